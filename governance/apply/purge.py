"""Purging quarantine: objects kept past `apply.quarantine_for` are deleted for good.

Runs at the start of every apply (and of nightly through it). The deadline of each
object (`purge_after`) was fixed when it was quarantined, from the plan's frozen `apply`
block, so a later policy change cannot shorten a quarantine already under way.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, bindparam, select, update
from sqlalchemy.engine import Engine

from governance.apply.journal import O
from governance.apply.modes import delete_keys
from governance.apply.types import StoreFactory, open_destination


@dataclass(slots=True)
class PurgeReport:
    purged: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def purge_quarantine(
    engine: Engine, *, now: datetime, stores: StoreFactory, actor: str, dry_run: bool = False
) -> PurgeReport:
    """Delete quarantined objects whose `purge_after` has passed; record `purge` events."""
    from governance import audit

    report = PurgeReport()
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                O.c.id,
                O.c.plan_id,
                O.c.root_url,
                O.c.quarantine_root,
                O.c.quarantine_key,
                O.c.copy_etag,
            ).where(and_(O.c.mode == "quarantine", O.c.state == "removed", O.c.purge_after <= now))
        ).all()
    if not rows:
        return report
    if dry_run:
        report.purged = len(rows)
        return report
    # A quarantine in another bucket opens with the endpoint of a root it serves (not the
    # defaults): said once per quarantine root, before the deletes open it by URL alone.
    for qroot, root in sorted({(r.quarantine_root, r.root_url) for r in rows}):
        open_destination(stores, qroot, root)
    # each copy only while it is the one apply made (its ETag, on an object store)
    answers = delete_keys(
        stores, ((r.quarantine_root, r.quarantine_key, r.copy_etag) for r in rows)
    )
    done: list[int] = []
    per_plan: dict[str, int] = defaultdict(int)
    for r in rows:
        answer = answers.get((r.quarantine_root, r.quarantine_key))
        if answer is not None and answer.ok:
            done.append(r.id)
            per_plan[r.plan_id] += 1
        else:
            report.failed += 1
            if answer is not None and len(report.errors) < 10:
                where = f"{r.quarantine_root}{r.quarantine_key}"
                error = answer.error or "failed"
                report.errors.append(error if error.startswith(where) else f"{where}: {error}")
    with engine.begin() as conn:
        if done:
            conn.execute(
                update(O).where(O.c.id == bindparam("b_id")).values(state="purged", purged_at=now),
                [{"b_id": i} for i in done],
            )
        audit.record_many(
            conn,
            [
                audit.NewEvent(
                    event="purge",
                    actor=actor,
                    plan_id=plan_id,
                    at=now,
                    payload={"objects": count},
                )
                for plan_id, count in sorted(per_plan.items())
            ],
        )
    report.purged = len(done)
    return report
