"""A DeleteObjects request S3 carried out but whose answer was lost (a read timeout after
botocore's retries): apply cannot know whether the objects are gone. It must keep their
quarantine copies and their journal rows `pending`, not take them for "not deleted" and
delete the copies (which were then all that was left of the objects); the next apply
settles them from the journal, and restore brings everything back. moto over real HTTP,
a real SQLite catalog; the lost answer is a botocore error raised after the real call.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ReadTimeoutError
from sqlalchemy import text

from governance.apply import StoreOpener, StoreSettings, apply_plan
from tests.fixtures.builders import residue
from tests.integration.test_conditional_delete_s3 import _old_writer, _quarantine_copies, _setup


def _lose_first_answer(store: Any) -> list[bool]:
    """Make the store's first DeleteObjects of the residue lose its answer after S3 carried
    it out; returns a flag list that says whether it happened."""
    fired: list[bool] = []
    client = store._client
    real = client.delete_objects

    def delete_objects(**kwargs: Any) -> Any:
        answer = real(**kwargs)
        keys = [o["Key"] for o in kwargs["Delete"]["Objects"]]
        if not fired and all(k.startswith("scratch/") for k in keys):
            fired.append(True)
            raise ReadTimeoutError(endpoint_url="http://s3")
        return answer

    client.delete_objects = delete_objects
    return fired


def _rows(setup: Any) -> dict[str, tuple[str, str | None]]:
    engine = setup.engine()
    with engine.connect() as conn:
        found = conn.execute(text("SELECT key, state, copy_etag FROM removed_objects")).all()
    engine.dispose()
    return {key: (state, etag) for key, state, etag in found}


def test_a_lost_delete_answer_keeps_the_copies_and_the_next_apply_settles_them(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    keys = residue(_old_writer(s3_bucket), "scratch/a")
    root = f"s3://{s3_bucket}/"
    setup = _setup(tmp_path, moto_server, s3_bucket)
    plan_id = setup.plan()["plan_id"]
    opener = StoreOpener([StoreSettings(root, moto_server)])
    fired = _lose_first_answer(opener(root))

    engine = setup.engine()
    first = apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    engine.dispose()

    assert fired == [True]
    assert {r.outcome.value for r in first.results} == {"failed"}
    assert all("timeout" in r.reason.lower() for r in first.results), first.results
    left = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])]
    assert not [k for k in left if k.startswith("scratch/")]  # S3 did delete them
    assert len(_quarantine_copies(s3_client, s3_bucket)) == len(keys)  # copies kept
    rows = _rows(setup)
    assert sorted(rows) == sorted(keys)
    assert {state for state, _ in rows.values()} == {"pending"}
    assert all(etag for _, etag in rows.values())

    # restore says where those objects are and that apply settles them, not "nothing"
    told = setup.restore(plan_id, code=3)
    assert "did not finish, or failed while removing: 3 objects it was removing" in told.stderr
    assert f"`govern apply {plan_id}` finishes and records them" in told.stderr

    second = json.loads(setup.apply(plan_id).stdout)
    assert {r["outcome"] for r in second["results"]} == {"ok"}
    assert {state for state, _ in _rows(setup).values()} == {"removed"}
    assert json.loads(setup.restore(plan_id).stdout)["restored"] == len(keys)
    for key in keys:
        assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()


def test_a_retried_versioned_delete_records_the_marker_that_hides_the_object(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """botocore retries a DeleteObjects whose answer was lost: on a versioned bucket the
    first attempt wrote the delete markers, and the retry's conditional entries find the
    keys empty (NoSuchKey: deleted, no marker said). Apply looks the markers up, so that
    restore can undo the deletes."""
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    keys = residue(_old_writer(s3_bucket), "scratch/v")
    root = f"s3://{s3_bucket}/"
    setup = _setup(tmp_path, moto_server, s3_bucket, "delete_mode: versioned")
    plan_id = setup.plan()["plan_id"]
    opener = StoreOpener([StoreSettings(root, moto_server)])
    client = opener(root)._client
    real = client.delete_objects

    def retried(**kwargs: Any) -> Any:
        real(**kwargs)  # carried out, its answer lost
        return real(**kwargs)  # the retry's answer

    client.delete_objects = retried
    engine = setup.engine()
    report = apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    with engine.connect() as conn:
        markers = dict(
            conn.execute(text("SELECT key, marker_version_id FROM removed_objects")).all()
        )
    engine.dispose()

    assert {r.outcome.value for r in report.results} == {"ok"}
    versions = s3_client.list_object_versions(Bucket=s3_bucket, Prefix="scratch/v/")
    hiding = {m["Key"]: m["VersionId"] for m in versions["DeleteMarkers"] if m["IsLatest"]}
    assert markers == hiding
    assert sorted(markers) == sorted(keys)
    assert json.loads(setup.restore(plan_id).stdout)["restored"] == len(keys)
    for key in keys:
        assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()


def test_only_a_request_that_may_have_been_carried_out_is_unknown() -> None:
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        ParamValidationError,
    )

    from governance.storage.s3 import _maybe_carried_out

    def answered(status: int) -> ClientError:
        return ClientError(
            {"Error": {"Code": "X"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Delete"
        )

    assert _maybe_carried_out(ReadTimeoutError(endpoint_url="http://s3"))
    assert _maybe_carried_out(answered(500))
    assert _maybe_carried_out(answered(503))
    assert not _maybe_carried_out(answered(403))  # a definite answer: not carried out
    assert not _maybe_carried_out(answered(404))
    assert not _maybe_carried_out(EndpointConnectionError(endpoint_url="http://s3"))
    assert not _maybe_carried_out(ParamValidationError(report="bad"))
