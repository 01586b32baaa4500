"""Runs a plan saw completed, and why: kept past the evidence a later apply may remove.

A run's status is read from what its folder holds (a marker, final weights, the newest
Trainer state), and plans act on that very evidence: a `final` tier may archive a finished
run's last checkpoint to another location, `trainer_state.json` with it. Read from what is
left, the run would be abandoned once quiet, and a rule for dead runs would expire the
checkpoints the tiers kept. So each saved plan records the runs it saw completed, with
their last write, and classification reads a run as completed still while nothing in it
was written after that (`model.runs`), whatever of the evidence is gone.

    record_completed(conn, {"file:///data/": [CompletedRun("runs/a/", "completed ...", t, None)]}, "p-1")
    seen_completed(engine, root_id)  # {"runs/a/": SeenCompleted("completed ...", t, "p-1", None)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import BigInteger, Column, bindparam, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel

from governance.catalog.roots import root_ids
from governance.catalog.tables import datetime_from_us
from governance.model.types import SeenCompleted
from governance.plan.types import CompletedRun
from governance.storage.base import epoch_micros


class CompletedRunRow(SQLModel, table=True):
    """One run of a root that a saved plan saw completed (keys relative to the root)."""

    __tablename__ = "completed_runs"

    root_id: int = Field(foreign_key="roots.id", primary_key=True)
    run_key: str = Field(primary_key=True)
    reason: str  # the evidence, as the run's status reason said then
    last_write_us: int = Field(sa_column=Column(BigInteger(), nullable=False))
    plan_id: str  # the plan that saw it
    final_key: str | None = None  # the checkpoint that plan's tiers kept as the final


_C = CompletedRunRow.__table__  # type: ignore[attr-defined]
_ROWS = 5000  # rows per executemany: bounded statements for a root of many runs


def record_completed(
    conn: Connection, runs: Mapping[str, Sequence[CompletedRun]], plan_id: str
) -> None:
    """Record each root's completed runs (by root URL), in the caller's transaction.

    A run already recorded changes only when seen completed after a later write (trained
    on and finished again), or when its final checkpoint was not known and now is: the
    first evidence of a completion is the one worth keeping."""
    ids = root_ids(conn, runs)
    for url, seen in runs.items():
        root_id = ids.get(url)
        if root_id is None or not seen:
            continue
        query = select(_C.c.run_key, _C.c.last_write_us, _C.c.final_key).where(
            _C.c.root_id == root_id
        )
        known = {str(k): (int(us), final) for k, us, final in conn.execute(query)}
        new: list[dict[str, object]] = []
        changed: list[dict[str, object]] = []
        for run in seen:
            us = epoch_micros(run.last_write)
            before = known.get(run.key)
            if before is None:
                new.append(
                    {
                        "root_id": root_id,
                        "run_key": run.key,
                        "reason": run.reason,
                        "last_write_us": us,
                        "plan_id": plan_id,
                        "final_key": run.final,
                    }
                )
            elif us > before[0] or (before[1] is None and run.final is not None):
                changed.append(
                    {
                        "key_": run.key,
                        "reason_": run.reason,
                        "us_": us,
                        "plan_": plan_id,
                        "final_": run.final,
                    }
                )
        for start in range(0, len(new), _ROWS):
            conn.execute(_C.insert(), new[start : start + _ROWS])  # executemany
        if changed:
            conn.execute(
                update(_C)
                .where(_C.c.root_id == root_id, _C.c.run_key == bindparam("key_"))
                .values(
                    reason=bindparam("reason_"),
                    last_write_us=bindparam("us_"),
                    plan_id=bindparam("plan_"),
                    final_key=bindparam("final_"),
                ),
                changed,
            )


def seen_completed(engine: Engine, root_id: int) -> dict[str, SeenCompleted]:
    """The root's recorded completed runs, by run key."""
    c = _C.c
    query = select(c.run_key, c.reason, c.last_write_us, c.plan_id, c.final_key).where(
        c.root_id == root_id
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return {
        str(key): SeenCompleted(str(reason), datetime_from_us(int(us)), str(plan), final)
        for key, reason, us, plan, final in rows
    }
