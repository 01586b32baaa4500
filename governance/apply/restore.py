"""`restore_plan`: bring back what a plan's apply removed, byte for byte.

Works from the plan's `removed_objects` rows: quarantined objects (state `removed`) are
copied back to their original key and then removed from quarantine; versioned deletes
are undone by deleting the delete marker. What cannot come back is reported failed, with
the reason: a permanent delete, a quarantine copy purged past `apply.quarantine_for`
(state `purged`), a quarantine copy gone missing, an object that exists again at its
original key (never overwritten) unless it is the object removed, put back by a restore
that stopped before recording it (`_put_back`). Objects restored already (state `restored`) are not
restored again: a `note` counts them. A dry run makes the same read-only checks (the
same HEADs, in the same batches and pool) and reports the same failures; it writes
nothing.

A quarantine copy is checked against what apply recorded before anything is written: the
size of the object removed; on local disk its modification time; on an object store the
copy's own ETag, taken when apply made it (`removed_objects.copy_etag`), compared with
the HEAD's: a copy written since, even with bytes of the same size, is refused as
damaged and left where it is. Rows of earlier releases (and objects an interrupted apply
removed) have no ETag of their copy: size only.

A copy back keeps the quarantine copy's metadata and tags and puts the object back in the
storage class it had: the quarantine copy's own when that is not STANDARD (apply may keep
an object's class in quarantine: see `modes.quarantine_class`), else the class the plan
saw the object in (apply writes quarantine copies in STANDARD by default; so did earlier
releases, always). Between S3 and a filesystem only the bytes travel.

    restore_plan(engine, plan_id, actor="ops", now=now, stores=opener,
                 uris=["s3://b/runs/r1/checkpoint-4000/"])
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy import and_, bindparam, delete, select, update
from sqlalchemy.engine import Engine

from governance.apply import journal
from governance.apply.journal import (
    CopiedInPlace,
    O,
    encryption_of,
    executions,
    record_copies_in_place,
)
from governance.apply.modes import (
    class_for,
    delete_keys,
    delete_version,
    on_local_disk,
    run_pool,
    s3_parts,
)
from governance.apply.types import (
    RestoredObject,
    RestoreReport,
    StoreFactory,
    open_destination,
)
from governance.approval import approval_state
from governance.catalog.plans import PlanHeader, load_plan_header, planned_classes
from governance.catalog.removals import revive
from governance.errors import ArgumentError, RefusedError
from governance.storage import typed_url
from governance.storage.base import KeyResult, ObjectState, Store
from governance.wording import counted

CHUNK = 1000
_TIME_SLACK_NS = 2_000_000_000  # a copy's time on a filesystem with coarse times
STATES = ("removed", "purged", "restored")  # not `pending`: never removed


def restore_plan(
    engine: Engine,
    plan_id: str,
    *,
    actor: str,
    now: datetime,
    stores: StoreFactory,
    uris: Sequence[str] = (),
    concurrency: int = 16,
    dry_run: bool = False,
    note: Callable[[str], None] | None = None,
) -> RestoreReport:
    """Restore every removed object of the plan (or those under `uris`); report each one,
    failed with the reason when it cannot come back. `note` hears of objects restored
    already (left out of the report). A dry run checks each object as a restore would
    (HEADs only) and reports the same failures."""
    header = load_plan_header(engine, plan_id)  # UnknownPlanError for a wrong id
    if dry_run:  # (reads only, as apply's dry run: no lock)
        return _restore(engine, header, actor, now, stores, uris, concurrency, True, note)
    # The plan's lock, as an apply holds it: no apply removes objects of the plan, and no
    # other restore puts them back, while this one reads its rows and acts on them.
    holder = journal.take_restore_lock(engine, plan_id, now)
    try:
        with journal.Heartbeat(engine, plan_id, journal.RESTORING, _clock, holder):
            fence = partial(journal.check_restore_lock, engine, plan_id, holder)
            return _restore(
                engine, header, actor, now, stores, uris, concurrency, False, note, fence
            )
    finally:
        journal.release(engine, plan_id, journal.RESTORING, holder)


def _clock() -> datetime:
    return datetime.now(UTC)


def _restore(
    engine: Engine,
    header: PlanHeader,
    actor: str,
    now: datetime,
    stores: StoreFactory,
    uris: Sequence[str],
    concurrency: int,
    dry_run: bool,
    note: Callable[[str], None] | None,
    fence: Callable[[], None] = lambda: None,
) -> RestoreReport:
    """`restore_plan`'s work; `fence` raises when this restore may act no more (asked
    before each batch: it has lost the plan's lock)."""
    plan_id = header.plan_id
    with engine.connect() as conn:
        rows = [
            dict(r)
            for r in conn.execute(
                select(O)
                .where(and_(O.c.plan_id == plan_id, O.c.state.in_((*STATES, "pending"))))
                .order_by(O.c.id)
            ).mappings()
        ]
    wanted = [typed_url(u) for u in uris]
    if wanted:
        rows = [r for r in rows if _matches(r, wanted)]
    # An apply stopped between its removals and their record leaves them `pending`: some
    # may be gone already, unrecorded, their copies in quarantine. Restore never acts on
    # them (while an apply of the plan runs they are removals in flight, and one found
    # in place could lose its copy to a restore); it says so, when that apply did not
    # finish or failed (a delete whose answer was lost leaves its rows pending), and how
    # to get them back. (An apply that finished without failures leaves a row pending on
    # purpose: an object written again since, which it did not remove.)
    # A plan that can no longer be applied (expired, rejected) has no apply to finish
    # them: restore settles them itself, with the checks it makes of every object (under
    # the plan's lock, no apply is in flight): one still at its key, as the plan saw it,
    # stays and its quarantine copy goes; one gone comes back from its quarantine copy.
    pending = [r for r in rows if r["state"] == "pending"]
    rows = [r for r in rows if r["state"] != "pending"]
    if pending and _unfinished(engine, plan_id):
        # (the status as approve and apply decide it: an approval past its expiry is
        # `expired` though the catalog's column still says approved)
        status = approval_state(engine, plan_id, now).status.value
        if status in CANNOT_APPLY:
            rows = sorted(rows + pending, key=lambda r: int(r["id"]))
            if note is not None:
                note(_settled_words(plan_id, pending, status))
        else:
            interrupted = _unfinished_words(plan_id, pending)
            if not rows:
                raise RefusedError(interrupted)
            if note is not None:
                note(interrupted)
    if not rows and not wanted and note is not None:
        note(_removed_nothing(plan_id, header.status.value))
    if wanted and not rows:
        raise ArgumentError(f"plan {plan_id}: nothing removed under {', '.join(uris)}")
    already = [r for r in rows if r["state"] == "restored"]
    rows = [r for r in rows if r["state"] != "restored"]
    if already and note is not None:
        note(_restored_already(plan_id, already, uris))
    report = RestoreReport(plan_id=plan_id, dry_run=dry_run)
    for start in range(0, len(rows), CHUNK):
        batch = rows[start : start + CHUNK]
        if dry_run:
            results = run_pool(lambda row: _would(row, stores), batch, concurrency)
            report.objects += [_restored(r, res) for r, res in zip(batch, results, strict=True)]
            continue
        fence()
        planned = planned_classes(
            engine,
            plan_id,
            [
                (r["action_id"], r["key"])
                for r in batch
                if r["mode"] == "quarantine" and r["state"] == "removed"
            ],
        )
        results, copied, stayed = _restore_batch(batch, stores, concurrency, planned)
        report.objects += [_restored(r, res) for r, res in zip(batch, results, strict=True)]
        copies = _copies_back(batch, results, copied)
        _commit(engine, plan_id, actor, batch, results, now, copies, stayed)
    return report


