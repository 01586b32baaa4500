"""Copies on one S3 endpoint keep an object's encryption, and copy only the object they
checked: against moto's server over HTTP, which, like S3, encrypts a copy that names no
encryption as the destination's default (an object under a KMS key of its own lost that
key to a quarantine, a restore or a transition in place).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from governance.storage.s3 import S3Store
from tests.integration.test_apply_support import Setup, actions_by
from tests.integration.test_copy_fidelity import make_setup, new_bucket

pytestmark = pytest.mark.s3

ENCRYPTION = ("ServerSideEncryption", "SSEKMSKeyId", "BucketKeyEnabled")


@pytest.fixture
def kms_key(moto_server: str) -> str:
    """A customer-managed KMS key's ARN on the moto server."""
    kms = boto3.client("kms", endpoint_url=moto_server, region_name="us-east-1")
    arn: str = kms.create_key(Description="team key")["KeyMetadata"]["Arn"]
    return arn


def encryption(client: Any, bucket: str, key: str) -> dict[str, Any]:
    head = client.head_object(Bucket=bucket, Key=key)
    return {name: head.get(name) for name in ENCRYPTION}


def put_kms(client: Any, bucket: str, key: str, arn: str, body: bytes = b"w" * 300) -> None:
    """One object under the KMS key `arn` (with an S3 Bucket Key), as of ten days ago."""
    client.put_object(
        Bucket=bucket,
        Key=key,
        Body=body,
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId=arn,
        BucketKeyEnabled=True,
    )
    age(bucket, key)


def age(bucket: str, key: str) -> None:
    """The object as of ten days ago (residue expires after two)."""
    stored = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, key)
    assert stored is not None
    stored.last_modified = (datetime.now(UTC) - timedelta(days=10)).replace(tzinfo=None)


def test_a_copy_keeps_a_kms_key_and_an_sse_s3_object_takes_the_destinations_default(
    moto_server: str, s3_client: Any, s3_bucket: str, kms_key: str
) -> None:
    put_kms(s3_client, s3_bucket, "runs/a/model.pt", kms_key)
    s3_client.put_object(
        Bucket=s3_bucket, Key="runs/a/opt.pt", Body=b"o" * 10, ServerSideEncryption="AES256"
    )
    kms_before = encryption(s3_client, s3_bucket, "runs/a/model.pt")
    assert kms_before == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": kms_key,
        "BucketKeyEnabled": True,
    }
    other = new_bucket(s3_client)
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    dest = S3Store(f"s3://{other}/", endpoint_url=moto_server)
    assert store.copy("runs/a/model.pt", dest, "q/model.pt", "STANDARD", size=300).ok
    assert encryption(s3_client, other, "q/model.pt") == kms_before
    # an SSE-S3 object copied into a bucket whose default is a KMS key takes that key
    # (naming AES256 would have overridden it: a quarantine bucket set up for KMS)
    s3_client.put_bucket_encryption(
        Bucket=other,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": kms_key,
                    }
                }
            ]
        },
    )
    assert store.copy("runs/a/opt.pt", dest, "q/opt.pt", "STANDARD", size=10).ok
    after = encryption(s3_client, other, "q/opt.pt")
    assert (after["ServerSideEncryption"], after["SSEKMSKeyId"]) == ("aws:kms", kms_key)
    # a transition in place (a copy onto itself in another class) keeps the key too
    assert store.copy("runs/a/model.pt", store, "runs/a/model.pt", "GLACIER_IR", size=300).ok
    head = s3_client.head_object(Bucket=s3_bucket, Key="runs/a/model.pt")
    assert head["StorageClass"] == "GLACIER_IR"
    assert encryption(s3_client, s3_bucket, "runs/a/model.pt") == kms_before


def test_the_managed_multipart_copy_keeps_a_kms_key(
    moto_server: str, s3_client: Any, s3_bucket: str, kms_key: str
) -> None:
    size = 5 * 1024**2 + 1
    put_kms(s3_client, s3_bucket, "big.bin", kms_key, b"b" * size)
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server, multipart_threshold=5 * 1024**2)
    store.copy_object_max_bytes = 5 * 1024**2  # (5 GiB in S3: too large for a test)
    result = store.copy("big.bin", store, "big.bin", storage_class="STANDARD_IA", size=size)
    assert result.ok, result.error
    after = encryption(s3_client, s3_bucket, "big.bin")
    assert (after["ServerSideEncryption"], after["SSEKMSKeyId"]) == ("aws:kms", kms_key)


