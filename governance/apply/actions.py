"""One batch of checked actions: act on storage, then commit their results in one go.

Order within a batch: archive copies to their destination, storage-class copies in place,
aborted uploads, then every removal of the batch together (quarantine copies, then one
delete call per root). A removal's objects are journaled as `pending` (committed) before
storage is touched, and become `removed` with the results, so a kill at any point is
recoverable (see `preconditions`). An action is ok only if every one of its objects is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from governance.apply import journal
from governance.apply.modes import (
    Item,
    copy_in_place,
    copy_to,
    latest_delete_marker,
    quarantine_class,
    remove,
)
from governance.apply.preconditions import Check
from governance.apply.types import ActionOutcome, Outcome, StoreFactory
from governance.catalog.removals import Removed, mark_removed_gone
from governance.errors import GovernanceError
from governance.plan.types import (
    ActionType,
    ObjectRef,
    PlannedAction,
    in_place_class,
    removes_objects,
)
from governance.policy.models import ApplyConfig
from governance.storage import normalize_url
from governance.storage.base import KeyResult
from governance.wording import counted


def outcome_for_check(check: Check) -> ActionOutcome:
    """The outcome of a check that found a reason not to act: skipped, or failed when
    the check itself could not be made (a read that failed: retried by a later apply)."""
    action = check.action
    return ActionOutcome(
        action_id=action.id,
        action=action.action.value,
        artifact_uri=action.artifact.uri,
        outcome=Outcome.FAILED if check.failed else Outcome.SKIPPED,
        reason=check.skip or "skipped",
        objects=len(action.objects),
        bytes=action.bytes,
        final=check.final and not check.failed,
    )


@dataclass(slots=True)
class StartedBatch:
    """A batch between `ActionRunner.start` and `finish`: its removals are journaled."""

    checks: Sequence[Check]
    pending: Mapping[tuple[int, str], Any]
    errors: dict[int, str]  # action id -> first failure so far
    removal: list[Check]  # the checks whose objects are removed
    items: list[Item]  # their objects, in order
    copied: list[journal.CopiedInPlace] = field(default_factory=list)  # recorded on commit


@dataclass
class ActionRunner:
    """Runs batches for one execution."""

    plan_id: str
    execution_id: int
    actor: str
    config: ApplyConfig
    stores: StoreFactory
    concurrency: int
    clock: Callable[[], datetime]
    record_copies: Callable[[Sequence[tuple[int, str, str, str | None]]], None]
    """Records quarantine copies' ETags and encryption in their pending rows
    (`journal.record_copy_etags`, committed), before their sources are deleted: the only
    place they are recorded."""
    fence: Callable[[], None] = lambda: None
    """Raises when this apply may act no more (`journal.check_lock`): asked before a
    batch starts and before each delete (`modes.remove`)."""
    _quarantine_roots: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def quarantine_root(self, root_url: str) -> str:
        found = self._quarantine_roots.get(root_url)
        if found is None:  # once per root, not once per object
            found = normalize_url(self.config.quarantine_url_for(root_url))
            self._quarantine_roots[root_url] = found
        return found

    def run(
        self, engine: Engine, checks: Sequence[Check], pending: Mapping[tuple[int, str], Any]
    ) -> list[ActionOutcome]:
        """Act on every runnable check of the batch; commit all outcomes; return them."""
        batch = self.start(engine, checks, pending)
        return self.finish(engine, batch, self.remove(batch))

    def start(
        self, engine: Engine, checks: Sequence[Check], pending: Mapping[tuple[int, str], Any]
    ) -> StartedBatch:
        """Copies, storage-class changes and aborts; then the batch's removals journaled as
        `pending` (committed), so that they may be sent (`remove`) from another thread."""
        self.fence()
        errors: dict[int, str] = {}  # action id -> first failure
        runnable = [c for c in checks if c.skip is None]
        self._archive_copies(runnable, errors)
        copied = self._in_place(runnable, errors)
        self._aborts(runnable, errors)
        removal = [c for c in runnable if removes_objects(c.action) and c.action.id not in errors]
        items: list[Item] = []
        rows: list[tuple[Any, ...]] = []
        for c in removal:
            for o in c.todo:
                item = self._item(c.action, o)
                earlier = pending.get((c.action.id, o.key)) if pending else None
                if (
                    earlier is not None
                    and earlier["state"] == "pending"
                    and earlier.get("quarantine_key")
                    and earlier.get("quarantine_root") == item.quarantine_root
                ):
                    # the copy goes where the row says it is (a release before may have
                    # named quarantine keys otherwise)
                    item = replace(item, quarantine_key=earlier["quarantine_key"])
                items.append(item)
                if earlier is None or earlier["state"] != "pending":
                    # An interrupted apply's pending row for an object it did not get to
                    # remove stands for this removal too: one row per removed object.
                    rows.append(self._pending_row(c.action, item, o.etag))
        with engine.begin() as conn:
            journal.insert_pending(conn, rows)
        return StartedBatch(checks, pending, errors, removal, items, copied)

    def remove(self, batch: StartedBatch) -> Mapping[tuple[int, str], KeyResult]:
        """The batch's removals (storage only: safe in a thread of its own)."""
        return remove(
            batch.items,
            self.config.delete_mode,
            self.stores,
            self.concurrency,
            self.fence,
            self._copies_made,
        )

    def _copies_made(self, copies: Mapping[tuple[int, str], KeyResult]) -> None:
        """The quarantine copies' ETags and the objects' encryption into their pending
        rows before any source is deleted: an apply killed between its deletes and its
        commit leaves them, and the resumed one records them removed with both."""
        self.record_copies(
            [
                (action_id, key, made.etag, journal.encryption_text(made.encryption))
                for (action_id, key), made in copies.items()
                if made.etag
            ]
        )

    def finish(
        self,
        engine: Engine,
        batch: StartedBatch,
        answers: Mapping[tuple[int, str], KeyResult],
    ) -> list[ActionOutcome]:
        """Map the removals' answers back to actions, commit every outcome, return them."""
        errors = batch.errors
        removed: list[tuple[int, str, str | None]] = []
        not_removed: list[tuple[int, str]] = []
        gone: list[Removed] = []  # what is no longer where the catalog has it
        # Actions with a delete whose outcome is not known: their rows are settled one by
        # one (those known removed), the others stay pending for the next apply.
        uncertain = {i.action_id for i in batch.items if answers[(i.action_id, i.key)].unknown}
        done: dict[int, int] = {}  # action id -> its objects removed in this batch
        for item in batch.items:
            answer = answers[(item.action_id, item.key)]
            if answer.ok:
                done[item.action_id] = done.get(item.action_id, 0) + 1
                gone.append((item.root_url, item.key, "", item.size or 0))
                version = answer.version_id
                if version is None and self.config.delete_mode == "versioned":
                    # deleted with no marker said (a retried request found the key empty:
                    # its first attempt's answer was lost): the marker that hides it now
                    version = self._marker_now(item.root_url, item.key)
                if version is not None or item.action_id in uncertain:
                    removed.append((item.action_id, item.key, version))
            else:
                if not answer.unknown:  # (unknown: its row stays pending for the next apply)
                    not_removed.append((item.action_id, item.key))
                errors.setdefault(item.action_id, f"{item.key}: {answer.error}")
        removed += self.recovered(batch.removal, batch.pending)
        gone += _gone_before(batch.removal)
        gone += _aborted_uploads(batch.checks, errors)
        for c in batch.removal:
            removed_now = done.get(c.action.id, 0) + len(c.already)
            if c.action.id in errors and removed_now:
                errors[c.action.id] = self._partly_removed(c, errors[c.action.id], removed_now)
        outcomes = [self._outcome(c, errors) for c in batch.checks]
        removal_ids = [c.action.id for c in batch.removal if c.action.id not in uncertain]
        by_row = [r for r in removed if r[2] is not None or r[0] in uncertain]
        self._commit(engine, outcomes, removal_ids, by_row, not_removed, batch.copied, gone)
        return outcomes

    # -- steps -----------------------------------------------------------------------

    def _archive_copies(self, checks: Sequence[Check], errors: dict[int, str]) -> None:
        items = []
        for c in checks:
            a = c.action
            if a.action is ActionType.ARCHIVE and a.dest_url is not None:
                rel = a.artifact.uri[len(a.artifact.root_url) :]
                for o in c.todo:
                    dest, dest_key = archive_destination(a.dest_url, rel, o.key)
                    items.append((a.id, a.artifact.root_url, o.key, dest, dest_key))
        # Two objects bound for one destination (two roots of one layout archived to one
        # place): the first goes, the others fail; never one copy over another.
        first: dict[tuple[str, str], tuple[int, str]] = {}
        for action_id, root, key, dest, dest_key in items:
            taken = first.setdefault((dest, dest_key), (action_id, root + key))
            if taken[0] != action_id:
                errors.setdefault(
                    action_id,
                    f"archive copy of {key} failed: {dest}{dest_key} is the destination of "
                    f"{taken[1]} too (two objects archived to one place)",
                )
        items = [i for i in items if i[0] not in errors]
        _collect(copy_to(items, self.stores, self.concurrency), errors, "archive copy")

    def _in_place(
        self, checks: Sequence[Check], errors: dict[int, str]
    ) -> list[journal.CopiedInPlace]:
        """Copy the storage-class changes' objects onto themselves; returns what each
        successful copy made, as the store answered, and what an interrupted apply's
        copies made, as the re-check found them (to record in the catalog: without them
        a resumed transition's objects would look as young as their copies)."""
        classes = {c.action.id: in_place_class(c.action) for c in checks}
        targets = {k: v for k, v in classes.items() if v}
        todo = [(c, o) for c in checks if c.action.id in targets for o in c.todo]
        items = [(c.action.id, c.action.artifact.root_url, o.key, o.size) for c, o in todo]
        results = copy_in_place(items, targets, self.stores, self.concurrency)
        _collect(results, errors, "copy")
        copied = []
        for c, o in todo:
            r = results[(c.action.id, o.key)]
            if r.ok and r.etag is not None and r.last_modified is not None:
                copied.append(
                    journal.CopiedInPlace(
                        c.action.artifact.root_url,
                        o.key,
                        o.size,
                        o.etag,
                        r.etag,
                        r.last_modified,
                        r.version_id,
                        targets[c.action.id],
                    )
                )
        for c in checks:
            target = targets.get(c.action.id)
            if target is None:
                continue
            for o, now in c.copied_before:
                copied.append(
                    journal.CopiedInPlace(
                        c.action.artifact.root_url,
                        o.key,
                        o.size,
                        o.etag,
                        now.etag,
                        now.last_modified,
                        now.version_id,
                        target,
                    )
                )
        return copied

    def _aborts(self, checks: Sequence[Check], errors: dict[int, str]) -> None:
        for c in checks:
            if c.action.action is not ActionType.ABORT_UPLOAD:
                continue
            store = self.stores(c.action.artifact.root_url)
            for o in c.todo:
                try:
                    result = store.abort_upload(o.key, o.upload_id)
                except GovernanceError as exc:
                    result = KeyResult(o.key, False, error=str(exc))
                if not result.ok:
                    errors.setdefault(c.action.id, f"{o.key}: {result.error}")

    def _marker_now(self, root_url: str, key: str) -> str | None:
        """The version id of the delete marker hiding `key` now; None when it cannot be
        found (restore then reports the marker unknown)."""
        try:
            return latest_delete_marker(self.stores(root_url), key)
        except Exception:
            return None

    def recovered(
        self, checks: Sequence[Check], pending: Mapping[tuple[int, str], Any]
    ) -> list[tuple[int, str, str | None]]:
        """Objects an interrupted execution removed; versioned ones get their marker."""
        found = []
        for c in checks:
            for o in c.already:
                marker = None
                if self.config.delete_mode == "versioned":
                    row = pending.get((c.action.id, o.key)) or {}
                    marker = row.get("marker_version_id")
                    if marker is None:  # (None: restore reports the marker unknown)
                        marker = self._marker_now(c.action.artifact.root_url, o.key)
                found.append((c.action.id, o.key, marker))
        return found

    def _commit(
        self,
        engine: Engine,
        outcomes: Sequence[ActionOutcome],
        removal_ids: Sequence[int],
        removed: Sequence[tuple[int, str, str | None]],
        not_removed: Sequence[tuple[int, str]],
        copied: Sequence[journal.CopiedInPlace] = (),
        gone: Sequence[Removed] = (),
    ) -> None:
        """One transaction: the removal journal, the copies in place made and the objects
        removed (into the catalog's object rows), the results and their audit event.

        Rows of objects not removed are dropped first; `removed` (those with a delete-marker
        version, and every object known removed of an action with an unknown outcome) is
        marked row by row; then every remaining pending row of `removal_ids` (this run's and
        any an interrupted run left for the same objects) is `removed`.
        """
        from governance import audit

        now = self.clock()
        purge_after = (
            now + self.config.quarantine_for if self.config.delete_mode == "quarantine" else None
        )
        run = self.execution_id
        with engine.begin() as conn:
            journal.drop_pending(conn, self.plan_id, not_removed)
            journal.mark_removed(
                conn, self.plan_id, removed, execution_id=run, now=now, purge_after=purge_after
            )
            journal.mark_actions_removed(
                conn, self.plan_id, removal_ids, execution_id=run, now=now, purge_after=purge_after
            )
            journal.record_copies_in_place(conn, copied)
            mark_removed_gone(conn, gone, actor=self.actor, now=now)
            journal.write_results(
                conn, journal.result_rows(self.execution_id, self.plan_id, outcomes, now)
            )
            audit.record(
                conn,
                "action_results",
                actor=self.actor,
                plan_id=self.plan_id,
                at=now,
                payload=results_payload(self.execution_id, outcomes),
            )

    # -- rows --------------------------------------------------------------------------

    def _item(self, action: PlannedAction, obj: ObjectRef) -> Item:
        root, key = action.artifact.root_url, obj.key
        # The ETag the plan saw and the check confirmed: on S3 the delete is conditional
        # on it, so an object written between the check and the delete stays.
        etag = obj.etag or None
        if self.config.delete_mode != "quarantine":
            return Item(action.id, root, key, size=obj.size, etag=etag)
        where = quarantine_key(self.plan_id, root, key, self.quarantine_root(root))
        # the copy's class: STANDARD unless its own costs less for quarantine_for
        held = quarantine_class(obj.storage_class, self.config.quarantine_for, obj.size)
        return Item(action.id, root, key, self.quarantine_root(root), where, obj.size, held, etag)

    def _pending_row(self, action: PlannedAction, item: Item, etag: str) -> tuple[Any, ...]:
        """A `removed_objects` row in journal.PENDING_COLUMNS order."""
        return (
            self.plan_id,
            action.id,
            self.execution_id,
            action.artifact.uri,
            item.root_url,
            item.key,
            item.size,
            etag,
            self.config.delete_mode,
            item.quarantine_root,
            item.quarantine_key,
            "pending",
        )

    def _outcome(self, check: Check, errors: Mapping[int, str]) -> ActionOutcome:
        if check.skip is not None:
            return outcome_for_check(check)
        action = check.action
        error = errors.get(action.id)
        failed = error is not None
        return ActionOutcome(
            action_id=action.id,
            action=action.action.value,
            artifact_uri=action.artifact.uri,
            outcome=Outcome.FAILED if failed else Outcome.OK,
            reason=error if error is not None else self._done_reason(check),
            objects=len(action.objects),
            bytes=action.bytes,
            final=not failed,
            execution_id=self.execution_id,
        )

    def _partly_removed(self, check: Check, error: str, removed: int) -> str:
        """A removal that failed for some of its objects after others went (a per-key
        error in a delete's answer): the reason says what is gone and how it comes back,
        as the artifact is now neither whole nor gone."""
        mode = self.config.delete_mode
        how = {
            "quarantine": "moved to quarantine (govern restore brings them back)",
            "versioned": "deleted behind delete markers (govern restore brings them back)",
            "permanent": "deleted permanently",
        }.get(mode, "removed")
        total = len(check.action.objects)
        return (
            f"{error}; partly carried out: {removed:,} of {total:,} objects {how}, the rest "
            "left (a later apply retries them)"
        )

    def _done_reason(self, check: Check) -> str:
        a = check.action
        n = _objects(len(a.objects))
        resumed = f" ({len(check.already)} by an interrupted apply)" if check.already else ""
        if a.action is ActionType.ABORT_UPLOAD:
            return _aborted(len(check.todo), len(check.already))
        if in_place_class(a) is not None:
            return f"{n} now in {a.storage_class}{resumed}"
        mode = self.config.delete_mode
        if mode == "quarantine":
            where = f"moved to {self.quarantine_root(a.artifact.root_url)}{self.plan_id}/"
        else:
            where = _REMOVED_HOW[mode]
        if a.action is ActionType.ARCHIVE:
            return f"{n} copied to {a.dest_url}, then {where}{resumed}"
        return f"{n} {where}{resumed}"