@dataclass(frozen=True, slots=True)
class _WayBack:
    """How one object can come back, as the read-only checks found it: its store, and
    for a quarantined object the quarantine's store and the copy there."""

    store: Store
    quarantine: Store | None = None
    held: ObjectState | None = None
    hidden: str | None = None  # versioned: the version id the delete marker hides
    back: ObjectState | None = None  # the object is back at its key already (see below)
    stayed: bool = False  # a `pending` row's object never left its key (see `_restore`)


def _way_back(row: dict[str, Any], stores: StoreFactory) -> _WayBack | KeyResult:
    """The checks a restore makes before it writes anything (HEADs only): a failed
    result when the object cannot come back, else the way back. A dry run stops here."""
    key = row["key"]
    if row["state"] == "pending":  # (settled: a plan no apply will finish, see `_restore`)
        store = stores(row["root_url"])
        current = store.head([key]).get(key)
        if current is not None and _put_back(row, current, on_disk=on_local_disk(store)):
            return _WayBack(store, back=current, stayed=True)  # never removed: it stays
    if row["state"] == "purged":
        return KeyResult(key, False, error=_purged(row))
    if row["mode"] == "permanent":
        return KeyResult(key, False, error="deleted permanently: there is no way back")
    store = stores(row["root_url"])
    current = store.head([key]).get(key)
    if current is not None:
        if _put_back(row, current, on_disk=on_local_disk(store)):
            return _WayBack(store, back=current)
        return KeyResult(key, False, error="an object exists at the original key again")
    if row["mode"] == "versioned":
        if not row["marker_version_id"]:
            return KeyResult(key, False, error="the delete marker's version id is unknown")
        hidden = _hidden_version(store, row)
        if isinstance(hidden, KeyResult):
            return hidden
        return _WayBack(store, hidden=hidden)
    quarantine = open_destination(stores, row["quarantine_root"], row["root_url"])
    held = quarantine.head([row["quarantine_key"]]).get(row["quarantine_key"])
    where = quarantine.uri(row["quarantine_key"])
    if held is None:
        return KeyResult(key, False, error=f"copy back failed: {where}: no such key")
    damage = _damage(row, held, on_disk=_on_disk(quarantine, store)) or _rewritten(row, held)
    if damage is not None:
        error = f"quarantine copy damaged, not copied back: {where} {damage}"
        return KeyResult(key, False, error=error)
    return _WayBack(store, quarantine, held)


