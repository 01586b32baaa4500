"""A restore that stopped before recording what it put back (killed, a lost connection) is
finished by the next one.

A restore copies each object back, removes its quarantine copy, and only then records
the batch. Killed in between, it left objects back at their keys that the catalog still
called removed, and every later restore failed them for good ("an object exists at the
original key again", exit 1) with quarantine copies stranded. The next restore now
takes an object at its key with the removed object's size and time (local disk: a copy
back keeps the time) or ETag (S3: the removed object's or its quarantine copy's) as put
back: restored, and what is left of its quarantine copy removed. The state such a kill
leaves is made by hand here (the copy back a restore makes, with or without the
quarantine copy removed after it), on local disk and on moto.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from sqlalchemy import text

from tests.integration.test_apply_local import build
from tests.integration.test_apply_s3 import contents, live, make_setup, upload_tree
from tests.integration.test_apply_support import Setup, snapshot


def _removed(setup: Setup) -> list[dict[str, Any]]:
    engine = setup.engine()
    try:
        with engine.connect() as conn:
            return [
                dict(r)
                for r in conn.execute(
                    text(
                        "SELECT root_url, key, quarantine_root, quarantine_key, state "
                        "FROM removed_objects ORDER BY id"
                    )
                ).mappings()
            ]
    finally:
        engine.dispose()


def _path(url: str, key: str) -> Path:
    return Path(unquote(urlparse(url).path)) / key


def test_on_local_disk_objects_put_back_by_a_killed_restore_are_restored(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    before = snapshot(storage)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    rows = _removed(setup)
    assert len(rows) == 23
    for i, row in enumerate(rows[:10]):  # the copy back a restore makes: a link, same time
        held, original = (
            _path(row["quarantine_root"], row["quarantine_key"]),
            _path(row["root_url"], row["key"]),
        )
        original.parent.mkdir(parents=True, exist_ok=True)
        os.link(held, original)
        if i % 2:  # killed after removing the quarantine copy too, or before
            held.unlink()

    report = json.loads(setup.restore(doc["plan_id"]).stdout)

    assert (report["restored"], report["failed"]) == (23, 0), report
    assert snapshot(storage) == before
    assert {r["state"] for r in _removed(setup)} == {"restored"}
    quarantine = storage.parent / ".govern-quarantine"
    assert not [p for p in quarantine.rglob("*") if p.is_file()]


def test_on_local_disk_other_bytes_of_the_same_size_are_never_taken_as_put_back(
    tmp_path: Path,
) -> None:
    setup, _ = build(tmp_path)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    row = _removed(setup)[0]
    held, original = (
        _path(row["quarantine_root"], row["quarantine_key"]),
        _path(row["root_url"], row["key"]),
    )
    original.parent.mkdir(parents=True, exist_ok=True)
    original.write_bytes(b"x" * held.stat().st_size)  # written since: a new time

    report = json.loads(setup.restore(doc["plan_id"], code=1).stdout)

    [failed] = [o for o in report["objects"] if not o["ok"]]
    assert failed["error"] == "an object exists at the original key again"
    assert original.read_bytes() == b"x" * held.stat().st_size
    assert held.exists()  # its quarantine copy is kept


def test_on_s3_objects_put_back_by_a_killed_restore_are_restored(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    before = live(s3_bucket)
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    rows = [r for r in _removed(setup) if r["state"] == "removed"]
    assert len(rows) > 4
    for i, row in enumerate(rows[:4]):  # the copy back a restore makes: a CopyObject
        source = urlparse(row["quarantine_root"])
        qkey = source.path.lstrip("/") + row["quarantine_key"]
        s3_client.copy_object(
            Bucket=s3_bucket, Key=row["key"], CopySource={"Bucket": source.netloc, "Key": qkey}
        )
        if i % 2:
            s3_client.delete_object(Bucket=source.netloc, Key=qkey)

    report = json.loads(setup.restore(doc["plan_id"]).stdout)

    assert (report["restored"], report["failed"]) == (len(rows), 0), report
    assert live(s3_bucket) == before
    assert {r["state"] for r in _removed(setup) if r["key"] in {x["key"] for x in rows}} == {
        "restored"
    }
    assert not [k for k in contents(s3_bucket) if k.startswith(".govern")]


def test_on_a_versioned_bucket_a_marker_removed_by_a_killed_restore_counts_as_restored(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_tree(s3_bucket)
    before = live(s3_bucket)
    setup = make_setup(
        tmp_path,
        moto_server,
        s3_bucket,
        "approval: {require_for: []}\napply: {delete_mode: versioned}\n",
    )
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    engine = setup.engine()
    with engine.connect() as conn:
        key, marker = conn.execute(
            text("SELECT key, marker_version_id FROM removed_objects ORDER BY id LIMIT 1")
        ).one()
    engine.dispose()
    s3_client.delete_object(Bucket=s3_bucket, Key=key, VersionId=marker)  # what restore does

    report = json.loads(setup.restore(doc["plan_id"]).stdout)

    assert report["failed"] == 0, report
    assert live(s3_bucket) == before
    assert {r["state"] for r in _removed(setup)} == {"restored"}
