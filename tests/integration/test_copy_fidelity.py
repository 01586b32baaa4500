"""Copies keep what an object is, not only its bytes: quarantine and restore, archives,
and `S3Store.copy` itself (one endpoint, across endpoints, to local disk), against moto's
server over HTTP.

A quarantine or archive location in a bucket of its own, which no storage root covers,
must be opened with the endpoint of the root it serves: those tests unset the
environment's endpoint and answer every request for a host other than the local moto
server with AccessDenied, recording it (so nothing can reach AWS, and a store opened on
the default endpoint fails fast instead).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.awsrequest import AWSResponse
from botocore.httpsession import URLLib3Session
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from governance.apply import StoreOpener, StoreSettings, purge_quarantine
from governance.apply.modes import Item, copy_to, remove
from governance.apply.purge import PurgeReport
from governance.storage import open_store
from governance.storage.s3 import S3Store
from tests.integration.conftest import running_moto
from tests.integration.test_apply_support import (
    NO_APPROVAL,
    Setup,
    actions_by,
    govern,
    policy_text,
)

pytestmark = pytest.mark.s3

HEADERS = {
    "ContentType": "application/x-checkpoint",
    "ContentEncoding": "gzip",
    "CacheControl": "max-age=60",
    "ContentDisposition": "attachment",
    "ContentLanguage": "en",
}
KEPT = (*HEADERS, "Metadata", "StorageClass", "ContentLength", "ETag")


def put(
    client: Any, bucket: str, key: str, storage_class: str, body: bytes = b"", **extra: Any
) -> None:
    """One object with system and user metadata, tags and a class, as of ten days ago."""
    client.put_object(
        Bucket=bucket,
        Key=key,
        Body=body or f"bytes of {key} ".encode() * 100,
        StorageClass=storage_class,
        Metadata={"origin": key.rsplit("/", 1)[-1], "step": "7"},
        Tagging=f"team=vision&class={storage_class}&note=a%20b",
        **(HEADERS | extra),
    )
    stored = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, key)
    assert stored is not None
    stored.last_modified = (datetime.now(UTC) - timedelta(days=10)).replace(tzinfo=None)


def state(client: Any, bucket: str, key: str) -> dict[str, Any]:
    """What a copy must keep: the bytes, headers, user metadata, class and tags."""
    got = client.get_object(Bucket=bucket, Key=key)
    seen = {k: got.get(k) for k in KEPT}
    seen["StorageClass"] = seen["StorageClass"] or "STANDARD"
    seen["Body"] = got["Body"].read()
    tags = client.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    seen["Tags"] = {t["Key"]: t["Value"] for t in tags}
    return seen


def new_bucket(client: Any) -> str:
    name = f"test-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=name)
    return name


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No default endpoint from the environment, and no request past the local server:
    any other host is answered AccessDenied and recorded (the list returned)."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    real = URLLib3Session.send
    strays: list[str] = []

    def send(self: URLLib3Session, request: Any) -> Any:
        if urlsplit(request.url).hostname not in ("127.0.0.1", "localhost"):
            strays.append(request.url)
            body = b"<Error><Code>AccessDenied</Code><Message>not in tests</Message></Error>"
            return AWSResponse(request.url, 403, {}, _Raw(body))
        return real(self, request)

    monkeypatch.setattr(URLLib3Session, "send", send)
    return strays


def purge_a_month_later(setup: Setup, stores: StoreOpener) -> PurgeReport:
    """A later run's purge (past the default 14 days), with the opener given: a new
    process's, which has opened no quarantine yet."""
    engine = setup.engine()
    try:
        return purge_quarantine(
            engine, now=datetime.now(UTC) + timedelta(days=30), stores=stores, actor="ops"
        )
    finally:
        engine.dispose()


CLASSES = ("STANDARD_IA", "GLACIER_IR", "ONEZONE_IA", "INTELLIGENT_TIERING", "STANDARD")


