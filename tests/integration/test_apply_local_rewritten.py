"""On local disk, a file written between apply's check and its delete is not deleted.

A filesystem has no conditional delete: apply's check runs up to two batches ahead of the
removals, and the store looks at each file's modification-time token (its ETag here)
right before unlinking it. A file replaced (a new file renamed over it) or rewritten in
place (the same inode, which a quarantine hard link shares) stays with its new content,
its action fails saying so, and nothing of it is left in quarantine for restore to put
back over the new content. Local disk, a real SQLite catalog, real stores.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from governance.apply import StoreOpener, apply_plan
from tests.fixtures.builders import local_writer, residue
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text
from tests.integration.test_conditional_delete_s3 import _WriterBeforeDelete


@pytest.mark.parametrize("how", ["replaced", "rewritten_in_place"])
@pytest.mark.parametrize("mode", ["quarantine", "permanent"])
def test_a_file_written_after_its_check_is_not_deleted(tmp_path: Path, how: str, mode: str) -> None:
    storage = tmp_path / "storage"
    keys = residue(local_writer(storage), "scratch")
    extra = f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\napply: {{delete_mode: {mode}}}\n"
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage), extra=extra))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    plan_id = setup.plan()["plan_id"]
    target = storage / "scratch" / "upload.tmp"
    new = b"written after the check " * 8

    def write() -> None:
        if how == "replaced":
            fresh = target.with_name(".upload.tmp.new")
            fresh.write_bytes(new)
            os.replace(fresh, target)
        else:
            with open(target, "r+b") as f:
                f.write(new)
            stamp = target.stat().st_mtime_ns + 1_000_000  # (a coarse clock: a new time)
            os.utime(target, ns=(stamp, stamp))

    root = storage.as_uri() + "/"
    opener = StoreOpener()
    racing = _WriterBeforeDelete(opener(root), write)
    engine = setup.engine()
    report = apply_plan(
        engine,
        plan_id,
        actor="ops",
        now=datetime.now(UTC),
        stores=lambda url: racing if url == root else opener(url),
        yes=True,
    )
    engine.dispose()

    outcomes = {r.artifact_uri: (r.outcome.value, r.reason) for r in report.results}
    assert outcomes.pop(root + "scratch/upload.tmp")[0] == "failed"
    assert {outcome for outcome, _ in outcomes.values()} == {"ok"}
    failed = next(r for r in report.results if r.outcome.value == "failed")
    assert f"{root}scratch/upload.tmp changed since it was checked" in failed.reason
    assert target.read_bytes().startswith(new)  # the new content stays
    assert [k for k in keys if (storage / k).exists()] == ["scratch/upload.tmp"]
    quarantined = [p.name for p in (tmp_path / ".govern-quarantine").rglob("*") if p.is_file()]
    assert "upload.tmp" not in quarantined
    if mode == "quarantine":
        assert json.loads(setup.restore(plan_id).stdout)["restored"] == len(keys) - 1
        assert target.read_bytes().startswith(new)
