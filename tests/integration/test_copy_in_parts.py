"""A copy of an object over CopyObject's 5 GiB goes in parts, made by `s3_parts`.

boto3's managed copy could not send a Bucket Key (an SSE-KMS object lost it, and each
read of the copy then called KMS) nor `If-None-Match` on the completion (restore's copy
back replaced an object written meanwhile). Against moto over HTTP, with CopyObject's
limit lowered to 5 MiB; moto keeps no Bucket Key of a multipart upload, so what is sent
is what that test checks.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from hypothesis import given
from hypothesis import strategies as st

from governance.storage.s3 import S3Store
from governance.storage.s3_parts import MAX_PART_BYTES, MAX_PARTS, MIN_PART_BYTES, part_ranges
from tests.integration.test_copy_encryption import encryption, kms_key  # noqa: F401

MiB = 1024**2
SIZE = 11 * MiB + 7  # three parts of 5 MiB at most
NEW = b"a new checkpoint, saved under the old name"


def _stores(moto_server: str, bucket: str) -> tuple[S3Store, S3Store]:
    source = S3Store(f"s3://{bucket}/runs/", endpoint_url=moto_server)
    source.copy_object_max_bytes = 5 * MiB  # (5 GiB in S3: too large for a test)
    dest = S3Store(f"s3://{bucket}/q/", endpoint_url=moto_server, multipart_threshold=5 * MiB)
    return source, dest


def _calls(store: S3Store) -> list[tuple[str, dict[str, Any]]]:
    """Each request `store` makes from now on: (operation, its API parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    store._client.meta.events.register(
        "before-parameter-build.s3.*", lambda model, params, **_: seen.append((model.name, params))
    )
    return seen


def test_a_copy_in_parts_keeps_bytes_headers_tags_class_and_bucket_key(
    moto_server: str,
    s3_client: Any,
    s3_bucket: str,
    kms_key: str,  # noqa: F811 (the fixture)
) -> None:
    body = bytes(range(256)) * (SIZE // 256) + b"x" * (SIZE % 256)
    s3_client.put_object(
        Bucket=s3_bucket,
        Key="runs/big.pt",
        Body=body,
        ContentType="application/x-torch",
        CacheControl="no-cache",
        Metadata={"framework": "torch"},
        Tagging="team=vision&keep=yes%20please",
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=kms_key,
        BucketKeyEnabled=True,
    )
    source, dest = _stores(moto_server, s3_bucket)
    calls = _calls(dest)

    result = source.copy("big.pt", dest, "big.pt", storage_class="GLACIER_IR", size=SIZE)

    assert result.ok, result.error
    names = [name for name, _ in calls]
    assert names.count("UploadPartCopy") == 3
    assert "CopyObject" not in names
    [create] = [params for name, params in calls if name == "CreateMultipartUpload"]
    assert (create["BucketKeyEnabled"], create["SSEKMSKeyId"]) == (True, kms_key)
    parts = [params for name, params in calls if name == "UploadPartCopy"]
    assert {p["CopySourceIfMatch"] for p in parts} == {
        s3_client.head_object(Bucket=s3_bucket, Key="runs/big.pt")["ETag"]
    }
    copied = s3_client.get_object(Bucket=s3_bucket, Key="q/big.pt")
    assert copied["Body"].read() == body
    assert (copied["ContentType"], copied["CacheControl"]) == ("application/x-torch", "no-cache")
    assert copied["Metadata"] == {"framework": "torch"}
    assert copied["StorageClass"] == "GLACIER_IR"
    assert encryption(s3_client, s3_bucket, "q/big.pt")["SSEKMSKeyId"] == kms_key
    tags = s3_client.get_object_tagging(Bucket=s3_bucket, Key="q/big.pt")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"team": "vision", "keep": "yes please"}
    head = s3_client.head_object(Bucket=s3_bucket, Key="q/big.pt")
    assert (result.etag, result.last_modified) == (head["ETag"].strip('"'), head["LastModified"])


def test_a_copy_back_in_parts_never_replaces_an_object_written_meanwhile(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """The completion carries `If-None-Match: *`: a run that saves under the key while the
    parts are copied keeps its object, and the upload is aborted (nothing left billed)."""
    s3_client.put_object(Bucket=s3_bucket, Key="runs/big.pt", Body=b"b" * SIZE)
    source, dest = _stores(moto_server, s3_bucket)

    def saves_meanwhile(**_: Any) -> None:
        s3_client.put_object(Bucket=s3_bucket, Key="q/big.pt", Body=NEW)

    dest._client.meta.events.register("before-call.s3.CompleteMultipartUpload", saves_meanwhile)
    result = source.copy("big.pt", dest, "big.pt", size=SIZE, moving=True, if_absent=True)

    assert result.error == (
        f"s3://{s3_bucket}/q/big.pt holds an object written since it was checked: left as it is"
    )
    assert s3_client.get_object(Bucket=s3_bucket, Key="q/big.pt")["Body"].read() == NEW
    assert s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []


def test_a_part_refused_fails_the_copy_and_aborts_the_upload(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """A part is copied only while the source is the object seen: S3 refuses a part of
    one rewritten mid-copy (PreconditionFailed, which moto never answers: given here as
    S3 answers it), and the copy fails, its upload aborted, nothing written."""
    s3_client.put_object(Bucket=s3_bucket, Key="runs/big.pt", Body=b"b" * SIZE)
    source, dest = _stores(moto_server, s3_bucket)

    def refuses_part_two(params: dict[str, Any], **_: Any) -> Any:
        if params["query_string"].get("partNumber") != 2:  # (the request, serialized)
            return None
        error = {"Code": "PreconditionFailed", "Message": "At least one of the pre-conditions"}
        meta = {"HTTPStatusCode": 412}
        return AWSResponse("http://s3", 412, {}, None), {"Error": error, "ResponseMetadata": meta}

    dest._client.meta.events.register("before-call.s3.UploadPartCopy", refuses_part_two)
    result = source.copy("big.pt", dest, "big.pt", size=SIZE)

    assert not result.ok
    assert "PreconditionFailed" in (result.error or "")
    assert "Contents" not in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="q/")
    assert s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []


@given(st.integers(1, MAX_PARTS * MAX_PART_BYTES), st.integers(0, 6 * 1024**3))
def test_parts_cover_the_object_within_s3s_limits(size: int, wanted: int) -> None:
    ranges = part_ranges(size, wanted)
    assert ranges[0][0] == 0
    assert ranges[-1][1] == size - 1
    assert all(b[0] == a[1] + 1 for a, b in pairwise(ranges))
    assert len(ranges) <= MAX_PARTS
    lengths = [last - first + 1 for first, last in ranges]
    assert all(MIN_PART_BYTES <= n <= MAX_PART_BYTES for n in lengths[:-1])
    assert 1 <= lengths[-1] <= MAX_PART_BYTES


def test_an_object_no_upload_can_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="over 10,000 parts of 5 GiB"):
        part_ranges(MAX_PARTS * MAX_PART_BYTES + 1, 0)


def test_a_copy_in_parts_onto_itself_completes_only_over_the_object_seen(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """A transition in place of a large object: its completion carries `If-Match` with
    the ETag the HEAD saw, so S3 refuses it (PreconditionFailed, and the upload is
    aborted as for any failure) when a run rewrote the key after the last part's check,
    and that write is not replaced by the old bytes. moto ignores `If-Match` there: what
    is sent is what this checks. A copy to another key carries none."""
    s3_client.put_object(Bucket=s3_bucket, Key="runs/big.pt", Body=b"b" * SIZE)
    seen = s3_client.head_object(Bucket=s3_bucket, Key="runs/big.pt")["ETag"]
    source, dest = _stores(moto_server, s3_bucket)
    calls = _calls(source)
    assert source.copy("big.pt", source, "big.pt", storage_class="STANDARD_IA", size=SIZE).ok
    [complete] = [p for name, p in calls if name == "CompleteMultipartUpload"]
    assert complete["IfMatch"] == seen
    elsewhere = _calls(dest)
    assert source.copy("big.pt", dest, "big.pt", size=SIZE).ok
    [complete] = [p for name, p in elsewhere if name == "CompleteMultipartUpload"]
    assert "IfMatch" not in complete


def test_an_upload_that_cannot_be_aborted_is_named_in_a_warning(
    moto_server: str, s3_client: Any, s3_bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Its parts stay billed until someone aborts it: a role without
    s3:AbortMultipartUpload must not leave that unsaid (S3's answers given here)."""
    s3_client.put_object(Bucket=s3_bucket, Key="runs/big.pt", Body=b"b" * SIZE)
    source, dest = _stores(moto_server, s3_bucket)

    def answer(code: str, status: int) -> Any:
        error = {"Code": code, "Message": code}
        return AWSResponse("http://s3", status, {}, None), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": status},
        }

    dest._client.meta.events.register(
        "before-call.s3.UploadPartCopy", lambda **_: answer("PreconditionFailed", 412)
    )
    dest._client.meta.events.register(
        "before-call.s3.AbortMultipartUpload", lambda **_: answer("AccessDenied", 403)
    )
    with caplog.at_level("WARNING", logger="governance.storage.s3_parts"):
        result = source.copy("big.pt", dest, "big.pt", size=SIZE)
    assert "PreconditionFailed" in (result.error or "")
    [upload] = s3_client.list_multipart_uploads(Bucket=s3_bucket)["Uploads"]
    [warning] = caplog.messages
    assert warning.startswith(
        f"s3://{s3_bucket}/q/big.pt: the failed copy's multipart upload {upload['UploadId']} "
        "could not be aborted"
    )
    assert "AccessDenied" in warning
    s3_client.abort_multipart_upload(Bucket=s3_bucket, Key="q/big.pt", UploadId=upload["UploadId"])
