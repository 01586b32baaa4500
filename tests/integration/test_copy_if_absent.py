"""A restore's copy back never writes over an object written at the key since it looked.

Restore checks that a removed object's key is empty, then copies the quarantine copy
back. A run that saves a new checkpoint under the old name in between had its new file
replaced by the old one. The copy back is now a write that refuses to replace
(`Store.copy(if_absent=True)`): on local disk a hard link into place (which never
replaces a file), in one S3 CopyObject `If-None-Match: *` (S3 answers PreconditionFailed;
moto ignores the header, so what is sent is checked), and in the managed copy and uploads,
which cannot send it, a HEAD right before. Local disk, moto over HTTP, a real SQLite
catalog.
"""

from __future__ import annotations

import errno
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from governance.apply import StoreOpener, restore_plan
from governance.storage.base import KeyResult
from governance.storage.errors import KeyOccupiedError
from governance.storage.fs import FsspecStore
from governance.storage.s3 import S3Store
from tests.integration.test_apply_local import build
from tests.integration.test_apply_support import snapshot

NEW = b"a new checkpoint, saved under the old name"


# --------------------------------------------------------------------------- local disk


def _two_stores(tmp_path: Path) -> tuple[FsspecStore, FsspecStore, Path, Path]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a").mkdir(parents=True)
    (src / "a" / "w.pt").write_bytes(b"old weights")
    dst.mkdir()
    return FsspecStore(src.as_uri() + "/"), FsspecStore(dst.as_uri() + "/"), src, dst


@pytest.mark.parametrize("moving", [False, True])
def test_a_local_copy_if_absent_leaves_an_object_at_the_key(tmp_path: Path, moving: bool) -> None:
    source, dest, src, dst = _two_stores(tmp_path)
    (dst / "a").mkdir()
    (dst / "a" / "w.pt").write_bytes(NEW)

    result = source.copy("a/w.pt", dest, "a/w.pt", moving=moving, if_absent=True)

    assert not result.ok
    assert (
        result.error
        == f"{dest.uri('a/w.pt')} holds an object written since it was checked: left as it is"
    )
    assert (dst / "a" / "w.pt").read_bytes() == NEW
    assert sorted(p.name for p in (dst / "a").iterdir()) == ["w.pt"]  # no temporary left
    assert os.stat(src / "a" / "w.pt").st_nlink == 1  # the source shares its bytes with nothing
    # without `if_absent` a copy replaces, as an archive's or a quarantine's does
    assert source.copy("a/w.pt", dest, "a/w.pt", moving=moving).ok
    assert (dst / "a" / "w.pt").read_bytes() == b"old weights"


def test_a_local_copy_if_absent_writes_where_the_key_is_empty(tmp_path: Path) -> None:
    source, dest, _, dst = _two_stores(tmp_path)
    result = source.copy("a/w.pt", dest, "b/w.pt", moving=True, if_absent=True)
    assert result.ok, result.error
    assert (dst / "b" / "w.pt").read_bytes() == b"old weights"
    assert result.etag == f"mtime:{os.stat(dst / 'b' / 'w.pt').st_mtime_ns}"


def test_a_local_upload_if_absent_leaves_an_object_at_the_key(tmp_path: Path) -> None:
    _, dest, _, dst = _two_stores(tmp_path)
    (dst / "x.bin").write_bytes(NEW)
    with pytest.raises(KeyOccupiedError, match="holds an object written since it was checked"):
        dest.put_stream("x.bin", io.BytesIO(b"old"), if_absent=True)
    assert (dst / "x.bin").read_bytes() == NEW
    assert [p.name for p in dst.iterdir()] == ["x.bin"]
    dest.put_stream("y.bin", io.BytesIO(b"old"), if_absent=True)
    assert (dst / "y.bin").read_bytes() == b"old"


