"""Orbax on S3 end to end (moto's server over HTTP): `govern scan`, then `govern plan
--no-scan` and `govern ls artifacts` through the CLI, judging from the catalog's cache.

On a store without rename Orbax writes `_CHECKPOINT_METADATA` when a save starts and adds
`commit_timestamp_nsecs` when it commits. The file was not among the small files read
into the metadata cache, so `plan --no-scan` found it unread, took the step started and
never committed for the newest complete one, and `keep_last: 1` deleted the only step
the run could resume from. A staging folder named as current Orbax names it
(`<step>.orbax-checkpoint-tmp/`, no timestamp) was taken for a step too.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from governance.catalog.engine import open_engine
from governance.cli.main import cli
from governance.scan.metadata import prefetch_metadata
from governance.scan.runner import scan_store
from governance.storage import open_store
from tests.fixtures.builders import Writer, hf_run, local_writer, orbax_step
from tests.unit.plan_factories import KEEP_LAST_1_RESIDUE

D = timedelta(days=1)
LIVE = "runs/live/ckpt/"  # 100, 200 committed; 300 started, never committed
STAGED = "runs/staged/ckpt/"  # 100, 200 committed; 300 left in its staging folder


def _govern(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


def _json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
    return json.loads(result.stdout)


def _put(client: Any, bucket: str) -> Writer:
    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=content)

    return write


@pytest.fixture(scope="module")
def scanned(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, str]:
    """(catalog URL, policy, bucket URL): the two runs uploaded and scanned once."""
    tmp = tmp_path_factory.mktemp("orbax_s3")
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    bucket = f"orbax-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=bucket)
    w = _put(client, bucket)
    orbax_step(w, LIVE, "100")
    orbax_step(w, LIVE, "200")
    orbax_step(w, LIVE, "300", commit_timestamp=False)
    orbax_step(w, STAGED, "100", commit_success=True)
    orbax_step(w, STAGED, "200", commit_success=True)
    # a commit time written into the staging folder, then the copy to `300/` never came
    orbax_step(w, STAGED, "300.orbax-checkpoint-tmp")
    policy = tmp / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage:
  - name: artifacts
    url: s3://{bucket}/
    endpoint_url: {moto_server}
"""
        + KEEP_LAST_1_RESIDUE
        + "safety: {max_delete_fraction: 1}\n",
        encoding="utf-8",
    )
    catalog = f"sqlite:///{tmp / 'catalog.db'}"
    _json(_govern(catalog, "scan", "--policy", str(policy), "--format", "json"))
    return catalog, policy, f"s3://{bucket}/"


def _plan(catalog: str, policy: Path, days: float) -> tuple[dict[str, Any], dict[str, Any]]:
    as_of = (datetime.now(UTC) + days * D).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = _json(
        _govern(
            catalog, "plan", "--policy", str(policy), "--no-scan", "--as-of", as_of,
            "--format", "json",
        )
    )  # fmt: skip
    acted: dict[str, Any] = {}
    for a in doc["actions"]:
        acted.setdefault(a["artifact"]["uri"], []).append((a["action"], a["rule"]))
    kept = {k["artifact"]["uri"]: k for k in doc["kept"]}
    return acted, kept


def test_no_scan_plan_keeps_the_committed_step(scanned: tuple[str, Path, str]) -> None:
    catalog, policy, base = scanned
    acted, kept = _plan(catalog, policy, 5)
    live = base + LIVE
    assert kept[live + "200/"]["tier"] == "recent", kept.get(live + "200/")
    assert live + "200/" not in acted
    assert acted[live + "100/"] == [("delete", "checkpoints")]
    # the save started at 300 and never committed: residue past the grace period
    assert acted[live + "300/"] == [("delete", "residue")]
    assert live + "300/" not in kept
    # the `_CHECKPOINT_METADATA` files were read into the cache (small files, by name)
    engine = open_engine(catalog)
    try:
        with engine.connect() as conn:
            keys = set(conn.execute(text("SELECT key FROM meta_cache")).scalars())
    finally:
        engine.dispose()
    assert {LIVE + f"{s}/_CHECKPOINT_METADATA" for s in (100, 200, 300)} <= keys
    assert not any(k.endswith(("/_METADATA", "manifest.ocdbt")) for k in keys)


def test_the_current_staging_folder_is_residue_on_s3(scanned: tuple[str, Path, str]) -> None:
    catalog, policy, base = scanned
    acted, kept = _plan(catalog, policy, 5)
    staged = base + STAGED
    assert kept[staged + "200/"]["tier"] == "recent", kept.get(staged + "200/")
    assert staged + "200/" not in acted
    assert acted[staged + "100/"] == [("delete", "checkpoints")]
    assert acted[staged + "300.orbax-checkpoint-tmp/"] == [("delete", "residue")]


def test_ls_artifacts_reads_the_commit_time(scanned: tuple[str, Path, str]) -> None:
    catalog, _policy, base = scanned
    rows = _json(_govern(catalog, "ls", "artifacts", "--format", "json"))
    by_key = {r["uri"].removeprefix(base): r for r in rows}
    started = by_key[LIVE + "300/"]
    assert started["complete"] is False
    assert "without commit_timestamp_nsecs" in started["completeness_reason"]
    assert by_key[LIVE + "200/"]["complete"] is True
    assert "commit_timestamp_nsecs" in by_key[LIVE + "200/"]["completeness_reason"]
    tmp = by_key[STAGED + "300.orbax-checkpoint-tmp/"]
    assert (tmp["kind"], tmp["complete"]) == ("residue", False)


def test_a_filesystem_root_does_not_read_checkpoint_metadata(tmp_path: Path) -> None:
    """On a filesystem a step under its final name was renamed when its save was done:
    its `_CHECKPOINT_METADATA` is not read, so it is not read into the cache either (an
    unchanged tree, or one read only for files classification uses, stays cheap)."""
    root = tmp_path / "data"
    w = local_writer(root)
    orbax_step(w, "runs/jx/ckpt", "100")
    orbax_step(w, "runs/jx/ckpt", "200", commit_timestamp=False)
    hf_run(w, "runs/hf", steps=(100,))
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        store = open_store(str(root))
        root_id = scan_store(engine, store, actor="t").root_id
        assert prefetch_metadata(engine, store, root_id) == 1  # the trainer state alone
        with engine.connect() as conn:
            keys = list(conn.execute(text("SELECT key FROM meta_cache")).scalars())
    finally:
        engine.dispose()
    assert keys == ["runs/hf/checkpoint-100/trainer_state.json"]