def _put_back(row: dict[str, Any], current: ObjectState, *, on_disk: bool) -> bool:
    """Whether the object at a removed object's key is that object, put back by a restore
    that stopped (killed, a lost connection) before it recorded it: the same size, and on
    local disk the same modification time (a copy back keeps it), on an object store the
    ETag of the object removed or of its quarantine copy (a copy of a copy keeps it).
    Such an object is restored: what is left of its quarantine copy is removed. Without
    this every later restore failed it for good ("an object exists at the original key
    again") while the catalog still called it removed. An identical upload of the same
    bytes passes too, and is as good as restored."""
    if current.size != row["size"] or not current.etag:
        return False
    if on_disk:
        return _mtime_ns(row["etag"]) is not None and not _times_differ(row["etag"], current.etag)
    return current.etag in {row["etag"], row.get("copy_etag")}


def _damage(row: dict[str, Any], held: ObjectState, *, on_disk: bool) -> str | None:
    """How the quarantine copy `held` is not the object apply removed, as far as its HEAD
    tells (None: it is): its size, and where both sides are on local disk its
    modification time, which every copy there keeps and every write changes (apply
    checked both against the plan before it removed the object)."""
    if held.size != row["size"]:
        removed = counted(row["size"], "byte")
        return f"is {counted(held.size, 'byte')}, the object removed was {removed}"
    if on_disk and _times_differ(row["etag"], held.etag):
        return "was modified after apply (its modification time is not the object's)"
    return None


def _rewritten(row: dict[str, Any], held: ObjectState) -> str | None:
    """How the quarantine copy `held` is not the copy apply made, by the ETag apply
    recorded of it (None: it is, or none was recorded)."""
    made = row.get("copy_etag")
    if not made or held.etag == made:
        return None
    return f"was written after apply (its ETag is {held.etag}, the copy's was {made})"


def _on_disk(*stores: Store) -> bool:
    """Whether all these stores are on local disk, where an ETag is an mtime token."""
    return all(map(on_local_disk, stores))


def _times_differ(expected: str | None, found: str | None) -> bool:
    """Whether two mtime tokens (`mtime:<ns>`) name different times: further apart than a
    filesystem with coarse times (FAT: 2 s) can make a copy's time. Not tokens: False."""
    a, b = _mtime_ns(expected), _mtime_ns(found)
    return a is not None and b is not None and abs(a - b) > _TIME_SLACK_NS


def _mtime_ns(token: str | None) -> int | None:
    if not token or not token.startswith("mtime:"):
        return None
    try:
        return int(token[len("mtime:") :])
    except ValueError:
        return None


