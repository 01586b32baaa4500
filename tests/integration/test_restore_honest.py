"""`govern restore` says what cannot come back, and its dry run says the same.

A dry run makes the read-only checks a restore makes (the object's key, its quarantine
copy) and reports the same failures, with the same exit code; objects deleted
permanently or purged from quarantine are failed, never silently left out; objects
restored already are not restored again, and a note says so. Local disk (the tree of
test_apply_local: 23 objects removed), and one versioned bucket on moto.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from governance.apply import StoreOpener, purge_quarantine
from tests.integration.test_apply_local import RUN, build
from tests.integration.test_apply_s3 import live, make_setup, upload_tree
from tests.integration.test_apply_support import NO_APPROVAL, Setup, govern, snapshot

NO_WAY_BACK = "deleted permanently: there is no way back"


def answers(doc: dict[str, Any]) -> list[tuple[str, bool, str | None]]:
    """Each object's (uri, ok, error): what a dry run and a restore must agree on."""
    return [(o["uri"], o["ok"], o["error"]) for o in doc["objects"]]


def failures(doc: dict[str, Any]) -> dict[str, str]:
    return {o["uri"]: o["error"] for o in doc["objects"] if not o["ok"]}


def table(setup: Setup, plan_id: str, *extra: str) -> Any:
    return govern(
        setup.catalog,
        "restore",
        plan_id,
        "--policy",
        str(setup.policy),
        "--format",
        "table",
        *extra,
    )


def restore_events(setup: Setup, plan_id: str) -> list[dict[str, Any]]:
    from governance.audit import events

    engine = setup.engine()
    try:
        return [e.payload for e in events(engine, plan_id) if e.event == "restore"]
    finally:
        engine.dispose()


def test_dry_run_after_permanent_deletes_fails_as_the_restore_does(tmp_path: Path) -> None:
    setup, _ = build(tmp_path, extra=NO_APPROVAL + "apply: {delete_mode: permanent}\n")
    doc = setup.plan()
    setup.apply(doc["plan_id"], "--yes")
    dry = json.loads(setup.restore(doc["plan_id"], "--dry-run", code=1).stdout)
    assert (dry["would_restore"], dry["failed"]) == (0, 23)
    assert set(failures(dry).values()) == {NO_WAY_BACK}
    shown = table(setup, doc["plan_id"], "--dry-run")
    assert shown.exit_code == 1
    assert "0 would be restored, 23 failed" in shown.stdout
    real = json.loads(setup.restore(doc["plan_id"], code=1).stdout)
    assert answers(real) == answers(dry)


def test_dry_run_checks_each_key_and_quarantine_copy_as_the_restore_does(
    tmp_path: Path,
) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    base = storage.as_uri() + "/"
    # one object is back at its key (written anew), one quarantine copy has gone
    again = storage / "scratch" / "upload.tmp"
    again.parent.mkdir(exist_ok=True)
    again.write_bytes(b"written again")
    quarantine = tmp_path / ".govern-quarantine"
    held = quarantine / doc["plan_id"] / str(storage).lstrip("/") / RUN / "checkpoint-1000"
    (held / "optimizer.pt").unlink()
    before = (snapshot(storage), snapshot(quarantine))

    dry = json.loads(setup.restore(doc["plan_id"], "--dry-run", code=1).stdout)
    assert (dry["restored"], dry["would_restore"], dry["failed"]) == (0, 21, 2)
    gone = f"file://{held}/optimizer.pt"
    assert failures(dry) == {
        f"{base}scratch/upload.tmp": "an object exists at the original key again",
        f"{base}{RUN}checkpoint-1000/optimizer.pt": f"copy back failed: {gone}: no such key",
    }
    shown = table(setup, doc["plan_id"], "--dry-run")
    assert shown.exit_code == 1
    assert "21 would be restored, 2 failed" in shown.stdout
    assert (snapshot(storage), snapshot(quarantine)) == before  # only read
    assert restore_events(setup, doc["plan_id"]) == []

    real = json.loads(setup.restore(doc["plan_id"], code=1).stdout)
    assert answers(real) == answers(dry)
    assert again.read_bytes() == b"written again"


