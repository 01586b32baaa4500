"""The audit log: append-only events, each hash-chained to the one before it.

Every event's `hash` is the SHA-256 of a canonical JSON of its id, time, name, actor,
plan, payload and the previous event's hash, so editing an event breaks its own hash and
deleting one breaks the next event's link; `verify` walks the chain and names the first
event of each break. The chain shows tampering, it does not prevent it: whoever can write
the catalog can rewrite the whole log. Keep a copy elsewhere (or a database role that may
only INSERT) where that matters.

Appends serialize, so the chain never forks: on PostgreSQL an advisory transaction lock is
taken before the last hash is read; on SQLite a (no-op) write statement takes the database
write lock first. Ids are last id + 1, assigned under that lock: gapless, and a second
writer that somehow read the same last event fails on the primary key instead of forking.

    with engine.begin() as conn:       # the caller's transaction: the event commits with it
        record(conn, "approve", actor="bob", plan_id="p-...", payload={"comment": "ok"})
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from governance.catalog.approval_tables import AuditEventRow, AuditHeadRow
from governance.catalog.bulk import insert_rows
from governance.errors import CatalogError

_E = AuditEventRow.__table__  # type: ignore[attr-defined]
_H = AuditHeadRow.__table__  # type: ignore[attr-defined]

EVENTS = frozenset(
    {
        "plan",
        "approve",
        "reject",
        "expire",
        "apply_start",
        "action",  # one action's result (logs written before action_results)
        "action_results",  # the results of one apply batch, in action order
        "apply_end",
        "restore",
        "purge",
    }
)
GENESIS = "0" * 64  # the previous hash of the first event
_PG_LOCK_KEY = 0x676F7665726E  # "govern" in ASCII: one advisory lock for the audit chain
_MAX_PROBLEMS = 50


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One stored event, as read back."""

    id: int
    at: datetime
    event: str
    actor: str
    plan_id: str | None
    payload: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append with `record_many` (`at` None: the time of the call)."""

    event: str
    actor: str
    plan_id: str | None = None
    payload: dict[str, Any] | None = None
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """`ok` when every event's hash and link check out; `problems` names each break."""

    checked: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# ----------------------------------------------------------------------------- hashing


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, set | frozenset | tuple):
        return sorted(value) if isinstance(value, set | frozenset) else list(value)
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"audit payload value of type {type(value).__name__} is not JSON")


def normalize_payload(payload: dict[str, Any] | None) -> dict[str, Any]:
    """The payload exactly as it reads back from a JSON column (datetimes as ISO strings).

    Hashing the stored form, not the caller's objects, keeps `verify` reproducible.
    """
    if not payload:
        return {}
    if _plain(payload):  # already what a JSON column reads back (most events): no round trip
        return payload
    text_ = json.dumps(payload, default=_json_default, allow_nan=False, ensure_ascii=False)
    normalized: dict[str, Any] = json.loads(text_)
    return normalized


_SCALARS = (str, int, bool, type(None))


