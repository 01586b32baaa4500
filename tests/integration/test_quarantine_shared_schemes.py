"""Roots of two schemes whose paths read alike (`file:///tmp/.../storage/` and
`s3://tmp/.../storage/`) sharing one `apply.quarantine_url` never share a quarantine
copy: the root of another scheme than the quarantine's has its scheme in the copy's key.
Without it the second copy overwrote the first: one object's bytes were gone, and
restore put the other's back in their place. Local disk and moto over real HTTP, a real
SQLite catalog.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from governance.apply import StoreOpener, StoreSettings, apply_plan
from governance.apply.actions import quarantine_key
from tests.fixtures.builders import local_writer, residue
from tests.integration.test_apply_support import NO_APPROVAL, Setup
from tests.integration.test_conditional_delete_s3 import _old_writer


def test_the_quarantine_key_names_a_scheme_other_than_the_quarantines() -> None:
    assert quarantine_key("p-1", "s3://ml/a/", "x.pt", "s3://q/") == "p-1/ml/a/x.pt"
    assert quarantine_key("p-1", "file:///ml/a/", "x.pt", "file:///q/") == "p-1/ml/a/x.pt"
    assert quarantine_key("p-1", "file:///ml/a/", "x.pt", "s3://q/") == "p-1/file:/ml/a/x.pt"
    assert quarantine_key("p-1", "s3://ml/a/", "x.pt", "file:///q/") == "p-1/s3:/ml/a/x.pt"


def test_a_local_root_and_a_bucket_alike_keep_their_own_quarantine_copies(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    storage = tmp_path / "storage"
    path = storage.as_posix().lstrip("/")
    bucket, _, prefix = path.partition("/")  # the bucket whose keys read as the path
    with contextlib.suppress(s3_client.exceptions.BucketAlreadyOwnedByYou):
        s3_client.create_bucket(Bucket=bucket)  # (another test of this session may have)
    local, remote = local_writer(storage), _old_writer(bucket)
    keys = residue(lambda k, c, m: local(k, b"L" * len(c), m), "scratch")
    residue(lambda k, c, m: remote(f"{prefix}/{k}", b"S" * len(c), m), "scratch")
    s3_root = f"s3://{bucket}/{prefix}/"
    quarantine = tmp_path / "quarantine"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage:
  - name: disk
    url: {storage}
  - name: bucket
    url: {s3_root}
    endpoint_url: {moto_server}
rules:
  - name: residue
    select: {{kind: residue}}
    expire: {{after: 2d}}
{NO_APPROVAL}safety: {{max_delete_fraction: 1}}
apply: {{quarantine_url: {quarantine.as_uri()}/}}
"""
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    plan_id = setup.plan()["plan_id"]
    engine = setup.engine()
    opener = StoreOpener([StoreSettings(s3_root, moto_server)])
    report = apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    engine.dispose()

    assert {r.outcome.value for r in report.results} == {"ok"}
    copies = sorted(p for p in quarantine.rglob("*") if p.is_file())
    assert len(copies) == 2 * len(keys)  # one copy per removed object
    assert json.loads(setup.restore(plan_id).stdout)["restored"] == 2 * len(keys)
    for key in keys:  # each object back with its own bytes
        assert set((storage / key).read_bytes()) == {ord("L")}
        body = s3_client.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read()
        assert set(body) == {ord("S")}
