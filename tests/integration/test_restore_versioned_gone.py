"""`govern restore` of a versioned delete (`delete_mode: versioned`) when the key cannot
come back by removing govern's delete marker: the version the marker hid was expired
since (a NoncurrentVersionExpiration rule), or the key was written and deleted again
since (a newer delete marker on top). The restore must say the object failed, with why,
exit 1, leave the markers as they are and never list the object live in the catalog.
moto's server over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_apply_s3 import RUN, live, make_setup, upload_tree
from tests.integration.test_apply_support import NO_APPROVAL, govern

KEY = f"{RUN}checkpoint-1000/model.safetensors"


def _markers(s3_client: Any, bucket: str) -> list[str]:
    versions = s3_client.list_object_versions(Bucket=bucket, Prefix=KEY)
    return [m["VersionId"] for m in versions.get("DeleteMarkers", ()) if m["Key"] == KEY]


@pytest.mark.parametrize("case", ["expired", "deleted_again"])
def test_a_versioned_restore_that_cannot_bring_the_key_back_fails(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, case: str
) -> None:
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_tree(s3_bucket)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    before = live(s3_bucket)
    assert KEY in before
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    assert KEY not in live(s3_bucket)
    if case == "expired":
        for v in s3_client.list_object_versions(Bucket=s3_bucket, Prefix=KEY).get("Versions", []):
            s3_client.delete_object(Bucket=s3_bucket, Key=KEY, VersionId=v["VersionId"])
        why = "the version govern's delete marker hid is gone"
    else:
        s3_client.put_object(Bucket=s3_bucket, Key=KEY, Body=b"scratch")
        s3_client.delete_object(Bucket=s3_bucket, Key=KEY)
        why = "a newer delete marker is on top"
    markers = _markers(s3_client, s3_bucket)

    dry = json.loads(setup.restore(doc["plan_id"], "--dry-run", code=1).stdout)
    [would] = [o for o in dry["objects"] if o["uri"].endswith(KEY)]
    assert would["status"] == "failed"
    assert why in would["error"]

    result = setup.restore(doc["plan_id"], code=1)
    report = json.loads(result.stdout)
    [mine] = [o for o in report["objects"] if o["uri"].endswith(KEY)]
    assert mine["status"] == "failed", mine
    assert why in mine["error"]
    assert report["failed"] == 1
    assert KEY not in live(s3_bucket)
    assert _markers(s3_client, s3_bucket) == markers  # no marker deleted
    # everything else came back
    assert live(s3_bucket) == {k: v for k, v in before.items() if k != KEY}
    listed = govern(setup.catalog, "ls", "objects", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    assert not [o for o in json.loads(listed.stdout) if o["uri"].endswith(KEY)]
