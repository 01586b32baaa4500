"""A strip removes nothing when a file it keeps vanished or changed since the plan.

A strip keeps the weights and metadata so the checkpoint still loads; with the weights
gone or rewritten since the plan was made, removing the optimizer state would leave what
neither loads nor resumes. Such a strip is stale: nothing of it is done, and the other
strips of the plan go on. On local disk, and on S3 (moto over HTTP) both with range
listings (no versioning) and with HEADs (versioning on).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_s3 import RUN, live, make_setup, upload_tree
from tests.integration.test_apply_support import Setup, policy_text

STRIPPED = (f"{RUN}checkpoint-500/", f"{RUN}checkpoint-1500/")
"""The tree's two stripped checkpoints (`policy_text`: keep the newest, thin to every 1000)."""
WEIGHTS = f"{RUN}checkpoint-500/model.safetensors"
OPTIMIZER = f"{RUN}checkpoint-500/optimizer.pt"
OTHER_OPTIMIZER = f"{RUN}checkpoint-1500/optimizer.pt"


def _by_artifact(report: dict[str, Any], base: str) -> dict[str, dict[str, Any]]:
    return {r["artifact_uri"][len(base) :]: r for r in report["results"]}


def _local_setup(tmp_path: Path) -> tuple[Setup, Path, str]:
    storage = tmp_path / "storage"
    write = local_writer(storage)
    hf_run(write, RUN, steps=(500, 1000, 1500, 2000))
    marker(write, RUN)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage)))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage, storage.as_uri() + "/"


def _strips(doc: dict[str, Any], base: str) -> set[str]:
    return {a["artifact"]["uri"][len(base) :] for a in doc["actions"] if a["action"] == "strip"}


@pytest.mark.parametrize("how", ["deleted", "rewritten"])
def test_local_a_strip_whose_weights_changed_since_the_plan_removes_nothing(
    tmp_path: Path, how: str
) -> None:
    setup, storage, base = _local_setup(tmp_path)
    doc = setup.plan()
    assert _strips(doc, base) == set(STRIPPED)
    weights = storage / WEIGHTS
    if how == "deleted":
        weights.unlink()
    else:
        weights.write_bytes(b"other weights, written after the plan")
        os.utime(weights, (weights.stat().st_atime, weights.stat().st_mtime + 60))

    report = json.loads(setup.apply(doc["plan_id"], code=None).stdout)

    results = _by_artifact(report, base)
    stale = results[STRIPPED[0]]
    assert stale["outcome"] == "skipped"
    assert stale["reason"].startswith("stale: ")
    change = "vanished" if how == "deleted" else "changed size"
    assert f"{WEIGHTS}, which the strip keeps, {change}" in stale["reason"]
    assert (storage / OPTIMIZER).exists()  # nothing of the stale strip was done
    assert results[STRIPPED[1]]["outcome"] == "ok"  # the other strip went on
    assert not (storage / OTHER_OPTIMIZER).exists()


def test_local_a_strip_whose_kept_files_are_as_planned_goes_on(tmp_path: Path) -> None:
    """A file added beside a strip's files since changes nothing it does."""
    setup, storage, base = _local_setup(tmp_path)
    doc = setup.plan()
    assert _strips(doc, base) == set(STRIPPED)
    (storage / f"{RUN}checkpoint-500/NOTES.md").write_text("written after the plan")

    report = json.loads(setup.apply(doc["plan_id"]).stdout)

    assert {r["outcome"] for r in report["results"]} == {"ok"}
    assert (storage / WEIGHTS).exists()
    assert not (storage / OPTIMIZER).exists()


@pytest.mark.parametrize("versioned", [False, True], ids=["listings", "heads"])
def test_s3_a_strip_whose_weights_vanished_since_the_plan_removes_nothing(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, versioned: bool
) -> None:
    if versioned:
        s3_client.put_bucket_versioning(
            Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"}
        )
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    base = f"s3://{s3_bucket}/"
    assert set(STRIPPED) <= _strips(doc, base)
    s3_client.delete_object(Bucket=s3_bucket, Key=WEIGHTS)

    report = json.loads(setup.apply(doc["plan_id"], code=None).stdout)

    results = _by_artifact(report, base)
    assert results[STRIPPED[0]]["outcome"] == "skipped"
    assert f"{WEIGHTS}, which the strip keeps, vanished" in results[STRIPPED[0]]["reason"]
    assert OPTIMIZER in live(s3_bucket)
    assert results[STRIPPED[1]]["outcome"] == "ok"
    assert OTHER_OPTIMIZER not in live(s3_bucket)
