"""Where an archive by copy puts things, and what it never does there.

- A one-file checkpoint (a Lightning `.ckpt`) lands at the key the plan names, on S3
  (moto over HTTP) as on disk; before, it landed at that key plus '/'.
- An object already at the destination that is not this one's copy is never overwritten:
  the action fails and its source stays.
- Two objects bound for one destination in one apply: the first goes, the other fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.builders import hf_run, lightning_run, local_writer, marker
from tests.integration.test_apply_support import NO_APPROVAL, Setup

CKPT = "runs/l/lightning_logs/version_0/checkpoints/"
POLICY = """version: 1
storage:{storage}
layout: {{runs: ["runs/{{run}}/"]}}
protect: {{min_age: 1h}}
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - {{name: recent, keep_last: 1}}
      - {{name: away, keep_last: 10, archive: {{url: {dest}}}}}
    otherwise: delete
{approval}safety: {{max_delete_fraction: 1}}
"""


def _root(url: str, name: str = "root", endpoint: str | None = None) -> str:
    extra = f"\n    endpoint_url: {endpoint}" if endpoint else ""
    return f"\n  - name: {name}\n    url: {url}{extra}"


def _archived(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in doc["actions"] if a["action"] == "archive"]


def test_a_one_file_checkpoint_is_archived_to_the_key_the_plan_names_on_s3(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.create_bucket(Bucket="cold")

    def write(key: str, content: bytes, _mtime: object) -> None:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=content)

    lightning_run(write, "runs/l/", last=False)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        POLICY.format(
            storage=_root(f"s3://{s3_bucket}/", endpoint=moto_server),
            dest="s3://cold/",
            approval=NO_APPROVAL,
        ).replace("min_age: 1h", "min_age: 0s")
        + f"apply: {{quarantine_url: s3://{s3_bucket}/.govern-quarantine/}}\n"
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    moved = _archived(doc)
    assert len(moved) == 2  # the two older epochs; the newest stays whole
    setup.apply(doc["plan_id"])

    listed = {o["Key"] for o in s3_client.list_objects_v2(Bucket="cold")["Contents"]}
    wanted = {a["artifact"]["uri"].removeprefix(f"s3://{s3_bucket}/") for a in moved}
    assert listed == wanted  # `.../epoch=0-step=100-val_loss=1.00.ckpt`, no '/' after it


def _hf_tree(tmp_path: Path) -> tuple[Setup, Path, Path]:
    storage, archive = tmp_path / "storage", tmp_path / "archive"
    write = local_writer(storage)
    hf_run(write, "runs/a/", steps=(500, 1000))
    marker(write, "runs/a/")
    archive.mkdir()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        POLICY.format(
            storage=_root(str(storage)), dest=archive.as_uri() + "/", approval=NO_APPROVAL
        )
    )
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage, archive


def test_an_object_already_at_the_destination_is_never_overwritten(tmp_path: Path) -> None:
    setup, storage, archive = _hf_tree(tmp_path)
    doc = setup.plan()
    [moved] = _archived(doc)
    assert moved["artifact"]["uri"].endswith("runs/a/checkpoint-500/")
    there = archive / "runs/a/checkpoint-500/model.safetensors"
    there.parent.mkdir(parents=True)
    there.write_bytes(b"someone else's weights, archived before")

    result = setup.apply(doc["plan_id"], code=1)

    [failed] = [r for r in json.loads(result.stdout)["results"] if r["outcome"] == "failed"]
    assert "holds another object already: not overwritten" in failed["reason"]
    assert there.read_bytes() == b"someone else's weights, archived before"
    assert (storage / "runs/a/checkpoint-500/model.safetensors").exists()  # source stays


def test_two_objects_bound_for_one_destination_are_never_copied_over_each_other(
    tmp_path: Path,
) -> None:
    """Two roots of one layout archived to one place: the same keys under the archive."""
    storage, archive = tmp_path / "storage", tmp_path / "archive"
    for team in ("a", "b"):
        write = local_writer(storage / team)
        hf_run(write, "runs/x/", steps=(500, 1000))
        marker(write, "runs/x/")
    archive.mkdir()
    policy = tmp_path / "policy.yaml"
    roots = _root(str(storage / "a"), "a") + _root(str(storage / "b"), "b")
    policy.write_text(
        POLICY.format(storage=roots, dest=archive.as_uri() + "/", approval=NO_APPROVAL)
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    assert len(_archived(doc)) == 2

    result = setup.apply(doc["plan_id"], code=1)

    outcomes = {r["artifact_uri"]: r for r in json.loads(result.stdout)["results"]}
    archived = {uri: r["outcome"] for uri, r in outcomes.items() if "checkpoint-500" in uri}
    assert sorted(archived.values()) == ["failed", "ok"]
    [lost] = [uri for uri, outcome in archived.items() if outcome == "failed"]
    assert "(two objects archived to one place)" in outcomes[lost]["reason"]
    team = lost.removeprefix(storage.as_uri() + "/").split("/")[0]
    assert (storage / team / "runs/x/checkpoint-500/model.safetensors").exists()
