"""The plan's lock between apply and restore: one of them at a time, per plan."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import journal
from governance.errors import RefusedError
from tests.unit.test_apply_journal import NOW, engine, start  # noqa: F401


def lock_rows(db: Any) -> list[tuple[int, str]]:
    with db.connect() as conn:
        return [
            tuple(r) for r in conn.execute(text("SELECT execution_id, holder FROM apply_locks"))
        ]


def as_dead_holder(db: Any) -> None:
    """Make the lock's holder a process of this host that is not running."""
    host = journal.holder_id().rpartition(":")[0]
    with db.begin() as conn:
        conn.execute(text("UPDATE apply_locks SET holder = :h"), {"h": f"{host}:999999999"})


def test_a_restore_waits_for_a_running_apply_and_an_apply_for_a_running_restore(
    engine: Any,  # noqa: F811
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


def test_a_restore_takes_over_a_dead_apply_and_marks_it_interrupted(engine: Any) -> None:  # noqa: F811
    execution = start(engine)
    as_dead_holder(engine)
    holder = journal.take_restore_lock(engine, "p1", NOW + timedelta(seconds=1))
    assert lock_rows(engine) == [(journal.RESTORING, holder)]
    [run] = journal.executions(engine, "p1")
    assert (run.id, run.status) == (execution, "interrupted")
    with pytest.raises(journal.LockLostError, match="a restore"):
        journal.check_lock(engine, "p1", execution)  # the paused apply acts no more


def test_a_silent_restore_loses_the_lock_and_then_stops(engine: Any) -> None:  # noqa: F811
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


def test_one_restore_does_not_release_another_ones_lock(engine: Any) -> None:  # noqa: F811
    journal.take_restore_lock(engine, "p1", NOW)
    as_dead_holder(engine)
    second = journal.take_restore_lock(engine, "p1", NOW + timedelta(seconds=1))
    assert lock_rows(engine) == [(journal.RESTORING, second)]
    journal.release(engine, "p1", journal.RESTORING, "elsewhere:1")
    assert lock_rows(engine) == [(journal.RESTORING, second)]
