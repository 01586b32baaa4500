"""An apply killed between its deletes and their commit, on S3: the resumed apply records
each removed object with its quarantine copy's ETag and the object's encryption, which
the killed one wrote into the pending rows before it deleted anything. Without them
restore could not check the copy it brings back, nor give the object its own encryption
back (a quarantine bucket's default KMS key would stay on it). moto over real HTTP, a
real SQLite catalog.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import StoreOpener, StoreSettings, apply_plan
from tests.fixtures.builders import residue
from tests.integration.test_apply_resume import DiesAfterDelete
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text

KEY = "arn:aws:kms:us-east-1:123456789012:key/run-key"  # the objects' own KMS key


def test_a_resumed_apply_records_the_copies_etags_and_the_objects_encryption(
    tmp_path: Any, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]

    def write(key: str, content: bytes, mtime: datetime) -> None:
        stored = backend.put_object(s3_bucket, key, content, encryption="aws:kms")
        stored.kms_key_id = KEY
        stored.last_modified = mtime.replace(tzinfo=None)

    keys = residue(write, "scratch/a") + residue(write, "scratch/b")
    root = f"s3://{s3_bucket}/"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(
            root, endpoint=moto_server, extra=f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n"
        )
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    plan_id = setup.plan()["plan_id"]
    opener = StoreOpener([StoreSettings(root, moto_server)])
    dying = DiesAfterDelete(opener(root))

    def stores(url: str) -> Any:
        return dying if url == root else opener(url)

    engine = setup.engine()
    with pytest.raises(KeyboardInterrupt):
        apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=stores)
    listed = s3_client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    assert not [o for o in listed if o["Key"].startswith("scratch/")]  # deleted, unrecorded
    with engine.connect() as conn:
        states = conn.execute(text("SELECT DISTINCT state FROM removed_objects")).scalars()
        assert list(states) == ["pending"]

    report = apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    assert {r.outcome.value for r in report.results} == {"ok"}
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT key, state, quarantine_root, quarantine_key, copy_etag, encryption "
                "FROM removed_objects"
            )
        ).all()
    engine.dispose()
    assert sorted(r.key for r in rows) == sorted(keys)
    for row in rows:
        assert row.state == "removed"
        bucket, _, prefix = (row.quarantine_root + row.quarantine_key)[5:].partition("/")
        copy = s3_client.head_object(Bucket=bucket, Key=prefix)
        assert row.copy_etag == copy["ETag"].strip('"'), row
        assert json.loads(row.encryption)[:2] == ["aws:kms", KEY], row

    assert json.loads(setup.restore(plan_id).stdout)["restored"] == len(keys)
    for key in keys:  # back under their own KMS key
        head = s3_client.head_object(Bucket=s3_bucket, Key=key)
        assert (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) == ("aws:kms", KEY)
