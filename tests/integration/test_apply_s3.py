"""`govern apply` / `govern restore` against S3: moto's server over HTTP.

S3 stamps LastModified at upload, so the tree's LastModified is set back in moto's
backend (to the builders' times, else ten days ago): plans are made as of now, as a plan
that may be applied must be (a plan made `--as-of` a future time is a what-if plan).
The tree: one finished HF run (steps 500..2000), a 160 KB log (transitioned to
STANDARD_IA), and residue.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import FakeKey, s3_backends

from governance.apply import StoreOpener, StoreSettings, apply_plan
from tests.fixtures.builders import hf_run, marker, residue
from tests.integration.conftest import deny_deletes
from tests.integration.test_apply_support import (
    NO_APPROVAL,
    Setup,
    actions_by,
    policy_text,
    without_restore_hold,
)

RUN = "runs/a/"
LOG = f"{RUN}logs/train.log"


def upload_tree(bucket: str) -> None:
    """Written straight into moto's backend (fast); everything under test goes over HTTP."""
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    default = datetime.now(UTC) - timedelta(days=10)

    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        if key.endswith((".pt", ".pth", ".bin", ".safetensors")):
            content += key.encode()
        stored = backend.put_object(bucket, key, content)
        stored.last_modified = (mtime or default).astimezone(UTC).replace(tzinfo=None)  # naive

    hf_run(write, RUN, steps=(500, 1000, 1500, 2000))
    marker(write, RUN)
    residue(write, "scratch")
    write(LOG, b"step 1 loss 2.0\n" * 10_000, None)


def contents(bucket: str, prefix: str = "") -> dict[str, bytes]:
    """The current version of every key (read from moto's backend: fast, and exact)."""
    store = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_bucket(bucket).keys
    found = {}
    for key in list(store):
        current = store.get(key)
        if key.startswith(prefix) and isinstance(current, FakeKey):
            found[key] = bytes(current.value)
    return found


def live(bucket: str) -> dict[str, bytes]:
    return {k: v for k, v in contents(bucket).items() if not k.startswith(".govern")}


def make_setup(tmp_path: Path, endpoint: str, bucket: str, extra: str = NO_APPROVAL) -> Setup:
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(f"s3://{bucket}/", endpoint=endpoint, extra=extra))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)


@pytest.fixture
def tree(tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str) -> Setup:
    upload_tree(s3_bucket)
    return make_setup(tmp_path, moto_server, s3_bucket)


