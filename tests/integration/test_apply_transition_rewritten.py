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
