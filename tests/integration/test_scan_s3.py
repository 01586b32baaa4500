"""Scanning S3 through the moto server over HTTP, into a real catalog; then classification."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import text

from governance.catalog.engine import open_engine
from governance.cli.main import cli
from governance.scan.runner import scan_store
from governance.storage import open_store
from tests.catalogs import catalog_url  # noqa: F401
from tests.integration.conftest import PutMany


def _policy(tmp_path: Path, bucket: str, endpoint: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "version: 1\n"
        "storage:\n"
        f"  - {{name: art, url: 's3://{bucket}/', endpoint_url: '{endpoint}'}}\n"
        "layout:\n"
        "  runs: ['{team}/runs/{run}/']\n"
        "rules: []\n"
    )
    return path


def test_s3_scan_past_pagination_is_incremental(
    s3_bucket: str,
    s3_client: Any,
    moto_server: str,
    put_many: PutMany,
    catalog_url: str,  # noqa: F811
) -> None:
    keys = [f"runs/r{i % 7}/part {i:05d} ü.bin" for i in range(2300)] + [
        f"top-{i}" for i in range(1100)
    ]
    put_many(s3_bucket, keys)
    engine = open_engine(catalog_url)
    store = open_store(f"s3://{s3_bucket}/", endpoint_url=moto_server, concurrency=4)
    first = scan_store(engine, store, actor="t")
    assert (first.objects, first.new) == (3400, 3400)

    s3_client.delete_object(Bucket=s3_bucket, Key="top-5")
    s3_client.put_object(Bucket=s3_bucket, Key="runs/r1/part 00001 ü.bin", Body=b"changed")
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="runs/r2/big.bin")
    second = scan_store(engine, store, actor="t")
    assert (second.new, second.changed, second.gone) == (1, 1, 1)
    with engine.connect() as conn:
        upload = conn.execute(text("SELECT key FROM objects WHERE upload_id <> ''")).scalar()
        gone = conn.execute(text("SELECT key FROM objects WHERE gone_scan_id IS NOT NULL")).scalar()
    assert upload == "runs/r2/big.bin"
    assert gone == "top-5"
    engine.dispose()


def test_cli_scan_policy_root_on_s3_then_ls_runs(
    tmp_path: Path, s3_bucket: str, moto_server: str, put_many: PutMany
) -> None:
    put_many(
        s3_bucket,
        [
            "nlp/runs/r1/checkpoint-100/model.safetensors",
            "nlp/runs/r1/checkpoint-100/config.json",
            "nlp/runs/r1/checkpoint-100/trainer_state.json",
            "nlp/runs/r1/checkpoint-100/optimizer.pt",
            "nlp/runs/r1/COMPLETED",
        ],
    )
    policy = _policy(tmp_path, s3_bucket, moto_server)
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner()
    result = runner.invoke(
        cli, ["--catalog", catalog, "scan", "--policy", str(policy), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scans"][0]["objects"] == 5

    result = runner.invoke(cli, ["--catalog", catalog, "ls", "runs", "--format", "json"])
    runs = json.loads(result.stdout)
    assert [(r["run"], r["status"], r["attributes"].get("team")) for r in runs] == [
        ("r1", "completed", "nlp")
    ]
    assert runs[0]["uri"] == f"s3://{s3_bucket}/nlp/runs/r1/"

    result = runner.invoke(
        cli, ["--catalog", catalog, "ls", "artifacts", "--kind", "checkpoint", "--format", "json"]
    )
    (ckpt,) = json.loads(result.stdout)
    assert ckpt["step"] == 100
    assert set(ckpt["components"]) >= {"weights", "optimizer", "metadata"}


def test_cli_scan_missing_bucket_exits_2_and_records_nothing(
    tmp_path: Path, moto_server: str
) -> None:
    policy = _policy(tmp_path, "no-such-bucket-here", moto_server)
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    result = CliRunner().invoke(cli, ["--catalog", catalog, "scan", "--policy", str(policy)])
    assert result.exit_code == 2
    assert "s3://no-such-bucket-here/" in result.stderr
    engine = open_engine(catalog)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM roots")).scalar() == 0
    engine.dispose()


def test_cli_scan_unreachable_endpoint_exits_1(tmp_path: Path) -> None:
    policy = _policy(tmp_path, "bucket", "http://127.0.0.1:1")
    result = CliRunner().invoke(
        cli, ["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "scan", "--policy", str(policy)]
    )
    assert result.exit_code == 1
    assert "s3://bucket/" in result.stderr


def test_catalog_failure_after_the_listing_started_releases_it_and_records_nothing(
    s3_bucket: str, moto_server: str, put_many: PutMany, tmp_path: Path
) -> None:
    # The listing starts before the catalog is touched; a catalog that then refuses the
    # write must leave no listing threads behind and no root or scan rows.
    import threading
    import time

    import pytest
    from sqlalchemy import event

    put_many(s3_bucket, [f"k/{i:05d}" for i in range(8000)])  # more pages than the queue holds
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    before = threading.active_count()

    def read_only(conn: Any, *_: Any) -> None:
        conn.execute("PRAGMA query_only = ON")

    event.listen(engine, "connect", read_only)
    engine.dispose()  # new connections are read-only from here
    store = open_store(f"s3://{s3_bucket}/", endpoint_url=moto_server, concurrency=1)
    with pytest.raises(Exception, match=r"readonly|read-only|query_only"):
        scan_store(engine, store, actor="t")
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM roots")).scalar() == 0


def test_cli_scan_on_a_corrupt_catalog_stops_the_early_listing(
    s3_bucket: str, moto_server: str, put_many: PutMany, tmp_path: Path
) -> None:
    # `govern scan` starts the first root's listing before it opens the catalog; a
    # catalog that cannot be opened must still end in its one clear error, exit 2, the
    # file untouched and no listing thread left behind.
    import threading
    import time

    put_many(s3_bucket, [f"k/{i:05d}" for i in range(8000)])  # more pages than the queue holds
    bad = tmp_path / "catalog.db"
    bad.write_bytes(b"this is not a database" * 100)
    before = threading.active_count()
    result = CliRunner().invoke(
        cli,
        [
            "--catalog",
            f"sqlite:///{bad}",
            "scan",
            "--policy",
            str(_policy(tmp_path, s3_bucket, moto_server)),
            "--concurrency",
            "1",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "cannot be opened" in result.output
    assert result.output.count("error:") == 1  # once, not once per root
    assert bad.read_bytes() == b"this is not a database" * 100
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before
