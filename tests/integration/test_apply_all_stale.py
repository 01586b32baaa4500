"""`govern apply` of a plan whose every action is stale applies nothing, and says so
(it once said "the rest was applied" when there was no rest)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.integration.test_apply_local import build


def test_an_apply_whose_every_action_is_stale_says_nothing_was_applied(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    n = len(doc["actions"])
    assert n > 1
    for path in storage.rglob("*"):  # every object touched since planning: all stale
        if path.is_file():
            os.utime(path, ns=(1, 2))
    applied = setup.apply(doc["plan_id"], code=3)
    [line] = [ln for ln in applied.stderr.splitlines() if "stale" in ln]
    assert line.startswith(f"all {n} actions were skipped as stale: their objects ")
    assert "; nothing was applied (plan status: " in line
    assert "the rest" not in line
