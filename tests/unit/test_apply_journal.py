"""The apply lock and the precondition comparisons, without storage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import journal
from governance.apply.preconditions import _changed
from governance.apply.protection import lock_reason as _lock_reason
from governance.catalog.engine import open_engine
from governance.errors import RefusedError
from governance.plan.types import ObjectRef
from governance.storage.base import ObjectState

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO plans (plan_id, fingerprint, status, as_of, created_at, created_by,"
                " scans, summary, notes) VALUES ('p1', 'f', 'approved', :t, :t, 'alice',"
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


def test_a_live_holder_refuses_a_second_apply(engine: Any) -> None:
    first = start(engine)
    with pytest.raises(RefusedError, match=f"plan p1 is being applied by execution {first} since"):
        start(engine, NOW + timedelta(minutes=1))
    journal.release(engine, "p1", first)
    assert start(engine, NOW + timedelta(minutes=2)) == first + 1


def test_a_silent_holder_loses_the_lock_after_its_heartbeat_goes_stale(engine: Any) -> None:
    first = start(engine)
    journal.heartbeat(engine, "p1", first, NOW + timedelta(minutes=5))
    with pytest.raises(RefusedError):
        start(engine, NOW + timedelta(minutes=14))
    second = start(engine, NOW + timedelta(minutes=16))
    statuses = {e.id: e.status for e in journal.executions(engine, "p1")}
    assert statuses == {first: "interrupted", second: "running"}


def test_a_dead_holder_on_this_host_loses_the_lock_at_once(engine: Any) -> None:
    first = start(engine)
    host = journal.holder_id().rpartition(":")[0]
    with engine.begin() as conn:
        conn.execute(text("UPDATE apply_locks SET holder = :h"), {"h": f"{host}:999999999"})
    second = start(engine, NOW + timedelta(seconds=1))
    assert second != first
    with engine.connect() as conn:
        assert conn.execute(text("SELECT execution_id FROM apply_locks")).scalar() == second


def ref(size: int = 10, etag: str = "e1", version: str | None = None) -> ObjectRef:
    return ObjectRef("k", size, NOW, etag, version_id=version)


def state(size: int = 10, etag: str = "e1", version: str | None = None, **kw: Any) -> ObjectState:
    return ObjectState("k", size, etag, NOW, version_id=version, **kw)


def test_changes_are_named() -> None:
    assert _changed(ref(), state()) is None
    assert "size" in (_changed(ref(), state(size=11)) or "")
    assert "rewritten" in (_changed(ref(), state(etag="e2")) or "")
    assert "re-uploaded" in (_changed(ref(version="v1"), state(version="v2")) or "")
    assert _changed(ref(), state(version="v9")) is None  # the plan knew no version


def test_locks_in_the_future_and_legal_holds_are_reasons() -> None:
    assert _lock_reason("k", state(), NOW) is None
    past = state(lock_mode="GOVERNANCE", lock_until=NOW - timedelta(days=1))
    assert _lock_reason("k", past, NOW) is None
    future = state(lock_mode="COMPLIANCE", lock_until=NOW + timedelta(days=1))
    assert (_lock_reason("k", future, NOW) or "").startswith(
        "object lock: k is retained (compliance)"
    )
    assert (_lock_reason("k", state(legal_hold=True), NOW) or "").startswith("legal hold")


def test_abandoning_an_execution_leaves_neither_it_nor_the_lock(engine: Any) -> None:
    first = start(engine)
    journal.abandon_execution(engine, "p1", first)
    assert journal.executions(engine, "p1") == []
    second = start(engine, NOW + timedelta(seconds=1))  # the lock is free again
    assert [(e.id, e.status) for e in journal.executions(engine, "p1")] == [(second, "running")]


def test_result_pages_read_back_every_result_in_action_order(engine: Any) -> None:
    from governance.apply.types import ActionOutcome, Outcome, outcome_dict

    run = start(engine)
    outcomes = [
        ActionOutcome(
            action_id=i,
            action="delete",
            artifact_uri=f"s3://b/r{i}/",
            outcome=Outcome.SKIPPED if i % 3 == 0 else Outcome.OK,
            reason="stale: x vanished" if i % 3 == 0 else "1 object deleted permanently",
            objects=1,
            bytes=i * 10,
            final=i % 3 != 0,
            execution_id=None if i % 3 == 0 else run,
        )
        for i in reversed(range(12))
    ]
    with engine.begin() as conn:
        journal.write_results(conn, journal.result_rows(run, "p1", outcomes, NOW))
    pages = list(journal.iter_result_pages(engine, run, page=5))
    assert [len(p) for p in pages] == [5, 5, 2]
    expected = [outcome_dict(o) for o in sorted(outcomes, key=lambda o: o.action_id)]
    assert [d for p in pages for d in p] == expected
    assert [outcome_dict(r) for r in journal.iter_results(engine, run, page=5)] == expected