_HIDDEN_GONE = (
    "the version govern's delete marker hid is gone (expired by a lifecycle rule?): "
    "there is no way back"
)
_MARKER_BELOW = (
    "a newer delete marker is on top: the key was written and deleted since apply; "
    "govern's delete marker was left as it is"
)


def _hidden_version(store: Store, row: dict[str, Any]) -> str | KeyResult:
    """The version id that govern's delete marker (`marker_version_id`) hides, checked
    in one listing of the key's versions before anything is deleted: the marker must
    still be the key's latest version, and the newest version below it must be the
    object apply removed (its size and ETag); else why the key cannot come back."""
    key, marker = row["key"], row["marker_version_id"]
    try:
        entries = _versions_of(store, key)
    except Exception as exc:
        from governance.storage.errors import translate

        return KeyResult(
            key, False, error=f"listing its versions failed: {translate(store.url, exc)}"
        )
    ours = [e for e in entries if e["VersionId"] == marker and e["marker"]]
    if not ours:
        return KeyResult(
            key, False, error="govern's delete marker is gone (removed since apply): not restored"
        )
    if not ours[0].get("IsLatest"):
        return KeyResult(key, False, error=_MARKER_BELOW)
    below = [e for e in entries if e is not ours[0]]
    if not below or below[0]["marker"]:
        return KeyResult(key, False, error=_HIDDEN_GONE)
    hidden = below[0]
    etag = str(hidden.get("ETag", "")).strip('"')
    if int(hidden.get("Size", -1)) != row["size"] or (row["etag"] and etag != row["etag"]):
        return KeyResult(key, False, error=_HIDDEN_GONE)
    return str(hidden["VersionId"])


def _versions_of(store: Store, key: str) -> list[dict[str, Any]]:
    """Every version and delete marker of exactly `key`, newest first (`marker` says
    which are markers): ListObjectVersions with the key as prefix."""
    client, bucket, prefix = s3_parts(store) or (None, "", "")
    if client is None:
        raise ValueError(f"{store.url}: versioned deletes need an S3 store")
    full = prefix + key
    entries: list[dict[str, Any]] = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=full):
        for e in page.get("Versions") or ():
            if e.get("Key") == full:
                entries.append({**e, "marker": False})
        for e in page.get("DeleteMarkers") or ():
            if e.get("Key") == full:
                entries.append({**e, "marker": True})
    # newest first: the latest first, then by time (a stable sort keeps S3's own order
    # of each list, newest first, between entries of one time)
    entries.sort(key=lambda e: (not e.get("IsLatest"), -e["LastModified"].timestamp()))
    return entries


def _undo_delete(store: Store, row: dict[str, Any], hidden: str | None) -> KeyResult:
    """Delete govern's delete marker, then check (one HEAD) that the key shows the
    version it hid, as apply removed it; else the object failed, with why."""
    key = row["key"]
    if hidden is None:  # (the checks always name it)
        return KeyResult(key, False, error=_HIDDEN_GONE)
    undone = delete_version(store, key, row["marker_version_id"])
    if not undone.ok:
        return undone
    back = store.head([key]).get(key)
    if back is None:
        return KeyResult(
            key,
            False,
            error="govern's delete marker was removed, but the key did not come back "
            "(written or deleted meanwhile?)",
        )
    if (back.version_id is not None and back.version_id != hidden) or back.size != row["size"]:
        return KeyResult(
            key,
            False,
            error=f"govern's delete marker was removed, but the key shows version "
            f"{back.version_id} ({counted(back.size, 'byte')}), not the version apply removed",
        )
    return KeyResult(key, True)


def _would(row: dict[str, Any], stores: StoreFactory) -> KeyResult:
    """A dry run's answer for one object: what the checks of a real restore say."""
    way = _way_back(row, stores)
    return way if isinstance(way, KeyResult) else KeyResult(row["key"], True)


def _purged(row: dict[str, Any]) -> str:
    on = f" on {_day(row['purged_at'])}" if row["purged_at"] is not None else ""
    return f"purged from quarantine{on} (past apply.quarantine_for): there is no way back"


def _unfinished(engine: Engine, plan_id: str) -> bool:
    """Whether the plan's last apply did not finish (killed, interrupted, an error), or
    finished with failed actions: a delete whose answer was lost leaves its objects'
    rows pending (gone or not, it is not known) for the next apply to settle."""
    runs = executions(engine, plan_id)
    if not runs:
        return False
    last = runs[-1]
    return last.status in ("running", "interrupted", "error") or last.actions_failed > 0