def _plain(value: Any) -> bool:
    """Whether JSON would give `value` back equal and of the same types: str-keyed dicts,
    lists, strings, ints, bools, None and finite floats only (no tuples, sets, datetimes,
    enums or subclasses, which the round trip changes)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return False


def iso(moment: datetime) -> str:
    """UTC, microseconds always written: the form the hash covers."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime in the audit log; use timezone-aware UTC")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def event_hash(
    id_: int,
    at: datetime,
    event: str,
    actor: str,
    plan_id: str | None,
    payload: dict[str, Any],
    prev_hash: str,
) -> str:
    """SHA-256 (hex) of the canonical JSON of an event: sorted keys, no spaces, UTF-8."""
    doc = {
        "id": id_,
        "at": iso(at),
        "event": event,
        "actor": actor,
        "plan_id": plan_id,
        "payload": payload,
        "prev_hash": prev_hash,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- appending


def _lock_chain(conn: Connection) -> None:
    """Serialize appenders before the last event is read (see the module docstring)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        # Any write statement makes pysqlite BEGIN and SQLite take the write lock (waiting
        # busy_timeout for another writer); the read below then sees the newest commit.
        conn.execute(text("DELETE FROM audit_events WHERE 0 = 1"))


def _last(conn: Connection) -> tuple[int, str]:
    """The event to chain from: the head's (so an append after a truncated tail still
    shows the gap), else the newest event, else the start of the log."""
    head = conn.execute(select(_H.c.last_id, _H.c.last_hash).where(_H.c.id == 1)).first()
    if head is not None:
        return int(head[0]), str(head[1])
    row = conn.execute(select(_E.c.id, _E.c.hash).order_by(_E.c.id.desc()).limit(1)).first()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def _move_head(conn: Connection, last_id: int, last_hash: str) -> None:
    values = {"last_id": last_id, "last_hash": last_hash}
    moved = conn.execute(update(_H).where(_H.c.id == 1).values(**values)).rowcount
    if not moved:
        conn.execute(insert(_H).values(id=1, **values))


def _check_name(event: str) -> None:
    if event not in EVENTS:
        raise ValueError(f"unknown audit event {event!r}; one of {', '.join(sorted(EVENTS))}")


def record(
    conn: Connection,
    event: str,
    *,
    actor: str,
    plan_id: str | None = None,
    payload: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> int:
    """Append one event inside the caller's transaction; returns its id.

    It commits or rolls back with the caller's work, so an approval and its audit event
    are never separated. Record audit events after locking any plan row you update
    (approval does): one lock order keeps PostgreSQL free of deadlocks.
    """
    ids = record_many(conn, [NewEvent(event, actor, plan_id, payload, at)])
    return ids[0]


def record_many(conn: Connection, rows: Iterable[NewEvent]) -> range:
    """Append a batch in order inside the caller's transaction, chained, with executemany.

    Many events take one lock, one read and chunked inserts. Returns the ids given (a range; empty when `rows` is).
    """
    _lock_chain(conn)
    last_id, last_hash = _last(conn)
    default_at = datetime.now(UTC)

    tail: tuple[int, str] = (last_id, last_hash)

    def chained() -> Iterator[tuple[Any, ...]]:
        nonlocal tail
        id_, prev = last_id, last_hash
        for row in rows:
            _check_name(row.event)
            at = row.at or default_at
            payload = normalize_payload(row.payload)
            id_ += 1
            digest = event_hash(id_, at, row.event, row.actor, row.plan_id, payload, prev)
            yield (id_, at, row.event, row.actor, row.plan_id, payload, prev, digest)
            prev = digest
            tail = (id_, digest)

    try:
        count = insert_rows(conn, _E, _COLUMNS, chained())
    except IntegrityError as exc:  # an event already holds the next id: not ours to chain
        raise CatalogError(
            f"the audit log holds an event past its head (event {last_id + 1} exists, the "
            "head records "
            f"event {last_id}): the catalog was edited; `govern audit --verify` shows where"
        ) from exc
    if count:
        _move_head(conn, *tail)
    return range(last_id + 1, last_id + 1 + count)


_COLUMNS = ("id", "at", "event", "actor", "plan_id", "payload", "prev_hash", "hash")


def record_now(engine: Engine, event: str, **kw: Any) -> int:
    """`record` in a transaction of its own (committed on return)."""
    with engine.begin() as conn:
        return record(conn, event, **kw)


# ----------------------------------------------------------------------------- reading


def _from_row(row: Any) -> AuditEvent:
    return AuditEvent(
        id=int(row["id"]),
        at=row["at"],
        event=row["event"],
        actor=row["actor"],
        plan_id=row["plan_id"],
        payload=dict(row["payload"] or {}),
        prev_hash=row["prev_hash"],
        hash=row["hash"],
    )


def iter_events(engine: Engine, plan_id: str | None = None) -> Iterator[AuditEvent]:
    """Events in id order, streamed (the log grows by one row per applied action)."""
    query = select(_E).order_by(_E.c.id)
    if plan_id is not None:
        query = query.where(_E.c.plan_id == plan_id)
    with engine.connect() as conn:
        for row in conn.execution_options(yield_per=2000).execute(query).mappings():
            yield _from_row(row)


def plan_events(conn: Connection, plan_id: str) -> list[AuditEvent]:
    """One plan's events, oldest first, read on the caller's connection (in its snapshot,
    with the rows the caller reads beside them)."""
    query = select(_E).where(_E.c.plan_id == plan_id).order_by(_E.c.id)
    return [_from_row(row) for row in conn.execute(query).mappings()]


def events(engine: Engine, plan_id: str | None = None) -> list[AuditEvent]:
    """Every event (of one plan, when given), oldest first."""
    return list(iter_events(engine, plan_id))


def _read_head(engine: Engine) -> tuple[int, str] | None:
    with engine.connect() as conn:
        head = conn.execute(select(_H.c.last_id, _H.c.last_hash).where(_H.c.id == 1)).first()
    return None if head is None else (int(head[0]), str(head[1]))


def _head_problems(
    before: tuple[int, str] | None,
    after: tuple[int, str] | None,
    hashes: dict[int, str],
    last_id: int | None,
) -> list[str]:
    """The log must end where its head (written with every append, in the same
    transaction) says it does: every event up to the head read before the walk was
    walked and the one it names has its hash, and no event walked lies past the head
    read after it (appends made meanwhile move both the log and the head)."""
    if before is None:
        return [] if last_id is None else ["the log's head record is missing (deleted?)"]
    head_id, head_hash = before
    if last_id is None:
        return [f"the log is empty but its head records event {head_id} (deleted?)"]
    if head_id > last_id:
        return [
            f"the log ends at event {last_id} but its head records event {head_id} "
            "(newest events deleted?)"
        ]
    problems = []
    if hashes.get(head_id) != head_hash:
        problems.append(f"the log's head does not match event {head_id} (edited?)")
    newest = after[0] if after is not None else head_id
    if last_id > newest:
        problems.append(
            f"events {newest + 1} to {last_id} lie past the log's head, which records "
            f"event {newest} (inserted, or the head rewound?)"
        )
    return problems


_DECISIONS = frozenset({"approve", "reject"})


def _unrecorded_decisions(
    engine: Engine, decided: Counter[tuple[str | None, str, str, str | None, str]]
) -> list[str]:
    """Approvals and rejections with no audit event of their own. `approve` and `reject`
    write the row and its event in one transaction, so a row without one was written
    outside govern: an approval inserted by hand would let a plan be applied that no
    approver's event shows."""
    from governance.catalog.approval_tables import ApprovalRow

    a = ApprovalRow.__table__.c  # type: ignore[attr-defined]
    out = []
    with engine.connect() as conn:
        rows = conn.execute(
            select(a.id, a.plan_id, a.decision, a.actor, a.fingerprint, a.at).order_by(a.id)
        )
        for row_id, plan_id, decision, actor, fingerprint, at in rows:
            key = (plan_id, decision, actor, fingerprint, stored_iso(at))
            if decided[key] > 0:
                decided[key] -= 1
                continue
            out.append(
                f"decision {row_id} ({decision} of plan {plan_id} by {actor}) has no audit "
                "event: written outside govern, or its event edited?"
            )
    # what is left are events whose decision has no row: a veto deleted to apply a plan
    for (plan_id, decision, actor, _, at), n in sorted(decided.items()):
        if n > 0:
            out.append(
                f"the {decision} of plan {plan_id} by {actor} at {at} (an audit event) has "
                "no decision row: deleted outside govern?"
            )
    return out


