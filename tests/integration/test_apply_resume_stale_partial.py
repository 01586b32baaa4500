"""An apply killed after S3 removed a checkpoint's objects, before it could record so;
then one object of that checkpoint is written again (training resumed), and the plan is
applied again. The resumed apply must not act on the changed checkpoint (it is stale),
but what the killed apply already removed is recorded as removed, said so in the
outcome, and `govern restore` brings it back (the whole plan, or `--uri` of the
artifact). moto's server over HTTP.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import StoreOpener, StoreSettings, apply_plan
from governance.storage import normalize_url
from tests.integration.test_apply_resume import DiesAfterDelete
from tests.integration.test_apply_s3 import RUN, contents, live, make_setup, upload_tree
from tests.integration.test_apply_support import NO_APPROVAL, Setup

CK = f"{RUN}checkpoint-1000/"
REWRITTEN = f"{CK}config.json"


def _killed_then_rewritten(
    tmp_path: Path, moto_server: str, s3_client: Any, bucket: str, extra: str = ""
) -> tuple[Setup, str, dict[str, bytes]]:
    upload_tree(bucket)
    setup = make_setup(tmp_path, moto_server, bucket, NO_APPROVAL + extra)
    doc = setup.plan()
    [delete] = [a for a in doc["actions"] if a["artifact"]["uri"].endswith(CK)]
    assert delete["action"] == "delete"
    before = {k: v for k, v in live(bucket).items() if k.startswith(CK)}
    assert REWRITTEN in before
    assert len(before) > 2
    root = f"s3://{bucket}/"
    opener = StoreOpener([StoreSettings(root, endpoint_url=moto_server)])
    dying = DiesAfterDelete(opener(root))
    engine = setup.engine()
    try:
        with pytest.raises(KeyboardInterrupt):
            apply_plan(
                engine, doc["plan_id"], actor="ops", now=datetime.now(UTC),
                stores=lambda url: dying if normalize_url(url) == root else opener(url),
            )  # fmt: skip
    finally:
        engine.dispose()
    assert not [k for k in live(bucket) if k.startswith(CK)]  # the deletes happened
    s3_client.put_object(Bucket=bucket, Key=REWRITTEN, Body=b'{"model_type": "gpt2", "v": 2}')
    return setup, doc["plan_id"], before


def _states(setup: Setup) -> dict[str, str]:
    engine = setup.engine()
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT key, state FROM removed_objects WHERE key LIKE :p"), {"p": CK + "%"}
            )
            return {str(k): str(s) for k, s in rows}
    finally:
        engine.dispose()


def _resume(setup: Setup, plan_id: str, before: dict[str, bytes]) -> dict[str, Any]:
    result = setup.apply(plan_id, code=3)  # stale: exit 3
    report = json.loads(result.stdout)
    [mine] = [r for r in report["results"] if r["artifact_uri"].endswith(CK)]
    assert mine["outcome"] == "skipped"
    assert mine["reason"].startswith("stale")
    assert "partly carried out by an interrupted apply" in mine["reason"]
    assert f"{len(before) - 1} of {len(before)} objects" in mine["reason"]
    assert REWRITTEN.rsplit("/", 1)[1] in mine["reason"]
    states = _states(setup)
    removed = {k for k, s in states.items() if s == "removed"}
    assert removed == set(before) - {REWRITTEN}
    return report


@pytest.mark.parametrize("by_uri", [False, True])
def test_what_a_killed_apply_quarantined_is_recorded_and_restored_though_the_rest_is_stale(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str, by_uri: bool
) -> None:
    setup, plan_id, before = _killed_then_rewritten(tmp_path, moto_server, s3_client, s3_bucket)
    _resume(setup, plan_id, before)
    new = live(s3_bucket)[REWRITTEN]
    extra = ("--uri", f"s3://{s3_bucket}/{CK}") if by_uri else ()
    restored = json.loads(setup.restore(plan_id, *extra).stdout)
    mine = [o for o in restored["objects"] if o["artifact_uri"].endswith(CK)]
    assert {o["uri"].split(s3_bucket + "/", 1)[1] for o in mine if o["status"] == "restored"} == (
        set(before) - {REWRITTEN}
    )
    now = {k: v for k, v in live(s3_bucket).items() if k.startswith(CK)}
    assert now == before | {REWRITTEN: new}  # the rewritten object is never overwritten
    left = [k for k in contents(s3_bucket, ".govern-quarantine/") if CK in k]
    assert left == [k for k in left if k.endswith(REWRITTEN)]  # only the old config's copy
    # applied again: still stale (the changed checkpoint stays), nothing removed again
    setup.apply(plan_id, code=3)
    assert {k: v for k, v in live(s3_bucket).items() if k.startswith(CK)} == now


def test_a_versioned_delete_a_killed_apply_made_is_recorded_with_its_marker(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    setup, plan_id, before = _killed_then_rewritten(
        tmp_path, moto_server, s3_client, s3_bucket, "apply: {delete_mode: versioned}\n"
    )
    _resume(setup, plan_id, before)
    new = live(s3_bucket)[REWRITTEN]
    restored = json.loads(setup.restore(plan_id, "--uri", f"s3://{s3_bucket}/{CK}").stdout)
    assert restored["restored"] == len(before) - 1
    now = {k: v for k, v in live(s3_bucket).items() if k.startswith(CK)}
    assert now == before | {REWRITTEN: new}