CANNOT_APPLY = frozenset({"expired", "rejected", "refused", "what_if"})
"""Plan statuses no apply runs under: what an apply of such a plan left unfinished, only
restore settles."""


def _settled_words(plan_id: str, pending: Sequence[dict[str, Any]], status: str) -> str:
    """What restore does with the objects an unfinished apply of a plan that can no longer
    be applied was removing."""
    return (
        f"plan {plan_id} is {status}: no apply will finish what an unfinished apply of it "
        f"was removing ({counted(len(pending), 'object')}); restore settles them: an object "
        "still at its key as the plan saw it stays (its quarantine copy is removed), one "
        "gone comes back from its quarantine copy"
    )


def _unfinished_words(plan_id: str, pending: Sequence[dict[str, Any]]) -> str:
    """What became of the objects an unfinished apply was removing, and the way back."""
    n = len(pending)
    held = sorted(
        {f"{r['quarantine_root']}{plan_id}/" for r in pending if r["mode"] == "quarantine"}
    )
    where = f"; their quarantine copies are under {', '.join(held)}" if held else ""
    return (
        f"plan {plan_id}: an apply of it did not finish, or failed while removing: "
        f"{counted(n, 'object')} it was "
        f"removing {'is' if n == 1 else 'are'} not recorded as removed (some may be gone "
        f"already{where}); `govern apply {plan_id}` finishes and records them, then `govern "
        f"restore {plan_id}` brings them back"
    )


def _removed_nothing(plan_id: str, status: str) -> str:
    """Why a restore of the whole plan finds nothing to bring back (said, not an error)."""
    if status in ("applied", "partially_applied"):
        why = f"status {status}: none of its actions carried out removed an object"
    else:
        why = f"status {status}: it has not been applied"
    return f"plan {plan_id} removed nothing ({why}): there is nothing to restore"


def _restored_already(plan_id: str, rows: Sequence[dict[str, Any]], uris: Sequence[str]) -> str:
    """`23 objects of plan P were restored already (on 2026-05-01): not restored again`."""
    days = sorted({_day(r["restored_at"]) for r in rows if r["restored_at"] is not None})
    when = ""
    if days:
        when = f" (on {days[0]})" if len(days) == 1 else f" ({days[0]} to {days[-1]})"
    where = f"under {', '.join(uris)}" if uris else f"of plan {plan_id}"
    were = "was" if len(rows) == 1 else "were"
    return (
        f"{counted(len(rows), 'object')} {where} {were} restored already{when}: not restored again"
    )


def _day(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d}"


def _restore_batch(
    rows: Sequence[dict[str, Any]],
    stores: StoreFactory,
    concurrency: int,
    planned: Mapping[tuple[int, str], str] | None = None,
) -> tuple[list[KeyResult], dict[int, ObjectState], set[int]]:
    """Each row's result, for each object copied back (by row id) what it is now, and the
    ids of `pending` rows whose object never left its key (settled: no row is kept for
    them). `planned`: (action id, key) -> the storage class the plan saw the object in."""
    now: dict[int, ObjectState] = {}
    unverified: dict[int, tuple[Store, ObjectState | None, KeyResult, str]] = {}
    stayed: set[int] = set()

    def one(row: dict[str, Any]) -> KeyResult:
        key = row["key"]
        way = _way_back(row, stores)
        if isinstance(way, KeyResult):
            return way
        store, quarantine, held = way.store, way.quarantine, way.held
        if way.stayed:
            stayed.add(row["id"])
            return KeyResult(key, True)
        if way.back is not None:  # put back by a restore that stopped before recording it
            if row["mode"] == "quarantine":  # (a versioned one is revived as it was)
                now[row["id"]] = way.back
            return KeyResult(key, True)
        if quarantine is None or held is None:  # versioned: the old version, as it was
            return _undo_delete(store, row, way.hidden)
        was = (planned or {}).get((row["action_id"], key))
        wanted = class_for(quarantine, store, _class_back(held.storage_class, was))
        copied = _copy_back(
            quarantine, row["quarantine_key"], store, key, wanted, held.size, row.get("encryption")
        )
        if not copied.ok:
            return KeyResult(key, False, error=f"copy back failed: {copied.error}")
        back = store.head([key]).get(key)
        problem = _not_verified(row, held, back, on_disk=_on_disk(quarantine, store))
        if problem is not None or back is None:
            unverified[row["id"]] = (store, back, copied, problem or "")
            return KeyResult(key, False, error=f"copy back not verified ({problem})")
        # the copy's own answer where the store gives one: it is what a listing says
        # (a HEAD's time has whole seconds only)
        now[row["id"]] = ObjectState(
            key,
            back.size,
            copied.etag or back.etag,
            copied.last_modified or back.last_modified,
            copied.version_id or back.version_id,
            back.storage_class,
        )
        return KeyResult(key, True)

    results = run_pool(one, rows, concurrency)
    # Taken back once every copy of the batch is made: removing a file also removes the
    # folders it leaves empty, which other copies back may be writing into meanwhile.
    for i, row in enumerate(rows):
        if row["id"] in unverified:
            store, back, copied, problem = unverified[row["id"]]
            taken = _take_back(store, row["key"], back, copied)
            error = f"copy back not verified ({problem}): {taken}"
            results[i] = KeyResult(row["key"], False, error=error)
    done_copies = [  # each only while it is the copy apply made (its ETag, on an object store)
        (r["quarantine_root"], r["quarantine_key"], r.get("copy_etag"))
        for r, res in zip(rows, results, strict=True)
        if res.ok and r["mode"] == "quarantine"
    ]
    _stranded(delete_keys(stores, done_copies))
    return results, now, stayed


