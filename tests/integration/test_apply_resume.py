"""An apply killed with SIGKILL halfway resumes exactly once; two applies cannot overlap.

`govern apply` runs as a real subprocess over a local plan of many small actions, with
`GOVERN_APPLY_CHUNK_OBJECTS` making each batch tiny and `GOVERN_TEST_APPLY_DELAY`
sleeping after each committed batch, so the test can catch it in the middle.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import Outcome, StoreOpener, apply_plan
from governance.storage import normalize_url
from tests.fixtures.builders import local_writer, residue
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text

PREFIXES = 30  # three residue files each: 90 delete actions


def build(tmp_path: Path, extra: str = "") -> tuple[Setup, Path, str]:
    storage = tmp_path / "storage"
    write = local_writer(storage)
    for i in range(PREFIXES):
        residue(write, f"scratch/{i:03d}")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(str(storage), extra=NO_APPROVAL + "safety: {max_delete_fraction: 1}\n" + extra)
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    assert len(doc["actions"]) == 3 * PREFIXES
    return setup, storage, doc["plan_id"]


def start_apply(setup: Setup, plan_id: str, delay: float) -> subprocess.Popen[bytes]:
    env = os.environ | {
        "GOVERN_TEST_APPLY_DELAY": str(delay),
        "GOVERN_APPLY_CHUNK_OBJECTS": "3",
        "GOVERN_USER": "alice",
    }
    govern = Path(sys.executable).parent / "govern"
    return subprocess.Popen(
        [str(govern), "--catalog", setup.catalog, "-q", "apply", plan_id, "--format", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def count(setup: Setup, sql: str) -> int:
    engine = setup.engine()
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar() or 0)
    finally:
        engine.dispose()


def wait_for(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_sigkill_halfway_then_apply_again_finishes_exactly_once(tmp_path: Path) -> None:
    setup, storage, plan_id = build(tmp_path)
    proc = start_apply(setup, plan_id, delay=0.1)
    try:
        wait_for(lambda: count(setup, "SELECT count(*) FROM action_results") >= 9)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()  # reaped: its pid is dead, so its lock is stale at once
    first = count(setup, "SELECT count(*) FROM action_results")
    assert 9 <= first < 3 * PREFIXES
    assert count(setup, "SELECT count(*) FROM apply_locks") == 1

    result = setup.apply(plan_id)
    report = json.loads(result.stdout)
    assert len(report["done_before"]) >= first
    assert len(report["done_before"]) + len(report["results"]) == 3 * PREFIXES
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    assert report["plan_status"] == "applied"
    assert [e["status"] for e in report["executions"]] == ["interrupted", "applied"]

    engine = setup.engine()
    with engine.connect() as conn:
        done = Counter(
            a
            for (a,) in conn.execute(
                text("SELECT action_id FROM action_results WHERE outcome = 'ok'")
            )
        )
        removed = conn.execute(
            text("SELECT state, count(*) FROM removed_objects GROUP BY state")
        ).all()
    engine.dispose()
    assert set(done) == set(range(1, 3 * PREFIXES + 1))
    assert set(done.values()) == {1}  # every action done exactly once
    assert dict(removed) == {"removed": 3 * PREFIXES}
    assert not any(p.is_file() for p in storage.rglob("*"))
    quarantined = [p for p in (storage.parent / ".govern-quarantine").rglob("*") if p.is_file()]
    assert len(quarantined) == 3 * PREFIXES
    assert count(setup, "SELECT count(*) FROM apply_locks") == 0

    restored = json.loads(setup.restore(plan_id).stdout)
    assert restored["restored"] == 3 * PREFIXES


def test_a_second_apply_of_the_same_plan_is_refused_while_one_runs(tmp_path: Path) -> None:
    setup, _, plan_id = build(tmp_path)
    proc = start_apply(setup, plan_id, delay=0.05)
    try:
        wait_for(lambda: count(setup, "SELECT count(*) FROM apply_locks") == 1)
        second = setup.apply(plan_id, code=3)
        assert f"plan {plan_id} is being applied by execution 1 since" in second.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)["plan_status"] == "applied"
    assert count(setup, "SELECT count(*) FROM executions") == 1


class DiesAfterDelete:
    """A store that deletes, then dies before apply can record it (a kill mid-batch)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def delete(self, keys: Any, etags: Any = None) -> Any:
        self._real.delete(keys, etags)
        raise KeyboardInterrupt


def test_a_kill_between_delete_and_record_is_recovered_from_the_journal(
    tmp_path: Path,
) -> None:
    setup, storage, plan_id = build(tmp_path)
    opener = StoreOpener()
    root = storage.as_uri() + "/"
    dying = DiesAfterDelete(opener(root))

    def factory(url: str) -> Any:
        return dying if normalize_url(url) == root else opener(url)

    engine = setup.engine()
    with pytest.raises(KeyboardInterrupt):
        apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=factory)
    assert not any(p.is_file() for p in storage.rglob("*"))  # the deletes happened...
    assert count(setup, "SELECT count(*) FROM action_results") == 0  # ...unrecorded
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'pending'") == 90
    assert count(setup, "SELECT count(*) FROM apply_locks") == 0

    report = apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    engine.dispose()
    assert {r.outcome.value for r in report.results} == {"ok"}
    assert all("interrupted apply" in r.reason for r in report.results)
    assert [e.status for e in report.executions] == ["interrupted", "applied"]
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'removed'") == 90
    assert json.loads(setup.restore(plan_id).stdout)["restored"] == 90
    assert len([p for p in storage.rglob("*") if p.is_file()]) == 90


