"""Runs a saved plan removes from because they were quiet: failed or abandoned.

Whatever a plan removes from a run it read as failed or abandoned rests on the run having
stopped: a rule for dead runs selected it, or invariant 1 did not keep its newest
checkpoint because nothing would resume from it. A run that writes again (a job relaunched
into its folder, training resumed) is neither: so each saved plan records those runs with
their last write, and apply re-checks them (`apply.quiet`): an object under such a run
written after `live_after` (its last write, and within `abandoned_after` of the plan's
`as_of`) makes its removals stale.

    record_quiet(conn, {"s3://b/": [QuietRun("runs/a/", "abandoned", t, live)]}, "p-1")
    quiet_runs(engine, "p-1")  # {"s3://b/": [QuietRun("runs/a/", "abandoned", t, live)]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import BigInteger, Column, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel

from governance.catalog.tables import datetime_from_us
from governance.plan.types import QuietRun
from governance.storage.base import epoch_micros


class QuietRunRow(SQLModel, table=True):
    """One quiet run a saved plan removes from (its key relative to the root)."""

    __tablename__ = "quiet_runs"

    plan_id: str = Field(primary_key=True)
    root_url: str = Field(primary_key=True)
    run_key: str = Field(primary_key=True)
    status: str  # failed | abandoned, as the plan read it
    last_write_us: int = Field(sa_column=Column(BigInteger(), nullable=False))
    live_after_us: int = Field(sa_column=Column(BigInteger(), nullable=False))


_Q = QuietRunRow.__table__  # type: ignore[attr-defined]
_ROWS = 5000  # rows per executemany: bounded statements for a plan over many runs


def record_quiet(conn: Connection, runs: Mapping[str, Sequence[QuietRun]], plan_id: str) -> None:
    """Record each root's quiet runs (by root URL), in the caller's transaction."""
    rows = [
        {
            "plan_id": plan_id,
            "root_url": url,
            "run_key": run.key,
            "status": run.status,
            "last_write_us": epoch_micros(run.last_write),
            "live_after_us": epoch_micros(run.live_after),
        }
        for url, found in runs.items()
        for run in found
    ]
    for start in range(0, len(rows), _ROWS):
        conn.execute(_Q.insert(), rows[start : start + _ROWS])  # executemany


def quiet_runs(engine: Engine, plan_id: str) -> dict[str, list[QuietRun]]:
    """The plan's quiet runs by root URL, each root's by key (none for a plan saved
    before they were recorded)."""
    c = _Q.c
    query = (
        select(c.root_url, c.run_key, c.status, c.last_write_us, c.live_after_us)
        .where(c.plan_id == plan_id)
        .order_by(c.root_url, c.run_key)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    out: dict[str, list[QuietRun]] = {}
    for url, key, status, last_us, live_us in rows:
        run = QuietRun(
            str(key), str(status), datetime_from_us(int(last_us)), datetime_from_us(int(live_us))
        )
        out.setdefault(str(url), []).append(run)
    return out