def _stranded(answers: Mapping[tuple[str, str], KeyResult]) -> None:
    """Say so when quarantine copies of restored objects could not be removed (a
    read-only or immutable quarantine): the objects are back, but the copies stay in
    quarantine, and no purge takes them (their rows read restored)."""
    failed = [(root, key, r.error) for (root, key), r in answers.items() if not r.ok]
    if not failed:
        return
    root, key, error = failed[0]
    logging.getLogger(__name__).warning(
        "%s restored, but their quarantine copies could not be removed (first %s%s: %s): "
        "they stay in quarantine, and no purge takes them; remove them by hand",
        counted(len(failed), "object"),
        root,
        key,
        error,
    )


def _copy_back(
    quarantine: Store,
    quarantine_key: str,
    store: Store,
    key: str,
    storage_class: str | None,
    size: int,
    encryption: str | None = None,
) -> KeyResult:
    """Copy a checked quarantine copy back to its original key. It is a move (the copy
    in quarantine is removed once the batch is verified), so on one local filesystem it
    may be a hard link rather than a copy of the bytes (`Store.copy`'s `moving`). On S3 it
    is encrypted as the object was when apply removed it (`encryption`, recorded then):
    the copy's own may be the quarantine bucket's default KMS key. It never writes over
    an object: one written at the key since restore looked (a run saving a new checkpoint
    under the old name) stays, and this object stays in quarantine (`if_absent`)."""
    return quarantine.copy(
        quarantine_key,
        store,
        key,
        storage_class=storage_class,
        size=size,
        moving=True,
        encryption=encryption_of(encryption),
        if_absent=True,
    )


def _not_verified(
    row: dict[str, Any], held: ObjectState, back: ObjectState | None, *, on_disk: bool
) -> str | None:
    """What is wrong with the object the copy back left at the original key (None: it
    is the object apply removed, as far as a HEAD tells: its size, and on local disk the
    modification time of the quarantine copy it was copied from)."""
    if back is None:
        return "nothing at the key after the copy"
    if back.size != row["size"]:
        return f"size differs: {counted(back.size, 'byte')}, not {row['size']:,}"
    if on_disk and _times_differ(held.etag, back.etag):
        return "modification time differs from the quarantine copy's"
    return None


def _take_back(store: Store, key: str, back: ObjectState | None, copied: KeyResult) -> str:
    """Remove what a copy back that failed its verification wrote at `key` (restore
    never writes over an object: the key was empty before), so the object stays as
    apply left it, in quarantine, for the next restore to check again; but only when
    the key still holds that copy (its ETag, and version where the store names one, as
    the copy answered, else as the HEAD right after it found them). Says what it did."""
    where = store.uri(key)
    if back is None:
        return "nothing was left at the original key"
    mine = (copied.etag is None or back.etag == copied.etag) and (
        copied.version_id is None or back.version_id == copied.version_id
    )
    now = store.head([key]).get(key)
    if not mine or now is None or (now.etag, now.version_id) != (back.etag, back.version_id):
        return f"{where} is not the copy restore wrote and was left as it is"
    version = copied.version_id or back.version_id
    if version is not None and s3_parts(store) is not None:
        removed = delete_version(store, key, version)  # the very version written
    else:
        [removed] = store.delete([key])
    if not removed.ok:
        return f"removing the copy at {where} failed too: {removed.error}"
    return "the copy at the original key was removed again; the quarantine copy is kept"