def residue_tree(client: Any, bucket: str) -> dict[str, str]:
    """Residue (deleted by the policy) in each class: key -> class."""
    keys = {f"scratch/{c.lower()}.tmp": c for c in CLASSES}
    for key, storage_class in keys.items():
        put(client, bucket, key, storage_class)
    return keys


def make_setup(tmp_path: Path, endpoint: str, bucket: str, extra: str = "") -> Setup:
    policy = tmp_path / "policy.yaml"
    safety = "safety: {max_delete_fraction: 1}\n"  # the tree is all residue
    policy.write_text(
        policy_text(f"s3://{bucket}/", endpoint=endpoint, extra=NO_APPROVAL + safety + extra)
    )
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)


def test_quarantine_and_restore_bring_each_object_back_as_it_was(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Apply quarantines (copy, then delete) objects in five classes with tags, system and
    user metadata; restore brings each back in the class it had, with all of it (before,
    every one came back STANDARD)."""
    keys = residue_tree(s3_client, s3_bucket)
    before = {k: state(s3_client, s3_bucket, k) for k in keys}
    assert {k: s["StorageClass"] for k, s in before.items()} == keys
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    assert actions_by(doc, f"s3://{s3_bucket}/") == {k: ["delete"] for k in keys}
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    q = f".govern-quarantine/{doc['plan_id']}/{s3_bucket}/"
    for key in keys:
        with pytest.raises(s3_client.exceptions.NoSuchKey):
            s3_client.get_object(Bucket=s3_bucket, Key=key)
        held = state(s3_client, s3_bucket, q + key)
        # the quarantine copy has everything; its class is apply's choice (see
        # `quarantine_class`): restore does not depend on it
        assert {k: v for k, v in held.items() if k != "StorageClass"} == {
            k: v for k, v in before[key].items() if k != "StorageClass"
        }

    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert (restored["restored"], restored["failed"]) == (len(keys), 0)
    after = {k: state(s3_client, s3_bucket, k) for k in keys}
    assert after == before
    assert not s3_client.list_objects_v2(Bucket=s3_bucket, Prefix=".govern-quarantine/").get(
        "Contents"
    )


def test_a_long_quarantine_keeps_a_large_objects_cheaper_class(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Kept 60 days, a 1 MiB GLACIER_IR object costs less in its own class than in
    STANDARD, so its quarantine copy stays there; a small STANDARD_IA one (billed as
    128 KiB) goes to STANDARD. Restore puts each back as it was either way."""
    put(s3_client, s3_bucket, "scratch/big.tmp", "GLACIER_IR", b"x" * 2**20)
    put(s3_client, s3_bucket, "scratch/small.tmp", "STANDARD_IA")
    before = {k: state(s3_client, s3_bucket, k) for k in ("scratch/big.tmp", "scratch/small.tmp")}
    setup = make_setup(tmp_path, moto_server, s3_bucket, extra="apply: {quarantine_for: 60d}\n")
    doc = setup.plan()
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    q = f".govern-quarantine/{doc['plan_id']}/{s3_bucket}/"
    assert state(s3_client, s3_bucket, q + "scratch/big.tmp")["StorageClass"] == "GLACIER_IR"
    assert state(s3_client, s3_bucket, q + "scratch/small.tmp")["StorageClass"] == "STANDARD"
    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert (restored["restored"], restored["failed"]) == (2, 0)
    assert {k: state(s3_client, s3_bucket, k) for k in before} == before


def test_a_quarantine_in_another_bucket_is_on_the_roots_endpoint(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, local_only: list[str]
) -> None:
    """`quarantine_url` in a bucket no storage root covers: apply's copies, restore's
    copies back and a purge by a later run go to the endpoint the policy's root names
    (before, the quarantine opened on the default endpoint and every action failed)."""
    other = new_bucket(s3_client)
    keys = residue_tree(s3_client, s3_bucket)
    before = {k: state(s3_client, s3_bucket, k) for k in keys}
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, extra=f"apply: {{quarantine_url: s3://{other}/q/}}\n"
    )
    doc = setup.plan()
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}, report["results"]
    listed = s3_client.list_objects_v2(Bucket=other, Prefix="q/")["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted(
        f"q/{doc['plan_id']}/{s3_bucket}/{k}" for k in keys
    )
    back, left = sorted(keys)[:2], sorted(keys)[2:]
    uris = [arg for k in back for arg in ("--uri", f"s3://{s3_bucket}/{k}")]
    restored = json.loads(setup.restore(doc["plan_id"], *uris).stdout)
    assert (restored["restored"], restored["failed"]) == (len(back), 0)
    assert {k: state(s3_client, s3_bucket, k) for k in back} == {k: before[k] for k in back}

    # the rest is purged by a later run, whose opener has opened no quarantine yet
    fresh = StoreOpener([StoreSettings(f"s3://{s3_bucket}/", endpoint_url=moto_server)])
    purged = purge_a_month_later(setup, fresh)
    assert (purged.purged, purged.failed) == (len(left), 0), purged.errors
    assert not s3_client.list_objects_v2(Bucket=other).get("Contents")
    assert local_only == []


