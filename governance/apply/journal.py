"""The apply journal in the catalog: executions, per-action results, removed objects, lock.

Everything here is written in short transactions of its own, committed as each batch
finishes, so that a process killed at any point leaves a journal that the next apply can
trust: an action with a `final` result is never repeated, and an object with a `pending`
removal row may already be gone (see `preconditions`).

The lock is a row keyed by plan id: inserting it is atomic on SQLite and PostgreSQL
alike (a unique violation means somebody holds it). An apply holds it, or a restore
(`RESTORING`). A holder that died on this host, or stopped heartbeating, loses it to the
next apply or restore.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from governance.apply.types import ActionOutcome, ExecutionSummary, Outcome
from governance.catalog.bulk import bind_processors, execute_rows, insert_rows
from governance.catalog.engine import page_cache
from governance.catalog.execution_tables import (
    ActionResultRow,
    ApplyLockRow,
    ExecutionRow,
    RemovedObjectRow,
)
from governance.catalog.removals import derive_again, held_then
from governance.catalog.roots import root_ids
from governance.catalog.tables import StoredObject
from governance.errors import RefusedError
from governance.storage.base import Encryption, epoch_micros

E = ExecutionRow.__table__  # type: ignore[attr-defined]
R = ActionResultRow.__table__  # type: ignore[attr-defined]
O = RemovedObjectRow.__table__  # type: ignore[attr-defined]  # noqa: E741
L = ApplyLockRow.__table__  # type: ignore[attr-defined]
OBJECTS = StoredObject.__table__  # type: ignore[attr-defined]

LOCK_STALE_AFTER = timedelta(minutes=10)
HEARTBEAT_EVERY = 30.0  # seconds


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ----------------------------------------------------------------------------- lock


def start_execution(
    engine: Engine,
    plan_id: str,
    *,
    actor: str,
    now: datetime,
    delete_mode: str,
    only_non_destructive: bool,
) -> int:
    """Insert the execution row and take the plan's lock, in one transaction.

    Raises RefusedError naming the holder when a live apply of the plan is running.
    A dead holder's lock is taken over and its execution marked `interrupted`.
    """
    holder = holder_id()
    row = {
        "plan_id": plan_id,
        "actor": actor,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": now,
        "status": "running",
        "delete_mode": delete_mode,
        "only_non_destructive": only_non_destructive,
        "actions_ok": 0,
        "actions_skipped": 0,
        "actions_failed": 0,
        "actions_done_before": 0,
        "objects_purged": 0,
    }
    lock = {"plan_id": plan_id, "holder": holder, "acquired_at": now, "heartbeat_at": now}

    def claim(conn: Connection) -> dict[str, Any]:
        return lock | {"execution_id": _insert_execution(conn, row)}

    taken = _acquire(engine, plan_id, now, claim, lambda held: held_by(plan_id, held))
    return int(taken["execution_id"])


def _acquire(
    engine: Engine,
    plan_id: str,
    now: datetime,
    claim: Callable[[Connection], dict[str, Any]],
    refusal: Callable[[RowMapping], str],
) -> dict[str, Any]:
    """Take the plan's lock for an apply or a restore; returns the lock row written.

    `claim(conn)` writes what goes with the lock in its transaction (an apply's execution
    row) and gives the lock row's values. A live holder is a RefusedError worded by
    `refusal`; a dead or silent one's lock is taken over (`_take_over`)."""
    try:
        with engine.begin() as conn:
            lock = claim(conn)
            conn.execute(insert(L).values(lock))
        return lock
    except IntegrityError:
        pass
    with engine.begin() as conn:
        held = conn.execute(select(L).where(L.c.plan_id == plan_id)).mappings().first()
        if held is None:  # released meanwhile: try once more, in this transaction
            lock = claim(conn)
            conn.execute(insert(L).values(lock))
            return lock
        if not _lock_is_stale(held, now):
            raise RefusedError(refusal(held))
        lock = claim(conn)
        _take_over(conn, plan_id, held, lock)
    return lock


RESTORING = 0
"""The lock's execution id while `govern restore` holds it (executions count from 1): an
apply and a restore of one plan, or two restores, never run at once. A restore copying
objects back while an apply removes them (or two restores putting back the same object and
each clearing its quarantine copy) would leave a journal that says neither."""


