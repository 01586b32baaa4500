"""`govern restore` and `govern apply` of one plan never run at once: each takes the plan's
lock, and the other is refused (exit 3) with nothing changed. On local disk, through the
command line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text

from governance.apply import journal
from tests.integration.test_apply_local import build
from tests.integration.test_apply_support import Setup, snapshot


def _states(setup: Setup) -> list[str]:
    engine = setup.engine()
    try:
        with engine.connect() as conn:
            return sorted({r[0] for r in conn.execute(text("SELECT state FROM removed_objects"))})
    finally:
        engine.dispose()


def _locks(setup: Setup) -> list[Any]:
    engine = setup.engine()
    try:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT plan_id, execution_id FROM apply_locks")))
    finally:
        engine.dispose()


def test_a_restore_is_refused_while_an_apply_of_the_plan_runs(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    before = snapshot(storage)
    plan_id = setup.plan()["plan_id"]
    setup.apply(plan_id)
    applied = snapshot(storage)
    engine = setup.engine()
    try:  # an apply of the plan running now (this process: a live holder)
        execution = journal.start_execution(
            engine,
            plan_id,
            actor="ops",
            now=datetime.now(UTC),
            delete_mode="quarantine",
            only_non_destructive=False,
        )
    finally:
        engine.dispose()

    refused = setup.restore(plan_id, code=3)

    assert f"plan {plan_id} is being applied by execution {execution} since" in refused.stderr
    assert "restore it once that finishes" in refused.stderr
    assert snapshot(storage) == applied  # nothing put back
    assert _states(setup) == ["removed"]

    engine = setup.engine()
    try:
        journal.release(engine, plan_id, execution)
    finally:
        engine.dispose()
    report = json.loads(setup.restore(plan_id).stdout)
    assert report["failed"] == 0
    assert report["restored"] > 0
    assert snapshot(storage) == before
    assert _locks(setup) == []  # given back when done


def test_an_apply_is_refused_while_a_restore_of_the_plan_runs(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    before = snapshot(storage)
    plan_id = setup.plan()["plan_id"]
    engine = setup.engine()
    try:
        holder = journal.take_restore_lock(engine, plan_id, datetime.now(UTC))
    finally:
        engine.dispose()

    refused = setup.apply(plan_id, code=3)

    assert f"plan {plan_id} is being restored since" in refused.stderr
    assert holder in refused.stderr
    assert snapshot(storage) == before  # nothing removed
    assert [row[1] for row in _locks(setup)] == [journal.RESTORING]


def test_a_refused_restore_gives_the_lock_back(tmp_path: Path) -> None:
    setup, _ = build(tmp_path)
    plan_id = setup.plan()["plan_id"]
    setup.apply(plan_id)

    missing = setup.restore(plan_id, "--uri", "file:///nowhere/at/all/", code=2)

    assert "nothing removed under" in missing.stderr
    assert _locks(setup) == []
    setup.restore(plan_id)  # not refused by a lock left behind


def test_a_restore_whose_lock_was_taken_over_stops_before_its_next_batch(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Paused past the lock's staleness, a restore may find an apply (or another restore)
    holding the plan: it asks before each batch, and stops with what it did recorded."""
    import pytest

    from governance.apply import StoreOpener, apply_plan, restore, restore_plan
    from tests.integration.test_apply_resume import build as residue_build
    from tests.integration.test_apply_resume import count

    setup, storage, plan_id = residue_build(tmp_path)
    engine = setup.engine()
    apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=StoreOpener())
    monkeypatch.setattr(restore, "CHUNK", 30)
    opener = StoreOpener()
    heads = 0

    class TakenOverMidway:
        """The quarantine's store: after the first batch's checks, another process takes
        the plan's lock (as one would after this restore's heartbeat went stale)."""

        def __init__(self, real: Any) -> None:
            self._real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

        def head(self, keys: Any) -> Any:
            nonlocal heads
            heads += 1
            if heads == 31:
                with engine.begin() as conn:
                    conn.execute(text("UPDATE apply_locks SET holder = 'elsewhere:1'"))
            return self._real.head(keys)

    def stores(url: str) -> Any:
        store = opener(url)
        return TakenOverMidway(store) if ".govern-quarantine" in url else store

    with pytest.raises(journal.LockLostError, match="this restore lost its lock"):
        restore_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=stores)
    engine.dispose()
    # taken over during the second batch's checks: that batch, past its question, is
    # finished and recorded; the third is never started
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'restored'") == 60
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'removed'") == 30
    assert len([p for p in storage.rglob("*") if p.is_file()]) == 60
