"""`govern restore` never puts a damaged quarantine copy back, and never leaves one behind.

A quarantine copy that is no longer the object apply removed (truncated, or written to
in place) is refused before anything is copied: the restore and its dry run fail it with
the reason, the original key stays empty, the copy stays in quarantine as evidence, the
catalog keeps the object `removed` and the audit trail counts it failed, so the next
restore says the same thing again (not "an object exists at the original key again").
A copy back that turns out wrong after it was written (the quarantine copy changed while
it was copied) is taken back from the original key. And an archive copy on local disk is
a copy of its own: writing to it in place changes neither the quarantine copy nor what
restore brings back.

Real files on local disk, a real SQLite catalog, the CLI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from governance.apply.journal import O
from tests.integration.test_apply_support import NO_APPROVAL, Setup

OLD = datetime.now(UTC) - timedelta(days=400)

LOGS_POLICY = """version: 1
storage: [{{name: r, url: {root}}}]
rules:
  - {{name: logs, select: {{kind: log}}, expire: {{after: 30d}}}}
{approval}safety: {{max_delete_fraction: 1.0}}
"""

ARCHIVE_POLICY = """version: 1
storage: [{{name: r, url: {root}}}]
layout: {{runs: ["runs/{{run}}/"]}}
rules:
  - name: ck
    select: {{kind: checkpoint}}
    tiers:
      - {{name: final, keep: [final], keep_components: [weights], archive: {{url: {archive}}}}}
    otherwise: delete
{approval}safety: {{max_delete_fraction: 1.0}}
"""


def _write(path: Path, data: bytes, when: datetime = OLD) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (when.timestamp(), when.timestamp()))


def _logs(tmp_path: Path) -> tuple[Setup, Path, dict[str, bytes]]:
    """Two old logs the policy expires (each its own artifact), on local disk."""
    root = tmp_path / "root"
    blobs = {"logs/old.log": os.urandom(1000), "logs/other.log": os.urandom(700)}
    for key, data in blobs.items():
        _write(root / key, data)
    policy = tmp_path / "policy.yaml"
    policy.write_text(LOGS_POLICY.format(root=root, approval=NO_APPROVAL))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), root, blobs


def _applied(setup: Setup) -> str:
    doc = setup.plan()
    plan_id: str = doc["plan_id"]
    report = json.loads(setup.apply(plan_id).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    return plan_id


def _held(tmp_path: Path, plan_id: str, live: Path) -> Path:
    """The quarantine copy of `live` (the default quarantine, beside the root)."""
    return tmp_path / ".govern-quarantine" / plan_id / str(live).lstrip("/")


def _answers(doc: dict[str, Any]) -> dict[str, tuple[bool, str | None]]:
    return {o["uri"]: (o["ok"], o["error"]) for o in doc["objects"]}


def _states(setup: Setup, plan_id: str) -> dict[str, str]:
    engine = setup.engine()
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(O.c.key, O.c.state).where(O.c.plan_id == plan_id))
            return {str(k): str(s) for k, s in rows}
    finally:
        engine.dispose()


def _restore_events(setup: Setup, plan_id: str) -> list[dict[str, Any]]:
    from governance.audit import events

    engine = setup.engine()
    try:
        return [e.payload for e in events(engine, plan_id) if e.event == "restore"]
    finally:
        engine.dispose()


def _trainer_state(step: int) -> bytes:
    return json.dumps({"global_step": step, "max_steps": 200, "log_history": []}).encode()


def _damage_by_truncating(path: Path) -> None:
    os.truncate(path, 10)


def _damage_in_place(path: Path) -> None:
    """A write into the copy that keeps its size (as `dd conv=notrunc` does)."""
    with open(path, "r+b") as handle:
        handle.write(b"CORRUPTED")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(_damage_by_truncating, "10 bytes"), (_damage_in_place, "modified")],
    ids=["truncated", "written-in-place"],
)
def test_a_damaged_quarantine_copy_is_refused_and_nothing_is_copied_back(
    tmp_path: Path, damage: Callable[[Path], None], reason: str
) -> None:
    setup, root, blobs = _logs(tmp_path)
    plan_id = _applied(setup)
    live, fine = root / "logs" / "old.log", root / "logs" / "other.log"
    held = _held(tmp_path, plan_id, live)
    assert held.read_bytes() == blobs["logs/old.log"]
    damage(held)
    damaged = held.read_bytes()
    uri, fine_uri = live.as_uri(), fine.as_uri()

    dry = json.loads(setup.restore(plan_id, "--dry-run", code=1).stdout)
    assert (dry["would_restore"], dry["failed"]) == (1, 1)
    ok, error = _answers(dry)[uri]
    assert not ok
    assert error is not None
    assert "quarantine copy" in error
    assert "damaged" in error
    assert reason in error
    assert held.as_uri() in error  # where to look
    assert not live.exists()

    real = json.loads(setup.restore(plan_id, code=1).stdout)
    assert (real["restored"], real["failed"]) == (1, 1)
    assert _answers(real) == _answers(dry)  # the same checks, the same failure
    assert not live.exists()  # nothing written at the original key
    assert fine.read_bytes() == blobs["logs/other.log"]
    assert held.read_bytes() == damaged  # the evidence stays in quarantine
    assert _states(setup, plan_id) == {"logs/old.log": "removed", "logs/other.log": "restored"}
    assert sorted(
        (e["artifact"], e["restored"], e["failed"]) for e in _restore_events(setup, plan_id)
    ) == [(uri, 0, 1), (fine_uri, 1, 0)]

    # the next restore says the same, not "an object exists at the original key again"
    again = json.loads(setup.restore(plan_id, code=1).stdout)
    assert _answers(again) == {uri: (False, error)}
    assert not live.exists()

    # a person puts the right bytes back in quarantine: now it comes back, byte for byte
    _write(held, blobs["logs/old.log"])  # with the time it had
    last = json.loads(setup.restore(plan_id).stdout)
    assert (last["restored"], last["failed"]) == (1, 0)
    assert live.read_bytes() == blobs["logs/old.log"]
    assert _states(setup, plan_id) == {"logs/old.log": "restored", "logs/other.log": "restored"}


def test_a_copy_back_that_is_not_verified_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quarantine copy is written to between the restore's check of it and the copy
    back (another process appends to it: injected at the `os.link`/`open` boundary, the
    last thing before the bytes move): the copy back is then not what apply removed, so
    restore fails it and removes what it wrote at the original key."""
    setup, root, blobs = _logs(tmp_path)
    plan_id = _applied(setup)
    live = root / "logs" / "old.log"
    held = _held(tmp_path, plan_id, live)

    real_link, real_open = os.link, open

    def late_write() -> None:
        if held.stat().st_size == 1000:
            with real_open(held, "ab") as handle:
                handle.write(b"a late write")

    def racing_link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(src) == str(held):
            late_write()
        real_link(src, dst, *args, **kwargs)

    def racing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | Path) and os.fspath(file) == str(held) and "r" in mode:
            late_write()
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "link", racing_link)
    monkeypatch.setattr("builtins.open", racing_open)
    real = json.loads(setup.restore(plan_id, code=1).stdout)
    monkeypatch.undo()

    ok, error = _answers(real)[live.as_uri()]
    assert not ok
    assert error is not None
    assert "not verified" in error
    assert not live.exists()  # what the copy back wrote was taken back
    assert not live.parent.exists() or sorted(p.name for p in live.parent.iterdir()) == [
        "other.log"
    ]
    assert held.read_bytes() == blobs["logs/old.log"] + b"a late write"  # still in quarantine
    assert _states(setup, plan_id)["logs/old.log"] == "removed"
    failed = [e for e in _restore_events(setup, plan_id) if e["artifact"] == live.as_uri()]
    assert failed == [{"artifact": live.as_uri(), "restored": 0, "failed": 1}]

    # now the quarantine copy is damaged, and the next restore says so before it copies
    again = json.loads(setup.restore(plan_id, code=1).stdout)
    [(ok, error)] = _answers(again).values()
    assert not ok
    assert "damaged" in (error or "")
    assert not live.exists()