def held_by(plan_id: str, held: RowMapping) -> str:
    """Who holds the plan's lock, in words: the refusal of whoever wanted it."""
    since = held["acquired_at"].isoformat()
    if held["execution_id"] == RESTORING:
        return f"plan {plan_id} is being restored since {since} ({held['holder']})"
    return (
        f"plan {plan_id} is being applied by execution {held['execution_id']} since {since} "
        f"({held['holder']})"
    )


def _take_over(conn: Connection, plan_id: str, held: RowMapping, lock: dict[str, Any]) -> None:
    """Replace a stale holder's lock row with `lock`, unless someone else replaced it first;
    the stale holder's execution (an apply's) is marked interrupted."""
    taken = conn.execute(
        update(L)
        .where(
            and_(
                L.c.plan_id == plan_id,
                L.c.execution_id == held["execution_id"],
                L.c.holder == held["holder"],
                L.c.heartbeat_at == held["heartbeat_at"],
            )
        )
        .values(lock)
    ).rowcount
    if taken != 1:
        raise RefusedError(f"plan {plan_id}: another process took over its lock just now")
    if held["execution_id"] != RESTORING:
        conn.execute(
            update(E)
            .where(and_(E.c.id == held["execution_id"], E.c.status == "running"))
            .values(status="interrupted", error=f"lock taken over from {held['holder']}")
        )


def take_restore_lock(engine: Engine, plan_id: str, now: datetime) -> str:
    """Take the plan's lock for a restore; returns the holder (for `release` and
    `check_restore_lock`). RefusedError when a live apply or restore of the plan holds
    it; a dead or silent holder's lock is taken over, as an apply takes it over."""
    holder = holder_id()
    lock = {
        "plan_id": plan_id,
        "execution_id": RESTORING,
        "holder": holder,
        "acquired_at": now,
        "heartbeat_at": now,
    }
    _acquire(
        engine,
        plan_id,
        now,
        lambda _conn: lock,
        lambda held: f"{held_by(plan_id, held)}: restore it once that finishes",
    )
    return holder


def abandon_execution(engine: Engine, plan_id: str, execution_id: int) -> None:
    """Undo `start_execution` for an apply refused before it did anything: its lock and
    its execution row go, in one transaction."""
    with engine.begin() as conn:
        conn.execute(
            delete(L).where(and_(L.c.plan_id == plan_id, L.c.execution_id == execution_id))
        )
        conn.execute(delete(E).where(E.c.id == execution_id))


def _insert_execution(conn: Connection, row: dict[str, Any]) -> int:
    key = conn.execute(insert(E).values(row)).inserted_primary_key
    assert key is not None
    return int(key[0])


def _lock_is_stale(held: Any, now: datetime) -> bool:
    if now - held["heartbeat_at"] > LOCK_STALE_AFTER:
        return True
    host, _, pid = str(held["holder"]).rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not _pid_alive(int(pid))


def _pid_alive(pid: int) -> bool:
    """Whether the process still runs. A killed one that no parent reaped (its parent
    died too, in a container whose PID 1 reaps nothing) is a zombie: `kill(pid, 0)`
    still finds it, and its lock was held for as long as the lock counts as fresh."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether `pid` is a zombie (Linux `/proc`; elsewhere it is taken as running)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    # `pid (comm) state ...`: the command may hold spaces and parentheses
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z"


def _mine(plan_id: str, execution_id: int, holder: str | None) -> Any:
    """The lock row of this execution (of this restore: `holder` given)."""
    clause = and_(L.c.plan_id == plan_id, L.c.execution_id == execution_id)
    return clause if holder is None else and_(clause, L.c.holder == holder)


def heartbeat(
    engine: Engine, plan_id: str, execution_id: int, now: datetime, holder: str | None = None
) -> bool:
    """Refresh the lock's heartbeat; False when this execution no longer holds it."""
    with engine.begin() as conn:
        beat = conn.execute(
            update(L).where(_mine(plan_id, execution_id, holder)).values(heartbeat_at=now)
        )
    return bool(beat.rowcount == 1)


class LockLostError(RefusedError):
    """This apply's lock was taken over: it must not act any more."""