def test_a_copy_is_conditional_on_the_etag_its_head_saw(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """The copy is of the object its HEAD saw: CopyObject names that ETag as
    x-amz-copy-source-if-match, so S3 refuses (412) to copy an object rewritten between
    the HEAD and the copy (a job saving a new checkpoint to the same key), and a
    quarantine does not go on to delete an object nobody checked. (moto does not check
    that condition, so what is sent is what this asserts.)"""
    s3_client.put_object(Bucket=s3_bucket, Key="ckpt/model.pt", Body=b"old" * 100)
    etag = s3_client.head_object(Bucket=s3_bucket, Key="ckpt/model.pt")["ETag"]
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    sent: list[dict[str, str]] = []
    store._client.meta.events.register(
        "before-send.s3.CopyObject", lambda request, **_: sent.append(dict(request.headers))
    )
    assert store.copy("ckpt/model.pt", store, "q/model.pt", "STANDARD", size=300).ok
    assert [h.get("x-amz-copy-source-if-match") for h in sent] == [etag.encode()]


def test_a_copy_of_an_object_whose_size_changed_since_its_check_is_refused(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="ckpt/model.pt", Body=b"x" * 500)
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    result = store.copy("ckpt/model.pt", store, "q/model.pt", "STANDARD", size=300)
    assert not result.ok
    assert "changed since it was checked: 500 bytes now, not 300" in (result.error or "")
    assert not s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="q/").get("Contents")


def test_quarantine_and_restore_bring_back_an_objects_kms_key(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, kms_key: str
) -> None:
    """Apply quarantines KMS-encrypted residue and restore brings it back under the same
    key (before, both copies named none: the bucket's default encrypted them)."""
    keys = ["scratch/a.tmp", "scratch/b.tmp"]
    for key in keys:
        put_kms(s3_client, s3_bucket, key, kms_key)
    before = {k: encryption(s3_client, s3_bucket, k) for k in keys}
    setup: Setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    assert actions_by(doc, f"s3://{s3_bucket}/") == {k: ["delete"] for k in keys}
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    q = f".govern-quarantine/{doc['plan_id']}/{s3_bucket}/"
    assert {k: encryption(s3_client, s3_bucket, q + k) for k in keys} == before
    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert (restored["restored"], restored["failed"]) == (2, 0)
    assert {k: encryption(s3_client, s3_bucket, k) for k in keys} == before


def test_a_restore_gives_back_the_encryption_the_object_had_not_the_quarantines(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, kms_key: str
) -> None:
    """A quarantine bucket whose default is a KMS key encrypts an SSE-S3 object's copy
    with it; restore, naming what the copy had, gave the object back under the
    quarantine's key (readers without it locked out). Apply records the object's own
    encryption, and restore names exactly that: SSE-S3 back as SSE-S3, a KMS key back."""
    held = new_bucket(s3_client)
    s3_client.put_bucket_encryption(
        Bucket=held,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": kms_key,
                    }
                }
            ]
        },
    )
    other_key = boto3.client("kms", endpoint_url=moto_server, region_name="us-east-1").create_key()
    own = other_key["KeyMetadata"]["Arn"]
    put_kms(s3_client, s3_bucket, "scratch/kms.tmp", own)
    s3_client.put_object(
        Bucket=s3_bucket, Key="scratch/plain.tmp", Body=b"p" * 300, ServerSideEncryption="AES256"
    )
    age(s3_bucket, "scratch/plain.tmp")
    before = {
        k: encryption(s3_client, s3_bucket, k) for k in ("scratch/kms.tmp", "scratch/plain.tmp")
    }
    assert before["scratch/plain.tmp"]["ServerSideEncryption"] == "AES256"
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, extra=f"apply: {{quarantine_url: 's3://{held}/q/'}}\n"
    )
    doc = setup.plan()
    assert {r["outcome"] for r in json.loads(setup.apply(doc["plan_id"]).stdout)["results"]} == {
        "ok"
    }
    copies = s3_client.list_objects_v2(Bucket=held)["Contents"]
    plain_copy = next(c["Key"] for c in copies if c["Key"].endswith("plain.tmp"))
    assert encryption(s3_client, held, plain_copy)["SSEKMSKeyId"] == kms_key  # the default
    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert (restored["restored"], restored["failed"]) == (2, 0)
    after = {k: encryption(s3_client, s3_bucket, k) for k in before}
    assert after == before