def test_purged_objects_are_failed_with_the_day_they_were_purged(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    base = storage.as_uri() + "/"
    one = f"{base}{RUN}checkpoint-1000/"
    assert json.loads(setup.restore(doc["plan_id"], "--uri", one).stdout)["restored"] == 12
    later = datetime.now(UTC) + timedelta(days=15)  # past quarantine_for: a later apply
    engine = setup.engine()
    try:
        purged = purge_quarantine(engine, now=later, stores=StoreOpener(), actor="ops")
    finally:
        engine.dispose()
    assert purged.purged == 11
    reason = (
        f"purged from quarantine on {later:%Y-%m-%d} (past apply.quarantine_for): "
        "there is no way back"
    )

    for extra in (("--dry-run",), ()):
        result = setup.restore(doc["plan_id"], *extra, code=1)
        report = json.loads(result.stdout)
        assert (report["restored"], report["would_restore"], report["failed"]) == (0, 0, 11)
        assert set(failures(report).values()) == {reason}
        assert f"12 objects of plan {doc['plan_id']} were restored already" in result.stderr
    shown = table(setup, doc["plan_id"])
    assert shown.exit_code == 1
    assert "0 restored, 11 failed" in shown.stdout
    assert "purged" in shown.stdout

    stripped = f"{base}{RUN}checkpoint-500/"
    by_uri = json.loads(setup.restore(doc["plan_id"], "--uri", stripped, code=1).stdout)
    assert {o["artifact_uri"] for o in by_uri["objects"]} == {stripped}
    assert (by_uri["failed"], set(failures(by_uri).values())) == (4, {reason})


def test_restoring_twice_restores_nothing_and_says_so(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    assert json.loads(setup.restore(doc["plan_id"]).stdout)["restored"] == 23
    after = snapshot(storage)
    today = f"{datetime.now(UTC):%Y-%m-%d}"

    for extra in ((), ("--dry-run",)):
        again = setup.restore(doc["plan_id"], *extra)
        report = json.loads(again.stdout)
        assert (report["restored"], report["would_restore"], report["failed"]) == (0, 0, 0)
        assert report["objects"] == []
        assert (
            f"note: 23 objects of plan {doc['plan_id']} were restored already (on {today}): "
            "not restored again"
        ) in again.stderr
    one = f"{storage.as_uri()}/{RUN}checkpoint-1000/"
    by_uri = setup.restore(doc["plan_id"], "--uri", one)  # was exit 2, "nothing removed"
    assert f"12 objects under {one} were restored already" in by_uri.stderr
    assert json.loads(by_uri.stdout)["objects"] == []
    nothing = setup.restore(doc["plan_id"], "--uri", f"{storage.as_uri()}/elsewhere/", code=2)
    assert "nothing removed under" in nothing.stderr
    # a folder without its closing slash is the folder (it was "nothing removed under")
    folder = setup.restore(doc["plan_id"], "--uri", f"{storage.as_uri()}/{RUN.rstrip('/')}")
    assert f"objects under {storage.as_uri()}/{RUN.rstrip('/')} were restored already" in (
        folder.stderr
    )
    half = setup.restore(doc["plan_id"], "--uri", f"{storage.as_uri()}/run", code=2)
    assert "nothing removed under" in half.stderr  # (`run` is not the folder `runs/`)
    assert snapshot(storage) == after


def test_on_s3_a_dry_run_heads_each_key_as_the_restore_does(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Versioned deletes: HEAD of a key under a delete marker says missing (comes back);
    one written again since says present (never overwritten), in the dry run too."""
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_tree(s3_bucket)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    key = f"{RUN}checkpoint-1000/optimizer.pt"
    s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"written again")
    before = live(s3_bucket)

    dry = json.loads(setup.restore(doc["plan_id"], "--dry-run", code=1).stdout)
    assert (dry["would_restore"], dry["failed"]) == (22, 1)
    assert failures(dry) == {
        f"s3://{s3_bucket}/{key}": "an object exists at the original key again"
    }
    assert live(s3_bucket) == before
    real = json.loads(setup.restore(doc["plan_id"], code=1).stdout)
    assert answers(real) == answers(dry)
    assert live(s3_bucket)[key] == b"written again"


def test_restoring_a_plan_that_removed_nothing_says_so_in_one_line(tmp_path: Path) -> None:
    """A plan never applied printed an empty table and "0 restored, 0 failed", which
    read as a restore done; it now says the plan removed nothing, and why."""
    setup, storage = build(tmp_path)
    doc = setup.plan()
    before = snapshot(storage)
    shown = govern(setup.catalog, "restore", doc["plan_id"])
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.strip() == f"restore of plan {doc['plan_id']}: nothing to restore"
    assert (
        f"note: plan {doc['plan_id']} removed nothing (status approved: it has not "
        "been applied): there is nothing to restore"
    ) in shown.stderr
    assert json.loads(setup.restore(doc["plan_id"]).stdout)["objects"] == []
    assert snapshot(storage) == before
