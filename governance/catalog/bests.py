"""Runs' best checkpoints that applied plans archived to another location.

A tier that keeps `best` and archives it by URL copies the best checkpoint away and
removes it here. Read from what is left, the next plan found another "best" (the
second best) and archived that too, night after night. So each saved plan records the
bests it archives away, with their metric values and its archive action; once that action
is carried out (an `ok` result), later plans compare what is left with the recorded
value (`tiers.best_scored`): only a better checkpoint is the run's best again.

    record_bests(conn, {"s3://b/": [BestArchived("runs/a/", "eval_loss", "min", 0.2, 900,
                                                 "runs/a/checkpoint-900/", action)]}, "p-1")
    archived_bests(engine, root_id)  # {"runs/a/": [(("eval_loss", "min"), ArchivedBest(...))]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import exists, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel

from governance.catalog.execution_tables import ActionResultRow
from governance.catalog.roots import root_ids
from governance.catalog.tables import PlanRow
from governance.plan.tiers import ArchivedBest, ArchivedRecord
from governance.plan.types import BestArchived


class BestArchivedRow(SQLModel, table=True):
    """One run's best checkpoint by one metric that a saved plan archives away (keys
    relative to the root); it counts once the plan's action `action_id` is done."""

    __tablename__ = "archived_bests"

    id: int | None = Field(default=None, primary_key=True)
    root_id: int = Field(foreign_key="roots.id", index=True)
    run_key: str
    metric: str
    mode: str  # min | max
    value: float
    step: int | None = None
    key: str
    plan_id: str
    action_id: int


_B = BestArchivedRow.__table__  # type: ignore[attr-defined]
_R = ActionResultRow.__table__  # type: ignore[attr-defined]
_P = PlanRow.__table__  # type: ignore[attr-defined]


def record_bests(
    conn: Connection, bests: Mapping[str, Sequence[BestArchived]], plan_id: str
) -> None:
    """Record each root's archived bests (by root URL), in the caller's transaction."""
    ids = root_ids(conn, bests)
    rows = [
        {
            "root_id": ids[url],
            "run_key": b.run_key,
            "metric": b.metric,
            "mode": b.mode,
            "value": b.value,
            "step": b.step,
            "key": b.key,
            "plan_id": plan_id,
            "action_id": b.action.id,
        }
        for url, found in bests.items()
        if url in ids
        for b in found
    ]
    if rows:
        conn.execute(_B.insert(), rows)  # executemany


def archived_bests(engine: Engine, root_id: int) -> dict[str, list[ArchivedRecord]]:
    """By run key, every best checkpoint applied plans archived away from the root, with
    its (metric, mode), oldest first: the planner keeps those of the run it plans (one
    trained into the same folder since is another) and compares with the best of them
    (`tiers.archived_of_run`)."""
    b = _B.c
    done = exists().where(
        _R.c.plan_id == b.plan_id, _R.c.action_id == b.action_id, _R.c.outcome == "ok"
    )
    query = (
        select(b.run_key, b.metric, b.mode, b.value, b.step, b.key, b.plan_id, _P.c.as_of)
        .join(_P, _P.c.plan_id == b.plan_id)
        .where(b.root_id == root_id, done)
        .order_by(b.id)
    )
    out: dict[str, list[ArchivedRecord]] = {}
    with engine.connect() as conn:
        for run_key, metric, mode, value, step, key, plan, as_of in conn.execute(query):
            best = ArchivedBest(float(value), step, str(key), str(plan), as_of)
            out.setdefault(str(run_key), []).append(((str(metric), str(mode)), best))
    return out
