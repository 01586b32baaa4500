"""Deletes on S3 are conditional on the ETag the plan saw and the check confirmed.

Apply checks each object right before acting, but a writer may put a new object at the
key between that check and the DeleteObjects request: an unconditional delete would
then remove data no plan ever looked at. S3's conditional delete (the `ETag` of each
DeleteObjects entry) closes that window: the new object stays and the result says why.
moto over real HTTP (`ThreadedMotoServer`), a real SQLite catalog.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import StoreOpener, StoreSettings, apply_plan
from governance.storage import open_store
from governance.storage.s3 import S3Store
from tests.fixtures.builders import residue
from tests.integration.conftest import deny_deletes
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text


def _store(moto_server: str, url: str) -> S3Store:
    store = open_store(url, endpoint_url=moto_server)
    assert isinstance(store, S3Store)
    return store


def _etag(s3_client: Any, bucket: str, key: str) -> str:
    return str(s3_client.head_object(Bucket=bucket, Key=key)["ETag"]).strip('"')


def _old_writer(s3_bucket: str) -> Callable[[str, bytes, datetime], None]:
    """A fixture builder's writer into the bucket, backdating each object (moto's own
    backend: S3 sets the time of a put itself)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    def write(key: str, content: bytes, mtime: datetime) -> None:
        backend.put_object(s3_bucket, key, content).last_modified = mtime.replace(tzinfo=None)

    return write


def _setup(tmp_path: Path, moto_server: str, s3_bucket: str, apply: str = "") -> Setup:
    """A policy over the whole bucket (residue expires), no approval needed, no limits."""
    policy = tmp_path / "policy.yaml"
    extra = f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n"
    if apply:
        extra += f"apply: {{{apply}}}\n"
    policy.write_text(policy_text(f"s3://{s3_bucket}/", endpoint=moto_server, extra=extra))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)


def _quarantine_copies(s3_client: Any, s3_bucket: str) -> list[str]:
    """The keys of the bucket outside the residue's folder (the quarantine's), sorted."""
    listed = s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    return sorted(o["Key"] for o in listed if not o["Key"].startswith("scratch/"))


def test_a_key_written_since_its_etag_was_checked_is_not_deleted(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    for key in ("a.bin", "b.bin"):
        s3_client.put_object(Bucket=s3_bucket, Key=f"runs/{key}", Body=b"old")
    seen = {k: _etag(s3_client, s3_bucket, f"runs/{k}") for k in ("a.bin", "b.bin")}
    s3_client.put_object(Bucket=s3_bucket, Key="runs/b.bin", Body=b"new")  # written since

    store = _store(moto_server, f"s3://{s3_bucket}/runs/")
    results = store.delete(["a.bin", "b.bin"], [seen["a.bin"], seen["b.bin"]])

    assert [r.ok for r in results] == [True, False]
    assert results[1].error == (
        f"s3://{s3_bucket}/runs/b.bin changed since it was checked (its ETag is not "
        f"{seen['b.bin']} any more: PreconditionFailed): not deleted"
    )
    body = s3_client.get_object(Bucket=s3_bucket, Key="runs/b.bin")["Body"].read()
    assert body == b"new"
    assert "Contents" not in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="runs/a.bin")


def test_a_key_gone_since_counts_as_deleted_and_no_etag_means_unconditional(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="x/kept-by-none.bin", Body=b"1")
    s3_client.put_object(Bucket=s3_bucket, Key="x/gone.bin", Body=b"2")
    gone_etag = _etag(s3_client, s3_bucket, "x/gone.bin")
    s3_client.delete_object(Bucket=s3_bucket, Key="x/gone.bin")

    store = _store(moto_server, f"s3://{s3_bucket}/x/")
    results = store.delete(["kept-by-none.bin", "gone.bin"], [None, gone_etag])

    # a missing key is deleted, as an unconditional delete answers (a retried request)
    assert [r.ok for r in results] == [True, True]
    assert "Contents" not in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="x/")


