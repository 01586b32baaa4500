"""Saved plans in the catalog: a header row, then actions and kept artifacts in bulk.

Plans can hold hundreds of thousands of actions, so rows are written in bulk, in the form
the driver takes as it is (SQLite: multi-row INSERTs on the sqlite3 cursor; PostgreSQL:
COPY; another driver: Core executemany in chunks), and read back with plain selects,
never one ORM object per row. Each action's object preconditions are stored as one JSON
array of compact arrays (`OBJECT_FIELDS` order), which keeps a million-object plan to one
row per action.

    >>> new_plan_id(datetime(2026, 11, 30, 2, 15, tzinfo=UTC))[:18]
    'p-20261130-021500-'
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from json import loads
from json.encoder import encode_basestring_ascii
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine

from governance.catalog.bests import record_bests
from governance.catalog.bulk import SQLITE_NULL, copy_rows, insert_rows, sqlite_insert
from governance.catalog.completions import record_completed
from governance.catalog.quiet_runs import record_quiet
from governance.catalog.tables import (
    PlanActionRow,
    PlanKeptRow,
    PlanRow,
    datetime_from_us,
)
from governance.errors import CatalogError, UnknownPlanError
from governance.heap import settled_collections
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    LeftSummary,
    ObjectRef,
    Plan,
    PlannedAction,
    PlanStatus,
    PlanSummary,
    RuleSummary,
)
from governance.storage.base import epoch_micros

_P = PlanRow.__table__  # type: ignore[attr-defined]
_A = PlanActionRow.__table__  # type: ignore[attr-defined]
_K = PlanKeptRow.__table__  # type: ignore[attr-defined]

OBJECT_FIELDS = (
    "key",
    "size",
    "etag",
    "last_modified_us",
    "storage_class",
    "version_id",
    "upload_id",
    "uri",  # always null: an object's URL is its action's root_url + key (older plans
    # could store one here; `_action_from_row` checks that it is that)
    "class_since_us",  # when govern's own copy put it in its class (null: never copied;
    # plans saved before it have 8 fields). Apply compares storage's time with it.
)


@dataclass(slots=True)
class PlanHeader:
    """A plan without its actions: what `govern plans` lists and approval checks."""

    plan_id: str
    fingerprint: str
    status: PlanStatus
    as_of: datetime
    created_at: datetime
    created_by: str
    policy_path: str | None
    policy_sha256: str | None
    scans: dict[str, int]
    summary: PlanSummary
    refusal: str | None = None
    notes: list[str] = field(default_factory=list)
    controls: dict[str, Any] = field(default_factory=dict)


def new_plan_id(now: datetime) -> str:
    """`p-YYYYMMDD-HHMMSS-xxxx` in UTC: sortable by time, with 16 random bits against clashes."""
    stamp = now.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    return f"p-{stamp}-{secrets.token_hex(2)}"


# ----------------------------------------------------------------------------- writing


def save_plan(engine: Engine, plan: Plan) -> None:
    """Write a whole plan in one transaction (a half-saved plan is never visible)."""
    with engine.begin() as conn:
        conn.execute(_P.insert(), [_header_row(plan)])
        record_completed(conn, plan.completed_runs, plan.plan_id)
        record_bests(conn, plan.bests_archived, plan.plan_id)
        record_quiet(conn, plan.quiet_runs, plan.plan_id)
        write = _bulk_writer(conn)
        if write is None:
            _insert_with_core(conn, plan)
            return
        null = SQLITE_NULL if conn.dialect.name == "sqlite" else None
        write(conn, _A.name, _ACTION_COLUMNS, _action_rows(plan, null))
        write(conn, _K.name, _KEPT_COLUMNS, _kept_rows(plan, null))


def _bulk_writer(conn: Connection) -> Callable[..., None] | None:
    """How `save_plan` writes rows in the driver's form on this connection: executemany on
    the sqlite3 cursor, psycopg's COPY, or None (another driver, or an engine with its own
    JSON serializer, which `objects` must go through): Core binds them."""
    dialect = conn.dialect
    if getattr(dialect, "_json_serializer", None) is not None:
        return None
    if dialect.name == "sqlite" and dialect.driver == "pysqlite":
        return sqlite_insert
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        return copy_rows
    return None


def _insert_with_core(conn: Connection, plan: Plan) -> None:
    """The actions and kept rows bound by Core, column type by column type (`insert_rows`)."""
    insert_rows(conn, _A, _ACTION_COLUMNS, _action_rows(plan, None, for_core=True))
    insert_rows(conn, _K, _KEPT_COLUMNS, _kept_rows(plan, None))


def set_plan_status(engine: Engine, plan_id: str, status: PlanStatus) -> None:
    """Move a plan to `status` (the approval state machine decides whether it may)."""
    with engine.begin() as conn:
        changed = conn.execute(
            update(_P).where(_P.c.plan_id == plan_id).values(status=PlanStatus(status).value)
        ).rowcount
    if not changed:
        raise _unknown(plan_id)


def _header_row(plan: Plan) -> dict[str, Any]:
    return {
        "plan_id": plan.plan_id,
        "fingerprint": plan.fingerprint,
        "status": plan.status.value,
        "as_of": plan.as_of,
        "created_at": plan.created_at,
        "created_by": plan.created_by,
        "policy_path": plan.policy_path,
        "policy_sha256": plan.policy_sha256,
        "scans": dict(plan.scans),
        "summary": summary_to_dict(plan.summary),
        "refusal": plan.refusal,
        "notes": list(plan.notes),
        "controls": dict(plan.controls),
    }


_ACTION_COLUMNS = (
    "plan_id",
    "action_id",
    "rule",
    "tier",
    "action",
    "destructive",
    "artifact_uri",
    "artifact_kind",
    "artifact_run",
    "artifact_step",
    "root_url",
    "storage_class",
    "dest_url",
    "reason",
    "bytes",
    "object_count",
    "early_deletion_usd",
    "request_cost_usd",
    "monthly_cost_before_usd",
    "monthly_cost_after_usd",
    "objects",
    "artifact_written",
)


_ACTION_VALUES: dict[str, str] = {kind: kind.value for kind in ActionType}
_HOW_VALUES: dict[str, str] = {how: how.value for how in KeptHow}


def _action_rows(plan: Plan, null: Any, *, for_core: bool = False) -> Iterator[tuple[Any, ...]]:
    """Each action as a `plan_actions` row (`_ACTION_COLUMNS` order) in the form drivers
    take as it is: `null` for NULL in the nullable columns, `destructive` as 1 or 0,
    `objects` as its JSON text (`_objects_text`). One loop, no call per action: a plan
    has hundreds of thousands. `for_core`: rows for Core to bind column by column
    (`destructive` a bool, `objects` as lists for the column's serializer)."""
    pid = plan.plan_id
    kinds = _ACTION_VALUES
    for a in plan.actions:
        art = a.artifact
        root = art.root_url
        if for_core:
            objects: Any = _object_lists(a.objects)
            size = sum(o.size for o in a.objects)
        else:
            objects, size = _objects_text(a.objects)
        kind = a.action
        yield (
            pid,
            a.id,
            a.rule,
            null if (tier := a.tier) is None else tier,
            kinds.get(kind) or ActionType(kind).value,
            a.destructive if for_core else 1 if a.destructive else 0,
            art.uri,
            art.kind,
            null if (run := art.run) is None else run,
            null if (step := art.step) is None else step,
            root,
            null if (sc := a.storage_class) is None else sc,
            null if (dest := a.dest_url) is None else dest,
            a.reason,
            size,  # a.bytes
            len(a.objects),
            a.early_deletion_usd,
            a.request_cost_usd,
            a.monthly_cost_before_usd,
            a.monthly_cost_after_usd,
            objects,
            null if (at := art.written) is None else epoch_micros(at),
        )


def _object_lists(objects: list[ObjectRef]) -> list[list[Any]]:
    """An action's objects as the stored compact arrays (`OBJECT_FIELDS` order)."""
    out = []
    when: datetime | None = None
    micros = 0
    for o in objects:
        if o.last_modified is not when:  # an action's objects often share their time
            when = o.last_modified
            micros = epoch_micros(when)
        since = o.class_since
        out.append(
            [
                o.key, o.size, o.etag, micros, o.storage_class, o.version_id, o.upload_id, None,
                None if since is None else epoch_micros(since),
            ]
        )  # fmt: skip
    return out


_TEXTS: dict[str, str] = {"": '""', "STANDARD": '"STANDARD"'}
"""JSON text of the strings most objects share (no upload id, the default class), looked
up instead of encoded."""


def _objects_text(objects: list[ObjectRef]) -> tuple[str, int]:
    """(`json.dumps(_object_lists(objects))`, the objects' total size), written in
    one pass with the same string encoder and separators and no list per object: this is
    most of a plan save's Python time. A value of another type than json.dumps's own
    strings, integers and None (an integer subclass, say) sends the whole list through
    `json.dumps` itself."""
    enc = encode_basestring_ascii
    texts = _TEXTS
    parts = []
    size = 0
    when: datetime | None = None
    micros = ""
    try:
        for o in objects:
            n = o.size
            lm = o.last_modified
            if type(n) is not int:
                raise TypeError(n)
            if lm is not when:  # an action's objects often share their time
                when = lm
                micros = str(epoch_micros(lm))
            sc = o.storage_class
            vid = o.version_id
            up = o.upload_id
            since = o.class_since
            parts.append(
                f"[{enc(o.key)}, {n}, {enc(o.etag)}, {micros}, "
                f"{'null' if sc is None else texts.get(sc) or enc(sc)}, "
                f"{'null' if vid is None else enc(vid)}, {texts.get(up) or enc(up)}, null, "
                f"{'null' if since is None else epoch_micros(since)}]"
            )
            size += n
    except TypeError:
        return json.dumps(_object_lists(objects)), sum(o.size for o in objects)
    return "[" + ", ".join(parts) + "]", size


_KEPT_COLUMNS = (
    "plan_id",
    "seq",
    "artifact_uri",
    "artifact_kind",
    "artifact_run",
    "artifact_step",
    "root_url",
    "rule",
    "tier",
    "how",
    "reason",
    "artifact_written",
)


def _kept_rows(plan: Plan, null: Any) -> Iterator[tuple[Any, ...]]:
    """Each kept artifact as a `plan_kept` row in the drivers' form (see `_action_rows`;
    with `null` None, also what Core binds)."""
    pid = plan.plan_id
    hows = _HOW_VALUES
    for seq, k in enumerate(plan.kept):
        art = k.artifact
        how = k.how
        yield (
            pid,
            seq,
            art.uri,
            art.kind,
            null if (run := art.run) is None else run,
            null if (step := art.step) is None else step,
            art.root_url,
            null if (rule := k.rule) is None else rule,
            null if (tier := k.tier) is None else tier,
            hows.get(how) or KeptHow(how).value,
            k.reason,
            null if (at := art.written) is None else epoch_micros(at),
        )


def summary_to_dict(summary: PlanSummary) -> dict[str, Any]:
    """The summary as plain JSON data (also the shape reports print)."""
    return asdict(summary)


def summary_from_dict(data: dict[str, Any]) -> PlanSummary:
    """Inverse of `summary_to_dict`; unknown keys (from a newer version) are ignored."""
    known = set(PlanSummary.__dataclass_fields__) - {"by_rule", "left"}
    rule_known = set(RuleSummary.__dataclass_fields__)
    by_rule = {
        name: RuleSummary(**{k: v for k, v in r.items() if k in rule_known})
        for name, r in (data.get("by_rule") or {}).items()
    }
    left_known = set(LeftSummary.__dataclass_fields__)
    left = [  # (absent from plans saved before it was counted)
        LeftSummary(**{k: v for k, v in item.items() if k in left_known})
        for item in data.get("left") or []
    ]
    return PlanSummary(**{k: v for k, v in data.items() if k in known}, by_rule=by_rule, left=left)


# ----------------------------------------------------------------------------- reading


def load_plan(engine: Engine, plan_id: str) -> Plan:
    """The whole plan, actions in id order and kept artifacts in saved order."""
    header = load_plan_header(engine, plan_id)
    actions: list[PlannedAction] = []
    with settled_collections() as settle:
        for batch in _action_batches(engine, _action_select(plan_id), 2_000):
            actions += batch
            settle()
    with engine.connect() as conn:
        kept = [
            _kept_from_row(row)
            for row in conn.execute(
                select(_K).where(_K.c.plan_id == plan_id).order_by(_K.c.seq)
            ).mappings()
        ]
    return Plan(
        plan_id=header.plan_id,
        fingerprint=header.fingerprint,
        as_of=header.as_of,
        created_at=header.created_at,
        created_by=header.created_by,
        policy_path=header.policy_path,
        policy_sha256=header.policy_sha256,
        status=header.status,
        scans=header.scans,
        actions=actions,
        kept=kept,
        summary=header.summary,
        refusal=header.refusal,
        notes=header.notes,
        controls=header.controls,
    )


def iter_actions(
    engine: Engine, plan_id: str, page: int = 1000, *, action: str | None = None
) -> Iterator[PlannedAction]:
    """A plan's actions in id order (only those of type `action`, if given), read `page`
    rows at a time (keyset pagination, a short read per page), so a plan of any size is
    walked in bounded memory."""
    after = -1
    while True:
        query = _action_select(plan_id, after=after, action=action).limit(page)
        actions = [a for batch in _action_batches(engine, query, page) for a in batch]
        yield from actions
        if len(actions) < page:
            return
        after = actions[-1].id


_READ_COLUMNS = (
    *(c for c in _ACTION_COLUMNS if c not in ("plan_id", "bytes", "object_count")),
    "plan_id",
)
"""What reading an action back needs, in `_actions_from_rows` order: the written
columns but the two derived from `objects` (bytes, object_count), the plan id last (for
a damaged plan's message)."""


def _action_select(plan_id: str, *, after: int = -1, action: str | None = None) -> Any:
    """The actions' columns (`_READ_COLUMNS` order), in id order, after id `after`."""
    query = select(*(_A.c[name] for name in _READ_COLUMNS)).where(
        _A.c.plan_id == plan_id, _A.c.action_id > after
    )
    if action is not None:
        query = query.where(_A.c.action == action)
    return query.order_by(_A.c.action_id)


def _action_batches(engine: Engine, query: Any, chunk: int) -> Iterator[list[PlannedAction]]:
    """The actions `query` selects, `chunk` rows at a time. On SQLite the rows come from
    the driver's cursor as plain tuples, `objects` as its JSON text: Core's Row and JSON
    processing per row cost several times what reading it does (a large plan has
    hundreds of thousands)."""
    if engine.dialect.name == "sqlite" and engine.dialect.driver == "pysqlite":
        from governance.catalog.queries import sqlite_chunks

        for rows in sqlite_chunks(engine, query, chunk):
            yield _actions_from_rows(rows)
        return
    with engine.connect() as conn:
        result = conn.execute(query)
        while rows := result.fetchmany(chunk):
            yield _actions_from_rows(rows)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHARED: dict[str, str] = {}
"""One copy of each repeated column value read back (see `_actions_from_rows`)."""
_ACTION_TYPES: dict[str, ActionType] = {kind.value: kind for kind in ActionType}


def _actions_from_rows(rows: Iterable[Sequence[Any]]) -> list[PlannedAction]:
    """Actions from rows in `_READ_COLUMNS` order (`objects` decoded or as JSON text), in
    one loop: objects of one action written at the same microsecond share a datetime."""
    out: list[PlannedAction] = []
    append = out.append
    kinds = _ACTION_TYPES
    epoch, micros = _EPOCH, timedelta
    # Rules, tiers, kinds, roots and classes repeat row after row: one string each, as
    # the planner held them, not one per row (a plan's load would be a third larger).
    share = _SHARED.setdefault
    if len(_SHARED) > 65_536:
        _SHARED.clear()
    for (
        action_id, rule, tier, kind, destructive, uri, art_kind, run, step, root, sc_to, dest,
        reason, early, request, before, after, stored, at, plan_id,
    ) in rows:  # fmt: skip
        rule, art_kind, root = share(rule, rule), share(art_kind, art_kind), share(root, root)
        if tier is not None:
            tier = share(tier, tier)
        if sc_to is not None:
            sc_to = share(sc_to, sc_to)
        objects: list[ObjectRef] = []
        last_us: int | None = None
        when = epoch
        listed = loads(stored) if isinstance(stored, str) else stored
        if listed and len(listed[0]) == 8:  # saved before objects kept their class time
            listed = [[*entry, None] for entry in listed]
        for key, size, etag, lm, sc, vid, upload, obj_uri, since in listed:
            if obj_uri is not None and obj_uri != root + key:  # no plan is made so
                raise CatalogError(
                    f"plan {plan_id} action {action_id}: object {obj_uri} is not under the "
                    f"action's root {root}; the catalog's plan is damaged"
                )
            if lm != last_us:
                last_us, when = lm, epoch + micros(0, 0, lm)  # = datetime_from_us(lm)
            if sc is not None:
                sc = share(sc, sc)
            obj = ObjectRef(key, size, when, etag, sc, vid, upload)
            if since is not None:
                obj.class_since = epoch + micros(0, 0, since)
            objects.append(obj)
        artifact = ArtifactRef(
            uri, art_kind, run, step, root, None if at is None else epoch + micros(0, 0, at)
        )
        action_type = kinds.get(kind) or ActionType(kind)
        planned = PlannedAction(
            action_id, rule, tier, action_type, bool(destructive), artifact, objects,
            reason, sc_to, dest, early, request, before, after,
        )  # fmt: skip
        append(planned)
    return out


def planned_classes(
    engine: Engine, plan_id: str, objects: Iterable[tuple[int, str]]
) -> dict[tuple[int, str], str]:
    """(action id, key) -> the storage class the plan saw each of these objects in (those
    it saw with one): one read of their actions' stored object lists, 500 actions a query
    (restore puts an object back in the class it had)."""
    wanted = set(objects)
    ids = sorted({action_id for action_id, _ in wanted})
    key_at, class_at = OBJECT_FIELDS.index("key"), OBJECT_FIELDS.index("storage_class")
    found: dict[tuple[int, str], str] = {}
    with engine.connect() as conn:
        for start in range(0, len(ids), 500):
            query = select(_A.c.action_id, _A.c.objects).where(
                _A.c.plan_id == plan_id, _A.c.action_id.in_(ids[start : start + 500])
            )
            for action_id, stored in conn.execute(query):
                listed = loads(stored) if isinstance(stored, str) else stored or ()
                for entry in listed:
                    key, storage_class = entry[key_at], entry[class_at]
                    if storage_class and (action_id, key) in wanted:
                        found[(action_id, key)] = storage_class
    return found


def copied_in_place(engine: Engine, plan_id: str, root_url: str, folder: str) -> set[str]:
    """The keys under `folder` (root-relative) of the objects the plan copies in place
    (transitions, archives by class): rewritten by apply itself, not by their writer."""
    key_at = OBJECT_FIELDS.index("key")
    a = _A.c
    query = select(a.objects).where(
        a.plan_id == plan_id,
        a.root_url == root_url,
        a.artifact_uri.startswith(root_url + folder, autoescape=True),
        (a.action == ActionType.TRANSITION.value)
        | ((a.action == ActionType.ARCHIVE.value) & a.dest_url.is_(None)),
    )
    found: set[str] = set()
    with engine.connect() as conn:
        for (stored,) in conn.execute(query):
            listed = loads(stored) if isinstance(stored, str) else stored or ()
            found.update(str(entry[key_at]) for entry in listed)
    return found


def action_counts(engine: Engine, plan_id: str) -> dict[str, int]:
    """A plan's number of actions by action type (value)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(_A.c.action, func.count()).where(_A.c.plan_id == plan_id).group_by(_A.c.action)
        )
        return {str(kind): int(n) for kind, n in rows}


def load_kept(engine: Engine, plan_id: str) -> list[KeptArtifact]:
    """A plan's kept artifacts in saved order."""
    with engine.connect() as conn:
        rows = conn.execute(select(_K).where(_K.c.plan_id == plan_id).order_by(_K.c.seq)).mappings()
        return [_kept_from_row(row) for row in rows]


def iter_kept(engine: Engine, plan_id: str, page: int = 1000) -> Iterator[KeptArtifact]:
    """`load_kept` a page at a time (keyset pagination), in bounded memory."""
    after = -1
    while True:
        with engine.connect() as conn:
            rows = conn.execute(
                select(_K)
                .where(_K.c.plan_id == plan_id, _K.c.seq > after)
                .order_by(_K.c.seq)
                .limit(page)
            ).mappings()
            found = [(int(row["seq"]), _kept_from_row(row)) for row in rows.all()]
        yield from (k for _, k in found)
        if len(found) < page:
            return
        after = found[-1][0]


def plan_row(conn: Connection, plan_id: str) -> dict[str, Any] | None:
    """The plan's row as stored (its columns by name), or None."""
    row = conn.execute(select(_P).where(_P.c.plan_id == plan_id)).mappings().first()
    return dict(row) if row is not None else None


def load_plan_header(engine: Engine, plan_id: str) -> PlanHeader:
    """One plan's header; UnknownPlanError naming the id when there is none."""
    with engine.connect() as conn:
        row = conn.execute(select(_P).where(_P.c.plan_id == plan_id)).mappings().first()
    if row is None:
        raise _unknown(plan_id)
    return _header_from_row(row)


def list_plans(engine: Engine) -> list[PlanHeader]:
    """Every saved plan's header, oldest first (ties broken by id, which sorts by time)."""
    return list(iter_plan_headers(engine))


def iter_plan_headers(engine: Engine) -> Iterator[PlanHeader]:
    with engine.connect() as conn:
        rows = conn.execute(select(_P).order_by(_P.c.created_at, _P.c.plan_id)).mappings()
        for row in rows:
            yield _header_from_row(row)


def _header_from_row(row: Any) -> PlanHeader:
    return PlanHeader(
        plan_id=row["plan_id"],
        fingerprint=row["fingerprint"],
        status=PlanStatus(row["status"]),
        as_of=row["as_of"],
        created_at=row["created_at"],
        created_by=row["created_by"],
        policy_path=row["policy_path"],
        policy_sha256=row["policy_sha256"],
        scans={str(k): int(v) for k, v in (row["scans"] or {}).items()},
        summary=summary_from_dict(row["summary"] or {}),
        refusal=row["refusal"],
        notes=list(row["notes"] or []),
        controls=dict(row["controls"] or {}),
    )


def _kept_from_row(row: Any) -> KeptArtifact:
    return KeptArtifact(
        artifact=ArtifactRef(
            uri=row["artifact_uri"],
            kind=row["artifact_kind"],
            run=row["artifact_run"],
            step=row["artifact_step"],
            root_url=row["root_url"],
            written=None if (at := row["artifact_written"]) is None else datetime_from_us(at),
        ),
        rule=row["rule"],
        tier=row["tier"],
        how=KeptHow(row["how"]),
        reason=row["reason"],
    )


def _unknown(plan_id: str) -> UnknownPlanError:
    return UnknownPlanError(f"no plan {plan_id!r} in the catalog; `govern plans` lists them")
