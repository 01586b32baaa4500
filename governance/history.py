"""What happened to a saved plan after it was made: who approved or rejected it, each
apply run, and what of its removed objects was restored or purged since.

`govern show` prints it under the plan, so a lead or an auditor sees in one place who
signed off on what and whether it was carried out, without reading the audit log.
Reads only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from governance.approval import approval_state, when
from governance.catalog.approval_tables import ApprovalRow, AuditEventRow
from governance.catalog.execution_tables import ExecutionRow, RemovedObjectRow

_R = ApprovalRow.__table__  # type: ignore[attr-defined]
_E = ExecutionRow.__table__  # type: ignore[attr-defined]
_O = RemovedObjectRow.__table__  # type: ignore[attr-defined]
_A = AuditEventRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class DecisionEntry:
    """One approval or rejection, as recorded."""

    decision: str  # approve | reject
    actor: str
    at: datetime
    comment: str | None
    current: (
        bool  # bound to the plan's fingerprint (an approval of other content counts for nothing)
    )


@dataclass(frozen=True, slots=True)
class ExecutionEntry:
    """One `govern apply` run of the plan."""

    id: int
    actor: str
    started_at: datetime
    finished_at: datetime | None
    status: str  # running | applied | partially_applied | interrupted | failed
    delete_mode: str
    only_non_destructive: bool
    ok: int
    skipped: int
    failed: int
    error: str | None


@dataclass(frozen=True, slots=True)
class RestoreEntry:
    """One `govern restore` run of the plan: who, when, and how many objects came back."""

    actor: str
    at: datetime
    restored: int
    failed: int


@dataclass(slots=True)
class PlanHistory:
    """A plan's approval state (one line), its decisions and apply runs oldest first, and
    its removed objects by state (`removed`, `restored`, `purged`)."""

    approval: str
    decisions: list[DecisionEntry] = field(default_factory=list)
    executions: list[ExecutionEntry] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)
    restores: list[RestoreEntry] = field(default_factory=list)

    def document(self) -> dict[str, object]:
        """As JSON-ready data (times as ISO 8601 UTC)."""
        from governance.report.common import iso

        return {
            "approval": self.approval,
            "decisions": [
                {
                    "decision": d.decision,
                    "actor": d.actor,
                    "at": iso(d.at),
                    "comment": d.comment,
                    "current": d.current,
                }
                for d in self.decisions
            ],
            "executions": [
                {
                    "id": e.id,
                    "actor": e.actor,
                    "started_at": iso(e.started_at),
                    "finished_at": iso(e.finished_at) if e.finished_at else None,
                    "status": e.status,
                    "delete_mode": e.delete_mode,
                    "only_non_destructive": e.only_non_destructive,
                    "actions_ok": e.ok,
                    "actions_skipped": e.skipped,
                    "actions_failed": e.failed,
                    "error": e.error,
                }
                for e in self.executions
            ],
            "removed_objects": dict(self.removed),
            "restores": [
                {"actor": r.actor, "at": iso(r.at), "restored": r.restored, "failed": r.failed}
                for r in self.restores
            ],
        }

    def lines(self) -> list[str]:
        """For people, a line per event, oldest first (after the approval state)."""
        events: list[tuple[datetime, str]] = []
        for d in self.decisions:
            verb = "approved" if d.decision == "approve" else "rejected"
            note = f": {d.comment}" if d.comment else ""
            stale = "" if d.current else " (of other content: does not count)"
            events.append((d.at, f"{verb} by {d.actor}{stale}{note}"))
        for e in self.executions:
            what = "apply (non-destructive only)" if e.only_non_destructive else "apply"
            counts = f"{e.ok:,} ok, {e.skipped:,} skipped, {e.failed:,} failed"
            error = f"; {e.error}" if e.error else ""
            events.append(
                (
                    e.started_at,
                    f"{what} #{e.id} by {e.actor}: {e.status} "
                    f"({counts}; deletes {e.delete_mode}){error}",
                )
            )
        for r in self.restores:
            failed = f", {r.failed:,} failed" if r.failed else ""
            events.append((r.at, f"restore by {r.actor}: {r.restored:,} restored{failed}"))
        events.sort(key=lambda event: event[0])  # stable: equal times keep their kind's order
        out = [f"approval: {self.approval}"]
        out += [f"{when(at)}  {text}" for at, text in events]
        if self.removed:
            parts = ", ".join(f"{n:,} {state}" for state, n in sorted(self.removed.items()))
            out.append(f"removed objects: {parts}")
        return out


def plan_history(engine: Engine, plan_id: str, fingerprint: str, now: datetime) -> PlanHistory:
    """The plan's history at `now` (its approval state is the effective one then)."""
    state = approval_state(engine, plan_id, now)
    with engine.connect() as conn:
        decisions = [
            DecisionEntry(r.decision, r.actor, r.at, r.comment, r.fingerprint == fingerprint)
            for r in conn.execute(
                select(_R.c.decision, _R.c.actor, _R.c.at, _R.c.comment, _R.c.fingerprint)
                .where(_R.c.plan_id == plan_id)
                .order_by(_R.c.at, _R.c.id)
            )
        ]
        executions = [
            ExecutionEntry(
                r.id,
                r.actor,
                r.started_at,
                r.finished_at,
                r.status,
                r.delete_mode,
                bool(r.only_non_destructive),
                r.actions_ok,
                r.actions_skipped,
                r.actions_failed,
                r.error,
            )
            for r in conn.execute(
                select(_E).where(_E.c.plan_id == plan_id).order_by(_E.c.started_at, _E.c.id)
            )
        ]
        removed = {
            str(s): int(n)
            for s, n in conn.execute(
                select(_O.c.state, func.count())
                .where(_O.c.plan_id == plan_id, _O.c.state != "pending")
                .group_by(_O.c.state)
            )
        }
        restores: dict[tuple[datetime, str], list[int]] = {}
        for at, actor, payload in conn.execute(
            select(_A.c.at, _A.c.actor, _A.c.payload)
            .where(_A.c.plan_id == plan_id, _A.c.event == "restore")
            .order_by(_A.c.id)
        ):
            # one event per artifact of a restore batch: a run of `govern restore` shares
            # its actor and time
            counts = restores.setdefault((at, actor), [0, 0])
            counts[0] += int((payload or {}).get("restored") or 0)
            counts[1] += int((payload or {}).get("failed") or 0)
    return PlanHistory(
        state.summary(),
        decisions,
        executions,
        removed,
        [RestoreEntry(actor, at, ok, bad) for (at, actor), (ok, bad) in restores.items()],
    )
