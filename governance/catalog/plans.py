"""Saved plans in the catalog: a header row, then actions and kept artifacts in bulk.

Plans can hold hundreds of thousands of actions, so rows are written with Core
executemany in chunks and read back with plain selects, never one ORM object per row.
Each action's object preconditions are stored as one JSON array of compact arrays
(`OBJECT_FIELDS` order), which keeps a million-object plan to one row per action.

    >>> new_plan_id(datetime(2026, 11, 30, 2, 15, tzinfo=UTC))[:18]
    'p-20261130-021500-'
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine

from governance.catalog.bulk import can_prebind, insert_rows
from governance.catalog.tables import (
    PlanActionRow,
    PlanKeptRow,
    PlanRow,
    datetime_from_us,
)
from governance.errors import UnknownPlanError
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
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
    "uri",  # null when it is root_url + key (almost always)
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
        pid = plan.plan_id
        if _writes_json_itself(conn):
            insert_rows(
                conn,
                _A,
                _ACTION_COLUMNS,
                (_action_values(pid, a, as_json=True) for a in plan.actions),
                bound=("objects",),
            )
        else:
            insert_rows(conn, _A, _ACTION_COLUMNS, (_action_values(pid, a) for a in plan.actions))
        insert_rows(
            conn, _K, _KEPT_COLUMNS, (_kept_values(pid, i, k) for i, k in enumerate(plan.kept))
        )


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
)


def _action_values(plan_id: str, a: PlannedAction, *, as_json: bool = False) -> tuple[Any, ...]:
    """One `plan_actions` row, in `_ACTION_COLUMNS` order; with `as_json`, `objects` is the
    JSON text the column's serializer (`json.dumps`) would write (see `_objects_json`)."""
    art = a.artifact
    root = art.root_url
    objects = []
    size = 0
    when: datetime | None = None
    micros = 0
    for o in a.objects:
        if o.last_modified is not when:  # an action's objects often share their time
            when = o.last_modified
            micros = epoch_micros(when)
        objects.append(
            [
                o.key,
                o.size,
                o.etag,
                micros,
                o.storage_class,
                o.version_id,
                o.upload_id,
                None if o.uri == root + o.key else o.uri,
            ]
        )
        size += o.size
    kind = a.action
    return (
        plan_id,
        a.id,
        a.rule,
        a.tier,
        kind._value_ if type(kind) is ActionType else ActionType(kind).value,
        a.destructive,
        art.uri,
        art.kind,
        art.run,
        art.step,
        root,
        a.storage_class,
        a.dest_url,
        a.reason,
        size,  # a.bytes
        len(objects),
        a.early_deletion_usd,
        a.request_cost_usd,
        a.monthly_cost_before_usd,
        a.monthly_cost_after_usd,
        _objects_json(objects) if as_json else objects,
    )


def _writes_json_itself(conn: Connection) -> bool:
    """Whether `save_plan` writes the `objects` JSON text itself: on SQLite with the
    default serializer (`json.dumps`, no string processing), for a driver `insert_rows`
    can hand pre-bound values to."""
    dialect = conn.dialect
    return (
        dialect.name == "sqlite"
        and getattr(dialect, "_json_serializer", None) is None
        and can_prebind(conn)
    )


def _objects_json(objects: list[list[Any]]) -> str:
    """`json.dumps(objects)` for the compact object arrays (strings, integers, None), with
    the same encoder for strings and the same separators, without building an encoder
    per row; anything else (an integer subclass, a value of another type) goes through
    `json.dumps` itself."""
    enc = encode_basestring_ascii
    parts = []
    try:
        for key, size, etag, micros, sc, vid, upload, uri in objects:
            if type(size) is not int or type(micros) is not int:
                return json.dumps(objects)
            parts.append(
                f"[{enc(key)}, {size!r}, {enc(etag)}, {micros!r}, "
                f"{'null' if sc is None else enc(sc)}, {'null' if vid is None else enc(vid)}, "
                f"{enc(upload)}, {'null' if uri is None else enc(uri)}]"
            )
    except TypeError:
        return json.dumps(objects)
    return "[" + ", ".join(parts) + "]"


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
)