def check_lock(engine: Engine, plan_id: str, execution_id: int) -> None:
    """Raise LockLostError unless this execution still holds the plan's lock.

    An apply whose heartbeat stopped for `LOCK_STALE_AFTER` (paused: Ctrl-Z, a frozen
    VM, or a clock far off the next one's) has its lock taken over by the next apply,
    which redoes what the first left pending. Were the first to wake and carry on, both
    would act on the same objects: its failed copies' clean-up would remove quarantine
    copies the other made of sources it then deleted, gone both ways. So an apply asks
    before each batch and right before each removal it sends (a fencing check)."""
    with engine.connect() as conn:
        holder = conn.execute(select(L.c.execution_id).where(L.c.plan_id == plan_id)).scalar()
    if holder != execution_id:
        taker = (
            "no execution now"
            if holder is None
            else "a restore"
            if holder == RESTORING
            else f"execution {holder}"
        )
        raise LockLostError(
            f"plan {plan_id}: apply execution {execution_id} lost its lock ({taker} holds "
            f"it): it was paused, or its clock is off, for over {_stale_words()}, so "
            f"{'a restore' if holder == RESTORING else 'another apply'} took over; this one "
            f"stopped and acts no more (see govern show {plan_id})"
        )


def _stale_words() -> str:
    return f"{int(LOCK_STALE_AFTER.total_seconds() // 60)} minutes"


def release(engine: Engine, plan_id: str, execution_id: int, holder: str | None = None) -> None:
    with engine.begin() as conn:
        conn.execute(delete(L).where(_mine(plan_id, execution_id, holder)))


def check_restore_lock(engine: Engine, plan_id: str, holder: str) -> None:
    """Raise LockLostError unless this restore still holds the plan's lock (asked before
    each batch it writes: see `check_lock`)."""
    with engine.connect() as conn:
        held = conn.execute(select(L).where(L.c.plan_id == plan_id)).mappings().first()
    if held is None or held["execution_id"] != RESTORING or held["holder"] != holder:
        taker = "no one now" if held is None else held_by(plan_id, held)
        raise LockLostError(
            f"plan {plan_id}: this restore lost its lock ({taker}): it was paused, or its "
            f"clock is off, for over {_stale_words()}; it stopped and restores no more "
            f"(what it restored is recorded; run govern restore {plan_id} again)"
        )


class Heartbeat:
    """Refreshes the lock's heartbeat from a daemon thread while a long apply runs."""

    def __init__(
        self,
        engine: Engine,
        plan_id: str,
        execution_id: int,
        clock: Any,
        holder: str | None = None,
    ) -> None:
        self._args = (engine, plan_id, execution_id)
        self._holder = holder
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="govern-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY):
            try:
                heartbeat(*self._args, self._clock(), self._holder)
            except Exception:  # a missed beat only risks a takeover after minutes
                continue


# ----------------------------------------------------------------------------- results


def final_action_ids(engine: Engine, plan_id: str) -> Iterator[int]:
    """The ids of the plan's actions that an execution finished (ok, or skipped on
    purpose), one at a time from the cursor (a resumed plan's may be most of them)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(R.c.action_id).where(and_(R.c.plan_id == plan_id, R.c.final.is_(True)))
        )
        for (action_id,) in rows:
            yield int(action_id)


def skipped_for_good(engine: Engine, plan_id: str) -> list[str]:
    """The artifact URIs of the plan's actions an execution skipped for good (a lock, a
    protection): done with, never carried out (their folders keep what goes with them)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(R.c.artifact_uri)
            .where(and_(R.c.plan_id == plan_id, R.c.final.is_(True), R.c.outcome != "ok"))
            .distinct()
        )
        return [str(uri) for (uri,) in rows]


RESULT_COLUMNS = (
    "execution_id",
    "action_id",
    "plan_id",
    "action",
    "artifact_uri",
    "outcome",
    "final",
    "reason",
    "objects",
    "bytes",
    "finished_at",
)


def result_rows(
    execution_id: int, plan_id: str, results: Iterable[ActionOutcome], now: datetime
) -> list[tuple[Any, ...]]:
    """`action_results` rows in RESULT_COLUMNS order."""
    return [
        (
            execution_id,
            r.action_id,
            plan_id,
            r.action,
            r.artifact_uri,
            r.outcome.value,
            r.final,
            r.reason,
            r.objects,
            r.bytes,
            now,
        )
        for r in results
    ]


