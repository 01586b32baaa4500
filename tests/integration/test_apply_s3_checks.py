"""What apply's checks find on S3 (moto over HTTP): an object added to a folder a delete
removes whole, seen from the listings the check makes anyway; a read that fails is a
failure, not a skip; a dry run says what an interrupted apply already did is done.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from governance.apply import StoreOpener, StoreSettings, apply_plan
from governance.errors import AccessDeniedError
from governance.storage.s3 import S3Store
from tests.integration.test_apply_s3 import (
    RUN,
    DiesAfterCopy,
    live,
    make_setup,
    protect_by_tag,
    upload_tree,
)

NEW = (f"{RUN}checkpoint-1000/NOTES.md", f"{RUN}checkpoint-1000/zz/extra.bin")
"""Written into the deleted checkpoint after planning: before its first key and after its
last (a listing from just before the first planned key to the last would see neither)."""


def _apply(setup: Any, plan_id: str, opener: StoreOpener) -> Any:
    engine = setup.engine()
    try:
        return apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    finally:
        engine.dispose()


@pytest.mark.parametrize("versioned", [False, True])
def test_objects_added_to_a_deleted_folder_make_the_delete_stale_without_extra_requests(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, versioned: bool
) -> None:
    """Without versioning, the range listing that checks the batch saw the folder whole:
    not one request more than it makes anyway, and no HEAD but the one before each
    copy (see `S3Store.copy`). With versioning (HEADs), one listing of the
    folder. Besides, the root's own check: one 1-key listing before any action."""
    if versioned:
        s3_client.put_bucket_versioning(
            Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"}
        )
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    for key in (*NEW, f"{RUN}checkpoint-1500/NOTES.md"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"written after planning")
    before = live(s3_bucket)
    root = f"s3://{s3_bucket}/"
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    sent: list[str] = []
    opener(root)._client.meta.events.register(  # type: ignore[attr-defined]
        "before-call.s3.*", lambda model, **_: sent.append(model.name)
    )
    report = _apply(setup, doc["plan_id"], opener)
    by_path = {r.artifact_uri[len(root) :]: r for r in report.results}
    stale = by_path[f"{RUN}checkpoint-1000/"]
    assert stale.reason == (
        f"stale: unplanned objects {NEW[0]}, {NEW[1]} in the artifact (written, restored or listed anew) since the plan was made"
    )
    assert by_path[f"{RUN}checkpoint-1500/"].outcome.value == "ok"  # a strip: not affected
    after = live(s3_bucket)
    assert {k: v for k, v in after.items() if "checkpoint-1000/" in k} == {
        k: v for k, v in before.items() if "checkpoint-1000/" in k
    }
    # (the first listing is the root's check before any action: one key, once an apply)
    if versioned:
        assert sent.count("ListObjectsV2") == 2  # and the folder's one listing
    else:
        assert sent.count("ListObjectsV2") == 2  # and the batch's range listing, nothing more
        copies = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix=".govern-quarantine/")
        # one HEAD a copy: the quarantine copies (by the quarantine's client) and the
        # log's transition in place (a CopyObject of this one)
        assert sent.count("HeadObject") == len(copies["Contents"]) + sent.count("CopyObject")


def test_tags_that_cannot_be_read_fail_the_action_and_the_next_apply_retries_it(
    tmp_path: Path,
    moto_server: str,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not being able to check is no intended skip: the action fails (exit 1, the plan
    partially applied, the execution too), and a later apply that can read acts on it."""
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    protect_by_tag(setup)
    doc = setup.plan()
    real = S3Store.object_tags

    def denied(self: S3Store, key: str) -> dict[str, str]:
        if key == "scratch/upload.tmp":
            raise AccessDeniedError(self.url, f"{key}: GetObjectTagging denied")
        return real(self, key)

    monkeypatch.setattr(S3Store, "object_tags", denied)
    result = setup.apply(doc["plan_id"], code=1)
    report = json.loads(result.stdout)
    [failed] = [r for r in report["results"] if r["artifact_uri"].endswith("scratch/upload.tmp")]
    assert (failed["outcome"], failed["final"]) == ("failed", False)
    assert failed["reason"].startswith("tags of scratch/upload.tmp cannot be read (")
    assert f"1 action failed; plan {doc['plan_id']} is partially_applied" in result.stderr
    assert [e["status"] for e in report["executions"]] == ["partially_applied"]
    assert "scratch/upload.tmp" in live(s3_bucket)

    monkeypatch.setattr(S3Store, "object_tags", real)
    again = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert [(r["artifact_uri"], r["outcome"]) for r in again["results"]] == [
        (failed["artifact_uri"], "ok")
    ]
    assert again["plan_status"] == "applied"
    assert "scratch/upload.tmp" not in live(s3_bucket)


def test_a_dry_run_reports_what_an_interrupted_apply_did_as_done(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """The killed apply moved the log to STANDARD_IA and the stale upload was aborted, but
    nothing was recorded: a dry run says both are done, not that it would transition 0
    objects and abort an upload that is gone; the real apply then records them."""
    upload_tree(s3_bucket)
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="scratch/big.bin")
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    kinds = {a["action"]: a["id"] for a in doc["actions"]}
    root = f"s3://{s3_bucket}/"
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    dying = DiesAfterCopy(opener(root))
    with pytest.raises(KeyboardInterrupt):
        _apply(setup, doc["plan_id"], lambda url: dying)  # type: ignore[arg-type]
    s3_client.abort_multipart_upload(
        Bucket=s3_bucket, Key="scratch/big.bin", UploadId=upload["UploadId"]
    )

    dry = json.loads(setup.apply(doc["plan_id"], "--dry-run").stdout)
    by_id = {r["action_id"]: r for r in dry["results"]}
    moved, aborted = by_id[kinds["transition"]], by_id[kinds["abort_upload"]]
    assert (moved["outcome"], aborted["outcome"]) == ("ok", "ok")
    assert moved["reason"] == (
        "done already: 1 object in STANDARD_IA (copied by an interrupted apply); nothing left to do"
    )
    assert aborted["reason"].startswith("done already: 1 incomplete upload gone")
    assert not [r for r in dry["results"] if " 0 objects" in r["reason"]]
    assert {r["outcome"] for r in dry["results"]} == {"ok", "would_apply"}

    real = json.loads(setup.apply(doc["plan_id"]).stdout)
    by_id = {r["action_id"]: r for r in real["results"]}
    assert by_id[kinds["abort_upload"]]["reason"].startswith("1 incomplete upload gone already")
    assert real["plan_status"] == "applied"


def test_an_upload_still_there_is_aborted(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="scratch/big.bin")
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    dry = json.loads(setup.apply(doc["plan_id"], "--dry-run").stdout)
    [would] = [r for r in dry["results"] if r["action"] == "abort_upload"]
    assert (would["outcome"], would["reason"]) == (
        "would_apply",
        "would abort_upload 1 incomplete upload",
    )
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    [done] = [r for r in report["results"] if r["action"] == "abort_upload"]
    assert done["reason"] == "1 incomplete upload aborted"
    assert s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []
