"""A log planned for a transition to STANDARD_IA is written again after the plan, with
new content of the same size, straight into STANDARD_IA. That is not a copy an
interrupted apply made: the transition is stale, and the catalog must not give the new
content the old content's age (the next plan would expire the fresh log as old).
moto's server over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.test_apply_s3 import LOG, _object_row, make_setup, upload_tree


def test_a_log_rewritten_in_the_target_class_is_stale_not_done_already(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    [step] = [a for a in doc["actions"] if a["artifact"]["uri"].endswith(LOG)]
    assert (step["action"], step["storage_class"]) == ("transition", "STANDARD_IA")
    size = s3_client.head_object(Bucket=s3_bucket, Key=LOG)["ContentLength"]
    body = (b"step 9 loss 0.1\n" * size)[:size]
    s3_client.put_object(Bucket=s3_bucket, Key=LOG, Body=body, StorageClass="STANDARD_IA")

    dry = json.loads(setup.apply(doc["plan_id"], "--dry-run", code=None).stdout)
    [would] = [r for r in dry["results"] if r["artifact_uri"].endswith(LOG)]
    assert would["reason"].startswith("stale"), would

    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)
    [mine] = [r for r in report["results"] if r["artifact_uri"].endswith(LOG)]
    assert mine["outcome"] == "skipped", mine
    assert mine["reason"].startswith("stale")
    assert "interrupted apply" not in mine["reason"]
    assert "ETag differs" in mine["reason"]
    head = s3_client.head_object(Bucket=s3_bucket, Key=LOG)
    content_us, copy_us, etag, _storage_class, _ = _object_row(setup, LOG)
    assert content_us is None  # no old content time for the new content
    assert etag != head["ETag"].strip('"') or copy_us == int(
        head["LastModified"].timestamp() * 1_000_000
    )


def test_a_log_a_lifecycle_rule_moved_to_another_class_is_stale_not_copied_back(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """A bucket lifecycle rule moves the planned log to GLACIER_IR between plan and
    apply; S3 keeps its ETag and time. Copied onto itself as planned, it left GLACIER_IR
    for the warmer STANDARD_IA: a rewrite nobody approved, with a retrieval and an
    early-deletion charge. Moved in moto's backend, as a lifecycle rule would."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    [step] = [a for a in doc["actions"] if a["artifact"]["uri"].endswith(LOG)]
    assert (step["action"], step["storage_class"]) == ("transition", "STANDARD_IA")
    before = s3_client.head_object(Bucket=s3_bucket, Key=LOG)
    for version in s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets[s3_bucket].keys.getlist(LOG):
        version._storage_class = "GLACIER_IR"

    report = json.loads(setup.apply(doc["plan_id"], code=None).stdout)

    [mine] = [r for r in report["results"] if r["artifact_uri"].endswith(LOG)]
    assert mine["outcome"] == "skipped", mine
    assert mine["reason"] == (
        f"stale: {LOG} was moved from STANDARD to GLACIER_IR (by a lifecycle rule?) since the "
        "plan was made"
    )
    after = s3_client.head_object(Bucket=s3_bucket, Key=LOG)
    assert (after["StorageClass"], after["ETag"], after["LastModified"]) == (
        "GLACIER_IR",
        before["ETag"],
        before["LastModified"],
    )
