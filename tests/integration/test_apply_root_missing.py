"""A root that is not there at apply time (an unmounted volume, a moved folder) refuses
the apply before any action, and the plan stays as it was.

Every object read as vanished: each action was skipped as stale, the plan was left
`partially_applied` with nothing applied, and "plan again" was the advice. Local disk,
a real SQLite catalog; the same check is one listing of an S3 root (`Store.check`).
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_apply_local import build
from tests.integration.test_apply_support import snapshot


def test_an_unmounted_root_refuses_the_apply_and_leaves_the_plan_approved(
    tmp_path: Path,
) -> None:
    setup, storage = build(tmp_path)
    before = snapshot(storage)
    doc = setup.plan()
    assert setup.status(doc["plan_id"]) == "approved"  # (no approval needed in this policy)
    away = storage.with_name("storage-unmounted")
    storage.rename(away)

    refused = setup.apply(doc["plan_id"], code=2)

    root = storage.as_uri() + "/"
    assert refused.stderr == (
        f"error: {root}: does not exist: plan {doc['plan_id']} acts on it, and nothing was "
        "applied (an unmounted volume? a moved folder?); make it reachable, then apply again\n"
    )
    assert setup.status(doc["plan_id"]) == "approved"
    away.rename(storage)
    assert snapshot(storage) == before
    assert setup.apply(doc["plan_id"]).exit_code == 0
    assert setup.status(doc["plan_id"]) == "applied"


def test_a_root_that_is_an_empty_mount_point_refuses_the_apply(tmp_path: Path) -> None:
    """The root is the mount point itself: with the volume not mounted it is an empty
    folder, which a listing alone finds in order."""
    setup, storage = build(tmp_path)
    doc = setup.plan()
    away = storage.with_name("storage-unmounted")
    storage.rename(away)
    storage.mkdir()  # the bare mount point

    refused = setup.apply(doc["plan_id"], code=2)

    assert refused.stderr.startswith(
        f"error: {storage.as_uri()}/: is an empty folder: plan {doc['plan_id']} acts on it, "
        "and nothing was applied (an unmounted volume? a moved folder?)"
    )
    assert setup.status(doc["plan_id"]) == "approved"
    storage.rmdir()
    away.rename(storage)
    assert setup.apply(doc["plan_id"]).exit_code == 0
