"""`govern restore` on S3 checks a quarantine copy's content, not only its size.

Apply records each quarantine copy's own ETag as it makes it (from the copy's answer),
and restore compares it with the HEAD it makes anyway (no object is read). A quarantine
copy replaced since by other bytes of the same size is refused by the dry run and the
restore alike: exit code 1, nothing written at the original key, the replacement left in
quarantine, the object still `removed` in the journal. The untouched copies beside it
come back, and so does the refused one once its own bytes are put back.

moto's server over real HTTP, with a single-part and a multipart original (whose
quarantine copy, made by CopyObject, does not keep the original's ETag); a real SQLite
catalog; the CLI.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from governance.apply import StoreOpener, StoreSettings, modes
from governance.errors import GovernanceError
from tests.integration.test_apply_support import NO_APPROVAL, Setup
from tests.integration.test_restore_damaged_copy import _answers, _applied, _states

OLD = datetime.now(UTC) - timedelta(days=400)
MiB = 2**20

S3_POLICY = """version: 1
storage:
  - name: r
    url: s3://{bucket}/
    endpoint_url: {endpoint}
rules:
  - {{name: logs, select: {{kind: log}}, expire: {{after: 30d}}}}
{approval}safety: {{max_delete_fraction: 1.0}}
"""


def _assert_refused(
    setup: Setup, plan_id: str, uri: str, held_uri: str, total: int
) -> tuple[bool, str | None]:
    """The dry run and the restore both fail `uri` (and only it) as damaged, naming its
    quarantine copy; returns its answer."""
    dry = json.loads(setup.restore(plan_id, "--dry-run", code=1).stdout)
    assert (dry["would_restore"], dry["failed"]) == (total - 1, 1)
    ok, error = _answers(dry)[uri]
    assert not ok
    assert error is not None
    assert "quarantine copy damaged, not copied back" in error
    assert held_uri in error  # where to look
    assert "was written after apply" in error
    real = json.loads(setup.restore(plan_id, code=1).stdout)
    assert (real["restored"], real["failed"]) == (total - 1, 1)
    assert _answers(real) == _answers(dry)  # the same checks, the same failure
    return ok, error


# ------------------------------------------------------------------------------- S3


def _s3_put_old(s3_client: Any, bucket: str, key: str, data: bytes, *, multipart: bool) -> None:
    """Upload over HTTP (as one PUT, or as a multipart upload of 5 MiB parts), then date
    the object back in moto's backend so that the policy expires it."""
    if multipart:
        upload = s3_client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        parts = []
        for number, start in enumerate(range(0, len(data), 5 * MiB), 1):
            made = s3_client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload,
                PartNumber=number,
                Body=data[start : start + 5 * MiB],
            )
            parts.append({"ETag": made["ETag"], "PartNumber": number})
        s3_client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
        )
    else:
        s3_client.put_object(Bucket=bucket, Key=key, Body=data)
    stored = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, key)
    stored.last_modified = OLD.replace(tzinfo=None)  # moto keeps naive UTC


def _s3_logs(
    tmp_path: Path, moto_server: str, s3_client: Any, bucket: str
) -> tuple[Setup, dict[str, bytes]]:
    """Three old logs the policy expires (each its own artifact): two single-part ones of
    one size, and a multipart one (its ETag `<md5>-2`)."""
    blobs = {
        "logs/a.log": os.urandom(3000),
        "logs/b.log": os.urandom(3000),
        "logs/big.log": os.urandom(5 * MiB + 1000),
    }
    for key, data in blobs.items():
        _s3_put_old(s3_client, bucket, key, data, multipart=key == "logs/big.log")
    assert s3_client.head_object(Bucket=bucket, Key="logs/big.log")["ETag"].endswith('-2"')
    policy = tmp_path / "policy.yaml"
    policy.write_text(S3_POLICY.format(bucket=bucket, endpoint=moto_server, approval=NO_APPROVAL))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), blobs


def _body(s3_client: Any, bucket: str, key: str) -> bytes | None:
    try:
        data: bytes = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3_client.exceptions.NoSuchKey:
        return None
    return data


