"""S3Store (boto3) and FsspecStore over s3fs against moto's S3 server over HTTP."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Generator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
import requests

from governance.errors import (
    AccessDeniedError,
    BadCredentialsError,
    NoSuchRootError,
    UnreachableError,
)
from governance.storage import open_store
from governance.storage.base import ObjectInfo, Store, row_from_info
from governance.storage.errors import KeyNotFoundError
from governance.storage.fs import FsspecStore
from governance.storage.s3 import S3Store
from tests.integration.conftest import deny_deletes

pytestmark = pytest.mark.s3

BACKENDS = ["auto", "fsspec"]
ODD_KEYS = [
    "with space/file name.txt",
    "ünïcödé/データ.bin",
    "plus+sign/a=b&c.json",
    "percent%2Fliteral/x",
    "deep/a/b/c/d/e/f.bin",
]


def store_for(endpoint: str, url: str, backend: str = "auto", **kw: Any) -> Store:
    return open_store(url, endpoint_url=endpoint, backend=backend, **kw)


def by_key(objects: Iterator[ObjectInfo] | list[ObjectInfo]) -> dict[str, ObjectInfo]:
    return {o.key: o for o in objects}


# -- listing ----------------------------------------------------------------------------


@pytest.fixture
def big_bucket(s3_bucket: str, put_many: Any) -> str:
    """2,500 keys over nested prefixes, 1,500 at the root, and a quarantine."""
    put_many(s3_bucket, (f"run-{i % 5}/step-{i % 3}/shard-{i:05d}" for i in range(2500)))
    put_many(s3_bucket, (f"top-{i:05d}.log" for i in range(1500)), body=b"log!")
    put_many(s3_bucket, (f"quarantine/2024/x-{i}" for i in range(30)))
    return s3_bucket


def expected_big() -> set[str]:
    return {f"run-{i % 5}/step-{i % 3}/shard-{i:05d}" for i in range(2500)} | {
        f"top-{i:05d}.log" for i in range(1500)
    }


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_lists_past_pagination_with_parallel_split(
    moto_server: str, big_bucket: str, concurrency: int
) -> None:
    store = store_for(moto_server, f"s3://{big_bucket}", concurrency=concurrency)
    objects = list(store.list(exclude_prefixes=["quarantine/"]))
    assert len(objects) == len(expected_big())  # no duplicates from overlapping splits
    found = by_key(objects)
    assert set(found) == expected_big()
    assert found["top-00007.log"].size == 4
    assert found["top-00007.log"].etag == hashlib.md5(b"log!").hexdigest()  # quotes stripped
    assert found["run-1/step-1/shard-00001"].storage_class == "STANDARD"
    assert all(o.last_modified.tzinfo is not None for o in objects)
    assert all(o.upload_id == "" for o in objects)


def test_lists_under_a_prefix_with_relative_keys(moto_server: str, big_bucket: str) -> None:
    store = store_for(moto_server, f"s3://{big_bucket}/run-2/")
    keys = {o.key for o in store.list()}
    assert keys == {k[len("run-2/") :] for k in expected_big() if k.startswith("run-2/")}
    assert len(keys) == 500
    assert store.uri("step-0/shard-00002") == f"s3://{big_bucket}/run-2/step-0/shard-00002"


def test_exclude_prefixes_at_any_depth(moto_server: str, big_bucket: str) -> None:
    store = store_for(moto_server, f"s3://{big_bucket}")
    keys = {o.key for o in store.list(["quarantine/", "run-0/step-1/", "top-0000"])}
    expected = {k for k in expected_big() if not k.startswith(("run-0/step-1/", "top-0000"))}
    assert keys == expected


def test_stopping_early_releases_the_listing_threads(moto_server: str, big_bucket: str) -> None:
    before = threading.active_count()
    store = store_for(moto_server, f"s3://{big_bucket}", concurrency=8)
    listing = cast(Generator[ObjectInfo, None, None], store.list())
    first = [next(listing) for _ in range(10)]
    listing.close()  # the consumer goes away with workers blocked on a full queue
    assert len(first) == 10
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_started_listing_never_consumed_is_released_by_close(
    moto_server: str, big_bucket: str
) -> None:
    # The scanner starts the listing before it opens its catalog transaction; if that
    # fails, close() must still stop the workers that are already filling the queue.
    before = threading.active_count()
    store = store_for(moto_server, f"s3://{big_bucket}", concurrency=8)
    rows = store.list_rows()
    deadline = time.monotonic() + 5
    while threading.active_count() == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() > before  # requests went out before any next()
    rows.close()
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_staging_rows_are_the_listed_objects_as_rows(moto_server: str, big_bucket: str) -> None:
    store = store_for(moto_server, f"s3://{big_bucket}", concurrency=4)
    with_info = sorted(row_from_info(o) for o in store.list(["quarantine/"]))
    rows = sorted(store.list_rows(["quarantine/"]))
    assert rows == with_info
    assert len(rows) == len(expected_big())


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_bucket_and_empty_prefix(moto_server: str, s3_bucket: str, backend: str) -> None:
    for url in (f"s3://{s3_bucket}", f"s3://{s3_bucket}/no/such/prefix"):
        store = store_for(moto_server, url, backend)
        store.check()  # an empty prefix of an existing bucket is a valid, empty root
        assert list(store.list()) == []


def test_boto3_and_s3fs_list_the_same_objects(
    moto_server: str, s3_bucket: str, s3_client: Any, put_many: Any
) -> None:
    for i, key in enumerate(ODD_KEYS):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"z" * (i + 1))
    put_many(s3_bucket, (f"nested/{i % 7}/{i}.pt" for i in range(1200)))
    listings = [
        {o.key: (o.size, o.etag) for o in store_for(moto_server, f"s3://{s3_bucket}", b).list()}
        for b in BACKENDS
    ]
    assert listings[0] == listings[1]
    assert set(ODD_KEYS) <= set(listings[0])
    assert listings[0]["ünïcödé/データ.bin"][0] == 2
    assert len(listings[0]) == len(ODD_KEYS) + 1200


def test_incomplete_multipart_uploads_are_listed_and_aborted(
    moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="ckpt/done.bin", Body=b"1")
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="ckpt/partial.bin")
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="quarantine/partial.bin")
    store = store_for(moto_server, f"s3://{s3_bucket}/ckpt/")
    uploads = [o for o in store.list() if o.upload_id]
    assert [(o.key, o.upload_id, o.size, o.etag) for o in uploads] == [
        ("partial.bin", upload["UploadId"], 0, "")
    ]
    # moto reports a constant Initiated date; what matters here is a tz-aware UTC time.
    assert uploads[0].last_modified.utcoffset() == timedelta(0)
    result = store.abort_upload("partial.bin", upload["UploadId"])
    assert result.ok, result.error
    assert [o.key for o in store.list()] == ["done.bin"]
    assert store.abort_upload("partial.bin", upload["UploadId"]).ok  # already gone: done


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_such_bucket(moto_server: str, backend: str) -> None:
    store = store_for(moto_server, "s3://no-such-bucket-here/x", backend)
    with pytest.raises(NoSuchRootError, match="s3://no-such-bucket-here/x/"):
        store.check()
    with pytest.raises(NoSuchRootError):
        list(store.list())


def test_unreachable_endpoint_fails_fast() -> None:
    store = S3Store(
        "s3://bucket/",
        endpoint_url="http://127.0.0.1:1",
        max_attempts=1,
        connect_timeout=1,
        read_timeout=1,
    )
    sent: list[str] = []  # each attempt to send a request (a retry would send it again)
    store._client.meta.events.register("before-send.s3.*", lambda **_: sent.append("try"))
    with pytest.raises(UnreachableError, match="s3://bucket/"):
        store.check()
    assert len(sent) == 1  # max_attempts 1: no retry, no backoff
    with pytest.raises(UnreachableError):
        list(store.list())
    assert len(sent) == 2


def test_an_unreachable_endpoint_says_it_is_trying_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Retries with backoff take about 15 s by default: a wrong endpoint_url must not look
    like a hang. Each retry of a connection says so on stderr (a warning)."""
    store = S3Store(
        "s3://bucket/", endpoint_url="http://127.0.0.1:1", max_attempts=2, connect_timeout=1
    )
    with (
        caplog.at_level("WARNING", logger="governance.storage.s3"),
        pytest.raises(UnreachableError),
    ):
        store.check()
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "s3://bucket/: cannot reach http://127.0.0.1:1 (EndpointConnectionError); trying "
        "again (attempt 2 of 2)"
    ]


