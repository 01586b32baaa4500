"""The plan's lock between apply and restore: one of them at a time, per plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import journal
from governance.catalog.engine import open_engine
from governance.errors import RefusedError

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO plans (plan_id, fingerprint, status, as_of, created_at, created_by,"
                " scans, summary, notes) VALUES ('p1', 'f', 'applied', :t, :t, 'alice',"
                " '{}', '{}', '[]')"
            ),
            {"t": NOW.replace(tzinfo=None)},
        )
    yield engine
    engine.dispose()


def start(engine: Any, now: datetime = NOW) -> int:
    return journal.start_execution(
        engine, "p1", actor="ops", now=now, delete_mode="quarantine", only_non_destructive=False
    )


def lock_rows(engine: Any) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        return [
            tuple(r) for r in conn.execute(text("SELECT execution_id, holder FROM apply_locks"))
        ]


def as_dead_holder(engine: Any) -> None:
    """Make the lock's holder a process of this host that is not running."""
    host = journal.holder_id().rpartition(":")[0]
    with engine.begin() as conn:
        conn.execute(text("UPDATE apply_locks SET holder = :h"), {"h": f"{host}:999999999"})


def test_a_restore_waits_for_a_running_apply_and_an_apply_for_a_running_restore(
    engine: Any,
) -> None:
    execution = start(engine)
    with pytest.raises(RefusedError, match=f"is being applied by execution {execution} since"):
        journal.take_restore_lock(engine, "p1", NOW)
    journal.release(engine, "p1", execution)

    holder = journal.take_restore_lock(engine, "p1", NOW)
    with pytest.raises(RefusedError, match="plan p1 is being restored since"):
        start(engine, NOW + timedelta(minutes=1))
    with pytest.raises(RefusedError, match="plan p1 is being restored since"):
        journal.take_restore_lock(engine, "p1", NOW + timedelta(minutes=1))
    assert journal.executions(engine, "p1") == [journal.executions(engine, "p1")[0]]  # no new
    journal.release(engine, "p1", journal.RESTORING, holder)
    assert lock_rows(engine) == []
    assert start(engine, NOW + timedelta(minutes=2)) > execution


def test_a_restore_takes_over_a_dead_apply_and_marks_it_interrupted(engine: Any) -> None:
    execution = start(engine)
    as_dead_holder(engine)
    holder = journal.take_restore_lock(engine, "p1", NOW + timedelta(seconds=1))
    assert lock_rows(engine) == [(journal.RESTORING, holder)]
    [run] = journal.executions(engine, "p1")
    assert (run.id, run.status) == (execution, "interrupted")
    with pytest.raises(journal.LockLostError, match="a restore"):
        journal.check_lock(engine, "p1", execution)  # the paused apply acts no more


def test_a_silent_restore_loses_the_lock_and_then_stops(engine: Any) -> None:
    holder = journal.take_restore_lock(engine, "p1", NOW)
    journal.check_restore_lock(engine, "p1", holder)  # held: no error
    assert journal.heartbeat(engine, "p1", journal.RESTORING, NOW + timedelta(minutes=5), holder)
    with pytest.raises(RefusedError):
        start(engine, NOW + timedelta(minutes=14))
    execution = start(engine, NOW + timedelta(minutes=16))
    with pytest.raises(journal.LockLostError, match=f"execution {execution} since"):
        journal.check_restore_lock(engine, "p1", holder)
    # its heartbeat and its release touch the apply's lock no more
    assert not journal.heartbeat(engine, "p1", journal.RESTORING, NOW, holder)
    journal.release(engine, "p1", journal.RESTORING, holder)
    assert [e for e, _ in lock_rows(engine)] == [execution]


def test_one_restore_does_not_release_another_ones_lock(engine: Any) -> None:
    journal.take_restore_lock(engine, "p1", NOW)
    as_dead_holder(engine)
    second = journal.take_restore_lock(engine, "p1", NOW + timedelta(seconds=1))
    assert lock_rows(engine) == [(journal.RESTORING, second)]
    journal.release(engine, "p1", journal.RESTORING, "elsewhere:1")
    assert lock_rows(engine) == [(journal.RESTORING, second)]
