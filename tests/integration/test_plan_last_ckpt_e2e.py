"""Lightning's `last.ckpt` on local disk, end to end: real files, a real scan (the
Lightning detector), a real catalog and plan, and `explain`.

`ModelCheckpoint(save_last=True)` saves `last.ckpt` right after the top-k file, in the same
hook: the same bytes, seconds later. That copy takes no `keep_last` place. A `last.ckpt`
saved later (no top-k file that epoch) is the newest state, and a checkpoint of its own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from governance.catalog.engine import open_engine
from governance.plan.service import explain_uri, make_plan
from governance.policy import load_policy_text
from governance.scan.runner import scan_store
from governance.storage import open_store
from tests.fixtures.builders import local_writer

NOW = datetime.now(UTC).replace(microsecond=0)
D = timedelta(days=1)
CKPT = b"\x80\x02lightning checkpoint\x00" * 4096  # the same bytes at every save


def write_run(root: Path, run: str, last_after: timedelta) -> str:
    """`runs/<run>/lightning_logs/version_0/checkpoints/`: epochs 0-5 (steps 100-600) one a
    day, the newest 1 day old, and last.ckpt `last_after` after the newest."""
    w = local_writer(root)
    folder = f"runs/{run}/lightning_logs/version_0/checkpoints/"
    for e in range(6):
        w(f"{folder}epoch={e}-step={(e + 1) * 100}.ckpt", CKPT, NOW - (6 - e) * D)
    w(f"{folder}last.ckpt", CKPT, NOW - D + last_after)
    w(f"runs/{run}/lightning_logs/version_0/hparams.yaml", b"lr: 0.001\n", NOW - 7 * D)
    return folder


def test_a_save_last_copy_is_kept_with_its_checkpoint_and_takes_no_place(tmp_path: Path) -> None:
    root = tmp_path / "data"
    copy = write_run(root, "copy", timedelta(seconds=3))
    own = write_run(root, "own", timedelta(hours=12))
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    summary = scan_store(engine, open_store(str(root)), actor="t")
    assert summary.status == "complete"
    policy = load_policy_text(
        f"""
version: 1
storage:
  - name: data
    url: {root}
protect: {{min_age: 1h}}
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - {{name: recent, keep_last: 3, max_age: 30d}}
    otherwise: delete
safety: {{max_delete_fraction: 1}}
"""
    )
    plan = make_plan(engine, policy, NOW, actor="planner")
    url = f"file://{root}/"
    deleted = {a.artifact.uri.removeprefix(url) for a in plan.actions if a.action.value == "delete"}
    kept = {k.artifact.uri.removeprefix(url): k for k in plan.kept}

    def epoch(folder: str, step: int) -> str:
        return f"{folder}epoch={step // 100 - 1}-step={step}.ckpt"

    # the copy: steps 600, 500, 400 are the newest 3, last.ckpt goes with step 600
    assert {epoch(copy, s) for s in (100, 200, 300)} <= deleted
    for key in (epoch(copy, 600), epoch(copy, 500), epoch(copy, 400), copy + "last.ckpt"):
        assert kept[key].tier == "recent", key
    assert kept[copy + "last.ckpt"].reason == (
        "recent tier: last.ckpt is Lightning's save_last copy of step 600 (same size, written "
        "3s after it), selected with it: step 600 is one of the newest 3 complete checkpoints "
        "within 30d; kept whole"
    )
    # saved 12 hours later: the newest state, one of the 3
    assert {epoch(own, s) for s in (100, 200, 300, 400)} <= deleted
    for key in (epoch(own, 600), epoch(own, 500), own + "last.ckpt"):
        assert kept[key].tier == "recent", key
    assert "save_last copy" not in kept[own + "last.ckpt"].reason
    assert len(deleted) == 7
    why = explain_uri(engine, policy, NOW, str(root / copy / "last.ckpt"))
    assert why.tiers == [
        ("recent", "selected: last.ckpt is Lightning's save_last copy of step 600 (same size, "
                   "written 3s after it), selected with it: step 600 is one of the newest 3 "
                   "complete checkpoints within 30d"),
    ]  # fmt: skip
    engine.dispose()
