"""Objects govern copied onto themselves (a transition, a restore from quarantine) have a
new LastModified; the catalog keeps when their content was written and when the copy put
them in their class, and so must a saved plan: apply compares storage's time with the
copy's, and without it every later plan touching them was skipped as re-uploaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_apply_s3 import LOG, make_setup, upload_tree
from tests.integration.test_apply_support import without_restore_hold

pytestmark = pytest.mark.s3


def _outcomes(result: Any) -> set[str]:
    return {r["outcome"] for r in json.loads(result.stdout)["results"]}


def test_a_plan_made_after_a_restore_applies(
    tmp_path: Path, moto_server: str, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    tree = make_setup(tmp_path, moto_server, s3_bucket)
    without_restore_hold(tree.policy)  # (the next plan may act on what was restored)
    first = tree.plan()
    tree.apply(first["plan_id"])
    tree.plan()  # its scan marks the removed objects gone
    assert json.loads(tree.restore(first["plan_id"]).stdout)["failed"] == 0
    again = tree.plan()  # the restored copies, recorded with their content's time
    assert again["actions"]
    assert _outcomes(tree.apply(again["plan_id"])) == {"ok"}


def test_a_transitioned_object_moves_on_down_the_ladder(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    upload_tree(s3_bucket)
    tree = make_setup(tmp_path, moto_server, s3_bucket)
    tree.apply(tree.plan()["plan_id"])
    assert s3_client.head_object(Bucket=s3_bucket, Key=LOG)["StorageClass"] == "STANDARD_IA"
    tree.policy.write_text(
        tree.policy.read_text().replace(
            "transition: [{after: 1d, storage_class: STANDARD_IA}]",
            "transition: [{after: 1d, storage_class: STANDARD_IA}, "
            "{after: 5d, storage_class: GLACIER_IR}]",
        )
    )
    doc = tree.plan()
    assert [a["action"] for a in doc["actions"]] == ["transition"]
    assert _outcomes(tree.apply(doc["plan_id"])) == {"ok"}
    assert s3_client.head_object(Bucket=s3_bucket, Key=LOG)["StorageClass"] == "GLACIER_IR"