def _kept_values(plan_id: str, seq: int, k: KeptArtifact) -> tuple[Any, ...]:
    """One `plan_kept` row, in `_KEPT_COLUMNS` order."""
    art = k.artifact
    return (
        plan_id,
        seq,
        art.uri,
        art.kind,
        art.run,
        art.step,
        art.root_url,
        k.rule,
        k.tier,
        KeptHow(k.how).value,
        k.reason,
    )


def summary_to_dict(summary: PlanSummary) -> dict[str, Any]:
    """The summary as plain JSON data (also the shape reports print)."""
    return asdict(summary)


def summary_from_dict(data: dict[str, Any]) -> PlanSummary:
    """Inverse of `summary_to_dict`; unknown keys (from a newer version) are ignored."""
    known = set(PlanSummary.__dataclass_fields__) - {"by_rule"}
    rule_known = set(RuleSummary.__dataclass_fields__)
    by_rule = {
        name: RuleSummary(**{k: v for k, v in r.items() if k in rule_known})
        for name, r in (data.get("by_rule") or {}).items()
    }
    return PlanSummary(**{k: v for k, v in data.items() if k in known}, by_rule=by_rule)


# ----------------------------------------------------------------------------- reading


def load_plan(engine: Engine, plan_id: str) -> Plan:
    """The whole plan, actions in id order and kept artifacts in saved order."""
    header = load_plan_header(engine, plan_id)
    with engine.connect() as conn:
        actions = [
            _action_from_row(row)
            for row in conn.execute(
                select(_A).where(_A.c.plan_id == plan_id).order_by(_A.c.action_id)
            ).mappings()
        ]
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
        query = select(_A).where(_A.c.plan_id == plan_id, _A.c.action_id > after)
        if action is not None:
            query = query.where(_A.c.action == action)
        with engine.connect() as conn:
            rows = conn.execute(query.order_by(_A.c.action_id).limit(page)).mappings()
            actions = [_action_from_row(row) for row in rows.all()]  # one fetch per page
        yield from actions
        if len(actions) < page:
            return
        after = actions[-1].id


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


def _action_from_row(row: Any) -> PlannedAction:
    root = row["root_url"]
    objects = [
        ObjectRef(
            uri=uri if uri is not None else root + key,
            key=key,
            size=size,
            etag=etag,
            last_modified=datetime_from_us(lm),
            storage_class=sc,
            version_id=vid,
            upload_id=upload,
        )
        for key, size, etag, lm, sc, vid, upload, uri in row["objects"]
    ]
    return PlannedAction(
        id=row["action_id"],
        rule=row["rule"],
        tier=row["tier"],
        action=ActionType(row["action"]),
        destructive=bool(row["destructive"]),
        artifact=ArtifactRef(
            uri=row["artifact_uri"],
            kind=row["artifact_kind"],
            run=row["artifact_run"],
            step=row["artifact_step"],
            root_url=root,
        ),
        objects=objects,
        reason=row["reason"],
        storage_class=row["storage_class"],
        dest_url=row["dest_url"],
        early_deletion_usd=row["early_deletion_usd"],
        request_cost_usd=row["request_cost_usd"],
        monthly_cost_before_usd=row["monthly_cost_before_usd"],
        monthly_cost_after_usd=row["monthly_cost_after_usd"],
    )


def _kept_from_row(row: Any) -> KeptArtifact:
    return KeptArtifact(
        artifact=ArtifactRef(
            uri=row["artifact_uri"],
            kind=row["artifact_kind"],
            run=row["artifact_run"],
            step=row["artifact_step"],
            root_url=row["root_url"],
        ),
        rule=row["rule"],
        tier=row["tier"],
        how=KeptHow(row["how"]),
        reason=row["reason"],
    )


def _unknown(plan_id: str) -> UnknownPlanError:
    return UnknownPlanError(f"no plan {plan_id!r} in the catalog; `govern plans` lists them")
