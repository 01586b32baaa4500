"""S3Store's fast response parsers give exactly what botocore's own parser gives.

The same requests go to moto's server through an S3Store's client (fast parsers
installed) and through a plain boto3 client; the parsed responses must be equal, minus
request metadata. Odd keys (URL-encoded in listings), checksums, delimiters, paging,
versioned deletes with markers and per-key errors are all covered; and a body the parsers
do not know is left to botocore.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from governance.storage.s3 import S3Store, parse_timestamp
from governance.storage.s3_listing import parse_delete_objects, parse_list_objects_v2

pytestmark = pytest.mark.s3

KEYS = [
    "with space/file name.txt",
    "ünïcödé/データ.bin",
    "plus+sign/a=b&c.json",
    "percent%2Fliteral/x",
    "amp&lt;/<tag>.txt",
    "deep/a/b/c/d/e/f.bin",
    *(f"run-{i % 3}/part-{i:04d}.tmp" for i in range(25)),
]


def _plain(response: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


@pytest.fixture
def clients(moto_server: str, s3_bucket: str) -> tuple[Any, Any, list[str]]:
    """(fast, plain) clients; each response the fast parsers took empties a body, and
    `fast_parsed` lists the operations for which they did."""
    fast = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)._client
    plain = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    taken: list[str] = []

    def after_ours(response_dict: dict[str, Any], operation_model: Any, **_: Any) -> None:
        if response_dict["status_code"] == 200 and response_dict["body"] == b"":
            taken.append(operation_model.name)

    for operation in ("ListObjectsV2", "DeleteObjects"):
        fast.meta.events.register(f"before-parse.s3.{operation}", after_ours)
    return fast, plain, taken


def test_listing_pages_parse_as_botocore_does(
    clients: tuple[Any, Any], s3_bucket: str, s3_client: Any
) -> None:
    fast, plain, taken = clients
    for key in KEYS:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"abc")
    s3_client.put_object(
        Bucket=s3_bucket, Key="summed/x.bin", Body=b"sum", ChecksumAlgorithm="SHA256"
    )
    requests: list[dict[str, Any]] = [
        {},
        {"MaxKeys": 7},
        {"Delimiter": "/"},
        {"Prefix": "run-1/", "StartAfter": "run-1/part-0004.tmp"},
        {"Prefix": "nothing-here/"},
        {"FetchOwner": True},
    ]
    for extra in requests:
        a = fast.list_objects_v2(Bucket=s3_bucket, **extra)
        b = plain.list_objects_v2(Bucket=s3_bucket, **extra)
        assert _plain(a) == _plain(b), extra
        if a.get("NextContinuationToken"):
            token = a["NextContinuationToken"]
            a2 = fast.list_objects_v2(Bucket=s3_bucket, ContinuationToken=token, **extra)
            b2 = plain.list_objects_v2(Bucket=s3_bucket, ContinuationToken=token, **extra)
            assert _plain(a2) == _plain(b2)
    listed = fast.list_objects_v2(Bucket=s3_bucket)
    assert {o["Key"] for o in listed["Contents"]} >= set(KEYS)  # decoded by botocore after
    assert set(taken) == {"ListObjectsV2"}  # the fast parser took every page


def test_delete_results_parse_as_botocore_does(
    clients: tuple[Any, Any], s3_bucket: str, s3_client: Any
) -> None:
    fast, plain, taken = clients
    for key in KEYS:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"abc")
    half = len(KEYS) // 2
    for client, keys in ((fast, KEYS[:half]), (plain, KEYS[half:])):
        response = client.delete_objects(
            Bucket=s3_bucket, Delete={"Objects": [{"Key": k} for k in keys]}
        )
        assert sorted(d["Key"] for d in response["Deleted"]) == sorted(keys)
        assert "Errors" not in response
    assert s3_client.list_objects_v2(Bucket=s3_bucket)["KeyCount"] == 0
    assert taken == ["DeleteObjects"]


def test_versioned_deletes_parse_as_botocore_does(
    clients: tuple[Any, Any], s3_bucket: str, s3_client: Any
) -> None:
    fast, plain, _ = clients
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    for key in ("a", "b"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"abc")
    got = fast.delete_objects(Bucket=s3_bucket, Delete={"Objects": [{"Key": "a"}]})["Deleted"]
    want = plain.delete_objects(Bucket=s3_bucket, Delete={"Objects": [{"Key": "b"}]})["Deleted"]
    assert [sorted(d) for d in got] == [sorted(d) for d in want]
    assert got[0]["DeleteMarker"] is True
    assert got[0]["DeleteMarkerVersionId"]


DELETE_WITH_ERRORS = b"""<?xml version="1.0" encoding="UTF-8"?>
<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Deleted><Key>gone.txt</Key></Deleted>
<Error><Key>locked.txt</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>
<Error><Key>empty.txt</Key><Code>InternalError</Code><Message></Message></Error>
</DeleteResult>"""


def test_per_key_errors_and_unknown_bodies() -> None:
    assert parse_delete_objects(DELETE_WITH_ERRORS) == {
        "Deleted": [{"Key": "gone.txt"}],
        "Errors": [
            {"Key": "locked.txt", "Code": "AccessDenied", "Message": "Access Denied"},
            {"Key": "empty.txt", "Code": "InternalError", "Message": ""},
        ],
    }
    # Anything unexpected goes to botocore: another root, a new element, broken XML.
    assert parse_delete_objects(b"<Error><Code>SlowDown</Code></Error>") is None
    assert parse_delete_objects(b"<DeleteResult><Surprise/></DeleteResult>") is None
    assert parse_delete_objects(b"<DeleteResult><Deleted>") is None
    listing = b"<ListBucketResult><Contents><Key>k</Key><New>1</New></Contents></ListBucketResult>"
    assert parse_list_objects_v2(listing, parse_timestamp) is None
    assert (
        parse_list_objects_v2(
            b"<ListBucketResult><KeyCount>x</KeyCount></ListBucketResult>", parse_timestamp
        )
        is None
    )


@pytest.mark.parametrize("operation", ["DeleteObjects", "ListObjectsV2", "CopyObject"])
@pytest.mark.parametrize(
    "body", [b"<Error><Code>InternalError</Code></Error>", b"<DeleteResult><Deleted>"]
)
def test_an_error_inside_a_200_response_is_still_retried(operation: str, body: bytes) -> None:
    """S3 may answer 200 and fail (or be cut off mid-body): botocore's check, which marks
    such a response 500 for its retries, still sees every one the fast parsers decline."""
    client = S3Store("s3://b/", endpoint_url="http://127.0.0.1:9")._client
    response = {"status_code": 200, "body": body, "headers": {}}
    client.meta.events.emit(
        f"before-parse.s3.{operation}",
        operation_model=client.meta.service_model.operation_model(operation),
        response_dict=response,
        customized_response_dict={},
    )
    assert response["status_code"] == 500
    assert response["body"] == body