def write_results(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    insert_rows(conn, R, RESULT_COLUMNS, rows)


def finish_execution(
    engine: Engine,
    execution_id: int,
    *,
    now: datetime,
    status: str,
    counts: Mapping[str, int],
    done_before: int,
    purged: int,
    error: str | None = None,
) -> None:
    """Close the execution row; `counts` are results by outcome value."""
    with engine.begin() as conn:
        conn.execute(
            update(E)
            .where(E.c.id == execution_id)
            .values(
                finished_at=now,
                status=status,
                actions_ok=counts.get(Outcome.OK.value, 0),
                actions_skipped=counts.get(Outcome.SKIPPED.value, 0),
                actions_failed=counts.get(Outcome.FAILED.value, 0),
                actions_done_before=done_before,
                objects_purged=purged,
                error=error,
            )
        )


def iter_results(engine: Engine, execution_id: int, page: int = 5000) -> Iterator[ActionOutcome]:
    """Every result one execution recorded, in action id order, a page at a time."""
    for docs in iter_result_pages(engine, execution_id, page):
        for d in docs:
            yield ActionOutcome(**d | {"outcome": Outcome(d["outcome"])})


def iter_result_pages(
    engine: Engine, execution_id: int, page: int = 5000
) -> Iterator[list[dict[str, Any]]]:
    """`iter_results` as `types.outcome_dict` documents, a page at a time, made straight
    from the rows (for `govern apply --format json`, which prints every result)."""
    after = -1
    while True:
        with page_cache(engine), engine.connect() as conn:  # each page is read once
            rows = conn.execute(
                select(
                    R.c.action_id,
                    R.c.action,
                    R.c.artifact_uri,
                    R.c.outcome,
                    R.c.reason,
                    R.c.objects,
                    R.c.bytes,
                    R.c.final,
                )
                .where(and_(R.c.execution_id == execution_id, R.c.action_id > after))
                .order_by(R.c.action_id)
                .limit(page)
            ).all()
        skipped = Outcome.SKIPPED.value
        docs = [
            {
                "action_id": int(action_id),
                "action": action,
                "artifact_uri": uri,
                "outcome": outcome,
                "reason": reason,
                "objects": int(objects),
                "bytes": int(size),
                "final": bool(final),
                "execution_id": None if outcome == skipped else execution_id,
            }
            for action_id, action, uri, outcome, reason, objects, size, final in rows
        ]
        if docs:
            yield docs
        if len(rows) < page:
            return
        after = int(rows[-1][0])


def first_started(engine: Engine, plan_id: str, current: int | None) -> datetime | None:
    """When the first apply of the plan other than `current` (this one) started; None
    when there was none. Only such an earlier (interrupted) apply can have made what this
    one finds done already without a journal row to say so (a copy in place)."""
    with engine.connect() as conn:
        query = select(E.c.started_at).where(E.c.plan_id == plan_id)
        if current is not None:
            query = query.where(E.c.id != current)
        started = conn.execute(query.order_by(E.c.started_at).limit(1)).scalar()
    if started is None:
        return None
    return started if started.tzinfo is not None else started.replace(tzinfo=UTC)


def executions(engine: Engine, plan_id: str) -> list[ExecutionSummary]:
    """Every execution of a plan, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(E).where(E.c.plan_id == plan_id).order_by(E.c.id)).mappings()
        return [
            ExecutionSummary(
                id=r["id"],
                plan_id=r["plan_id"],
                actor=r["actor"],
                started_at=r["started_at"],
                finished_at=r["finished_at"],
                status=r["status"],
                actions_ok=r["actions_ok"],
                actions_skipped=r["actions_skipped"],
                actions_failed=r["actions_failed"],
                actions_done_before=r["actions_done_before"],
                objects_purged=r["objects_purged"],
                error=r["error"],
            )
            for r in rows
        ]


# ----------------------------------------------------------------------------- removed objects


def pending_removals(
    engine: Engine, plan_id: str, action_ids: Sequence[int]
) -> dict[tuple[int, str], Any]:
    """(action id, key) -> the removal row an earlier execution left for it: `pending`
    (interrupted before it could record the outcome) or `removed` (its action failed on
    other objects, so it is being re-run)."""
    if not action_ids:
        return {}
    with engine.connect() as conn:
        rows = conn.execute(
            select(O).where(
                and_(
                    O.c.plan_id == plan_id,
                    O.c.state.in_(("pending", "removed")),
                    O.c.action_id.in_(list(action_ids)),
                )
            )
        ).mappings()
        return {(int(r["action_id"]), str(r["key"])): dict(r) for r in rows}


def restored_since(
    engine: Engine, since: datetime, keys: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Of these (root URL, key) pairs, those `govern restore` brought back at `since` or
    later (by any plan). A plan made before such a restore must not remove the object
    again: the restored copy matches its preconditions (same size and ETag), yet a person
    decided it stays, after the plan was reviewed."""
    if not keys:
        return set()
    wanted = set(keys)
    found: set[tuple[str, str]] = set()
    names = sorted({k for _, k in wanted})
    with engine.connect() as conn:
        for start in range(0, len(names), _IDS_PER_STATEMENT):
            part = names[start : start + _IDS_PER_STATEMENT]
            rows = conn.execute(
                select(O.c.root_url, O.c.key).where(
                    and_(O.c.state == "restored", O.c.restored_at >= since, O.c.key.in_(part))
                )
            )
            found.update((str(r), str(k)) for r, k in rows if (r, k) in wanted)
    return found


def known_at_plan(
    engine: Engine,
    scans: Mapping[str, int],
    keys: Sequence[tuple[str, str]],
    made_at: datetime | None = None,
) -> set[tuple[str, str]]:
    """Of these (root URL, key) pairs, those the catalog held, as they are, when the
    plan's scan of their root ran (`scans`: root URL -> scan id). Under a folder that a
    delete removes whole, such an object belongs to another artifact (a Lightning log
    folder holds the run's checkpoints): it is not new.

    A row listed again since that scan (written anew, or back after it was gone: the scan
    rewrites it, `changed_scan_id`) is new, and so is an object `govern restore` brought
    back at `made_at` or later (a restore revives its row in place): neither was there,
    as it is, when the plan was made; nor was one an apply removed before `made_at`
    (`removals.held_then`). A root without a scan id: only live rows count."""
    if not keys:
        return set()
    objects = OBJECTS
    wanted = set(keys)
    found: set[tuple[str, str]] = set()
    with engine.connect() as conn:
        ids = root_ids(conn, (r for r, _ in wanted))
        for root, root_id in ids.items():
            names = sorted(k for r, k in wanted if r == root)
            scan = scans.get(root)
            held = [objects.c.root_id == root_id, objects.c.upload_id == ""]
            if scan is not None:
                held += [
                    objects.c.changed_scan_id <= scan,
                    *held_then(objects, root_id, scan, made_at),
                ]
            else:
                held.append(objects.c.gone_scan_id.is_(None))
            for start in range(0, len(names), _IDS_PER_STATEMENT):
                part = names[start : start + _IDS_PER_STATEMENT]
                rows = conn.execute(select(objects.c.key).where(*held, objects.c.key.in_(part)))
                found.update((root, str(k)) for (k,) in rows)
    if made_at is not None and found:
        found -= restored_since(engine, made_at, sorted(found))
    return found


PENDING_COLUMNS = (
    "plan_id",
    "action_id",
    "execution_id",
    "artifact_uri",
    "root_url",
    "key",
    "size",
    "etag",
    "mode",
    "quarantine_root",
    "quarantine_key",
    "state",
)


def insert_pending(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """`removed_objects` rows in state `pending`, in PENDING_COLUMNS order (state last)."""
    insert_rows(conn, O, PENDING_COLUMNS, rows)


def mark_removed(
    conn: Connection,
    plan_id: str,
    removed: Sequence[tuple[int, str, str | None]],
    *,
    execution_id: int,
    now: datetime,
    purge_after: datetime | None,
) -> None:
    """Pending rows (action id, key, marker version) become `removed`."""
    if not removed:
        return
    when = bind_processors(conn, O, ("removed_at", "purge_after"))((now, purge_after))
    execute_rows(
        conn,
        "UPDATE removed_objects SET state = 'removed', execution_id = {p}, "
        "marker_version_id = {p}, removed_at = {p}, purge_after = {p} "
        "WHERE plan_id = {p} AND action_id = {p} AND key = {p} AND state = 'pending'",
        [(execution_id, m, *when, plan_id, a, k) for a, k, m in removed],
    )


def record_copy_etags(
    conn: Connection, plan_id: str, copies: Sequence[tuple[int, str, str, str | None]]
) -> None:
    """Each pending row's quarantine copy ETag and the object's encryption (action id,
    key, ETag, `encryption_text`): what `restore` checks the copy by, and gives back.
    Before `mark_actions_removed`, which the rows then wait for."""
    if not copies:
        return
    execute_rows(
        conn,
        "UPDATE removed_objects SET copy_etag = {p}, encryption = {p} "
        "WHERE plan_id = {p} AND action_id = {p} AND key = {p} AND state = 'pending'",
        [(etag, encryption, plan_id, a, k) for a, k, etag, encryption in copies],
    )


def encryption_text(encryption: Encryption | None) -> str | None:
    """An object's encryption as `removed_objects.encryption` holds it (JSON)."""
    if encryption is None:
        return None
    return json.dumps([encryption.algorithm, encryption.kms_key_id, encryption.bucket_key])


def encryption_of(text: str | None) -> Encryption | None:
    """`encryption_text` read back (None: not recorded)."""
    if not text:
        return None
    algorithm, key_id, bucket_key = json.loads(text)
    return Encryption(str(algorithm), key_id, bool(bucket_key))


def mark_actions_removed(
    conn: Connection,
    plan_id: str,
    action_ids: Sequence[int],
    *,
    execution_id: int,
    now: datetime,
    purge_after: datetime | None,
) -> None:
    """Every pending row of these actions becomes `removed`, set-based (one statement per
    900 actions, not one per object). Call it once the rows of objects that were
    not removed are dropped and any delete-marker versions are recorded (`mark_removed`)."""
    when = bind_processors(conn, O, ("removed_at", "purge_after"))((now, purge_after))
    for start in range(0, len(action_ids), _IDS_PER_STATEMENT):
        ids = list(action_ids[start : start + _IDS_PER_STATEMENT])
        execute_rows(
            conn,
            "UPDATE removed_objects SET state = 'removed', execution_id = {p}, "
            "removed_at = {p}, purge_after = {p} WHERE plan_id = {p} AND state = 'pending' "
            f"AND action_id IN ({', '.join(['{p}'] * len(ids))})",
            [(execution_id, *when, plan_id, *ids)],
        )


_IDS_PER_STATEMENT = 900  # with 3 more parameters, within SQLite's oldest limit of 999


def drop_pending(conn: Connection, plan_id: str, keys: Sequence[tuple[int, str]]) -> None:
    """Pending rows of objects that were not removed after all (their action failed)."""
    if not keys:
        return
    execute_rows(
        conn,
        "DELETE FROM removed_objects "
        "WHERE plan_id = {p} AND action_id = {p} AND key = {p} AND state = 'pending'",
        [(plan_id, a, k) for a, k in keys],
    )


def record_copies_in_place(
    conn: Connection, copies: Sequence[CopiedInPlace], *, revive: bool = False
) -> None:
    """Write what a copy in place (a transition, an archive by class) made into the
    catalog's object rows: the copy's ETag, time, version and class, with the time the
    content was written kept in `content_modified_us` (policy ages count from it, not
    from the copy). The next scan then lists the object as recorded and leaves the row
    as it is; an object written again since is listed otherwise, and the scan's rewrite
    of the row clears `content_modified_us`. Only a row still showing the object the plan
    saw (size and ETag) is written.

    `revive`: the copies are objects `restore` copied back from quarantine, whose rows a
    scan since the apply may have marked gone: they are live again, and the next scan
    must find them as recorded (a revived row is otherwise rewritten, content time and
    all)."""
    if not copies:
        return
    revived = "gone_scan_id = NULL, " if revive else ""
    only_live = "" if revive else "AND gone_scan_id IS NULL "
    execute_rows(
        conn,
        "UPDATE objects SET content_modified_us = coalesce(content_modified_us, last_modified), "
        f"etag = {{p}}, last_modified = {{p}}, storage_class = {{p}}, {revived}"
        "version_id = coalesce({p}, version_id) "
        "WHERE root_id = (SELECT id FROM roots WHERE url = {p}) AND key = {p} "
        f"AND upload_id = '' {only_live}AND size = {{p}} AND etag = {{p}}",
        [
            (
                c.etag,
                epoch_micros(c.last_modified),
                c.storage_class,
                c.version_id,
                c.root_url,
                c.key,
                c.size,
                c.old_etag,
            )
            for c in copies
        ],
    )
    if revive:  # live again
        derive_again(conn, (c.root_url for c in copies))


@dataclass(frozen=True, slots=True)
class CopiedInPlace:
    """One object copied onto itself into `storage_class`, as the store answered."""

    root_url: str
    key: str
    size: int
    old_etag: str
    etag: str
    last_modified: datetime
    version_id: str | None
    storage_class: str | None  # None: a store without classes (a filesystem)
