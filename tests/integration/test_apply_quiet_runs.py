"""A run the plan read as abandoned that writes again: its removals are stale at apply.

The plan deletes every checkpoint of a run that had been quiet for weeks (a rule for dead
runs; invariant 1 does not keep a dead run's newest). Training resumes before the plan
is applied: a log line, a new checkpoint. Applied as it was, the plan would delete what
the run resumes from. Apply lists each quiet run's folder and skips its removals as
stale; a run that stayed quiet is removed as planned. On local disk and on S3 (moto's
server over HTTP).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from governance.catalog.engine import open_engine
from governance.catalog.quiet_runs import quiet_runs
from tests.fixtures.builders import hf_run, local_writer
from tests.integration.conftest import deny_deletes
from tests.integration.test_apply_support import NO_APPROVAL, Setup

PAUSED, QUIET = "runs/paused/", "runs/quiet/"
LONG_AGO = datetime.now(UTC) - timedelta(days=30)


def policy(url: str, endpoint: str | None = None) -> str:
    reach = f"\n    endpoint_url: {endpoint}" if endpoint else ""
    return f"""version: 1
storage:
  - name: root
    url: {url}{reach}
layout:
  runs: ["runs/{{run}}/"]
protect: {{min_age: 1h}}
rules:
  - name: dead-runs
    select: {{run_status: [failed, abandoned]}}
    expire: {{after: 7d}}
