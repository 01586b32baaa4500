"""A plan's rows against its audit events: what was edited in the catalog after the fact.

The fingerprint covers a plan's actions and kept list; the rest of what approve and apply
decide by lives in rows a database editor can change: the plan's refusal, its frozen
approval rules (`controls`), when and by whom it was made, its decisions (an approval's
time, a veto). Each of them was also written, when it happened, into the hash-chained
audit log (`plan`, `approve`, `reject` events), which `govern audit --verify` proves
unedited. So the rows are compared with those events: a refusal cleared, `require_for`
emptied, a notice period shortened by an earlier `created_at`, a veto deleted, an expired
approval's time moved on, each disagrees with an event, and approve and apply refuse the
plan ("changed after review"), as they refuse actions that no longer match the fingerprint.

A plan saved before its event carried a field (`controls_sha256`) is not checked on it;
a plan with no `plan` event at all (none is written when saving fails half-way) is
checked on its decisions alone.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import Connection, Engine

from governance.audit import AuditEvent, plan_events, stored_iso
from governance.errors import ApprovalError

DECISIONS = ("approve", "reject")


def controls_digest(controls: Mapping[str, Any] | None) -> str:
    """The SHA-256 of a plan's frozen controls, as canonical JSON (the `plan` event's
    `controls_sha256`)."""
    text = json.dumps(dict(controls or {}), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _moment(value: Any) -> str | None:
    """A time as the audit log writes it (`iso`), whether a datetime (naive: UTC) or text."""
    if value is None:
        return None
    return stored_iso(value) if isinstance(value, datetime) else str(value)


def plan_tampering(row: Mapping[str, Any], event: AuditEvent) -> list[str]:
    """How a plan's row disagrees with its `plan` event."""
    payload = event.payload or {}
    found = []
    checks = [
        ("fingerprint", row.get("fingerprint"), payload.get("fingerprint")),
        ("refusal", row.get("refusal"), payload.get("refusal", row.get("refusal"))),
        ("maker", row.get("created_by"), event.actor),
        ("creation time", _moment(row.get("created_at")), _moment(event.at)),
        ("as_of", _moment(row.get("as_of")), payload.get("as_of", _moment(row.get("as_of")))),
    ]
    if "controls_sha256" in payload:
        checks.append(
            (
                "set of frozen rules",
                controls_digest(row.get("controls")),
                payload["controls_sha256"],
            )
        )
    for what, now, then in checks:
        if now != then:
            found.append(f"its {what} is not what its audit event {event.id} recorded")
    status = payload.get("status")
    if status in ("refused", "what_if") and row.get("status") != status:
        found.append(
            f"it was made {status} (audit event {event.id}), and reads {row.get('status')}"
        )
    return found


def decision_tampering(
    rows: Iterable[Mapping[str, Any]], events: Iterable[AuditEvent]
) -> list[str]:
    """Decisions (approvals, vetoes) whose row and event disagree, either way: a row with
    no event of its own (inserted, or its time or actor edited), an event with no row
    (a veto deleted)."""
    recorded: Counter[tuple[str, str, str | None, str | None]] = Counter()
    for ev in events:
        if ev.event in DECISIONS:
            recorded[
                (ev.event, ev.actor, (ev.payload or {}).get("fingerprint"), _moment(ev.at))
            ] += 1
    found = []
    for row in rows:
        key = (row["decision"], row["actor"], row["fingerprint"], _moment(row["at"]))
        if recorded[key] > 0:
            recorded[key] -= 1
            continue
        found.append(
            f"its {row['decision']} by {row['actor']} (decision {row['id']}) has no audit "
            "event of its own (written, or its time edited, outside govern)"
        )
    for (decision, actor, _, at), n in sorted(recorded.items()):
        if n > 0:
            found.append(
                f"its {decision} by {actor} at {at} is in the audit log, not in its "
                "decisions (deleted outside govern)"
            )
    return found


def tampering(engine: Engine, plan_id: str) -> list[str]:
    """Every way the plan's rows disagree with its audit events (empty: none)."""
    from governance.catalog.approval_tables import ApprovalRow
    from governance.catalog.plans import plan_row

    # One transaction and one snapshot, taken as deciders take theirs (`approval`: a
    # no-op write on the plan's row, which SQLite begins a transaction for, and which
    # waits for a decision being written): a decision committed between two reads would
    # read as a row without its event.
    with engine.begin() as conn:
        conn.execute(text("UPDATE plans SET status = status WHERE plan_id = :p"), {"p": plan_id})
        events = plan_events(conn, plan_id)
        row = plan_row(conn, plan_id)
        decisions = _decision_rows(conn, plan_id, ApprovalRow)
    found: list[str] = []
    made = [ev for ev in events if ev.event == "plan"]
    if row is not None and made:
        found += plan_tampering(row, made[0])
    found += decision_tampering(decisions, events)
    return found


def _decision_rows(conn: Connection, plan_id: str, model: Any) -> list[Mapping[str, Any]]:
    a = model.__table__.c
    query = select(a.id, a.decision, a.actor, a.fingerprint, a.at).where(a.plan_id == plan_id)
    return [dict(r) for r in conn.execute(query.order_by(a.id)).mappings()]


def refuse_tampered(engine: Engine, plan_id: str) -> None:
    """ApprovalError (exit 3) when the plan's rows disagree with its audit events."""
    found = tampering(engine, plan_id)
    if found:
        raise ApprovalError(
            f"plan {plan_id}: the catalog was changed after review ({'; '.join(found[:3])}"
            f"{'; ...' if len(found) > 3 else ''}); govern audit --verify tells more"
        )