def test_a_conditional_delete_on_a_versioned_bucket_leaves_a_new_version_current(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    s3_client.put_object(Bucket=s3_bucket, Key="v/model.pt", Body=b"old")
    seen = _etag(s3_client, s3_bucket, "v/model.pt")
    s3_client.put_object(Bucket=s3_bucket, Key="v/model.pt", Body=b"newer")

    [result] = _store(moto_server, f"s3://{s3_bucket}/v/").delete(["model.pt"], [seen])

    assert not result.ok
    assert "changed since it was checked" in (result.error or "")
    assert result.version_id is None  # no delete marker was written
    body = s3_client.get_object(Bucket=s3_bucket, Key="v/model.pt")["Body"].read()
    assert body == b"newer"


@pytest.mark.parametrize("code", ["NotImplemented", "MalformedXML"])
def test_an_endpoint_without_conditional_deletes_is_asked_again_without_them(
    moto_server: str, s3_client: Any, s3_bucket: str, caplog: pytest.LogCaptureFixture, code: str
) -> None:
    """An S3-compatible endpoint that answers NotImplemented to the ETag entries gets the
    batch again as a plain delete, once per store, with a warning (stood in for by a
    botocore `before-call` handler: moto implements conditional deletes)."""
    for i in range(3):
        s3_client.put_object(Bucket=s3_bucket, Key=f"n/{i}.bin", Body=b"x")
    store = _store(moto_server, f"s3://{s3_bucket}/n/")
    refused: list[int] = []

    def no_conditions(params: dict[str, Any], **_: Any) -> Any:
        objects = params["body"].decode() if isinstance(params["body"], bytes) else ""
        if "<ETag>" not in objects:
            return None  # sent on to moto
        refused.append(1)
        error = {"Error": {"Code": code, "Message": "no ETag in a Delete entry"}}
        return _Response(501 if code == "NotImplemented" else 400), error

    store._client.meta.events.register("before-call.s3.DeleteObjects", no_conditions)
    etag = _etag(s3_client, s3_bucket, "n/0.bin")

    with caplog.at_level("WARNING", logger="governance.storage.s3"):
        first = store.delete(["0.bin"], [etag])
        second = store.delete(["1.bin", "2.bin"], [etag, etag])

    assert [r.ok for r in first + second] == [True, True, True]
    assert refused == [1]  # the second call went without ETags at once
    assert "Contents" not in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="n/")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "does not implement conditional deletes" in warnings[0]


def test_a_conditional_delete_denied_names_the_permission_it_needs(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="d/a.bin", Body=b"a")
    deny_deletes(s3_client, s3_bucket, "d/*")
    store = _store(moto_server, f"s3://{s3_bucket}/d/")

    [conditional] = store.delete(["a.bin"], [_etag(s3_client, s3_bucket, "d/a.bin")])
    [plain] = store.delete(["a.bin"])

    assert conditional.error == (
        "AccessDenied: Access Denied (check that s3:DeleteObject is allowed on it; a delete "
        "conditional on the object's ETag needs s3:GetObject as well)"
    )
    assert plain.error == "AccessDenied: Access Denied"