@pytest.mark.parametrize("key", ["logs/a.log", "logs/big.log"], ids=["single-part", "multipart"])
def test_s3_a_same_size_replacement_of_a_quarantine_copy_is_refused(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, key: str
) -> None:
    setup, blobs = _s3_logs(tmp_path, moto_server, s3_client, s3_bucket)
    plan_id = _applied(setup)
    held = f".govern-quarantine/{plan_id}/{s3_bucket}/{key}"
    assert _body(s3_client, s3_bucket, held) == blobs[key]
    assert _body(s3_client, s3_bucket, key) is None

    # someone writes other bytes of the same size over the quarantine copy (over HTTP)
    other = os.urandom(len(blobs[key]))
    s3_client.put_object(Bucket=s3_bucket, Key=held, Body=other)
    uri, held_uri = f"s3://{s3_bucket}/{key}", f"s3://{s3_bucket}/{held}"

    _, error = _assert_refused(setup, plan_id, uri, held_uri, total=len(blobs))
    assert "ETag" in (error or "")
    assert _body(s3_client, s3_bucket, key) is None  # nothing written at the original key
    assert _body(s3_client, s3_bucket, held) == other  # the evidence stays in quarantine
    for k in blobs.keys() - {key}:  # the untouched copies came back, byte for byte
        assert _body(s3_client, s3_bucket, k) == blobs[k]
    states = _states(setup, plan_id)
    assert states.pop(key) == "removed"
    assert set(states.values()) == {"restored"}

    # the next restore says the same (not "an object exists at the original key again")
    again = json.loads(setup.restore(plan_id, code=1).stdout)
    assert _answers(again) == {uri: (False, error)}

    # the object's own bytes put back in quarantine: the same content, the same ETag
    s3_client.put_object(Bucket=s3_bucket, Key=held, Body=blobs[key])
    last = json.loads(setup.restore(plan_id).stdout)
    assert (last["restored"], last["failed"]) == (1, 0)
    assert _body(s3_client, s3_bucket, key) == blobs[key]
    assert _states(setup, plan_id)[key] == "restored"


def test_s3_a_quarantine_copy_swapped_for_another_of_the_same_size_is_refused(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """One quarantine copy copied over another of the same size (server-side, metadata
    and all): both are genuine copies apply made, but not of the same object."""
    setup, blobs = _s3_logs(tmp_path, moto_server, s3_client, s3_bucket)
    plan_id = _applied(setup)
    q = f".govern-quarantine/{plan_id}/{s3_bucket}/"
    s3_client.copy_object(
        CopySource={"Bucket": s3_bucket, "Key": q + "logs/b.log"},
        Bucket=s3_bucket,
        Key=q + "logs/a.log",
    )
    uri, held_uri = f"s3://{s3_bucket}/logs/a.log", f"s3://{s3_bucket}/{q}logs/a.log"
    _assert_refused(setup, plan_id, uri, held_uri, total=len(blobs))
    assert _body(s3_client, s3_bucket, "logs/a.log") is None
    assert _body(s3_client, s3_bucket, "logs/b.log") == blobs["logs/b.log"]
    assert _body(s3_client, s3_bucket, q + "logs/a.log") == blobs["logs/b.log"]


def test_s3_a_copy_whose_etag_is_unknown_fails_its_action_and_deletes_nothing(
    moto_server: str, s3_client: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the copy's ETag restore could not tell it from another: the action fails
    as a failed copy does, its copies made are removed again, the sources stay."""
    root, quarantine = f"s3://{s3_bucket}/", f"s3://{s3_bucket}/.q/"
    blobs = {"a/one.bin": os.urandom(100), "a/two.bin": os.urandom(100)}
    for key, data in blobs.items():
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=data)
    told = {"calls": 0}

    def unknown(dest: Any, key: str, copied: Any) -> str:
        told["calls"] += 1
        if key.endswith("two.bin"):
            raise GovernanceError(f"{dest.uri(key)}: its store gives no ETag")
        return str(copied.etag)

    monkeypatch.setattr(modes, "copy_etag", unknown)
    items = [modes.Item(1, root, k, quarantine, f"p/{k}", len(d)) for k, d in blobs.items()]
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    results = modes.remove(items, "quarantine", opener, concurrency=2)
    assert told["calls"] == 2
    assert {r.ok for r in results.values()} == {False}
    assert {r.error for r in results.values()} == {
        f"quarantine copy of a/two.bin failed: made, but its ETag not known: "
        f"{quarantine}p/a/two.bin: its store gives no ETag"
    }
    for key, data in blobs.items():
        assert _body(s3_client, s3_bucket, key) == data
        assert _body(s3_client, s3_bucket, f".q/p/{key}") is None
