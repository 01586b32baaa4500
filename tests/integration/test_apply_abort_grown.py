"""An incomplete upload that received parts after the plan is still being written: its
abort is stale, not carried out (moto over HTTP). One that did not grow is aborted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.conftest import age_upload_parts
from tests.integration.test_apply_s3 import make_setup, upload_tree

KEY = "scratch/big.bin"


def test_an_upload_that_grew_since_the_plan_is_not_aborted(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    growing = s3_client.create_multipart_upload(Bucket=s3_bucket, Key=KEY)["UploadId"]
    s3_client.upload_part(
        Bucket=s3_bucket, Key=KEY, UploadId=growing, PartNumber=1, Body=b"a" * 1000
    )
    idle_key = "scratch/idle.bin"
    idle = s3_client.create_multipart_upload(Bucket=s3_bucket, Key=idle_key)["UploadId"]
    s3_client.upload_part(
        Bucket=s3_bucket, Key=idle_key, UploadId=idle, PartNumber=1, Body=b"b" * 10
    )
    for upload in (growing, idle):  # (parts written now are protected by min_age)
        age_upload_parts(s3_bucket, upload)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    aborts = {a["artifact"]["uri"] for a in doc["actions"] if a["action"] == "abort_upload"}
    assert aborts == {f"s3://{s3_bucket}/{KEY}", f"s3://{s3_bucket}/{idle_key}"}
    s3_client.upload_part(
        Bucket=s3_bucket, Key=KEY, UploadId=growing, PartNumber=2, Body=b"c" * 5_000_000
    )

    result = setup.apply(doc["plan_id"], code=3)

    outcomes = {r["artifact_uri"]: r for r in json.loads(result.stdout)["results"]}
    grown = outcomes[f"s3://{s3_bucket}/{KEY}"]
    assert grown["outcome"] == "skipped"
    assert "grew since the plan (1,000 -> 5,001,000 bytes): still being written" in grown["reason"]
    assert outcomes[f"s3://{s3_bucket}/{idle_key}"]["outcome"] == "ok"
    left = s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads") or []
    assert [(u["Key"], u["UploadId"]) for u in left] == [(KEY, growing)]