def stored_iso(moment: datetime) -> str:
    """A time as an event writes it (`iso`), also for one a row reads back naive (UTC)."""
    return iso(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))


def _plans_unlike_their_events(engine: Engine, made: dict[str, AuditEvent]) -> list[str]:
    """Plans whose row disagrees with their `plan` event (`integrity.plan_tampering`):
    a refusal cleared, frozen rules or a creation time edited."""
    from governance.catalog.plans import plan_row
    from governance.integrity import plan_tampering

    out = []
    with engine.connect() as conn:
        for plan_id, event in sorted(made.items()):
            row = plan_row(conn, plan_id)
            if row is None:
                continue
            out += [f"plan {plan_id}: {what}" for what in plan_tampering(row, event)]
    return out


def verify(engine: Engine) -> VerifyResult:
    """Walk the whole chain: each event's hash must match its content, each link its
    predecessor. Editing event 17 reports 17; deleting it reports 18 (the broken link).

    Deleting the newest events is caught by the head record every append moves in the
    same transaction, and so are events past the head (an inserted row, a head rewound
    to hide the events after it), and so is an approval or rejection without its own
    event (`_unrecorded_decisions`: one written by hand). Only an editor who rewrites
    the head and deletes every event after the new one, or recomputes every later hash,
    goes unseen: keep exported copies where that matters.
    """
    before = _read_head(engine)
    problems: list[str] = []
    checked = 0
    prev_id: int | None = None
    prev_hash = GENESIS
    hashes: dict[int, str] = {}
    decided: Counter[tuple[str | None, str, str, str | None, str]] = Counter()
    made: dict[str, AuditEvent] = {}  # plan id -> its `plan` event
    for ev in iter_events(engine):
        checked += 1
        hashes[ev.id] = ev.hash
        if ev.event in _DECISIONS:
            fingerprint = (ev.payload or {}).get("fingerprint")
            decided[(ev.plan_id, ev.event, ev.actor, fingerprint, stored_iso(ev.at))] += 1
        elif ev.event == "plan" and ev.plan_id is not None:
            made.setdefault(ev.plan_id, ev)
        if ev.prev_hash != prev_hash or (prev_id is None and ev.id != 1):
            if prev_id is None:
                problems.append(
                    f"event {ev.id}: previous hash does not match the start of the log (deleted?)"
                )
            else:
                why = "deleted?" if ev.id != prev_id + 1 else "edited?"
                problems.append(
                    f"event {ev.id}: previous hash does not match event {prev_id} ({why})"
                )
        expected = event_hash(
            ev.id, ev.at, ev.event, ev.actor, ev.plan_id, ev.payload, ev.prev_hash
        )
        if expected != ev.hash:
            problems.append(f"event {ev.id}: hash does not match its content (edited?)")
        prev_id, prev_hash = ev.id, ev.hash
    problems += _head_problems(before, _read_head(engine), hashes, prev_id)
    problems += _unrecorded_decisions(engine, decided)
    problems += _plans_unlike_their_events(engine, made)
    if len(problems) > _MAX_PROBLEMS:
        more = len(problems) - _MAX_PROBLEMS
        problems = [*problems[:_MAX_PROBLEMS], f"... and {more} more"]
    return VerifyResult(checked=checked, problems=problems)