def test_unreachable_endpoint_through_s3fs() -> None:
    options = {
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:1"},
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
        "skip_instance_cache": True,
    }
    store = FsspecStore("s3://bucket/", storage_options=options)
    # (an unreachable endpoint is UnreachableError naming the root, not a hang: how long
    # the retries take is s3fs's, set by the options above)
    with pytest.raises(UnreachableError, match="s3://bucket/"):
        store.check()
    with pytest.raises(UnreachableError):
        list(store.list())


def test_missing_credentials_and_unknown_profile(
    moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_SECURITY_TOKEN", raising=False)
    with pytest.raises(BadCredentialsError, match="no usable credentials"):
        store_for(moto_server, "s3://bucket").check()
    with pytest.raises(BadCredentialsError, match="no-such-profile"):
        open_store("s3://bucket", endpoint_url=moto_server, profile="no-such-profile")


@pytest.fixture
def moto_auth(moto_server: str) -> Iterator[dict[str, str]]:
    """Turn on moto's IAM authentication; yields the keys of a user with no permissions.

    The switch is server-wide: it is turned off again before any other test runs.
    """
    iam = boto3.client("iam", endpoint_url=moto_server, region_name="us-east-1")
    name = f"nobody-{time.monotonic_ns()}"
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    requests.post(f"{moto_server}/moto-api/reset-auth", data=b"0", timeout=5)
    try:
        yield {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    finally:
        requests.post(f"{moto_server}/moto-api/reset-auth", data=b"inf", timeout=5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_credentials_rejected_or_unprivileged(
    moto_server: str,
    s3_bucket: str,
    moto_auth: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_SECURITY_TOKEN", raising=False)
    cases = [
        ("AKIAUNKNOWNKEY000000", "whatever", BadCredentialsError, "InvalidAccessKeyId"),
        (moto_auth["id"], "wrong-secret", BadCredentialsError, "SignatureDoesNotMatch"),
        (moto_auth["id"], moto_auth["secret"], AccessDeniedError, "AccessDenied"),
    ]
    for key_id, secret, error, code in cases:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        store = store_for(moto_server, f"s3://{s3_bucket}", backend)
        with pytest.raises(error, match=code):
            store.check()
        with pytest.raises(error):
            list(store.list())


# -- reads ------------------------------------------------------------------------------


def test_head_reports_object_lock_fields(moto_server: str, s3_client: Any) -> None:
    bucket = f"locked-{time.monotonic_ns()}"
    s3_client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    until = datetime.now(UTC).replace(microsecond=0) + timedelta(days=3)
    s3_client.put_object(
        Bucket=bucket,
        Key="ckpt/model.pt",
        Body=b"weights",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
        ObjectLockLegalHoldStatus="ON",
        Metadata={"step": "100"},
        StorageClass="STANDARD_IA",
    )
    s3_client.put_object(Bucket=bucket, Key="ckpt/free.pt", Body=b"f")
    store = store_for(moto_server, f"s3://{bucket}/ckpt/")
    states = store.head(["model.pt", "free.pt", "missing.pt"])
    assert set(states) == {"model.pt", "free.pt"}
    locked = states["model.pt"]
    assert (locked.lock_mode, locked.lock_until, locked.legal_hold) == ("GOVERNANCE", until, True)
    assert locked.metadata == {"step": "100"}
    assert locked.storage_class == "STANDARD_IA"
    assert locked.size == 7
    assert locked.version_id  # lock implies versioning
    assert (states["free.pt"].lock_mode, states["free.pt"].legal_hold) == (None, False)
    assert store.supports_versioning


def test_read_bytes(moto_server: str, s3_bucket: str, s3_client: Any) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="p/meta.json", Body=b'{"step": 100}')
    s3_client.put_object(Bucket=s3_bucket, Key="p/empty", Body=b"")
    store = store_for(moto_server, f"s3://{s3_bucket}/p/")
    assert store.read_bytes("meta.json", 5) == b'{"ste'
    assert store.read_bytes("meta.json", 1000) == b'{"step": 100}'
    assert store.read_bytes("empty", 10) == b""
    with pytest.raises(KeyNotFoundError, match=r"nope\.json"):
        store.read_bytes("nope.json", 10)


# -- mutations --------------------------------------------------------------------------


def test_delete_in_batches_with_per_key_errors(
    moto_server: str, s3_bucket: str, s3_client: Any, put_many: Any
) -> None:
    keys = [f"ckpt/{i:05d}" for i in range(2100)] + [f"protected/{i}" for i in range(3)]
    put_many(s3_bucket, keys)
    deny_deletes(s3_client, s3_bucket, "protected/*")
    store = store_for(moto_server, f"s3://{s3_bucket}")
    assert isinstance(store, S3Store)
    batch_sizes: list[int] = []
    store._client.meta.events.register(
        "before-call.s3.DeleteObjects",
        lambda params, **_: batch_sizes.append(params["body"].count(b"<Object>")),
    )
    request = ["protected/1", *keys[:2100], "never-existed"]
    results = store.delete(request)
    assert [r.key for r in results] == request
    assert sorted(batch_sizes, reverse=True) == [1000, 1000, 102]  # batches run in parallel
    failed = {r.key: r.error for r in results if not r.ok}
    assert failed == {"protected/1": "AccessDenied: Access Denied"}
    remaining = {o.key for o in store.list()}
    assert remaining == {"protected/0", "protected/1", "protected/2"}


def test_delete_on_versioned_bucket_returns_marker_versions(
    moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    s3_client.put_object(Bucket=s3_bucket, Key="a/model.pt", Body=b"m")
    store = store_for(moto_server, f"s3://{s3_bucket}/a/")
    assert isinstance(store, S3Store)
    assert store.versioning_enabled()
    [result] = store.delete(["model.pt"])
    assert result.ok
    assert result.version_id
    assert store.head(["model.pt"]) == {}
    # Undo: deleting the delete marker brings the object back.
    s3_client.delete_object(Bucket=s3_bucket, Key="a/model.pt", VersionId=result.version_id)
    assert set(store.head(["model.pt"])) == {"model.pt"}


def test_delete_against_missing_bucket_fails_every_key(moto_server: str) -> None:
    results = store_for(moto_server, "s3://no-such-bucket-to-delete").delete(["a", "b"])
    assert [r.ok for r in results] == [False, False]
    assert all("NoSuchBucket" in (r.error or "") for r in results)
    assert not any(r.unknown for r in results)  # a definite answer: nothing was deleted


@pytest.mark.parametrize("size", [1024, 6 * 1024 * 1024])
def test_copy_with_storage_class_keeps_metadata_and_tags(
    moto_server: str, s3_bucket: str, s3_client: Any, size: int
) -> None:
    s3_client.put_object(
        Bucket=s3_bucket,
        Key="runs/a/model.pt",
        Body=b"w" * size,
        Metadata={"framework": "torch"},
        ContentType="application/octet-stream",
        Tagging="team=vision&keep=yes",
    )
    # The destination copies: its 5 MiB threshold sends the 6 MiB object through the multipart copy path.
    source = S3Store(f"s3://{s3_bucket}/runs/", endpoint_url=moto_server)
    source.copy_object_max_bytes = 5 * 1024**2  # (5 GiB in S3: too large for a test)
    archive = S3Store(
        f"s3://{s3_bucket}/archive/", endpoint_url=moto_server, multipart_threshold=5 * 1024**2
    )
    part_copies: list[str] = []
    archive._client.meta.events.register(
        "before-call.s3.UploadPartCopy", lambda params, **_: part_copies.append("part")
    )
    result = source.copy("a/model.pt", archive, "a/model.pt", storage_class="GLACIER_IR")
    assert result.ok, result.error
    head = s3_client.head_object(Bucket=s3_bucket, Key="archive/a/model.pt")
    assert head["ContentLength"] == size
    assert head["StorageClass"] == "GLACIER_IR"
    assert head["Metadata"] == {"framework": "torch"}
    assert len(part_copies) == (2 if size > 5 * 1024**2 else 0)
    # the managed copy answers nothing itself: what it wrote is asked after it (apply
    # records it in the catalog)
    assert (result.etag, result.last_modified) == (head["ETag"].strip('"'), head["LastModified"])
    tags = s3_client.get_object_tagging(Bucket=s3_bucket, Key="archive/a/model.pt")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"team": "vision", "keep": "yes"}


def test_copy_of_a_known_size_is_one_copy_object_keeping_metadata_and_tags(
    moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    # One HEAD (for the object's encryption and ETag), then one CopyObject: the size the
    # plan saw (checked just before) is within CopyObject's limit.
    s3_client.put_object(
        Bucket=s3_bucket,
        Key="runs/a/model.pt",
        Body=b"w" * 1000,
        Metadata={"framework": "torch"},
        Tagging="team=vision",
    )
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    calls: list[str] = []
    for op in ("HeadObject", "CopyObject", "UploadPartCopy"):
        store._client.meta.events.register(
            f"before-call.s3.{op}", lambda model, **_: calls.append(model.name)
        )
    result = store.copy("runs/a/model.pt", store, "q/a/model.pt", "STANDARD_IA", size=1000)
    assert result.ok, result.error
    assert calls == ["HeadObject", "CopyObject"]
    head = s3_client.head_object(Bucket=s3_bucket, Key="q/a/model.pt")
    assert (result.etag, result.last_modified) == (head["ETag"].strip('"'), head["LastModified"])
    assert (head["ContentLength"], head["StorageClass"]) == (1000, "STANDARD_IA")
    assert head["Metadata"] == {"framework": "torch"}
    tags = s3_client.get_object_tagging(Bucket=s3_bucket, Key="q/a/model.pt")["TagSet"]
    assert tags == [{"Key": "team", "Value": "vision"}]
    missing = store.copy("runs/nothing.pt", store, "q/nothing.pt", size=10)
    assert not missing.ok
    assert "no such key" in (missing.error or "")


def test_copy_missing_source_reports_it(moto_server: str, s3_bucket: str) -> None:
    store = store_for(moto_server, f"s3://{s3_bucket}")
    result = store.copy("nope.bin", store, "dest.bin")
    assert not result.ok
    assert "nope.bin" in (result.error or "")


def test_copy_between_s3_and_local_streams(
    moto_server: str, s3_bucket: str, s3_client: Any, tmp_path: Path
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="k/ü.bin", Body=b"abc", Metadata={"m": "1"})
    s3 = store_for(moto_server, f"s3://{s3_bucket}/k/")
    local = open_store(str(tmp_path))
    assert s3.copy("ü.bin", local, "sub/ü.bin").ok
    assert (tmp_path / "sub" / "ü.bin").read_bytes() == b"abc"
    (tmp_path / "up.bin").write_bytes(b"local bytes")
    result = local.copy("up.bin", s3, "from-local/up.bin")
    assert result.ok, result.error
    assert s3.read_bytes("from-local/up.bin", 100) == b"local bytes"


def test_s3fs_backend_reads_and_mutates(moto_server: str, s3_bucket: str, s3_client: Any) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="p/a.bin", Body=b"hello", StorageClass="STANDARD_IA")
    s3_client.put_object(Bucket=s3_bucket, Key="p/b.bin", Body=b"bye")
    store = store_for(moto_server, f"s3://{s3_bucket}/p/", "fsspec")
    boto = store_for(moto_server, f"s3://{s3_bucket}/p/")
    listed = by_key(store.list())
    assert listed["a.bin"].storage_class == "STANDARD_IA"
    states = store.head(["a.bin", "b.bin", "missing"])
    assert {k: (s.size, s.etag) for k, s in states.items()} == {
        k: (s.size, s.etag) for k, s in boto.head(["a.bin", "b.bin"]).items()
    }
    assert store.read_bytes("a.bin", 4) == b"hell"
    copied = store.copy("a.bin", store, "c.bin", storage_class="GLACIER_IR")
    assert copied.ok, copied.error
    assert s3_client.head_object(Bucket=s3_bucket, Key="p/c.bin")["StorageClass"] == "GLACIER_IR"
    assert [r.ok for r in store.delete(["a.bin", "missing"])] == [True, True]
    assert {o.key for o in boto.list()} == {"b.bin", "c.bin"}


def test_no_network_at_construction() -> None:
    # Opening a store must not touch the endpoint (the CLI opens stores before checking).
    store = S3Store("s3://bucket/x/", endpoint_url="http://127.0.0.1:1")
    assert store.bucket == "bucket"
    assert store.prefix == "x/"
    assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
