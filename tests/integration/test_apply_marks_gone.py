"""What an apply did is in the catalog before the next scan (see `catalog.removals`); on
S3 (moto over HTTP). Each catalog backend: `test_apply_catalogs`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.test_apply_s3 import make_setup, upload_tree


def test_s3_an_apply_leaves_nothing_for_the_next_plan_without_a_scan(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Deletes, strips, an aborted multipart upload and a transition: the catalog knows
    what each did, so a plan made without scanning again has nothing left to do."""
    upload_tree(s3_bucket)
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="scratch/big.bin")
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    kinds = {a["action"] for a in doc["actions"]}
    assert kinds == {"delete", "strip", "transition", "abort_upload"}
    setup.apply(doc["plan_id"])

    assert setup.plan("--no-scan")["actions"] == []