def test_a_quarantine_copy_is_written_in_the_class_apply_names_else_standard(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """`Item.storage_class` (see `quarantine_class`) is the copy's class; without one,
    STANDARD, named in the CopyObject (not the object's own, which its HEAD says)."""
    for name in ("kept", "moved"):
        put(s3_client, s3_bucket, f"runs/{name}.bin", "GLACIER_IR")
    root = f"s3://{s3_bucket}/"
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    size = {
        n: state(s3_client, s3_bucket, f"runs/{n}.bin")["ContentLength"] for n in ("kept", "moved")
    }
    sent = _calls(opener(root))  # type: ignore[arg-type]
    copies = _calls(opener(root + "q/"))  # type: ignore[arg-type]  # the copies' client
    items = [
        Item(1, root, "runs/kept.bin", root + "q/", "p/kept.bin", size["kept"], "GLACIER_IR"),
        Item(2, root, "runs/moved.bin", root + "q/", "p/moved.bin", size["moved"]),
    ]
    results = remove(items, "quarantine", opener, concurrency=2)
    assert all(r.ok for r in results.values()), results
    assert (sorted(sent), copies) == (
        ["DeleteObjects", "GetBucketVersioning", "HeadObject", "HeadObject"],
        ["CopyObject"] * 2,
    )
    got = {
        k: state(s3_client, s3_bucket, f"q/p/{k}.bin")["StorageClass"] for k in ("kept", "moved")
    }
    assert got == {"kept": "GLACIER_IR", "moved": "STANDARD"}


def test_apply_and_restore_without_a_policy_use_the_endpoint_the_scan_recorded(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, local_only: list[str]
) -> None:
    """The endpoint is only in the policy's root, and apply and restore are given no
    policy: they open the root with the endpoint its scan recorded in the catalog (they
    went to the default, AWS, endpoint)."""
    keys = residue_tree(s3_client, s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    applied = govern(setup.catalog, "apply", doc["plan_id"], "--format", "json")
    assert applied.exit_code == 0, applied.stderr
    assert {r["outcome"] for r in json.loads(applied.stdout)["results"]} == {"ok"}
    assert not s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="scratch/").get("Contents")
    restored = govern(setup.catalog, "restore", doc["plan_id"], "--format", "json")
    assert restored.exit_code == 0, restored.stderr
    assert json.loads(restored.stdout)["restored"] == len(keys)
    assert local_only == []


def test_an_archive_in_another_bucket_is_on_the_roots_endpoint_and_keeps_the_object(
    moto_server: str, s3_client: Any, s3_bucket: str, local_only: list[str]
) -> None:
    other = new_bucket(s3_client)
    put(s3_client, s3_bucket, "runs/a/final/model.safetensors", "GLACIER_IR")
    put(s3_client, s3_bucket, "runs/a/final/config.json", "STANDARD_IA")
    root = f"s3://{s3_bucket}/"
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    items = [
        (1, root, f"runs/a/final/{name}", f"s3://{other}/cold/", f"a/final/{name}")
        for name in ("model.safetensors", "config.json")
    ]
    results = copy_to(items, opener, concurrency=2)
    assert all(r.ok for r in results.values()), results
    for _, _, key, _, dest_key in items:
        expected = state(s3_client, s3_bucket, key)
        assert state(s3_client, other, "cold/" + dest_key) == expected
    assert local_only == []


# ------------------------------------------------------------------------- S3Store.copy


@pytest.fixture(scope="module")
def second_endpoint() -> Iterator[str]:
    """Another moto server: another endpoint URL, so copies to it are streamed. (moto's
    servers in one process share their backend, so both see every bucket; the copy
    itself still goes GET from one endpoint, PUT to the other, over HTTP.)"""
    with running_moto() as endpoint:
        yield endpoint


def _calls(store: S3Store) -> list[str]:
    sent: list[str] = []
    store._client.meta.events.register(
        "before-call.s3.*", lambda model, **_: sent.append(model.name)
    )
    return sent


def test_a_copy_across_endpoints_keeps_tags_headers_and_class(
    moto_server: str, second_endpoint: str, s3_client: Any, s3_bucket: str
) -> None:
    other = new_bucket(s3_client)
    put(s3_client, s3_bucket, "runs/a/model.pt", "GLACIER_IR")
    before = state(s3_client, s3_bucket, "runs/a/model.pt")
    source = S3Store(f"s3://{s3_bucket}/runs/", endpoint_url=moto_server)
    dest = S3Store(f"s3://{other}/copies/", endpoint_url=second_endpoint)
    read, written = _calls(source), _calls(dest)
    result = source.copy("a/model.pt", dest, "a/model.pt")
    assert result.ok, result.error
    assert "GetObject" in read  # streamed: read from one endpoint...
    assert "PutObject" in written  # ...and written to the other
    assert "CopyObject" not in written
    assert state(s3_client, other, "copies/a/model.pt") == before
    # a class asked for wins; the rest is kept
    assert source.copy("a/model.pt", dest, "b/model.pt", storage_class="STANDARD_IA").ok
    assert state(s3_client, other, "copies/b/model.pt") == before | {"StorageClass": "STANDARD_IA"}
    # an object without tags or extra headers copies as it is
    s3_client.put_object(Bucket=s3_bucket, Key="runs/plain.bin", Body=b"plain")
    assert source.copy("plain.bin", dest, "plain.bin").ok
    plain = state(s3_client, other, "copies/plain.bin")
    assert (plain["Body"], plain["Tags"], plain["StorageClass"]) == (b"plain", {}, "STANDARD")


def test_a_copy_on_one_endpoint_keeps_everything_and_the_class_unless_told(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    put(s3_client, s3_bucket, "runs/a/model.pt", "GLACIER_IR")
    before = state(s3_client, s3_bucket, "runs/a/model.pt")
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    sent = _calls(store)
    # the class not given: one HEAD learns it (S3 would make the copy STANDARD)
    assert store.copy("runs/a/model.pt", store, "keep/model.pt", size=before["ContentLength"]).ok
    assert sent == ["HeadObject", "CopyObject"]
    assert state(s3_client, s3_bucket, "keep/model.pt") == before
    sent.clear()
    # a class given: the HEAD still comes first (the copy names the object's encryption)
    assert store.copy("runs/a/model.pt", store, "ia/model.pt", "STANDARD_IA", size=2500).ok
    assert sent == ["HeadObject", "CopyObject"]
    assert state(s3_client, s3_bucket, "ia/model.pt") == before | {"StorageClass": "STANDARD_IA"}


def test_the_managed_multipart_copy_keeps_headers_and_tags(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    size = 5 * 1024**2 + 1
    s3_client.put_object(
        Bucket=s3_bucket,
        Key="big.bin",
        Body=b"b" * size,
        Metadata={"m": "1"},
        Tagging="team=vision",
        **HEADERS,
    )
    before = state(s3_client, s3_bucket, "big.bin")
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server, multipart_threshold=5 * 1024**2)
    store.copy_object_max_bytes = 5 * 1024**2  # (5 GiB in S3: too large for a test)
    sent = _calls(store)
    assert store.copy("big.bin", store, "copy/big.bin", storage_class="STANDARD_IA").ok
    assert "UploadPartCopy" in sent
    after = state(s3_client, s3_bucket, "copy/big.bin")
    assert {k: after[k] for k in (*HEADERS, "Metadata", "Tags", "Body")} == {
        k: before[k] for k in (*HEADERS, "Metadata", "Tags", "Body")
    }
    assert after["StorageClass"] == "STANDARD_IA"


def test_a_copy_to_and_from_local_disk_still_streams_the_bytes(
    moto_server: str, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    put(s3_client, s3_bucket, "runs/a/model.pt", "GLACIER_IR")
    body = state(s3_client, s3_bucket, "runs/a/model.pt")["Body"]
    s3 = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    local = open_store(str(tmp_path))
    assert s3.copy("runs/a/model.pt", local, "q/model.pt").ok
    assert (tmp_path / "q" / "model.pt").read_bytes() == body
    result = local.copy("q/model.pt", s3, "back/model.pt")
    assert result.ok, result.error
    assert s3_client.get_object(Bucket=s3_bucket, Key="back/model.pt")["Body"].read() == body


def test_a_quarantine_in_another_bucket_is_purged_on_its_roots_endpoint(
    tmp_path: Path,
    moto_server: str,
    second_endpoint: str,
    s3_client: Any,
    s3_bucket: str,
    local_only: list[str],
) -> None:
    """Roots on two endpoints share no settings a quarantine in a bucket of its own could
    borrow: a later run's purge (and an interrupted apply's check of its copies) must
    open it with the endpoint of the root whose copies it holds, not the defaults."""
    other, second = new_bucket(s3_client), new_bucket(s3_client)
    keys = residue_tree(s3_client, s3_bucket)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage:
  - {{name: a, url: 's3://{s3_bucket}/', endpoint_url: '{moto_server}'}}
  - {{name: b, url: 's3://{second}/', endpoint_url: '{second_endpoint}'}}
approval: {{require_for: []}}
safety: {{max_delete_fraction: 1}}
apply: {{quarantine_url: 's3://{other}/q/'}}
rules:
  - {{name: residue, select: {{kind: residue}}, expire: {{after: 2d}}}}
"""
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    assert {r["outcome"] for r in json.loads(setup.apply(doc["plan_id"]).stdout)["results"]} == {
        "ok"
    }
    fresh = StoreOpener(
        [
            StoreSettings(f"s3://{s3_bucket}/", endpoint_url=moto_server),
            StoreSettings(f"s3://{second}/", endpoint_url=second_endpoint),
        ]
    )
    purged = purge_a_month_later(setup, fresh)
    assert (purged.purged, purged.failed) == (len(keys), 0), purged.errors
    assert not s3_client.list_objects_v2(Bucket=other).get("Contents")
    assert local_only == []


def test_a_managed_copy_onto_itself_keeps_its_tags(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """A transition of an object over 5 GiB (the managed multipart copy onto its own
    key) lost every tag: s3transfer reads the source's tags once the copy has replaced
    it, finds none and puts none back. The tags are read before and put back after."""
    size = 5 * 1024**2 + 1
    s3_client.put_object(
        Bucket=s3_bucket, Key="big.bin", Body=b"b" * size, Tagging="cost-center=42&legal=keep"
    )
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server, multipart_threshold=5 * 1024**2)
    store.copy_object_max_bytes = 5 * 1024**2  # (5 GiB in S3: too large for a test)
    sent = _calls(store)
    result = store.copy("big.bin", store, "big.bin", storage_class="STANDARD_IA")
    assert result.ok, result.error
    assert "UploadPartCopy" in sent
    after = state(s3_client, s3_bucket, "big.bin")
    assert after["StorageClass"] == "STANDARD_IA"
    assert after["Tags"] == {"cost-center": "42", "legal": "keep"}
