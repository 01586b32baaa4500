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