def test_without_hard_links_a_copy_if_absent_still_refuses_an_object_at_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that cannot link (FAT, some network mounts: `link` answers EPERM)
    falls back to a look and a rename: an object there is still left as it is."""
    source, dest, _, dst = _two_stores(tmp_path)

    def no_links(*_: Any, **__: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    (dst / "a").mkdir()
    (dst / "a" / "w.pt").write_bytes(NEW)
    assert not source.copy("a/w.pt", dest, "a/w.pt", moving=True, if_absent=True).ok
    assert (dst / "a" / "w.pt").read_bytes() == NEW
    assert source.copy("a/w.pt", dest, "b/w.pt", moving=True, if_absent=True).ok
    assert (dst / "b" / "w.pt").read_bytes() == b"old weights"


def test_a_file_saved_at_the_last_moment_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final step itself refuses: a run that saves under the key just before the copy
    is put in place (after every look) keeps its file. A look followed by a rename would
    replace it."""
    source, dest, _, dst = _two_stores(tmp_path)
    target = dst / "a" / "w.pt"

    def saving_first(real: Any) -> Any:
        def call(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
            if Path(b) == target and not target.exists():
                target.write_bytes(NEW)  # a run saves under the key right now
            return real(a, b, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "replace", saving_first(os.replace))
    monkeypatch.setattr(os, "link", saving_first(os.link))
    result = source.copy("a/w.pt", dest, "a/w.pt", moving=True, if_absent=True)
    assert not result.ok
    assert target.read_bytes() == NEW


def test_a_link_or_folder_at_the_key_is_named_for_what_it_is(tmp_path: Path) -> None:
    """A listing counts neither as an object, so restore's look found the key free; they
    were there all along, and the refusal says what they are."""
    source, dest, _, dst = _two_stores(tmp_path)
    (dst / "a").mkdir()
    (dst / "a" / "w.pt").symlink_to(dst / "nowhere")
    (dst / "b" / "w.pt").mkdir(parents=True)
    linked = source.copy("a/w.pt", dest, "a/w.pt", moving=True, if_absent=True)
    assert linked.error == f"{dest.uri('a/w.pt')} is a symbolic link, not an object: left as it is"
    folder = source.copy("a/w.pt", dest, "b/w.pt", moving=True, if_absent=True)
    assert folder.error == f"{dest.uri('b/w.pt')} is a folder, not an object: left as it is"
    assert (dst / "a" / "w.pt").is_symlink()
    assert (dst / "b" / "w.pt").is_dir()


def test_on_an_object_store_filesystem_a_folder_of_the_key_s_name_leaves_it_free() -> None:
    """Keys `runs/model` and `runs/model/x` coexist on an object store: `head` counts the
    first free, and so does the write (fsspec's `exists` said taken, for good)."""
    store = FsspecStore("memory://if-absent/")
    store.put_stream("runs/model/x", io.BytesIO(b"x"))
    store.put_stream("q/w.pt", io.BytesIO(b"old"))
    assert store.head(["runs/model"]) == {}
    result = store.copy("q/w.pt", store, "runs/model", if_absent=True)
    assert result.ok, result.error
    store.put_stream("runs/w.pt", io.BytesIO(NEW))  # a key that holds an object is taken
    taken = store.copy("q/w.pt", store, "runs/w.pt", if_absent=True)
    words = "holds an object written since it was checked: left as it is"
    assert taken.error == f"{store.uri('runs/w.pt')} {words}"
    assert store.head(["runs/w.pt"])["runs/w.pt"].size == len(NEW)


class _SavesFirst:
    """The quarantine's real store; as its copy back of `key` begins, a training run saves
    a new file under that key (after restore's check, before its write)."""

    def __init__(self, real: Any, path: Path, key: str) -> None:
        self._real, self._path, self._key = real, path, key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def copy(self, key: str, dest: Any, dest_key: str, *args: Any, **kwargs: Any) -> KeyResult:
        if dest_key == self._key:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._path.write_bytes(NEW)
        return self._real.copy(key, dest, dest_key, *args, **kwargs)


def test_a_restore_never_writes_over_a_file_saved_after_its_check(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    before = snapshot(storage)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    root = storage.as_uri() + "/"
    deleted = next(a for a in doc["actions"] if a["action"] == "delete")
    uri = next(o["uri"] for o in deleted["objects"] if o["uri"].endswith(".safetensors"))
    key = uri[len(root) :]
    opener = StoreOpener()

    def stores(url: str) -> Any:
        real = opener(url)
        return real if url == root else _SavesFirst(real, storage / key, key)

    engine = setup.engine()
    try:
        report = restore_plan(
            engine, doc["plan_id"], actor="ops", now=datetime.now(UTC), stores=stores
        )
    finally:
        engine.dispose()

    [failed] = [o for o in report.objects if not o.ok]
    assert failed.uri == uri
    assert "holds an object written since it was checked: left as it is" in (failed.error or "")
    assert (storage / key).read_bytes() == NEW  # the run's new file stays
    assert report.restored == len(report.objects) - 1 == 22  # every other one
    after = snapshot(storage)
    assert {k: v for k, v in after.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    # the removed object stays in quarantine, for a restore once the key is free again
    (storage / key).unlink()
    again = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert (again["restored"], again["failed"]) == (1, 0)
    assert snapshot(storage) == before


# --------------------------------------------------------------------------- S3 (moto)


def _s3(moto_server: str, bucket: str, prefix: str) -> S3Store:
    return S3Store(f"s3://{bucket}/{prefix}", endpoint_url=moto_server)


def test_one_copy_object_sends_if_none_match_only_when_asked(
    moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="q/w.pt", Body=b"old weights")
    quarantine, root = _s3(moto_server, s3_bucket, "q/"), _s3(moto_server, s3_bucket, "runs/")
    sent: list[dict[str, Any]] = []
    root._client.meta.events.register(
        "before-call.s3.CopyObject", lambda params, **_: sent.append(dict(params))
    )
    assert quarantine.copy("w.pt", root, "a/w.pt", if_absent=True).ok
    assert quarantine.copy("w.pt", root, "b/w.pt").ok
    assert [p.get("headers", {}).get("If-None-Match") for p in sent] == ["*", None]
    body = s3_client.get_object(Bucket=s3_bucket, Key="runs/a/w.pt")["Body"].read()
    assert body == b"old weights"


def test_an_endpoint_that_ignores_the_header_is_still_looked_at_first(
    moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    """moto, like some S3-compatible stores, ignores `If-None-Match` on CopyObject: the
    HEAD before it finds the object, and nothing is copied."""
    s3_client.put_object(Bucket=s3_bucket, Key="q/w.pt", Body=b"old weights")
    s3_client.put_object(Bucket=s3_bucket, Key="runs/a/w.pt", Body=NEW)
    quarantine, root = _s3(moto_server, s3_bucket, "q/"), _s3(moto_server, s3_bucket, "runs/")
    result = quarantine.copy("w.pt", root, "a/w.pt", moving=True, if_absent=True)
    assert result.error == (
        f"s3://{s3_bucket}/runs/a/w.pt holds an object written since it was checked: left as it is"
    )
    assert s3_client.get_object(Bucket=s3_bucket, Key="runs/a/w.pt")["Body"].read() == NEW


def _s3_refuses_the_copy(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
    """S3's answer to a CopyObject whose condition does not hold, which moto never gives
    (it ignores `If-None-Match` and `x-amz-copy-source-if-match` on a copy): given in
    place of sending the request (a `before-call` handler's answer is the call's)."""
    error = {
        "Code": "PreconditionFailed",
        "Message": "At least one of the pre-conditions you specified did not hold",
    }
    return AWSResponse("http://s3", 412, {}, None), {
        "Error": error,
        "ResponseMetadata": {"HTTPStatusCode": 412},
    }


@pytest.mark.parametrize("written", [True, False])
def test_a_refused_copy_object_is_named_by_what_is_at_the_key(
    moto_server: str, s3_bucket: str, s3_client: Any, written: bool
) -> None:
    """S3 answers PreconditionFailed to both conditions a copy back sends: the source is
    not the object seen (CopySourceIfMatch), the key holds an object (If-None-Match).
    Only an object at the key then makes it "an object written since it was checked":
    in one case a run saves under the key as the copy is sent."""
    s3_client.put_object(Bucket=s3_bucket, Key="q/w.pt", Body=b"old weights")
    quarantine, root = _s3(moto_server, s3_bucket, "q/"), _s3(moto_server, s3_bucket, "runs/")

    def meanwhile(**kwargs: Any) -> tuple[AWSResponse, dict[str, Any]]:
        if written:
            s3_client.put_object(Bucket=s3_bucket, Key="runs/a/w.pt", Body=NEW)
        return _s3_refuses_the_copy(**kwargs)

    root._client.meta.events.register("before-call.s3.CopyObject", meanwhile)
    result = quarantine.copy("w.pt", root, "a/w.pt", moving=True, if_absent=True)
    assert not result.ok
    if written:
        assert result.error == (
            f"s3://{s3_bucket}/runs/a/w.pt holds an object written since it was checked: "
            "left as it is"
        )
        assert s3_client.get_object(Bucket=s3_bucket, Key="runs/a/w.pt")["Body"].read() == NEW
    else:
        assert "PreconditionFailed" in (result.error or "")
        assert "holds an object" not in (result.error or "")
        assert "Contents" not in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="runs/")


def test_the_managed_copy_if_absent_leaves_an_object_at_the_key(
    moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    """Above CopyObject's limit (5 GiB; 1 KiB here) the managed copy cannot send the
    header: a HEAD right before finds the object, and nothing is copied."""
    s3_client.put_object(Bucket=s3_bucket, Key="q/w.pt", Body=b"old weights" * 200)
    s3_client.put_object(Bucket=s3_bucket, Key="runs/a/w.pt", Body=NEW)
    quarantine, root = _s3(moto_server, s3_bucket, "q/"), _s3(moto_server, s3_bucket, "runs/")
    quarantine.copy_object_max_bytes = 1024
    calls: list[str] = []
    root._client.meta.events.register(
        "before-call.s3.*", lambda model, **_: calls.append(model.name)
    )
    result = quarantine.copy("w.pt", root, "a/w.pt", moving=True, if_absent=True)
    assert not result.ok
    assert (
        result.error
        == f"s3://{s3_bucket}/runs/a/w.pt holds an object written since it was checked: left as it is"
    )
    assert s3_client.get_object(Bucket=s3_bucket, Key="runs/a/w.pt")["Body"].read() == NEW
    assert not {"CopyObject", "UploadPartCopy", "CreateMultipartUpload"} & set(calls)
    # to an empty key it copies
    assert quarantine.copy("w.pt", root, "b/w.pt", if_absent=True).ok
    body = s3_client.get_object(Bucket=s3_bucket, Key="runs/b/w.pt")["Body"].read()
    assert body == b"old weights" * 200


def test_a_streamed_copy_if_absent_leaves_an_object_at_the_key(
    tmp_path: Path, moto_server: str, s3_bucket: str, s3_client: Any
) -> None:
    """From local disk to S3 and from S3 to local disk (a quarantine elsewhere)."""
    local = tmp_path / "q"
    local.mkdir()
    (local / "w.pt").write_bytes(b"old weights")
    disk = FsspecStore(local.as_uri() + "/")
    root = _s3(moto_server, s3_bucket, "runs/")
    s3_client.put_object(Bucket=s3_bucket, Key="runs/a/w.pt", Body=NEW)
    assert not disk.copy("w.pt", root, "a/w.pt", if_absent=True).ok
    assert s3_client.get_object(Bucket=s3_bucket, Key="runs/a/w.pt")["Body"].read() == NEW

    (local / "taken.pt").write_bytes(NEW)
    result = root.copy("a/w.pt", disk, "taken.pt", if_absent=True)
    assert not result.ok
    assert "holds an object written since it was checked" in (result.error or "")
    assert (local / "taken.pt").read_bytes() == NEW
    assert root.copy("a/w.pt", disk, "free.pt", if_absent=True).ok
    assert (local / "free.pt").read_bytes() == NEW