def test_quarantine_transition_and_restore(tree: Setup, s3_client: Any, s3_bucket: str) -> None:
    before = live(s3_bucket)
    doc = tree.plan()
    assert actions_by(doc, f"s3://{s3_bucket}/") == {
        f"{RUN}checkpoint-1000/": ["delete"],
        f"{RUN}checkpoint-1500/": ["strip"],
        f"{RUN}checkpoint-500/": ["strip"],
        f"{RUN}logs/train.log": ["transition"],
        "scratch/blob.incomplete": ["delete"],
        "scratch/model.safetensors.partial": ["delete"],
        "scratch/upload.tmp": ["delete"],
    }
    report = json.loads(tree.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    assert report["plan_status"] == "applied"

    after = live(s3_bucket)
    assert not [k for k in after if "checkpoint-1000/" in k]
    assert f"{RUN}checkpoint-500/model.safetensors" in after
    assert f"{RUN}checkpoint-500/optimizer.pt" not in after  # strip: only named components
    assert s3_client.head_object(Bucket=s3_bucket, Key=LOG)["StorageClass"] == "STANDARD_IA"
    assert after[LOG] == before[LOG]
    quarantine = contents(s3_bucket, f".govern-quarantine/{doc['plan_id']}/")
    assert len(quarantine) == 23
    q = f".govern-quarantine/{doc['plan_id']}/{s3_bucket}/"  # the whole path, bucket first
    assert all(v == before[k.removeprefix(q)] for k, v in quarantine.items())

    restored = json.loads(tree.restore(doc["plan_id"]).stdout)
    assert (restored["restored"], restored["failed"]) == (23, 0)
    assert live(s3_bucket) == before  # byte for byte
    assert contents(s3_bucket, ".govern-quarantine/") == {}


def test_restored_objects_keep_their_age_and_an_older_plan_does_not_remove_them_again(
    tree: Setup, s3_bucket: str
) -> None:
    """A restore copies each object back from quarantine: S3 stamps the copy with a new
    LastModified, and the checkpoints looked freshly written (inside `min_age`, a
    finished run's final no longer its newest). The catalog records the content's time,
    so the next plan is the first one again. And a plan made before the restore, whose
    preconditions the restored copies match, must not remove them again."""
    without_restore_hold(tree.policy)  # (the plan after the restore decides anew)
    first = tree.plan()
    older = tree.plan()  # made before the restore: same content, never applied
    assert older["fingerprint"] == first["fingerprint"]
    tree.apply(first["plan_id"])
    tree.plan()  # its scan marks the removed objects gone in the catalog
    before_restore = json.loads(tree.restore(first["plan_id"]).stdout)
    assert before_restore["failed"] == 0

    again = tree.plan()  # scans first: the restored objects are listed with new times
    base = f"s3://{s3_bucket}/"
    expected = actions_by(first, base)
    assert expected.pop(LOG) == ["transition"]  # done, and a restore does not undo it
    assert actions_by(again, base) == expected

    report = json.loads(tree.apply(older["plan_id"], code=3).stdout)  # stale: re-plan
    removing = {"delete", "strip"}
    skipped = [r for r in report["results"] if r["action"] in removing]
    assert skipped
    for r in skipped:
        assert r["outcome"] == "skipped", r
        assert r["reason"].startswith("stale: ")
        assert "restored since the plan was made (govern restore)" in r["reason"]
    assert contents(s3_bucket, ".govern-quarantine/") == {}  # nothing quarantined again
    assert f"{RUN}checkpoint-1000/model.safetensors" in live(s3_bucket)


def test_versioned_mode_deletes_and_restores_by_marker(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_tree(s3_bucket)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    before = live(s3_bucket)
    doc = setup.plan()
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    after = live(s3_bucket)
    assert not [k for k in after if "checkpoint-1000/" in k]
    versions = s3_client.list_object_versions(Bucket=s3_bucket, Prefix=f"{RUN}checkpoint-1000/")
    assert len(versions["DeleteMarkers"]) == 12
    assert contents(s3_bucket, ".govern-quarantine/") == {}

    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert restored["restored"] == 23
    assert live(s3_bucket) == before
    versions = s3_client.list_object_versions(Bucket=s3_bucket, Prefix=RUN)
    assert not versions.get("DeleteMarkers")


def test_a_plan_says_what_the_buckets_versioning_means_for_its_deletes(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Versioned deletes on a bucket whose versioning is not Enabled: apply will refuse,
    and reviewers must not sign off on a plan that says deletes can be undone. Quarantine
    on a versioned bucket keeps a noncurrent version beside the quarantine copy: the
    savings come later than the report says."""
    upload_tree(s3_bucket)
    (tmp_path / "v").mkdir()
    (tmp_path / "q").mkdir()
    versioned = make_setup(
        tmp_path / "v", moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    notes = versioned.plan()["notes"]
    root = f"s3://{s3_bucket}/"
    assert f"root {root}: apply.delete_mode is versioned but the bucket's versioning is not " in (
        " ".join(notes)
    )
    refused = versioned.apply(versioned.plan()["plan_id"], code=3)
    assert "versioning is not enabled" in refused.stderr

    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    quarantined = make_setup(tmp_path / "q", moto_server, s3_bucket)
    notes = quarantined.plan()["notes"]
    [kept_twice] = [n for n in notes if "a quarantined object" in n]
    assert kept_twice.startswith(f"root {root}: the bucket keeps versions: a quarantined object")
    # the log's transition is a copy onto itself: its old version stays, in STANDARD
    [copied] = [n for n in notes if "transition or archive in place" in n]
    assert copied.startswith(f"root {root}: the bucket keeps versions: a transition or archive")
    assert "noncurrent version in its old class" in copied
    # versioned deletes on a versioned bucket: nothing to say of them, only of the copies
    assert [n for n in versioned.plan()["notes"] if "versioning" in n or "versions" in n] == [
        copied
    ]


def test_on_a_versioned_bucket_a_plan_names_versions_and_a_new_one_is_stale(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """The scan lists versions on a versioned bucket, so each planned object names the
    version it saw; the same bytes uploaded again (same ETag, a new version) make its
    action stale, and nothing of it is removed."""
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_tree(s3_bucket)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    doc = setup.plan()
    objects = {
        a["artifact"]["uri"]: [o["uri"].split(s3_bucket + "/", 1)[1] for o in a["objects"]]
        for a in doc["actions"]
        if a["action"] == "delete"
    }
    versions = {
        o["uri"].split(s3_bucket + "/", 1)[1]: o.get("version_id")
        for a in doc["actions"]
        for o in a["objects"]
    }
    assert versions
    assert all(versions.values())
    artifact, keys = next(iter(sorted(objects.items())))
    key = keys[0]
    assert versions[key] == s3_client.head_object(Bucket=s3_bucket, Key=key)["VersionId"]
    body = s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    s3_client.put_object(Bucket=s3_bucket, Key=key, Body=body)  # same ETag, a new version
    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)  # 3: some were stale
    by_uri = {r["artifact_uri"]: r for r in report["results"]}
    stale = by_uri.pop(artifact)
    assert stale["outcome"] == "skipped"
    assert f"{key} was re-uploaded (version differs)" in stale["reason"]
    assert {r["outcome"] for r in by_uri.values()} == {"ok"}
    assert all(k in live(s3_bucket) for k in keys)


def test_the_same_bytes_put_again_on_an_unversioned_bucket_are_stale(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Without versions, the same bytes uploaded again keep their size and ETag: only
    the new modification time tells, and the plan judged the old object's age."""
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    artifact, key = next(
        (a["artifact"]["uri"], a["objects"][0]["uri"].split(s3_bucket + "/", 1)[1])
        for a in doc["actions"]
        if a["action"] == "delete"
    )
    time.sleep(1.05)  # S3 times are whole seconds apart at least
    body = s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    s3_client.put_object(Bucket=s3_bucket, Key=key, Body=body)  # same ETag, a new time
    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)
    stale = next(r for r in report["results"] if r["artifact_uri"] == artifact)
    assert stale["outcome"] == "skipped"
    assert f"{key} was re-uploaded (modification time differs)" in stale["reason"]
    assert key in live(s3_bucket)
    assert {r["outcome"] for r in report["results"] if r["artifact_uri"] != artifact} == {"ok"}


def test_versioned_mode_is_refused_on_an_unversioned_bucket(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    before = live(s3_bucket)
    doc = setup.plan()
    refused = setup.apply(doc["plan_id"], code=3)
    assert "versioning is not enabled" in refused.stderr
    assert live(s3_bucket) == before


def test_per_key_delete_errors_fail_the_action_and_nothing_is_marked_done(
    tree: Setup, s3_client: Any, s3_bucket: str
) -> None:
    before = live(s3_bucket)
    doc = tree.plan()
    deny_deletes(s3_client, s3_bucket, f"{RUN}checkpoint-1000/optimizer.pt")
    try:
        result = tree.apply(doc["plan_id"], code=1)
    finally:
        s3_client.delete_bucket_policy(Bucket=s3_bucket)
    report = json.loads(result.stdout)
    by_key = {r["artifact_uri"].split(s3_bucket + "/", 1)[1]: r for r in report["results"]}
    failed = by_key.pop(f"{RUN}checkpoint-1000/")
    assert failed["outcome"] == "failed"
    assert "AccessDenied" in failed["reason"]
    # the artifact is neither whole nor gone: the reason says what went, and how back
    total = failed["objects"]
    assert total > 1
    assert failed["reason"].endswith(
        f"; partly carried out: {total - 1} of {total} objects moved to quarantine (govern "
        "restore brings them back), the rest left (a later apply retries them)"
    )
    assert not failed["final"]
    assert {r["outcome"] for r in by_key.values()} == {"ok"}
    assert report["plan_status"] == "partially_applied"
    assert tree.status(doc["plan_id"]) == "partially_applied"
    after = live(s3_bucket)
    assert (
        after[f"{RUN}checkpoint-1000/optimizer.pt"] == before[f"{RUN}checkpoint-1000/optimizer.pt"]
    )
    q = f".govern-quarantine/{doc['plan_id']}/{s3_bucket}/{RUN}checkpoint-1000/"
    assert list(contents(s3_bucket, q)) != [f"{q}optimizer.pt"]
    assert f"{q}optimizer.pt" not in contents(s3_bucket, q)  # stray copy removed

    # the objects that were removed can come back; the failed action can be re-run
    again = json.loads(tree.apply(doc["plan_id"]).stdout)
    assert [r["action_id"] for r in again["results"]] == [failed["action_id"]]
    assert again["results"][0]["outcome"] == "ok", again["results"][0]["reason"]
    assert again["plan_status"] == "applied"
    assert json.loads(tree.restore(doc["plan_id"]).stdout)["restored"] == 23
    assert live(s3_bucket) == before


def test_slowdown_is_retried_by_botocore_then_succeeds(
    tree: Setup, moto_server: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.retries.standard import ExponentialBackoff

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.01)
    doc = tree.plan()
    opener = StoreOpener([StoreSettings(f"s3://{s3_bucket}/", endpoint_url=moto_server)])
    store: Any = opener(f"s3://{s3_bucket}/")
    calls: list[int] = []

    class Raw:
        def stream(self, **_: Any) -> Any:
            yield b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"

    def throttle(request: Any, **_: Any) -> AWSResponse | None:
        calls.append(1)
        if len(calls) <= 2:
            return AWSResponse(request.url, 503, {}, Raw())
        return None

    store._client.meta.events.register("before-send.s3.DeleteObjects", throttle)
    engine = tree.engine()
    report = apply_plan(engine, doc["plan_id"], actor="ops", now=datetime.now(UTC), stores=opener)
    engine.dispose()
    assert len(calls) >= 3
    assert {r.outcome.value for r in report.results} == {"ok"}
    assert report.plan_status == "applied"


def test_object_lock_and_legal_hold_skip_their_artifacts(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    bucket = f"locked-{datetime.now(UTC).strftime('%H%M%S%f')}"
    s3_client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    upload_tree(bucket)
    setup = make_setup(tmp_path, moto_server, bucket)
    doc = setup.plan()
    # locks placed after planning (the plan could not know): apply must see them
    s3_client.put_object_legal_hold(
        Bucket=bucket, Key=f"{RUN}checkpoint-1000/rng_state.pth", LegalHold={"Status": "ON"}
    )
    s3_client.put_object_retention(
        Bucket=bucket,
        Key="scratch/upload.tmp",
        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": datetime.now(UTC) + timedelta(days=2)},
    )
    before = live(bucket)
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    by_key = {r["artifact_uri"].split(bucket + "/", 1)[1]: r for r in report["results"]}
    held = by_key.pop(f"{RUN}checkpoint-1000/")
    retained = by_key.pop("scratch/upload.tmp")
    assert (held["outcome"], held["final"]) == ("skipped", True)
    assert held["reason"].startswith("legal hold")
    assert retained["outcome"] == "skipped"
    assert retained["reason"].startswith("object lock")
    assert {r["outcome"] for r in by_key.values()} == {"ok"}
    assert report["plan_status"] == "applied"  # skipped on purpose: locks are never bypassed
    after = live(bucket)
    for key, body in before.items():
        if "checkpoint-1000/" in key or key == "scratch/upload.tmp":
            assert after[key] == body


RETAIN = {"TagSet": [{"Key": "retain", "Value": "true"}]}
"""The tag the policy of `protect_by_tag` protects."""


def protect_by_tag(setup: Setup) -> None:
    """The setup's policy, protecting whatever carries the tag retain=true."""
    text = setup.policy.read_text()
    setup.policy.write_text(
        text.replace("  min_age: 1h\n", '  min_age: 1h\n  tags: {retain: "true"}\n')
    )


def test_a_protected_tag_put_on_after_planning_skips_its_artifact(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """S3 keeps an object's ETag and LastModified when its tags change, so neither a scan
    nor the plan's cached tags can see a tag put on later: apply reads them again."""
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    protect_by_tag(setup)
    doc = setup.plan()
    planned = {a["artifact"]["uri"].split(s3_bucket + "/", 1)[1] for a in doc["actions"]}
    assert "scratch/upload.tmp" in planned
    s3_client.put_object_tagging(Bucket=s3_bucket, Key="scratch/upload.tmp", Tagging=RETAIN)
    other = {"TagSet": [{"Key": "team", "Value": "nlp"}]}  # not a protected tag
    s3_client.put_object_tagging(
        Bucket=s3_bucket, Key=f"{RUN}checkpoint-500/optimizer.pt", Tagging=other
    )
    before = live(s3_bucket)
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    by_key = {r["artifact_uri"].split(s3_bucket + "/", 1)[1]: r for r in report["results"]}
    tagged = by_key.pop("scratch/upload.tmp")
    assert (tagged["outcome"], tagged["final"]) == ("skipped", True)
    assert tagged["reason"] == "protected: scratch/upload.tmp has protected tag retain=true now"
    assert {r["outcome"] for r in by_key.values()} == {"ok"}
    after = live(s3_bucket)
    assert after["scratch/upload.tmp"] == before["scratch/upload.tmp"]
    assert f"{RUN}checkpoint-500/optimizer.pt" not in after  # its own tag protects nothing


def test_a_strip_is_skipped_when_the_files_it_leaves_were_protected_since(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    """Protection covers a whole artifact. A strip acts on some of a checkpoint's files;
    a protected tag, or a legal hold, put since on a file it leaves (the weights) skips
    it all the same, for good."""
    bucket = f"locked-{datetime.now(UTC).strftime('%H%M%S%f')}"
    s3_client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    upload_tree(bucket)
    setup = make_setup(tmp_path, moto_server, bucket)
    protect_by_tag(setup)
    doc = setup.plan()
    stripped = {
        a["artifact"]["uri"].split(bucket + "/", 1)[1]: [o["uri"] for o in a["objects"]]
        for a in doc["actions"]
        if a["action"] == "strip"
    }
    tagged, held = f"{RUN}checkpoint-1500/", f"{RUN}checkpoint-500/"
    assert tagged in stripped
    assert held in stripped
    assert not any(u.endswith("model.safetensors") for u in stripped[tagged])  # left in place
    s3_client.put_object_tagging(Bucket=bucket, Key=tagged + "model.safetensors", Tagging=RETAIN)
    s3_client.put_object_legal_hold(
        Bucket=bucket, Key=held + "model.safetensors", LegalHold={"Status": "ON"}
    )
    before = live(bucket)
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    by_key = {r["artifact_uri"].split(bucket + "/", 1)[1]: r for r in report["results"]}
    assert (by_key[tagged]["outcome"], by_key[tagged]["final"]) == ("skipped", True)
    assert by_key[tagged]["reason"] == (
        f"protected: {tagged}model.safetensors has protected tag retain=true now"
    )
    assert (by_key[held]["outcome"], by_key[held]["final"]) == ("skipped", True)
    assert by_key[held]["reason"].startswith(f"legal hold: {held}model.safetensors")
    after = live(bucket)
    for key, body in before.items():
        if key.startswith((tagged, held)):
            assert after[key] == body


def _object_row(setup: Setup, key: str) -> tuple[Any, ...]:
    from sqlalchemy import text

    engine = setup.engine()
    try:
        with engine.connect() as conn:
            return tuple(
                conn.execute(
                    text(
                        "SELECT content_modified_us, last_modified, etag, storage_class, "
                        "version_id FROM objects WHERE key = :key AND gone_scan_id IS NULL"
                    ),
                    {"key": key},
                ).one()
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("versioned", [False, True])
def test_a_transition_keeps_the_content_age_and_the_next_step_counts_from_it(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, versioned: bool
) -> None:
    """The log (written 10 days ago) goes to STANDARD_IA; its copy is stamped now. The
    ladder's next step, GLACIER after 25 days, is due 15 days from now (its age counts
    from the content), and leaving STANDARD_IA then bills the 30-day minimum's rest
    (counted from the copy). Written again, the log is young again. On a versioned
    bucket the copy is a new version, which the catalog records as the scan lists it."""
    if versioned:
        s3_client.put_bucket_versioning(
            Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"}
        )
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    ladder = "transition: [{after: 1d, storage_class: STANDARD_IA}, {after: 25d, storage_class: GLACIER}]"
    text = setup.policy.read_text()
    setup.policy.write_text(
        text.replace("transition: [{after: 1d, storage_class: STANDARD_IA}]", ladder)
    )
    written = s3_client.head_object(Bucket=s3_bucket, Key=LOG)["LastModified"]
    doc = setup.plan()
    assert [a["storage_class"] for a in doc["actions"] if a["action"] == "transition"] == [
        "STANDARD_IA"
    ]
    setup.apply(doc["plan_id"])
    head = s3_client.head_object(Bucket=s3_bucket, Key=LOG)
    assert head["StorageClass"] == "STANDARD_IA"
    assert head["LastModified"] > written + timedelta(days=9)  # S3 stamps the copy
    content_us, copy_us, etag, storage_class, version = _object_row(setup, LOG)
    assert content_us == int(written.timestamp() * 1_000_000)
    assert copy_us == int(head["LastModified"].timestamp() * 1_000_000)
    assert (etag, storage_class) == (head["ETag"].strip('"'), "STANDARD_IA")
    assert version == (head["VersionId"] if versioned else None)

    def log_actions(as_of: datetime) -> list[dict[str, Any]]:
        plan = setup.plan(as_of=as_of.isoformat())  # (scans first)
        return [a for a in plan["actions"] if a["artifact"]["uri"].endswith(LOG)]

    now = datetime.now(UTC)
    assert log_actions(now + timedelta(days=14)) == []  # content 24 days old
    [step] = log_actions(now + timedelta(days=20))  # content 30 days old, 20 in IA
    assert step["storage_class"] == "GLACIER"
    size = len(live(s3_bucket)[LOG])
    rest = size / 2**30 * 0.0125 * (30 - 20) / 30
    assert step["early_deletion_usd"] == pytest.approx(rest, rel=0.01)
    assert _object_row(setup, LOG)[0] == content_us  # the rescans found the copy as recorded

    s3_client.put_object(Bucket=s3_bucket, Key=LOG, Body=b"step 2 loss 1.0\n" * 10_000)
    [again] = log_actions(now + timedelta(days=20))  # written now: 20 days old
    assert (again["action"], again["storage_class"]) == ("transition", "STANDARD_IA")
    assert _object_row(setup, LOG)[0] is None


class DiesAfterCopy:
    """A store that copies, then dies before apply can record the copy (a kill)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        self._real.copy(*args, **kwargs)
        raise KeyboardInterrupt


def test_a_transition_resumed_after_a_kill_keeps_the_content_age(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """The killed apply copied the log into STANDARD_IA but recorded nothing; the resumed
    apply finds the copy done and records it as a finished one would, with the content's
    time beside it (else the log would look as young as its copy)."""
    upload_tree(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    written = s3_client.head_object(Bucket=s3_bucket, Key=LOG)["LastModified"]
    doc = setup.plan()
    root = f"s3://{s3_bucket}/"
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    dying = DiesAfterCopy(opener(root))
    engine = setup.engine()
    try:
        with pytest.raises(KeyboardInterrupt):
            apply_plan(
                engine, doc["plan_id"], actor="ops", now=datetime.now(UTC),
                stores=lambda url: dying,
            )  # fmt: skip
        head = s3_client.head_object(Bucket=s3_bucket, Key=LOG)
        assert head["StorageClass"] == "STANDARD_IA"  # the copy happened...
        assert _object_row(setup, LOG)[0] is None  # ...unrecorded
        report = apply_plan(
            engine, doc["plan_id"], actor="ops", now=datetime.now(UTC), stores=opener
        )
    finally:
        engine.dispose()
    [moved] = [r for r in report.results if r.action_id in _transition_ids(doc)]
    assert "interrupted apply" in moved.reason
    content_us, copy_us, etag, storage_class, _ = _object_row(setup, LOG)
    assert content_us == int(written.timestamp() * 1_000_000)
    assert copy_us == int(head["LastModified"].timestamp() * 1_000_000)
    assert (etag, storage_class) == (head["ETag"].strip('"'), "STANDARD_IA")


def _transition_ids(doc: dict[str, Any]) -> set[int]:
    return {a["id"] for a in doc["actions"] if a["action"] == "transition"}