def test_restore_after_an_in_place_write_to_the_archive_copy_is_byte_for_byte(
    tmp_path: Path,
) -> None:
    """Archive by URL to local disk, then restore: the archive copy, the quarantine copy
    and the restored file are three files, not three names of one."""
    root, archive = tmp_path / "root", tmp_path / "archive"
    originals: dict[str, bytes] = {}
    for step in (100, 200):
        folder = f"runs/a/checkpoint-{step}/"
        for name, data in (
            ("model.safetensors", os.urandom(4096)),
            ("optimizer.pt", os.urandom(8192)),
            ("config.json", b"{}"),
            ("trainer_state.json", _trainer_state(step)),
        ):
            originals[folder + name] = data
            _write(root / folder / name, data, datetime.now(UTC) - timedelta(days=20))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        ARCHIVE_POLICY.format(root=root, archive=archive.as_uri() + "/", approval=NO_APPROVAL)
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    plan_id = _applied(setup)

    key = "runs/a/checkpoint-200/model.safetensors"
    archived = archive / "runs/a/checkpoint-200/model.safetensors"
    held = _held(tmp_path, plan_id, root / key)
    assert archived.read_bytes() == held.read_bytes() == originals[key]
    assert archived.stat().st_ino != held.stat().st_ino
    with open(archived, "r+b") as handle:  # someone edits the archive copy in place
        handle.write(b"CORRUPTED")
    assert held.read_bytes() == originals[key]

    report = json.loads(setup.restore(plan_id).stdout)
    assert report["failed"] == 0
    restored = root / key
    assert restored.read_bytes() == originals[key]
    assert restored.stat().st_ino != archived.stat().st_ino
    with open(restored, "r+b") as handle:  # and the restored file is its own too
        handle.write(b"LIVE EDIT")
    assert archived.read_bytes()[:9] == b"CORRUPTED"