def test_a_write_racing_the_delete_is_said_to_have_raced_it(
    moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """S3 answers 409 ConditionalRequestConflict for an entry whose key a write raced
    (stood in for by a `before-call` handler: moto never races)."""
    s3_client.put_object(Bucket=s3_bucket, Key="r/a.bin", Body=b"a")
    store = _store(moto_server, f"s3://{s3_bucket}/r/")
    conflict = {"Code": "ConditionalRequestConflict", "Message": "conflicting operation"}

    def raced(params: dict[str, Any], **_: Any) -> Any:
        return _Response(200), {"Deleted": [], "Errors": [{"Key": "r/a.bin", **conflict}]}

    store._client.meta.events.register("before-call.s3.DeleteObjects", raced)
    [result] = store.delete(["a.bin"], [_etag(s3_client, s3_bucket, "r/a.bin")])

    assert result.error == (
        f"s3://{s3_bucket}/r/a.bin: a write to it raced the delete "
        "(ConditionalRequestConflict): not deleted; plan again to decide on what is there now"
    )


class _Response:
    """What a `before-call` handler answers for botocore: an HTTP status is enough."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


class _WriterBeforeDelete:
    """The root's real store, with a writer putting new content at `key` right before
    the first DeleteObjects request apply sends (after every check and copy)."""

    def __init__(self, real: Any, write: Callable[[], None]) -> None:
        self._real = real
        self._write: Callable[[], None] | None = write

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def delete(self, keys: Any, etags: Any = None) -> Any:
        if self._write is not None:
            self._write, write = None, self._write
            write()
        return self._real.delete(keys, etags)


@pytest.mark.parametrize("mode", ["permanent", "quarantine"])
def test_apply_leaves_an_object_written_between_its_check_and_its_delete(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, mode: str
) -> None:
    write = _old_writer(s3_bucket)
    keys = residue(write, "scratch/a") + residue(write, "scratch/b")
    target = "scratch/a/upload.tmp"
    root = f"s3://{s3_bucket}/"
    setup = _setup(tmp_path, moto_server, s3_bucket, f"delete_mode: {mode}")
    doc = setup.plan()
    assert {o["uri"] for a in doc["actions"] for o in a["objects"]} == {root + k for k in keys}

    opener = StoreOpener([StoreSettings(root, moto_server)])
    size = len(s3_client.get_object(Bucket=s3_bucket, Key=target)["Body"].read())
    new = b"N" * size  # the same size: only the ETag tells it from what the plan saw
    racing = _WriterBeforeDelete(
        opener(root), lambda: s3_client.put_object(Bucket=s3_bucket, Key=target, Body=new)
    )

    def stores(url: str) -> Any:
        return racing if url == root else opener(url)

    engine = setup.engine()
    report = apply_plan(
        engine, doc["plan_id"], actor="ops", now=datetime.now(UTC), stores=stores, yes=True
    )
    engine.dispose()

    by_uri = {r.artifact_uri: r for r in report.results}
    failed = [u for u, r in by_uri.items() if r.outcome.value != "ok"]
    assert failed == [root + target]
    assert "changed since it was checked" in by_uri[root + target].reason
    assert s3_client.get_object(Bucket=s3_bucket, Key=target)["Body"].read() == new
    left = {o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])}
    assert {k for k in left if k.startswith("scratch/")} == {target}
    # the object that stayed is not recorded as removed; the others are
    journal = setup.engine()
    with journal.connect() as conn:
        rows = conn.execute(text("SELECT key, state FROM removed_objects")).all()
    journal.dispose()
    assert {k for k, state in rows if state == "removed"} == set(keys) - {target}
    if mode == "quarantine":  # the failed removal's quarantine copy was taken back
        copies = _quarantine_copies(s3_client, s3_bucket)
        assert len(copies) == len(keys) - 1
        assert not any(k.endswith(target) for k in copies)
        assert json.loads(setup.restore(doc["plan_id"]).stdout)["restored"] == len(keys) - 1
        assert s3_client.get_object(Bucket=s3_bucket, Key=target)["Body"].read() == new


def test_purge_leaves_a_quarantine_copy_that_is_not_the_one_apply_made(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Purging deletes each quarantine copy only while its ETag is the one apply recorded
    (`removed_objects.copy_etag`): something written at that key since is not ours."""
    from datetime import timedelta

    from governance.apply import purge_quarantine

    keys = residue(_old_writer(s3_bucket), "scratch/p")
    root = f"s3://{s3_bucket}/"
    setup = _setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    opener = StoreOpener([StoreSettings(root, moto_server)])
    engine = setup.engine()
    report = apply_plan(engine, doc["plan_id"], actor="ops", now=datetime.now(UTC), stores=opener)
    assert {r.outcome.value for r in report.results} == {"ok"}
    copies = _quarantine_copies(s3_client, s3_bucket)
    assert len(copies) == len(keys)
    s3_client.put_object(Bucket=s3_bucket, Key=copies[0], Body=b"someone else's")

    later = datetime.now(UTC) + timedelta(days=400)
    purged = purge_quarantine(engine, now=later, stores=opener, actor="ops")
    engine.dispose()

    assert (purged.purged, purged.failed) == (len(keys) - 1, 1)
    assert "changed since it was checked" in purged.errors[0]
    left = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])]
    assert left == [copies[0]]


def test_apply_says_which_quarantine_copies_it_could_not_purge(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Purging runs at the start of each apply; a copy it may not delete (written since
    apply made it) stays, and that apply's report says so in a note."""
    import time

    write = _old_writer(s3_bucket)
    keys = residue(write, "scratch/first")
    setup = _setup(tmp_path, moto_server, s3_bucket, "quarantine_for: 1s")
    first = setup.plan()["plan_id"]
    assert json.loads(setup.apply(first).stdout)["purged"] == 0
    copies = _quarantine_copies(s3_client, s3_bucket)
    assert len(copies) == len(keys)
    made = _etag(s3_client, s3_bucket, copies[0])  # as apply recorded it
    s3_client.put_object(Bucket=s3_bucket, Key=copies[0], Body=b"someone else's")
    residue(write, "scratch/second")
    second = setup.plan()["plan_id"]
    time.sleep(1.1)  # the first plan's copies are past quarantine_for

    result = setup.apply(second)

    assert json.loads(result.stdout)["purged"] == len(keys) - 1
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    copy = f"s3://{s3_bucket}/{copies[0]}"
    assert notes == [
        "note: 1 quarantined object past quarantine_for could not be purged and stays in "
        f"quarantine, tried again by the next apply: {copy} changed since it was checked "
        f"(its ETag is not {made} any more: PreconditionFailed): not deleted"
    ]
    assert s3_client.get_object(Bucket=s3_bucket, Key=copies[0])["Body"].read() == b"someone else's"
