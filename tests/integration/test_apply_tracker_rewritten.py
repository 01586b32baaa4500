"""A run's tracker rewritten between plan and apply makes its checkpoints' removals stale
(`apply.trackers`): DeepSpeed's `latest` rolled back to an older tag means training will
resume from that tag, which the plan strips. On local disk, a real SQLite catalog."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.fixtures.builders import deepspeed_run, local_writer
from tests.integration.test_apply_support import NO_APPROVAL, Setup, actions_by, policy_text

RUN = "runs/ds/"


def _setup(tmp_path: Path) -> tuple[Setup, Path]:
    storage = tmp_path / "storage"
    deepspeed_run(local_writer(storage), RUN, steps=(1000, 2000, 3000, 4000))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(str(storage), extra=f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n")
    )
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage


def test_a_rolled_back_latest_makes_the_runs_removals_stale(tmp_path: Path) -> None:
    setup, storage = _setup(tmp_path)
    doc = setup.plan()
    base = storage.as_uri() + "/"
    planned = actions_by(doc, base)
    assert planned[f"{RUN}global_step3000/"] == ["strip"]
    latest = storage / RUN / "latest"
    stamp = latest.stat().st_mtime
    latest.write_text("global_step3000")  # rolled back: training resumes from 3000
    os.utime(latest, (stamp + 60, stamp + 60))

    result = setup.apply(doc["plan_id"], code=3)

    outcomes = json.loads(result.stdout)["results"]
    assert {r["outcome"] for r in outcomes} == {"skipped"}
    assert all(
        f"{RUN}latest, which names the checkpoint the run resumes from, was written again"
        in r["reason"]
        for r in outcomes
    ), [r["reason"] for r in outcomes]
    assert (storage / RUN / "global_step3000").exists()
    assert len(list((storage / RUN / "global_step3000").iterdir())) == 3  # nothing stripped


def test_an_unchanged_latest_lets_the_plan_be_applied(tmp_path: Path) -> None:
    setup, storage = _setup(tmp_path)
    doc = setup.plan()
    result = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in result["results"]} == {"ok"}
    assert (storage / RUN / "latest").read_text().strip() == "global_step4000"


def test_on_s3_a_rolled_back_latest_stops_deletes_of_whole_tags_too(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """On S3 a delete of a whole tag folder is checked by listing that folder: the
    tracker beside it is asked for on its own (moto over HTTP)."""
    from datetime import UTC, datetime, timedelta

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    old = datetime.now(UTC) - timedelta(days=10)

    def write(key: str, content: bytes, _mtime: object) -> None:
        stored = backend.put_object(s3_bucket, key, content)
        stored.last_modified = old.replace(tzinfo=None)

    deepspeed_run(write, RUN, steps=(500, 1000, 1500, 2000))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(
            f"s3://{s3_bucket}/",
            endpoint=moto_server,
            extra=f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n",
        )
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    deletes = [a for a in doc["actions"] if a["action"] == "delete"]
    assert deletes
    s3_client.put_object(Bucket=s3_bucket, Key=f"{RUN}latest", Body=b"global_step1500")

    def keys() -> set[str]:
        return {o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]}

    before = keys()
    result = setup.apply(doc["plan_id"], code=3)

    outcomes = json.loads(result.stdout)["results"]
    assert {r["outcome"] for r in outcomes} == {"skipped"}
    assert keys() == before  # every tag whole
