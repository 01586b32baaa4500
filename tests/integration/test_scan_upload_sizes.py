"""An incomplete multipart upload is billed for the parts it holds: the scan records their
size (one ListParts per upload), so the plan shows what aborting it saves."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from governance.storage.s3_listing import AS_INFO, ParallelListing
from tests.integration.conftest import age_upload_parts
from tests.integration.test_apply_s3 import make_setup, upload_tree
from tests.integration.test_apply_support import NO_APPROVAL, govern

pytestmark = pytest.mark.s3

PART = 5 * 2**20


def test_an_incomplete_uploads_size_is_its_parts(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    started = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="scratch/big.bin")
    for number in (1, 2):
        s3_client.upload_part(
            Bucket=s3_bucket,
            Key="scratch/big.bin",
            UploadId=started["UploadId"],
            PartNumber=number,
            Body=b"x" * PART,
        )
    age_upload_parts(s3_bucket, started["UploadId"])  # (else: written now, protected)
    # and one with no part yet
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="scratch/empty.bin")
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "safety: {max_delete_fraction: 1}\n"
    )
    doc = setup.plan()
    aborts = {
        a["objects"][0]["uri"].rsplit("/", 1)[-1]: a
        for a in doc["actions"]
        if a["action"] == "abort_upload"
    }
    assert set(aborts) == {"big.bin", "empty.bin"}
    assert aborts["big.bin"]["objects"][0]["size"] == 2 * PART
    assert aborts["big.bin"]["monthly_cost_before_usd"] > 0
    assert aborts["empty.bin"]["objects"][0]["size"] == 0
    listed = govern(setup.catalog, "ls", "objects", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    sizes = {o["uri"].rsplit("/", 1)[-1]: o["size"] for o in json.loads(listed.stdout)}
    assert sizes["big.bin"] == 2 * PART


def test_a_stopped_listing_lists_no_more_parts(s3_client: Any, s3_bucket: str) -> None:
    """The consumer stops (an error, Ctrl-C): the uploads queued for their parts are
    skipped, not each asked with a ListParts before the listing can end."""
    for i in range(300):
        s3_client.create_multipart_upload(Bucket=s3_bucket, Key=f"up/{i:05d}")
    s3_client.put_object(Bucket=s3_bucket, Key="obj/a", Body=b"x")
    calls: list[int] = []

    def slow(**_: Any) -> None:
        calls.append(1)
        time.sleep(0.02)  # a real ListParts round trip

    s3_client.meta.events.register("before-call.s3.ListParts", slow)
    listing = ParallelListing(s3_client, s3_bucket, "", (), 2, AS_INFO)
    next(iter(listing))
    listing.close()
    assert len(calls) < 50, len(calls)


def test_an_upload_still_receiving_parts_is_as_young_as_its_newest_part(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """A multi-day upload of a large checkpoint, started long ago (moto: in 2010), whose
    last part arrived a minute ago: its age came from its start, and the plan aborted it
    while it was written. Its parts' listing says when it was written last."""
    upload_tree(s3_bucket)
    live = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="ckpt/huge.bin")
    stale = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="ckpt/stale.bin")
    for started in (live, stale):
        s3_client.upload_part(
            Bucket=s3_bucket,
            Key=started["Key"],
            UploadId=started["UploadId"],
            PartNumber=1,
            Body=b"x" * PART,
        )
    age_upload_parts(s3_bucket, stale["UploadId"], days=10)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "safety: {max_delete_fraction: 1}\n"
    )
    doc = setup.plan()
    aborts = [
        a["objects"][0]["uri"].rsplit("/", 1)[-1]
        for a in doc["actions"]
        if a["action"] == "abort_upload"
    ]
    assert aborts == ["stale.bin"]
    listed = govern(setup.catalog, "ls", "objects", "--format", "json")
    written = {o["uri"].rsplit("/", 1)[-1]: o["last_modified"] for o in json.loads(listed.stdout)}
    assert written["huge.bin"] > written["stale.bin"]
    assert written["huge.bin"][:4] != "2010"
