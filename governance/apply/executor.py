"""`apply_plan`: carry out an approved plan, resumably and exactly once per action.

    report = apply_plan(engine, "p-20261130-021500-3f9a", actor="ops", now=now,
                        stores=StoreOpener(settings))

The run loop: refuse what must be refused before touching anything (approval, permanent
deletes without `yes`, versioned mode on an unversioned bucket, a held lock); purge
expired quarantine; then, batch by batch, re-check preconditions, act, and commit one
result row per action (plus its audit event) before the next batch. Actions that an
earlier execution finished are not repeated. `dry_run` is a property of the loop: it
re-checks and reports, and never writes storage or the catalog.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from governance.apply import journal
from governance.apply.actions import ActionRunner, outcome_for_check, removes_objects
from governance.apply.modes import versioning_enabled
from governance.apply.preconditions import Check, check_actions
from governance.apply.types import ActionOutcome, ExecutionReport, Outcome, StoreFactory
from governance.catalog.plans import load_plan, load_plan_header, set_plan_status
from governance.errors import RefusedError
from governance.plan.types import Plan, PlannedAction, PlanStatus
from governance.policy.models import ApplyConfig

log = logging.getLogger(__name__)

CHUNK_OBJECTS = int(os.environ.get("GOVERN_APPLY_CHUNK_OBJECTS", "5000"))
CHUNK_ACTIONS = 1000
Progress = Callable[[int, int], None]


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
) -> ExecutionReport:
    """Apply (or with `dry_run`, re-check and report) one saved plan.

    Raises UnknownPlanError (exit 2), or RefusedError and its subclasses (exit 3) before
    anything is changed. Action failures do not raise: they are in the report.
    """
    from governance.approval import check_applicable, verify_fingerprint

    header = load_plan_header(engine, plan_id)
    config = ApplyConfig.model_validate(header.controls.get("apply") or {})
    notes: list[str] = []
    try:
        check_applicable(
            engine, plan_id, now=now, destructive=not only_non_destructive, actor=actor
        )
    except RefusedError as exc:
        if not dry_run:
            raise
        notes.append(f"a real apply would be refused: {exc}")
    plan = load_plan(engine, plan_id)
    verify_fingerprint(plan)
    actions = list(plan.actions)
    not_run = [a.id for a in actions if only_non_destructive and a.destructive]
    actions = [a for a in actions if a.id not in set(not_run)]
    _refuse_unsafe_modes(plan, actions, config, stores, yes=yes, dry_run=dry_run, notes=notes)
    concurrency = config.concurrency or 16
    report = ExecutionReport(
        plan_id=plan_id,
        execution_id=None,
        dry_run=dry_run,
        delete_mode=config.delete_mode,
        plan_status=plan.status.value,
        not_run=not_run,
        notes=notes,
    )
    done = journal.final_actions(engine, plan_id)
    report.done_before = sorted(a.id for a in actions if a.id in done)
    todo = [a for a in actions if a.id not in done]
    if dry_run:
        for chunk in _chunks(todo):
            pending = _pending(engine, plan_id, chunk)
            checks = check_actions(chunk, stores, now=now, pending=pending, concurrency=concurrency)
            report.results += [_would(c, config.delete_mode) for c in checks]
        report.executions = journal.executions(engine, plan_id)
        return report
    return _execute(engine, plan, todo, report, actor, now, stores, config, concurrency, progress)


def _execute(
    engine: Engine,
    plan: Plan,
    todo: list[PlannedAction],
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

    plan_id = plan.plan_id
    execution_id = journal.start_execution(
        engine,
        plan_id,
        actor=actor,
        now=now,
        delete_mode=config.delete_mode,
        only_non_destructive=bool(report.not_run),
    )
    report.execution_id = execution_id
    status, error = "error", None
    try:
        with journal.Heartbeat(engine, plan_id, execution_id, _clock):
            audit.record_now(
                engine,
                "apply_start",
                actor=actor,
                plan_id=plan_id,
                payload={
                    "execution_id": execution_id,
                    "delete_mode": config.delete_mode,
                    "actions": len(todo),
                    "done_before": len(report.done_before),
                    "not_run": len(report.not_run),
                },
                at=now,
            )
            report.purged = purge_quarantine(engine, now=now, stores=stores, actor=actor).purged
            runner = ActionRunner(
                plan_id=plan_id,
                execution_id=execution_id,
                actor=actor,
                config=config,
                stores=stores,
                concurrency=concurrency,
                clock=_clock,
            )
            delay = float(os.environ.get("GOVERN_TEST_APPLY_DELAY") or 0)
            for chunk in _chunks(todo):
                pending = _pending(engine, plan_id, chunk)
                checks = check_actions(
                    chunk, stores, now=_clock(), pending=pending, concurrency=concurrency
                )
                report.results += runner.run(engine, checks, pending)
                journal.heartbeat(engine, plan_id, execution_id, _clock())
                if progress is not None:
                    progress(len(report.results), len(todo))
                if delay:
                    time.sleep(delay)  # test hook: lets a test kill an apply halfway
        status = _execution_status(report.results)
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        _finish(engine, plan, report, execution_id, actor, status, error)
    return report


def _finish(
    engine: Engine,
    plan: Plan,
    report: ExecutionReport,
    execution_id: int,
    actor: str,
    status: str,
    error: str | None,
) -> None:
    """Record the execution's end, move the plan's status, release the lock (always)."""
    from governance import audit

    try:
        end = _clock()
        journal.finish_execution(
            engine,
            execution_id,
            now=end,
            status=status,
            results=report.results,
            done_before=len(report.done_before),
            purged=report.purged,
            error=error,
        )
        new_status = _plan_status(plan, report)
        if new_status is not None and error is None:
            set_plan_status(engine, plan.plan_id, new_status)
            report.plan_status = new_status.value
        audit.record_now(
            engine,
            "apply_end",
            actor=actor,
            plan_id=plan.plan_id,
            payload={
                "execution_id": execution_id,
                "status": status,
                "plan_status": report.plan_status,
                "counts": report.counts(),
                "error": error,
            },
            at=end,
        )
        report.executions = journal.executions(engine, plan.plan_id)
    finally:
        journal.release(engine, plan.plan_id, execution_id)


def _execution_status(results: Sequence[ActionOutcome]) -> str:
    bad = any(r.outcome is Outcome.FAILED or r.stale for r in results)
    return "partially_applied" if bad else "applied"


def _plan_status(plan: Plan, report: ExecutionReport) -> PlanStatus | None:
    """partially_applied when anything failed or was stale; applied when every action is
    done (ok or skipped on purpose); otherwise (destructive ones not run yet) unchanged."""
    if any(r.outcome is Outcome.FAILED or r.stale for r in report.results):
        return PlanStatus.PARTIALLY_APPLIED
    finished = set(report.done_before) | {r.action_id for r in report.results if r.final}
    if all(a.id in finished for a in plan.actions):
        return PlanStatus.APPLIED
    return None


def _refuse_unsafe_modes(
    plan: Plan,
    actions: Sequence[PlannedAction],
    config: ApplyConfig,
    stores: StoreFactory,
    *,
    yes: bool,
    dry_run: bool,
    notes: list[str],
) -> None:
    """Refuse before anything is touched: permanent without `yes`, versioned without versions."""
    removing = [a for a in actions if removes_objects(a)]
    if not removing:
        return
    problem: str | None = None
    if config.delete_mode == "permanent" and not yes:
        problem = (
            f"plan {plan.plan_id} deletes permanently (apply.delete_mode: permanent): "
            "nothing can be restored; pass --yes to confirm"
        )
    elif config.delete_mode == "versioned":
        roots = sorted({a.artifact.root_url for a in removing})
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
    if check.skip is not None:
        return outcome_for_check(check)
    action = check.action
    how = f" ({mode})" if removes_objects(action) else ""
    return ActionOutcome(
        action_id=action.id,
        action=action.action.value,
        artifact_uri=action.artifact.uri,
        outcome=Outcome.WOULD_APPLY,
        reason=f"would {action.action.value} {len(check.todo)} objects{how}",
        objects=len(check.todo) + len(check.already),
        bytes=action.bytes,
        final=False,
    )


def _pending(
    engine: Engine, plan_id: str, chunk: Sequence[PlannedAction]
) -> dict[tuple[int, str], Any]:
    return journal.pending_removals(engine, plan_id, [a.id for a in chunk if removes_objects(a)])


def _chunks(actions: Sequence[PlannedAction]) -> Iterator[list[PlannedAction]]:
    """Batches of whole actions, up to about CHUNK_OBJECTS objects each."""
    chunk: list[PlannedAction] = []
    objects = 0
    for action in actions:
        chunk.append(action)
        objects += len(action.objects)
        if objects >= CHUNK_OBJECTS or len(chunk) >= CHUNK_ACTIONS:
            yield chunk
            chunk, objects = [], 0
    if chunk:
        yield chunk


def _clock() -> datetime:
    return datetime.now(UTC)
