"""What an apply did is in the catalog before the next scan (see `catalog.removals`); on
S3 (moto over HTTP). Each catalog backend: `test_apply_catalogs`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_s3 import RUN, make_setup, upload_tree
from tests.integration.test_apply_support import (
    NO_APPROVAL,
    Setup,
    actions_by,
    policy_text,
    without_restore_hold,
)


def test_s3_an_apply_leaves_nothing_for_the_next_plan_without_a_scan(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """Deletes, strips, an aborted multipart upload and a transition: the catalog knows
    what each did, so a plan made without scanning again has nothing left to do."""
    upload_tree(s3_bucket)
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="scratch/big.bin")
    setup = make_setup(tmp_path, moto_server, s3_bucket)
    doc = setup.plan()
    kinds = {a["action"] for a in doc["actions"]}
    assert kinds == {"delete", "strip", "transition", "abort_upload"}
    setup.apply(doc["plan_id"])

    assert setup.plan("--no-scan")["actions"] == []


def test_a_file_written_again_after_a_no_scan_plan_is_not_taken_for_one_it_saw(
    tmp_path: Path,
) -> None:
    """The apply stripped checkpoint-500 (its optimizer state is gone, in the catalog
    too); a new policy, planned without scanning, deletes the checkpoint whole. The
    optimizer file written again before that plan's apply is one it never saw: the
    delete is stale, not carried out around it (before, the catalog row the apply marked
    gone counted as held at the plan's scan, so the file was not new)."""
    storage = tmp_path / "storage"
    write = local_writer(storage)
    hf_run(write, RUN, steps=(500, 1000, 1500, 2000))
    marker(write, RUN)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(str(storage), extra=f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n")
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    base = storage.as_uri() + "/"
    stripped = f"{RUN}checkpoint-500/"
    first = setup.plan()
    assert actions_by(first, base)[stripped] == ["strip"]
    setup.apply(first["plan_id"])
    policy.write_text(
        policy.read_text().replace("keep_every_steps: 1000", "keep_every_steps: 2000")
    )
    second = setup.plan("--no-scan")
    assert actions_by(second, base)[stripped] == ["delete"]
    again = storage / stripped / "optimizer.pt"
    assert not again.exists()
    again.write_bytes(b"optimizer state written after the second plan")

    report = json.loads(setup.apply(second["plan_id"], code=3).stdout)

    [result] = [r for r in report["results"] if r["artifact_uri"] == base + stripped]
    assert result["outcome"] == "skipped"
    assert f"unplanned object {stripped}optimizer.pt" in result["reason"]
    assert len(list((storage / stripped).iterdir())) > 1  # the checkpoint is as it was


def test_s3_a_versioned_restore_brings_the_objects_back_in_the_catalog_too(
    tmp_path: Path, moto_server: str, s3_client: Any, s3_bucket: str
) -> None:
    """delete_mode versioned: a restore removes the delete markers, and the old versions
    are current again, as they were: their rows are live again, and a plan made without
    scanning plans them as the first plan did."""
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_tree(s3_bucket)
    setup = make_setup(
        tmp_path, moto_server, s3_bucket, NO_APPROVAL + "apply: {delete_mode: versioned}\n"
    )
    base = f"s3://{s3_bucket}/"
    first = setup.plan()
    setup.apply(first["plan_id"])
    assert [a for a in setup.plan("--no-scan")["actions"] if a["action"] != "transition"] == []

    restored = json.loads(setup.restore(first["plan_id"]).stdout)

    assert restored["failed"] == 0
    # what the restore brought back is protected (protect.restored_for) ...
    held = setup.plan("--no-scan")
    assert [a for a in held["actions"] if a["action"] != "transition"] == []
    assert any(k["reason"].startswith("protected: restored from plan ") for k in held["kept"])
    # ... and as the policy decides anew, planned as the first plan did
    without_restore_hold(setup.policy)
    expected = actions_by(first, base)
    assert {k: v for k, v in expected.items() if v != ["transition"]} == {
        k: v for k, v in actions_by(setup.plan("--no-scan"), base).items() if v != ["transition"]
    }