def results_payload(execution_id: int, outcomes: Sequence[ActionOutcome]) -> dict[str, Any]:
    """The `action_results` audit event of one batch: every action's result, in order, as
    [action id, outcome, reason] (the artifact and its objects are in the fingerprinted
    plan), with counts by outcome first so that `govern audit`'s one-line view reads well.

    One event per batch rather than per action keeps the chain (and each result in it)
    at a fraction of the cost: a hash and a row per thousands of actions.
    """
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.outcome.value] = counts.get(o.outcome.value, 0) + 1
    return {
        "execution_id": execution_id,
        "counts": counts,
        "results": [[o.action_id, o.outcome.value, o.reason] for o in outcomes],
    }


def quarantine_key(plan_id: str, root_url: str, key: str, quarantine_url: str = "") -> str:
    """Where an object goes under its quarantine location: the plan's folder, then the
    object's whole path (bucket or folders included), so roots that share a quarantine
    location (two prefixes of one bucket, sibling folders) never collide there. A root
    of another scheme than the quarantine's has its scheme first (`file:`, `gs:`: no
    bucket is named so), so `file:///ckpt/x` and `s3://ckpt/x` never share a copy.

        >>> quarantine_key("p-1", "s3://ml/team-a/", "runs/r1/x.pt")
        'p-1/ml/team-a/runs/r1/x.pt'
        >>> quarantine_key("p-1", "file:///data/a/", "x.pt")
        'p-1/data/a/x.pt'
        >>> quarantine_key("p-1", "file:///ml/team-a/", "x.pt", "s3://q/")
        'p-1/file:/ml/team-a/x.pt'
    """
    scheme, _, rest = root_url.partition("://")
    path = rest.lstrip("/")
    if quarantine_url and quarantine_url.partition("://")[0] != scheme:
        return f"{plan_id}/{scheme}:/{path}{key}"
    return f"{plan_id}/{path}{key}"


