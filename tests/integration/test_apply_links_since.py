"""A symbolic link made after the plan, beside the checkpoints, keeps what it points at.

The plan protected what the links of its scan pointed at; `runs/a/best` made since (a
person picked a checkpoint to deploy) is seen by apply in the folder holding the
checkpoints, and the delete or strip of what it points at is stale (the next plan keeps
it). Local disk, through the CLI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_support import Setup, policy_text

RUN = "runs/a/"


@pytest.mark.parametrize(
    ("target", "action"),
    [("checkpoint-1000", "delete"), ("checkpoint-500", "strip"), ("checkpoint-1000/", "delete")],
)
def test_a_link_made_since_the_plan_makes_what_it_points_at_stale(
    tmp_path: Path, target: str, action: str
) -> None:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), RUN, steps=(500, 1000, 1500, 2000))
    marker(local_writer(storage), RUN)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage)))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    base = storage.as_uri() + "/"
    doc = setup.plan()
    pointed = f"{RUN}{target.rstrip('/')}/"
    planned = {a["artifact"]["uri"][len(base) :]: a["action"] for a in doc["actions"]}
    assert planned[pointed] == action
    os.symlink(target, storage / RUN / "best")  # made after the plan, relative
    (storage / RUN / "elsewhere").symlink_to("/tmp")  # out of the root: keeps nothing

    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)

    results = {r["artifact_uri"][len(base) :]: r for r in report["results"]}
    assert results[pointed]["outcome"] == "skipped"
    assert results[pointed]["reason"].startswith(f"stale: the symbolic link {RUN}best points at it")
    assert (storage / pointed).is_dir()
    assert len(list((storage / pointed).iterdir())) > 2  # nothing of it removed
    others = [r for k, r in results.items() if k != pointed]
    assert others
    assert all(r["outcome"] == "ok" for r in others)
    again = setup.plan()
    kept = {k["artifact"]["uri"][len(base) :]: k["reason"] for k in again["kept"]}
    assert "the symbolic link runs/a/best points at it" in kept[pointed]