def _class_back(held: str | None, planned: str | None) -> str | None:
    """The class an object goes back in: its quarantine copy's (the class it had when it
    was removed), unless that copy says only STANDARD or nothing and the plan saw another
    (a copy made by an earlier release, or kept where there are no classes)."""
    if held and held != "STANDARD":
        return held
    return planned or held


def _copies_back(
    rows: Sequence[dict[str, Any]], results: Sequence[KeyResult], now: dict[int, ObjectState]
) -> list[CopiedInPlace]:
    """The objects copied back from quarantine, as the catalog should now record them:
    the copy is new (a new time, maybe a new ETag), its content is not. Without this the
    next plan took a restored checkpoint for a fresh one (a finished run's final was no
    longer its newest, an abandoned run read as running)."""
    out: list[CopiedInPlace] = []
    for row, res in zip(rows, results, strict=True):
        state = now.get(row["id"])
        if res.ok and state is not None:
            out.append(
                CopiedInPlace(
                    row["root_url"],
                    row["key"],
                    row["size"],
                    row["etag"],
                    state.etag,
                    state.last_modified,
                    state.version_id,
                    state.storage_class,
                )
            )
    return out


def _commit(
    engine: Engine,
    plan_id: str,
    actor: str,
    rows: Sequence[dict[str, Any]],
    results: Sequence[KeyResult],
    now: datetime,
    copies: Sequence[CopiedInPlace] = (),
    stayed: set[int] | frozenset[int] = frozenset(),
) -> None:
    """Record a batch: rows restored, and the rows of objects that never left dropped (a
    `restored` row would protect them as brought back, and `explain` say so)."""
    from governance import audit

    ok_ids = [r["id"] for r, res in zip(rows, results, strict=True) if res.ok]
    ok_ids, kept_ids = [i for i in ok_ids if i not in stayed], [i for i in ok_ids if i in stayed]
    per_artifact: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r, res in zip(rows, results, strict=True):
        per_artifact[r["artifact_uri"]][0 if res.ok else 1] += 1
    with engine.begin() as conn:
        if ok_ids:
            conn.execute(
                update(O)
                .where(O.c.id == bindparam("b_id"))
                .values(state="restored", restored_at=now),
                [{"b_id": i} for i in ok_ids],
            )
        if kept_ids:
            conn.execute(delete(O).where(O.c.id.in_(kept_ids)))
        record_copies_in_place(conn, copies, revive=True)
        revive(  # a versioned delete undone: the old version is back as it was
            conn,
            [
                (r["root_url"], r["key"], r["size"], r["etag"])
                for r, res in zip(rows, results, strict=True)
                if res.ok and r["mode"] != "quarantine" and r["id"] not in stayed
            ],
        )
        audit.record_many(
            conn,
            [
                audit.NewEvent(
                    event="restore",
                    actor=actor,
                    plan_id=plan_id,
                    at=now,
                    payload={"artifact": uri, "restored": ok, "failed": bad},
                )
                for uri, (ok, bad) in sorted(per_artifact.items())
            ],
        )


def _restored(row: dict[str, Any], result: KeyResult) -> RestoredObject:
    return RestoredObject(
        uri=row["root_url"] + row["key"],
        artifact_uri=row["artifact_uri"],
        ok=result.ok,
        how=row["mode"],
        error=result.error,
    )


def _matches(row: dict[str, Any], wanted: Sequence[str]) -> bool:
    uri = row["root_url"] + row["key"]
    for w in wanted:
        if w in (uri, row["artifact_uri"], row["artifact_uri"].rstrip("/")):
            return True
        if uri.startswith(w if w.endswith("/") else w + "/"):  # a folder, with or without
            return True  # its closing slash (`runs/vision` is the folder, not `vision2`)
    return False
