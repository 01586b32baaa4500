"""`apply_plan`: carry out an approved plan, resumably and exactly once per action.

    report = apply_plan(engine, "p-20261130-021500-3f9a", actor="ops", now=now,
                        stores=StoreOpener(settings))

The run loop: refuse what must be refused before touching anything (approval, permanent
deletes without `yes`, versioned mode on an unversioned bucket, a held lock); purge
expired quarantine; then, batch by batch, re-check preconditions, act, and commit one
result row per action (and one audit event with the batch's results): a pipeline in which
the next batches are checked, and one batch's removals are sent, while the batch before is
committed. Actions that an earlier execution finished are not repeated. `dry_run` is a
property of the loop: it re-checks and reports, and never writes storage or the catalog.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine

from governance.apply import journal
from governance.apply.actions import (
    ActionRunner,
    StartedBatch,
    outcome_for_check,
)
from governance.apply.kept import KeptFile, after_strips, files_held_at_plan, held_at_plan
from governance.apply.links import LinksRead
from governance.apply.modes import versioning_enabled
from governance.apply.preconditions import Check, check_actions
from governance.apply.quiet import QuietRuns
from governance.apply.stream import IdSet, PlanScan, scan_plan
from governance.apply.types import (
    RESULTS_KEPT,
    ActionOutcome,
    ExecutionReport,
    Outcome,
    StoreFactory,
)
from governance.approval import veto_of
from governance.catalog.engine import page_cache
from governance.catalog.plans import (
    copied_in_place,
    iter_actions,
    load_plan_header,
    set_plan_status,
)
from governance.catalog.quiet_runs import quiet_runs
from governance.errors import CatalogError, NoSuchRootError, RefusedError, StorageError
from governance.integrity import refuse_tampered
from governance.interrupts import release_frames, stop_between_steps
from governance.plan.types import (
    ActionType,
    PlannedAction,
    PlanStatus,
    in_place_class,
    removes_objects,
)
from governance.policy.models import ApplyConfig
from governance.settings import MAX_CONCURRENCY, env_float, env_int
from governance.storage.base import KeyResult
from governance.wording import counted

log = logging.getLogger(__name__)

CHUNK_OBJECTS = env_int("GOVERN_APPLY_CHUNK_OBJECTS", 5000)
CHUNK_ACTIONS = env_int("GOVERN_APPLY_CHUNK_ACTIONS", 5000)
FIRST_CHUNK_OBJECTS = 1000
CHECK_AHEAD = 2  # batches whose preconditions are checked while the current ones run
SWITCH_INTERVAL = env_float("GOVERN_SWITCH_INTERVAL", 0.0005)  # seconds
Progress = Callable[[ExecutionReport, int], None]
"""Called after each batch with the report so far and the number of actions to do."""
Removed = Mapping[tuple[int, str], KeyResult]
Batch = tuple[list[PlannedAction], dict[tuple[int, str], Any], list[Check]]


def apply_plan(
    engine: Engine,
    plan_id: str,
    *,
    actor: str,
    now: datetime,
    stores: StoreFactory,
    only_non_destructive: bool = False,
    dry_run: bool = False,
    yes: bool = False,
    progress: Progress | None = None,
    default_concurrency: int = 16,
) -> ExecutionReport:
    """Apply (or with `dry_run`, re-check and report) one saved plan.

    Parallel storage calls: the plan's frozen `apply.concurrency`, else
    `default_concurrency` (the CLI's: `GOVERN_CONCURRENCY`).

    Raises UnknownPlanError (exit 2), or RefusedError and its subclasses (exit 3) before
    anything is changed. Action failures do not raise: they are in the report.

    The plan is never held whole: it is verified in one streaming pass (`scan_plan`) and
    then read a batch at a time; a real apply's report keeps counts and the first
    RESULTS_KEPT results (the journal has all of them).
    """
    from governance.approval import check_applicable

    header = load_plan_header(engine, plan_id)
    # first: whatever the approval rows say is worth nothing if they were edited
    refuse_tampered(engine, plan_id)
    config = _frozen_apply_config(plan_id, header.controls)
    notes: list[str] = []
    try:
        with page_cache(engine):  # it reads every action once (types): no use for a cache
            check_applicable(
                engine, plan_id, now=now, destructive=not only_non_destructive, actor=actor
            )
    except RefusedError as exc:
        if not dry_run:
            raise
        notes.append(f"a real apply would be refused: {exc}")
    concurrency = config.concurrency or default_concurrency
    done = IdSet(header.summary.actions)  # done by earlier executions; read again under the lock

    waiting: list[PlannedAction] = []  # files that go with their folder: acted on last

    def todo_actions() -> Iterator[PlannedAction]:
        for action in iter_actions(engine, plan_id):
            if action.id in done or (only_non_destructive and action.destructive):
                continue
            if _goes_with_its_folder(action):
                waiting.append(action)
            else:
                yield action

    execution_id: int | None = None

    def pipeline(batches: Iterator[list[PlannedAction]]) -> CheckPipeline:
        made = CheckPipeline(
            engine,
            plan_id,
            batches,
            stores,
            concurrency,
            protected_tags=dict(header.controls.get("protect_tags") or {}),
            made_at=header.created_at,
            scans=header.scans,
            quiet=QuietRuns.of(
                quiet_runs(engine, plan_id),
                header.created_at,
                partial(copied_in_place, engine, plan_id),
            ),
        )
        made.execution_id = execution_id  # (the second pass's: this apply's)
        return made

    with (
        page_cache(engine),  # the plan is read through once: a big page cache is wasted
        _responsive_threads(),
        pipeline(_chunks(todo_actions())) as checks,
    ):
        # Preconditions are checked only under the plan's lock (a check made before could
        # be made stale by an apply still holding it), so a real apply takes the lock
        # first; the first batches' checks (or, in a dry run, which takes no lock, just
        # reads) then overlap the verification of the whole plan. Every action is
        # verified against the fingerprinted digests before it is acted on or reported
        # (`scan.verify_all`), and a refusal here gives the lock back and leaves no
        # execution behind.
        if not dry_run:
            execution_id = journal.start_execution(
                engine,
                plan_id,
                actor=actor,
                now=now,
                delete_mode=config.delete_mode,
                only_non_destructive=only_non_destructive,
            )
            checks.execution_id = execution_id  # before its first check
        try:
            done.update(journal.final_action_ids(engine, plan_id))
            _open_stores(header.scans, stores)
            checks.start()
            scan = scan_plan(engine, header, only_non_destructive=only_non_destructive)
            first = journal.first_started(engine, plan_id, execution_id) is None
            _require_roots(plan_id, scan.acting_roots, stores, first=first)
            _refuse_unsafe_modes(
                plan_id, scan.removing_roots, config, stores, yes=yes, dry_run=dry_run, notes=notes
            )
        except BaseException:
            if execution_id is not None:
                checks.close()  # no check runs on once the lock is given back
                journal.abandon_execution(engine, plan_id, execution_id)
            raise
        report = ExecutionReport(
            plan_id=plan_id,
            execution_id=execution_id,
            dry_run=dry_run,
            delete_mode=config.delete_mode,
            plan_status=header.status.value,
            not_run=scan.not_run,
            notes=notes,
            keep_results=None if dry_run else RESULTS_KEPT,
        )

        def count_todo() -> int:
            """Read what is done (again: a dry run holds no lock), note it, count the rest."""
            done.clear()
            done.update(journal.final_action_ids(engine, plan_id))
            skip = set(scan.not_run)
            report.done_before = [i for i in done if i in scan.digests and i not in skip]
            return scan.total - len(scan.not_run) - len(report.done_before)

        held = LeftBehind()

        def last() -> Iterator[Batch]:
            """The files that go with their folder, checked once everything else is done
            (and noted in `held`), each kept where its folder keeps an artifact this apply
            did not carry out (now, or for good before)."""
            if not waiting:
                return
            held.left(journal.skipped_for_good(engine, plan_id))
            with pipeline(_chunks(iter(waiting))) as after:
                for chunk, pending, batch_checks in after:
                    held.hold(batch_checks)
                    yield chunk, pending, batch_checks

        # the files that go with their folder come in a second pass (see `LeftBehind`)
        passes = (lambda: checks, last)
        if execution_id is None:
            count_todo()
            for batches in passes:
                for chunk, _, batch_checks in batches():
                    scan.verify_all(chunk)
                    outcomes = [_would(c, config.delete_mode) for c in batch_checks]
                    held.note(outcomes)
                    report.add(outcomes)
            report.executions = journal.executions(engine, plan_id)
            return report
        return _execute(
            engine,
            execution_id,
            scan,
            passes,
            held,
            count_todo,
            report,
            actor,
            now,
            stores,
            config,
            concurrency,
            progress,
        )


class CheckPipeline:
    """Batches with fresh precondition checks, in order; the next `depth` batches are
    checked in threads while the caller acts on the current one. A check is a sequential
    listing (each page waits for the one before), so it overlaps the acting well. Batches
    are read from the plan in the caller's thread, in order. Use it as a context manager:
    leaving it cancels what is still queued and waits for the checks under way."""

    def __init__(
        self,
        engine: Engine,
        plan_id: str,
        batches: Iterator[list[PlannedAction]],
        stores: StoreFactory,
        concurrency: int,
        depth: int = CHECK_AHEAD,
        protected_tags: Mapping[str, str] | None = None,
        made_at: datetime | None = None,
        scans: Mapping[str, int] | None = None,
        quiet: QuietRuns | None = None,
    ) -> None:
        self._engine = engine
        self._quiet = quiet  # the failed or abandoned runs the plan removes from
        self._made_at = made_at  # objects restored since are not removed again
        self._links_read: LinksRead = {}  # folders read for symbolic links, this apply
        self._scans = dict(scans or {})  # root URL -> the scan the plan was made from
        self._plan_id = plan_id
        self._batches = batches
        self._stores = stores
        self._concurrency = concurrency
        self._protected_tags = dict(protected_tags or {})
        self._depth = depth
        self._pool = ThreadPoolExecutor(depth, thread_name_prefix="govern-check")
        self._ahead: deque[Future[Batch]] = deque()
        self.execution_id: int | None = None  # this apply's (set once it has one)

    def __enter__(self) -> CheckPipeline:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel what is still queued and wait for the checks under way."""
        for future in self._ahead:
            future.cancel()
        self._pool.shutdown(wait=True)

    def start(self) -> None:
        """Read the first batches and start checking them (before iteration, optionally)."""
        while len(self._ahead) < self._depth:
            chunk = next(self._batches, None)
            if chunk is None:
                return
            self._ahead.append(self._pool.submit(self._prepare, chunk))

    def __iter__(self) -> Iterator[Batch]:
        self.start()
        while self._ahead:
            batch = self._ahead.popleft().result()
            self.start()
            yield batch

    def _prepare(self, chunk: list[PlannedAction]) -> Batch:
        pending = _pending(self._engine, self._plan_id, chunk)
        ids, uris = after_strips(chunk)  # done before: an archive of what a strip keeps
        done = journal.pending_removals(self._engine, self._plan_id, ids) if ids else {}
        moved = {(r["root_url"], key) for (_, key), r in done.items() if r["artifact_uri"] in uris}
        restored: set[tuple[str, str]] = set()
        if self._made_at is not None:
            removing = [
                (a.artifact.root_url, o.key) for a in chunk if removes_objects(a) for o in a.objects
            ]
            restored = journal.restored_since(self._engine, self._made_at, removing)
        checks = check_actions(
            chunk,
            self._stores,
            now=_clock(),
            pending=pending,
            concurrency=self._concurrency,
            protected_tags=self._protected_tags,
            restored=restored,
            known=self._known,
            held=self._held,
            held_files=self._held_files,
            links_read=self._links_read,
            moved=moved,
            copies_since=journal.first_started(self._engine, self._plan_id, self.execution_id),
            quiet=self._quiet,
        )
        return chunk, pending, checks

    def _known(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these objects the catalog held when the plan was made."""
        return journal.known_at_plan(self._engine, self._scans, keys, self._made_at)

    def _held_files(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], KeptFile]:
        """`trackers.HeldFiles` from the catalog, as of the plan's scans."""
        return files_held_at_plan(self._engine, self._scans, keys, self._made_at)

    def _held(self, folders: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[KeptFile]]:
        """What the catalog held under these folders when the plan was made."""
        return held_at_plan(self._engine, self._scans, folders, self._made_at)


def _execute(
    engine: Engine,
    execution_id: int,
    scan: PlanScan,
    passes: Sequence[Callable[[], Iterable[Batch]]],
    held: LeftBehind,
    count_todo: Callable[[], int],
    report: ExecutionReport,
    actor: str,
    now: datetime,
    stores: StoreFactory,
    config: ApplyConfig,
    concurrency: int,
    progress: Progress | None,
) -> ExecutionReport:
    from governance import audit
    from governance.apply.purge import purge_quarantine

    plan_id = scan.plan_id
    status, error = "error", None
    try:
        todo = count_todo()
        with journal.Heartbeat(engine, plan_id, execution_id, _clock):
            audit.record_now(
                engine,
                "apply_start",
                actor=actor,
                plan_id=plan_id,
                payload={
                    "execution_id": execution_id,
                    "delete_mode": config.delete_mode,
                    "actions": todo,
                    "done_before": len(report.done_before),
                    "not_run": len(report.not_run),
                },
                at=now,
            )
            purge = purge_quarantine(engine, now=now, stores=stores, actor=actor)
            report.purged = purge.purged
            if purge.failed:
                report.notes.append(_purge_failures(purge.failed, purge.errors))
            runner = ActionRunner(
                plan_id=plan_id,
                execution_id=execution_id,
                actor=actor,
                config=config,
                stores=stores,
                concurrency=concurrency,
                clock=_clock,
                fence=partial(journal.check_lock, engine, plan_id, execution_id),
                record_copies=partial(_record_copies, engine, plan_id),
            )
            delay = env_float("GOVERN_TEST_APPLY_DELAY", 0.0)  # (exit 2 when not a number)

            def finish(batch: StartedBatch, removing: Future[Removed]) -> None:
                outcomes = runner.finish(engine, batch, removing.result())
                _record_removed_before(engine, runner, batch)
                held.note(outcomes)
                report.add(outcomes)
                if not journal.heartbeat(engine, plan_id, execution_id, _clock()):
                    journal.check_lock(engine, plan_id, execution_id)  # (raises: taken over)
                if progress is not None:
                    progress(report, todo)
                if delay:
                    time.sleep(delay)  # test hook: lets a test kill an apply halfway

            # One batch's removals are sent from a thread while this one journals the next
            # batch's and commits the one before: storage is kept busy while the catalog
            # is written. Every removal is journaled `pending` (committed) before it is sent.
            # A batch whose removals were sent is finished (committed) even when the next
            # batch's check or start fails.
            # The files that go with their folder come in a second pass, once every batch
            # of the first is finished: whether they stay depends on those outcomes.
            # A first Ctrl-C stops at the next batch (with the one under way committed).
            with (
                stop_between_steps(f"apply of {plan_id}") as stop,
                ThreadPoolExecutor(1, thread_name_prefix="govern-remove") as removals,
            ):
                for batches in passes:
                    if report.vetoed is not None:
                        break
                    in_flight: tuple[StartedBatch, Future[Removed]] | None = None
                    try:
                        for chunk, pending, batch_checks in batches():
                            stop.check()
                            # a veto given while it runs stops it before the next batch
                            report.vetoed = veto_of(engine, plan_id)
                            if report.vetoed is not None:
                                break
                            scan.verify_all(chunk)  # nothing unverified is acted on
                            batch = runner.start(engine, batch_checks, pending)
                            sent = (batch, removals.submit(runner.remove, batch))
                            if in_flight is not None:
                                earlier, in_flight = in_flight, None
                                finish(*earlier)
                            in_flight = sent
                            stop.check()  # (before waiting for the next batch's check)
                        stop.check()  # (before the next pass starts checking)
                    except KeyboardInterrupt as exc:
                        release_frames(exc)  # a cursor it cut short holds the write lock
                        raise
                    finally:
                        if in_flight is not None:
                            finish(*in_flight)
        status = _execution_status(scan, report)
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
        error = _error_line(exc)
        raise
    finally:
        try:
            _finish(engine, scan, report, execution_id, actor, status, error)
        except Exception:
            if error is None:
                raise
            # (the catalog that failed mid-apply fails again here: what stopped the
            # apply is the error to report, not this one, which would take its place)
            logging.getLogger(__name__).debug(
                "the end of the apply was not recorded", exc_info=True
            )
    return report


def _error_line(exc: BaseException) -> str:
    """What an execution's `error` keeps of what stopped it: its first line, at most 500
    characters (a database error's text goes on with the SQL and ten rows of parameters,
    which `govern show` printed as 75 lines)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 500 else text[:499] + "…"


def _finish(
    engine: Engine,
    scan: PlanScan,
    report: ExecutionReport,
    execution_id: int,
    actor: str,
    status: str,
    error: str | None,
) -> None:
    """Record the execution's end, move the plan's status, release the lock (always)."""
    from governance import audit

    plan_id = scan.plan_id
    try:
        end = _clock()
        journal.finish_execution(
            engine,
            execution_id,
            now=end,
            status=status,
            counts=report.outcome_counts,
            done_before=len(report.done_before),
            purged=report.purged,
            error=error,
        )
        new_status = _plan_status(scan, report)
        if report.vetoed is None:  # (one vetoed meanwhile stays rejected)
            report.vetoed = veto_of(engine, plan_id)
        if report.vetoed is not None:
            new_status = None
            report.plan_status = PlanStatus.REJECTED.value
        if new_status is not None and error is None:
            set_plan_status(engine, plan_id, new_status)
            report.plan_status = new_status.value
        audit.record_now(
            engine,
            "apply_end",
            actor=actor,
            plan_id=plan_id,
            payload={
                "execution_id": execution_id,
                "status": status,
                "plan_status": report.plan_status,
                "counts": report.counts(),
                "error": error,
            },
            at=end,
        )
        report.executions = journal.executions(engine, plan_id)
    finally:
        journal.release(engine, plan_id, execution_id)


def _record_removed_before(engine: Engine, runner: ActionRunner, batch: StartedBatch) -> None:
    """Record what an interrupted apply removed of the batch's skipped removals (a
    checkpoint it deleted all but one object of, that one written again since: stale, the
    rest not acted on): their `pending` rows become `removed` (with the delete marker, in
    versioned mode), their catalog rows gone, so that `govern restore` brings them back
    and the quarantine purge counts from now. Skipped, such an action is checked again by
    the next apply, which finds them removed (and records nothing twice)."""
    from governance.catalog.removals import mark_removed_gone

    skipped = [c for c in batch.checks if c.skip is not None and c.removed_before]
    if not skipped:
        return
    found = [Check(c.action, already=list(c.removed_before)) for c in skipped]
    removed = runner.recovered(found, batch.pending)  # the markers, as for a resumed action
    gone = [(c.action.artifact.root_url, o.key, "", o.size) for c in found for o in c.already]
    config = runner.config
    now = _clock()
    purge_after = now + config.quarantine_for if config.delete_mode == "quarantine" else None
    with engine.begin() as conn:
        journal.mark_removed(
            conn,
            runner.plan_id,
            removed,
            execution_id=runner.execution_id,
            now=now,
            purge_after=purge_after,
        )
        mark_removed_gone(conn, gone, actor=runner.actor, now=now)


def _execution_status(scan: PlanScan, report: ExecutionReport) -> str:
    """applied when the whole plan is done now; else partially_applied: something failed
    or was stale, or actions are left (destructive ones left out by
    --only-non-destructive, one skipped for now)."""
    return "applied" if _plan_status(scan, report) is PlanStatus.APPLIED else "partially_applied"


def _bad(report: ExecutionReport) -> bool:
    return bool(report.failed or report.stale_count)


def _plan_status(scan: PlanScan, report: ExecutionReport) -> PlanStatus | None:
    """partially_applied when anything failed or was stale; applied when every action is
    done (ok or skipped on purpose); otherwise (destructive ones not run yet) unchanged."""
    if _bad(report):
        return PlanStatus.PARTIALLY_APPLIED
    # done_before and this run's results are disjoint subsets of the plan's actions
    if len(report.done_before) + report.final_count == scan.total:
        return PlanStatus.APPLIED
    return None


@contextlib.contextmanager
def _responsive_threads() -> Iterator[None]:
    """A shorter GIL switch interval while applying. The requests run in threads that
    wait on the network most of the time, beside a thread that reads the plan and writes
    the journal without pause; at the default 5 ms, each of a response's many socket
    reads can wait that long for the interpreter, and storage sits idle meanwhile."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _open_stores(roots: Iterable[str], stores: StoreFactory) -> None:
    """Open the plan's roots before anything else competes for the interpreter: opening a
    client is a few hundred milliseconds of work that the first precondition check would
    otherwise do while the plan is verified. Best effort: a root that fails to open here
    fails where it is used."""
    for root in roots:
        try:
            stores(root)
        except Exception:
            log.debug("opening %s ahead of its first use failed", root, exc_info=True)


def _require_roots(
    plan_id: str, roots: Iterable[str], stores: StoreFactory, *, first: bool
) -> None:
    """Refuse, before any action, a plan whose root is not there (an unmounted volume, a
    folder moved, a bucket gone): each of its objects read as vanished, every action was
    skipped as stale and the plan left partially applied, with nothing applied. One
    listing of each root the plan acts on. On the plan's `first` apply a local root that
    is an empty folder is refused too: the mount point of a volume not mounted is one
    (an apply resumed after one that removed all of a root's objects finds it empty)."""
    for root in sorted(roots):
        try:
            stores(root).check()
            local = root.startswith("file://")
            if first and local and _empty_folder(root[len("file://") :]):
                raise NoSuchRootError(root, "is an empty folder")
        except StorageError as exc:
            reason = str(exc).removeprefix(f"{root}: ")
            raise type(exc)(
                root,
                f"{reason}: plan {plan_id} acts on it, and nothing was applied (an unmounted "
                "volume? a moved folder?); make it reachable, then apply again",
            ) from exc


def _empty_folder(path: str) -> bool:
    with os.scandir(path) as entries:
        return next(entries, None) is None


def _refuse_unsafe_modes(
    plan_id: str,
    removing_roots: Iterable[str],
    config: ApplyConfig,
    stores: StoreFactory,
    *,
    yes: bool,
    dry_run: bool,
    notes: list[str],
) -> None:
    """Refuse before anything is touched: permanent without `yes`, versioned without versions."""
    roots = sorted(removing_roots)
    if not roots:
        return
    problem: str | None = None
    if config.delete_mode == "permanent" and not yes:
        problem = (
            f"plan {plan_id} deletes permanently (apply.delete_mode: permanent): "
            "nothing can be restored; pass --yes to confirm"
        )
    elif config.delete_mode == "versioned":
        unversioned = [r for r in roots if not versioning_enabled(stores(r))]
        if unversioned:
            problem = (
                f"apply.delete_mode is versioned but versioning is not enabled on "
                f"{', '.join(unversioned)}: a delete there could not be undone"
            )
    if problem is None:
        return
    if not dry_run:
        raise RefusedError(problem)
    notes.append(f"a real apply would be refused: {problem}")


def _would(check: Check, mode: str) -> ActionOutcome:
    """A dry run's outcome: what a real apply would do, or, for an action an earlier
    (interrupted) apply already carried out, that it is done."""
    if check.skip is not None:
        return outcome_for_check(check)
    action = check.action
    done = f" ({len(check.already)} done already)" if check.already else ""
    outcome, reason = (
        Outcome.WOULD_APPLY,
        f"would {action.action.value} {counted(len(check.todo), _noun(action))}",
    )
    if not check.todo:
        outcome, reason = Outcome.OK, f"done already: {_done_already(check)}; nothing left to do"
    elif removes_objects(action):
        reason += f" ({mode}){done}"
    else:
        reason += done
    return ActionOutcome(
        action_id=action.id,
        action=action.action.value,
        artifact_uri=action.artifact.uri,
        outcome=outcome,
        reason=reason,
        objects=len(check.todo) + len(check.already),
        bytes=action.bytes,
        final=outcome is Outcome.OK,
    )


def _done_already(check: Check) -> str:
    """What an earlier apply left done of an action whose every object is done."""
    n, action = len(check.already), check.action
    if action.action is ActionType.ABORT_UPLOAD:
        return (
            f"{counted(n, 'incomplete upload')} gone (aborted or completed since the plan was made)"
        )
    if in_place_class(action) is not None:
        return f"{counted(n, 'object')} in {action.storage_class} (copied by an interrupted apply)"
    return f"{counted(n, 'object')} removed by an interrupted apply"


def _pending(
    engine: Engine, plan_id: str, chunk: Sequence[PlannedAction]
) -> dict[tuple[int, str], Any]:
    return journal.pending_removals(engine, plan_id, [a.id for a in chunk if removes_objects(a)])


def _noun(action: PlannedAction) -> str:
    return "incomplete upload" if action.action is ActionType.ABORT_UPLOAD else "object"


def _goes_with_its_folder(action: PlannedAction) -> bool:
    """A delete of a loose file inside a folder (not at the root), of no kind of its own:
    a run's status marker (`COMPLETED`), a tracker checkpoints depend on (DeepSpeed's
    `latest`). The plan deletes such a file only with what depends on it; apply must not
    delete it while an action on that folder is left undone (`LeftBehind`)."""
    ref = action.artifact
    return (
        action.action is ActionType.DELETE
        and ref.kind == "other"
        and not ref.uri.endswith("/")
        and ref.uri.rfind("/") >= len(ref.root_url)
    )


_CARRIED_OUT = (Outcome.OK, Outcome.WOULD_APPLY)


class LeftBehind:
    """The folders in which this apply left an action undone (skipped or failed), and
    `hold`, which keeps the files that go with such a folder where they are.

    A marker deleted beside a checkpoint that a legal hold kept made its completed run
    read as abandoned; a `latest` deleted beside a stale checkpoint made that checkpoint
    incomplete: residue, deleted whole by the next plan.
    """

    def __init__(self) -> None:
        self._undone: dict[str, str] = {}  # folder URL -> the first artifact left in it

    def note(self, outcomes: Iterable[ActionOutcome]) -> None:
        """Outcomes of this apply: those not carried out leave their artifact behind."""
        self.left(o.artifact_uri for o in outcomes if o.outcome not in _CARRIED_OUT)

    def left(self, uris: Iterable[str]) -> None:
        """These artifacts stay (undone): every folder above each keeps what goes with it."""
        for uri in uris:
            cut = uri.rfind("/", 0, len(uri) - 1)
            while cut > 0 and uri[cut - 1] != "/":  # each folder above it, up to the scheme
                self._undone.setdefault(uri[: cut + 1], uri)
                cut = uri.rfind("/", 0, cut)

    def hold(self, checks: Iterable[Check]) -> None:
        for check in checks:
            if check.skip is not None:
                continue
            uri = check.action.artifact.uri
            left = self._undone.get(uri[: uri.rfind("/") + 1])
            if left is not None:
                check.skip_for(
                    f"stale: {left} in its folder was not carried out, and this file goes "
                    "with it (plan again once that is settled)"
                )


def _chunks(actions: Iterable[PlannedAction]) -> Iterator[list[PlannedAction]]:
    """Batches of whole actions, up to about CHUNK_OBJECTS objects each, never cutting
    between the actions of one artifact (a strip and the archive of what it keeps are
    checked together: `kept`).

    The first batches are smaller (FIRST_CHUNK_OBJECTS, doubling): nothing can be acted
    on before the first batch is checked, nor after the last check, so small batches at
    the start fill the check-then-act pipeline sooner.
    """
    chunk: list[PlannedAction] = []
    objects = 0
    limit = min(FIRST_CHUNK_OBJECTS, CHUNK_OBJECTS)
    for action in actions:
        if (
            chunk
            and (objects >= limit or len(chunk) >= CHUNK_ACTIONS)
            and action.artifact.uri != chunk[-1].artifact.uri
        ):
            yield chunk
            chunk, objects = [], 0
            limit = min(limit * 2, CHUNK_OBJECTS)
        chunk.append(action)
        objects += len(action.objects)
    if chunk:
        yield chunk


def _clock() -> datetime:
    return datetime.now(UTC)


def _frozen_apply_config(plan_id: str, controls: dict[str, Any]) -> ApplyConfig:
    """The plan's frozen `apply` block. One a newer govern no longer accepts (a
    quarantine URL storage cannot open, say) is a damaged plan, not a traceback: the plan
    was made under rules that cannot be carried out; planning again shows the error with
    its position in the policy."""
    frozen = dict(controls.get("apply") or {})
    asked = frozen.get("concurrency")
    if type(asked) is int and asked > MAX_CONCURRENCY:  # a plan made before the cap: capped
        frozen["concurrency"] = MAX_CONCURRENCY
    try:
        return ApplyConfig.model_validate(frozen)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "apply"
        raise CatalogError(
            f"plan {plan_id}: its frozen apply block is not usable ({where}: {first['msg']}); "
            "make a new plan"
        ) from exc


def _record_copies(
    engine: Engine, plan_id: str, copies: Sequence[tuple[int, str, str, str | None]]
) -> None:
    """`journal.record_copy_etags` in a transaction of its own (see `ActionRunner`)."""
    if copies:
        with engine.begin() as conn:
            journal.record_copy_etags(conn, plan_id, copies)


def _purge_failures(failed: int, errors: Sequence[str]) -> str:
    """The note for quarantine copies past `quarantine_for` that could not be purged: they
    stay, and the next apply tries again."""
    first = f": {errors[0]}" if errors else ""
    more = f" (and {failed - 1:,} more)" if failed > 1 and errors else ""
    return (
        f"{counted(failed, 'quarantined object')} past quarantine_for could not be purged "
        f"and stay{'s' if failed == 1 else ''} in quarantine, tried again by the next "
        f"apply{first}{more}"
    )
