"""Restore says so when it cannot remove the quarantine copies of what it brought back
(an immutable or read-only quarantine): they stay there, and no purge takes them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_apply_local import RUN, build


def _chattr(flag: str, *paths: Path) -> bool:
    done = subprocess.run(
        ["chattr", flag, *map(str, paths)], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("chattr") is None, reason="chattr +i needs root"
)
def test_copies_restore_cannot_remove_are_named(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    quarantine = tmp_path / ".govern-quarantine"
    copies = [p for p in quarantine.rglob("*") if p.is_file()]
    assert copies
    if not _chattr("+i", *copies):
        pytest.skip("chattr +i is not possible on this filesystem")
    try:  # (the real command, not quiet: the logged warning is what is asked)
        govern = Path(sys.executable).with_name("govern")
        args = [
            "--catalog",
            setup.catalog,
            "restore",
            doc["plan_id"],
            "--policy",
            str(setup.policy),
        ]
        restored = subprocess.run(
            [str(govern), *args], capture_output=True, text=True, check=False, timeout=300
        )
    finally:
        _chattr("-i", *copies)
    assert restored.returncode == 0, restored.stderr
    assert "their quarantine copies could not be removed" in restored.stderr, restored.stderr
    assert "no purge takes them; remove them by hand" in restored.stderr
    assert (storage / RUN / "checkpoint-1000").exists()  # the objects are back
