"""Apply and restore never act through a folder that became a symbolic link since the plan.

The usual move: a checkpoint folder is moved to a bigger disk (or renamed to keep it) and
a link is left at its old path. The scan neither lists nor follows links, so the files
behind the link are not the ones the plan saw; before, apply followed the link, found
the same sizes and times (a move keeps them), and emptied the folder it points at: files
outside the root, for good in permanent mode. Restore likewise wrote a checkpoint into
the folder a link at its old path points at. Local disk, through the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text, snapshot

RUN = "runs/a/"
PERMANENT = NO_APPROVAL + "apply: {delete_mode: permanent}\n"


def _setup(tmp_path: Path, extra: str = NO_APPROVAL) -> tuple[Setup, Path, str]:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), RUN, steps=(500, 1000, 1500, 2000))
    marker(local_writer(storage), RUN)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage), extra=extra))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage, storage.as_uri() + "/"


def _deleted(doc: dict, base: str) -> str:
    """The key of a checkpoint the plan deletes whole."""
    return next(
        a["artifact"]["uri"][len(base) :]
        for a in doc["actions"]
        if a["action"] == "delete" and a["artifact"]["kind"] == "checkpoint"
    )


@pytest.mark.parametrize("where", ["outside the root", "inside the root"])
@pytest.mark.parametrize("mode", ["quarantine", "permanent"])
def test_a_checkpoint_folder_moved_and_linked_back_is_stale_and_left_whole(
    tmp_path: Path, where: str, mode: str
) -> None:
    setup, storage, base = _setup(tmp_path, PERMANENT if mode == "permanent" else NO_APPROVAL)
    doc = setup.plan()
    key = _deleted(doc, base)
    folder = storage / key.rstrip("/")
    moved = (
        tmp_path / "bigger-disk" / "ck" if where == "outside the root" else folder.parent / "keep"
    )
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(folder, moved)
    folder.symlink_to(moved, target_is_directory=True)
    before = snapshot(moved)
    assert len(before) > 2

    extra = ("--yes",) if mode == "permanent" else ()
    report = json.loads(setup.apply(doc["plan_id"], *extra, code=3).stdout)

    results = {r["artifact_uri"][len(base) :]: r for r in report["results"]}
    assert results[key]["outcome"] == "skipped", results[key]
    assert results[key]["reason"].startswith("stale"), results[key]
    assert snapshot(moved) == before  # not a byte of what the link points at is touched
    assert folder.is_symlink()
    others = [r for k, r in results.items() if k != key]
    assert others
    assert all(r["outcome"] == "ok" for r in others)


def test_a_run_folder_linked_since_the_plan_makes_every_action_in_it_stale(
    tmp_path: Path,
) -> None:
    """A link higher up the way (the run's folder itself) is followed no more than one at
    the checkpoint's own folder."""
    setup, storage, _ = _setup(tmp_path)
    doc = setup.plan()
    run = storage / RUN.rstrip("/")
    moved = tmp_path / "elsewhere" / "a"
    moved.parent.mkdir()
    shutil.move(run, moved)
    run.symlink_to(moved, target_is_directory=True)
    before = snapshot(moved)

    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)

    assert report["results"]
    assert {r["outcome"] for r in report["results"]} == {"skipped"}
    assert snapshot(moved) == before


def test_restore_does_not_write_through_a_link_made_at_the_old_path(tmp_path: Path) -> None:
    setup, storage, base = _setup(tmp_path)
    doc = setup.plan()
    key = _deleted(doc, base)
    setup.apply(doc["plan_id"])
    folder = storage / key.rstrip("/")
    assert not folder.exists()
    outside = tmp_path / "outside"
    outside.mkdir()
    folder.symlink_to(outside, target_is_directory=True)

    result = setup.restore(doc["plan_id"], code=1)

    assert os.listdir(outside) == []  # nothing written where the link points
    assert "symbolic link" in result.stdout + result.stderr
    assert folder.is_symlink()
    # the quarantine copies stay, so once the link is gone the restore completes
    folder.unlink()
    setup.restore(doc["plan_id"])
    assert len(list(folder.iterdir())) > 2


def test_a_quarantine_folder_moved_and_linked_back_is_restored_from(tmp_path: Path) -> None:
    """The refusal is for roots: a quarantine holds govern's own copies, and an admin
    who moves a plan's quarantine folder to another disk and links it back (to free
    space) must still be able to restore from it (every object failed: "no such key")."""
    setup, storage, _ = _setup(tmp_path)
    before = snapshot(storage)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    quarantine = storage.parent / ".govern-quarantine"
    [held] = [p for p in quarantine.rglob(doc["plan_id"]) if p.is_dir()]
    moved = tmp_path / "other-disk" / held.name
    moved.parent.mkdir()
    shutil.move(held, moved)
    held.symlink_to(moved, target_is_directory=True)

    report = json.loads(setup.restore(doc["plan_id"]).stdout)

    assert report["failed"] == 0, report
    assert report["restored"] > 0
    assert snapshot(storage) == before