_REMOVED_HOW = {
    "versioned": "deleted (delete markers recorded: restorable)",
    "permanent": "deleted permanently",
}


def _collect(
    results: Mapping[tuple[int, str], KeyResult], errors: dict[int, str], what: str
) -> None:
    for (action_id, key), result in results.items():
        if not result.ok:
            errors.setdefault(action_id, f"{what} of {key} failed: {result.error}")


def _gone_before(removal: Sequence[Check]) -> list[Removed]:
    """The objects of removals that an interrupted apply removed (found gone, journaled)."""
    return [(c.action.artifact.root_url, o.key, "", o.size) for c in removal for o in c.already]


def _aborted_uploads(checks: Sequence[Check], errors: Mapping[int, str]) -> list[Removed]:
    """The incomplete uploads of the aborts that went through (or were gone already)."""
    return [
        (c.action.artifact.root_url, o.key, o.upload_id, o.size)
        for c in checks
        if c.action.action is ActionType.ABORT_UPLOAD
        and c.skip is None
        and c.action.id not in errors
        for o in (*c.todo, *c.already)
    ]


def _aborted(sent: int, gone: int) -> str:
    """`2 incomplete uploads aborted, 1 gone already (aborted or completed since the plan was made)`."""
    parts = [f"{counted(sent, 'incomplete upload')} aborted"] if sent else []
    if gone:
        what = f"{gone:,}" if sent else counted(gone, "incomplete upload")
        parts.append(f"{what} gone already (aborted or completed since the plan was made)")
    return ", ".join(parts)


def _objects(n: int) -> str:
    return counted(n, "object")


def archive_destination(dest_url: str, rel: str, key: str) -> tuple[str, str]:
    """Where an archive by copy puts one object of its artifact: (destination root URL,
    key under it). `dest_url` is the artifact's destination (`archive.url` + its key),
    `rel` the artifact's key under its root: a folder's objects keep their path under it;
    a one-file artifact (a Lightning `.ckpt`) is the file `dest_url` names, not a key
    under a folder of that name.

        >>> archive_destination("s3://cold/runs/a/c-1/", "runs/a/c-1/", "runs/a/c-1/w.bin")
        ('s3://cold/runs/a/c-1/', 'w.bin')
        >>> archive_destination("s3://cold/runs/l/e.ckpt", "runs/l/e.ckpt", "runs/l/e.ckpt")
        ('s3://cold/runs/l/', 'e.ckpt')
    """
    if rel and not rel.endswith("/") and key == rel:
        head, _, name = dest_url.rpartition("/")
        return normalize_url(head + "/"), name
    dest = normalize_url(dest_url)
    return dest, key[len(rel) :] if key.startswith(rel) and rel else key