apply: {{delete_mode: permanent}}
safety: {{max_delete_fraction: 1.0}}
{NO_APPROVAL}"""


def _results(applied: Any) -> dict[str, dict[str, Any]]:
    report = json.loads(applied.stdout)
    return {r["artifact_uri"]: r for r in report["results"]}


def _check_plan_and_apply(setup: Setup, root: str, resume: Any, listing: Any) -> None:
    doc = setup.plan()
    planned = {a["artifact"]["uri"] for a in doc["actions"]}
    assert {u for u in planned if u.startswith(root + PAUSED)}, planned
    assert {u for u in planned if u.startswith(root + QUIET)}, planned
    engine = open_engine(setup.catalog)
    try:
        saved = quiet_runs(engine, doc["plan_id"])
    finally:
        engine.dispose()
    assert [(r.key, r.status) for r in saved[root]] == [
        (PAUSED, "abandoned"),
        (QUIET, "abandoned"),
    ]
    resume()  # training resumes in runs/paused/ after the plan was made
    before = listing(PAUSED)

    applied = setup.apply(doc["plan_id"], "--yes", code=3)
    results = _results(applied)
    paused = [r for uri, r in results.items() if uri.startswith(root + PAUSED)]
    assert paused
    for r in paused:
        assert (r["outcome"], r["final"]) == ("skipped", False)
        assert r["reason"].startswith(
            f"stale: run {PAUSED} (abandoned when the plan was made, last written "
        )
        assert f"has new writes: {PAUSED}logs/train.log at " in r["reason"]
    assert listing(PAUSED) == before  # every checkpoint it resumes from is there
    quiet = [r for uri, r in results.items() if uri.startswith(root + QUIET)]
    assert quiet
    assert {r["outcome"] for r in quiet} == {"ok"}
    assert not [k for k in listing(QUIET) if "checkpoint-" in k]


def test_a_quiet_run_written_since_the_plan_is_not_removed_on_local_disk(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    for run in (PAUSED, QUIET):
        hf_run(local_writer(storage), run, steps=(100, 200), start=LONG_AGO)
    text = tmp_path / "policy.yaml"
    text.write_text(policy(storage.as_uri() + "/"))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", text)

    def resume() -> None:
        log = storage / PAUSED / "logs" / "train.log"
        log.parent.mkdir(parents=True)
        log.write_text("step 201 loss 1.9\n")

    def listing(run: str) -> dict[str, int]:
        base = storage / run
        return {
            str(p.relative_to(base)): p.stat().st_mtime_ns for p in base.rglob("*") if p.is_file()
        }

    _check_plan_and_apply(setup, storage.as_uri() + "/", resume, listing)


def test_a_rewritten_file_of_a_quiet_run_counts_as_a_write(tmp_path: Path) -> None:
    """Appending to a file it had (its log) is a write too: no new key needed."""
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), PAUSED, steps=(100, 200), start=LONG_AGO)
    log = storage / PAUSED / "logs" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_text("step 200 loss 2.0\n")
    old = LONG_AGO.timestamp()
    os.utime(log, (old, old))
    text = tmp_path / "policy.yaml"
    text.write_text(policy(storage.as_uri() + "/"))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", text)
    doc = setup.plan()
    with log.open("a") as handle:
        handle.write("step 201 loss 1.9\n")
    applied = setup.apply(doc["plan_id"], "--yes", code=3)
    results = _results(applied).values()
    assert {r["outcome"] for r in results} == {"skipped"}
    # (the log itself changed too: its own precondition says so first)
    assert all(f"run {PAUSED} (abandoned when the plan was made" in r["reason"] for r in results)
    assert (storage / PAUSED / "checkpoint-200" / "model.safetensors").exists()


def test_a_quiet_run_written_since_the_plan_is_not_removed_on_s3(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        stored = backend.put_object(s3_bucket, key, content + key.encode())
        stored.last_modified = (mtime or LONG_AGO).astimezone(UTC).replace(tzinfo=None)

    for run in (PAUSED, QUIET):
        hf_run(write, run, steps=(100, 200), start=LONG_AGO)
    text = tmp_path / "policy.yaml"
    text.write_text(policy(f"s3://{s3_bucket}/", moto_server))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", text)

    def resume() -> None:  # over HTTP, stamped now
        s3_client.put_object(Bucket=s3_bucket, Key=f"{PAUSED}logs/train.log", Body=b"step 201\n")

    def listing(run: str) -> dict[str, str]:
        pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket, Prefix=run)
        return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents") or ()}

    _check_plan_and_apply(setup, f"s3://{s3_bucket}/", resume, listing)


def test_the_plans_own_copies_in_place_are_not_writes_of_the_run(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """The plan archives an abandoned run's newest checkpoint in place (a copy onto
    itself: a new LastModified) and deletes the older one. The delete fails the first
    time (denied); applied again, the run holds objects written after its last write, but
    by this plan's own copy: the delete goes ahead."""
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        body = content
        if key.endswith((".safetensors", ".pt", ".pth", ".bin")):
            body += key.encode() + b"\0" * (256 * 1024)  # over GLACIER_IR's minimum size
        stored = backend.put_object(s3_bucket, key, body)
        stored.last_modified = (mtime or LONG_AGO).astimezone(UTC).replace(tzinfo=None)

    hf_run(write, PAUSED, steps=(100, 200), start=LONG_AGO)
    text = tmp_path / "policy.yaml"
    text.write_text(
        policy(f"s3://{s3_bucket}/", moto_server).replace(
            "    select: {run_status: [failed, abandoned]}\n    expire: {after: 7d}\n",
            "    select: {run_status: [abandoned], kind: checkpoint}\n"
            "    tiers: [{name: cold, keep_last: 1, archive: {storage_class: GLACIER_IR}}]\n"
            "    otherwise: delete\n",
        )
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", text)
    doc = setup.plan()
    kinds = {a["artifact"]["uri"].rsplit("/", 2)[-2]: a["action"] for a in doc["actions"]}
    assert kinds == {"checkpoint-100": "delete", "checkpoint-200": "archive"}
    deny_deletes(s3_client, s3_bucket, f"{PAUSED}checkpoint-100/*")
    first = _results(setup.apply(doc["plan_id"], "--yes", code=1))
    assert {uri.rsplit("/", 2)[-2]: r["outcome"] for uri, r in first.items()} == {
        "checkpoint-100": "failed",
        "checkpoint-200": "ok",
    }
    s3_client.delete_bucket_policy(Bucket=s3_bucket)

    second = _results(setup.apply(doc["plan_id"], "--yes"))
    [(uri, result)] = second.items()
    assert uri.endswith(f"{PAUSED}checkpoint-100/")
    assert result["outcome"] == "ok", result["reason"]
    left = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix=f"{PAUSED}checkpoint-100/")
    assert left["KeyCount"] == 0