def test_an_apply_holds_the_plan_lock_while_it_verifies_and_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Apply B takes the plan's lock before it verifies the plan, and checks preconditions
    # (the first batches, meanwhile) only under it: apply A, started while B verifies,
    # is refused, so no check of B can be made stale by A moving objects (which would
    # fail B's copies and delete quarantine copies as strays).
    import governance.apply.executor as executor
    from governance.apply import StoreOpener, apply_plan

    setup, storage, plan_id = build(tmp_path)
    real_scan = executor.scan_plan
    raced: list[str] = []

    def scan_while_another_apply_starts(*args: Any, **kwargs: Any) -> Any:
        if not raced:
            refused = setup.apply(plan_id, code=3)  # apply A
            raced.append(refused.stderr)
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(executor, "scan_plan", scan_while_another_apply_starts)
    engine = setup.engine()
    try:
        report = apply_plan(
            engine, plan_id, actor="ops", now=datetime.now(UTC), stores=StoreOpener()
        )
    finally:
        engine.dispose()
    assert "is being applied by execution" in raced[0]
    quarantined = [p for p in (storage.parent / ".govern-quarantine").rglob("*") if p.is_file()]
    assert len(quarantined) == 90
    assert not report.failed
    assert report.count(Outcome.OK) == 90
    assert [e.status for e in report.executions] == ["applied"]  # A left no execution


def test_a_refused_apply_gives_the_lock_back_and_leaves_no_execution(tmp_path: Path) -> None:
    # The lock is taken before the plan is verified; a refusal after that (here: a
    # permanent delete without --yes) must leave the catalog as it found it.
    setup, _, plan_id = build(tmp_path, extra="apply: {delete_mode: permanent}\n")
    refused = setup.apply(plan_id, code=3)
    assert "pass --yes" in refused.stderr
    assert count(setup, "SELECT count(*) FROM executions") == 0
    assert count(setup, "SELECT count(*) FROM apply_locks") == 0


def test_ctrl_c_stops_after_the_batch_under_way_with_everything_journaled(
    tmp_path: Path,
) -> None:
    """The first SIGINT asks apply to stop: the batch under way is committed, nothing is
    left `pending`, the lock is given back, exit 130; a second one stops at once. An
    interrupt that landed inside a catalog write used to leave SQLite's write lock held
    by a cut-short cursor: the apply hung, then failed with "database is locked"."""
    setup, _, plan_id = build(tmp_path)
    proc = start_apply(setup, plan_id, delay=0.2)
    try:
        wait_for(lambda: count(setup, "SELECT count(*) FROM action_results") >= 6)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert f"stopping apply of {plan_id} after the step under way" in err.decode()
    done = count(setup, "SELECT count(*) FROM action_results")
    assert 6 <= done < 3 * PREFIXES
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'pending'") == 0
    assert count(setup, "SELECT count(*) FROM removed_objects") == done
    assert count(setup, "SELECT count(*) FROM apply_locks") == 0
    assert count(setup, "SELECT count(*) FROM executions WHERE status = 'interrupted'") == 1

    proc = start_apply(setup, plan_id, delay=0.2)  # twice: stops where the second lands
    try:
        wait_for(lambda: count(setup, "SELECT count(*) FROM action_results") >= done + 3)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert count(setup, "SELECT count(*) FROM apply_locks") == 0
    report = json.loads(setup.apply(plan_id).stdout)
    assert report["plan_status"] == "applied"
    assert [e["status"] for e in report["executions"]] == ["interrupted", "interrupted", "applied"]
    assert count(setup, "SELECT count(DISTINCT action_id) FROM action_results") == 3 * PREFIXES


def test_a_restore_after_an_unfinished_apply_says_how_to_get_its_removals_back(
    tmp_path: Path,
) -> None:
    """Killed between its deletes and their record, an apply left them `pending`, their
    copies in quarantine. Restore said the plan "has not been applied" (exit 0). It
    leaves them alone (a live apply's are in flight), says where they are and that
    `govern apply` finishes and records them: exit 3, nothing copied back; then it does."""
    setup, storage, plan_id = build(tmp_path)
    opener = StoreOpener()
    root = storage.as_uri() + "/"
    dying = DiesAfterDelete(opener(root))
    engine = setup.engine()
    with pytest.raises(KeyboardInterrupt):
        apply_plan(
            engine, plan_id, actor="ops", now=datetime.now(UTC),
            stores=lambda url: dying if normalize_url(url) == root else opener(url),
        )  # fmt: skip
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'pending'") == 90
    early = setup.restore(plan_id, code=3)
    quarantine = (storage.parent / ".govern-quarantine").as_uri() + "/"
    assert early.stderr.strip() == (
        f"error: plan {plan_id}: an apply of it did not finish, or failed while removing: "
        "90 objects it was removing "
        "are not recorded as removed (some may be gone already; their quarantine copies "
        f"are under {quarantine}{plan_id}/); `govern apply {plan_id}` finishes and records "
        f"them, then `govern restore {plan_id}` brings them back"
    )
    assert not any(p.is_file() for p in storage.rglob("*"))  # nothing copied back
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'pending'") == 90
    apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    engine.dispose()
    assert json.loads(setup.restore(plan_id).stdout)["restored"] == 90
