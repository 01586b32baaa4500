"""What an unfinished apply of a plan that can no longer be applied was removing is
settled by restore.

An apply killed between its deletes and their record leaves them `pending`, their copies
in quarantine; `govern apply` finishes them. Once the plan is rejected (or its approval
expires) no apply ever will: restore used to say "copy them back from quarantine by hand".
It now settles them with the checks it makes of every object: one gone comes back from
its quarantine copy, one still at its key as the plan saw it stays and its copy goes, and
one written anew at its key is never overwritten (failed, its copy kept).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from governance.apply import StoreOpener, apply_plan, restore_plan
from governance.storage import normalize_url
from tests.integration.test_apply_resume import DiesAfterDelete, build, count
from tests.integration.test_apply_support import Setup, govern


class DiesBeforeDelete(DiesAfterDelete):
    """A store killed after the quarantine copies were made, before the deletes went."""

    def delete(self, keys: Any, etags: Any = None) -> Any:
        raise KeyboardInterrupt


def _killed_apply(
    setup: Setup, storage: Path, plan_id: str, store: type[DiesAfterDelete], *, yes: bool = False
) -> None:
    opener = StoreOpener()
    root = storage.as_uri() + "/"
    dying = store(opener(root))
    engine = setup.engine()
    try:
        with pytest.raises(KeyboardInterrupt):
            apply_plan(
                engine, plan_id, actor="ops", now=datetime.now(UTC), yes=yes,
                stores=lambda url: dying if normalize_url(url) == root else opener(url),
            )  # fmt: skip
    finally:
        engine.dispose()
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'pending'") == 90


def _files(where: Path) -> dict[str, bytes]:
    return {str(p.relative_to(where)): p.read_bytes() for p in where.rglob("*") if p.is_file()}


def _reject(setup: Setup, plan_id: str) -> None:
    result = govern(setup.catalog, "reject", plan_id, "--comment", "not now")
    assert result.exit_code == 0, result.stderr


def test_deleted_objects_of_a_rejected_plan_come_back(tmp_path: Path) -> None:
    setup, storage, plan_id = build(tmp_path)
    before = _files(storage)
    _killed_apply(setup, storage, plan_id, DiesAfterDelete)
    assert _files(storage) == {}
    _reject(setup, plan_id)
    blocked = setup.apply(plan_id, code=None)
    assert blocked.exit_code != 0  # no apply will finish them

    restored = setup.restore(plan_id)

    report = json.loads(restored.stdout)
    assert (report["restored"], report["failed"]) == (90, 0)
    assert f"plan {plan_id} is rejected: no apply will finish what an unfinished apply" in (
        restored.stderr
    )
    assert _files(storage) == before
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'restored'") == 90
    assert _files(storage.parent / ".govern-quarantine") == {}


def test_objects_never_deleted_stay_and_one_written_anew_is_not_overwritten(
    tmp_path: Path,
) -> None:
    setup, storage, plan_id = build(tmp_path)
    before = _files(storage)
    _killed_apply(setup, storage, plan_id, DiesBeforeDelete)
    assert _files(storage) == before  # copies made, nothing deleted
    quarantine = storage.parent / ".govern-quarantine"
    assert len(_files(quarantine)) == 90
    rewritten = sorted(p for p in storage.rglob("*") if p.is_file())[0]
    rewritten.write_bytes(b"new content, written after the kill")
    _reject(setup, plan_id)

    restored = setup.restore(plan_id, code=1)

    report = json.loads(restored.stdout)
    assert (report["restored"], report["failed"]) == (89, 1)
    [failed] = [o for o in report["objects"] if o["error"]]
    assert failed["uri"] == rewritten.as_uri()
    assert "an object exists at the original key again" in failed["error"]
    assert rewritten.read_bytes() == b"new content, written after the kill"
    assert {k: v for k, v in _files(storage).items() if storage / k != rewritten} == {
        k: v for k, v in before.items() if storage / k != rewritten
    }
    assert len(_files(quarantine)) == 1  # the rewritten object's copy, kept
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'pending'") == 1
    # the 89 that never left keep no row: a `restored` one would protect them as brought
    # back (protect.restored_for) and have explain say so
    assert count(setup, "SELECT count(*) FROM removed_objects") == 1


def test_an_expired_approval_is_settled_without_a_detour_through_apply(tmp_path: Path) -> None:
    """The catalog's status column says `approved` until an apply finds the approval
    expired: restore read it, told the user to run apply, which refused the plan as
    expired; only a second restore settled the objects. It now goes by the plan's status
    as apply decides it."""
    setup, storage, plan_id = build(tmp_path)
    before = _files(storage)
    _killed_apply(setup, storage, plan_id, DiesAfterDelete)
    later = datetime.now(UTC) + timedelta(days=400)  # past `approval.expires_after`
    said: list[str] = []
    engine = setup.engine()
    try:
        report = restore_plan(
            engine, plan_id, actor="ops", now=later, stores=StoreOpener(), note=said.append
        )
    finally:
        engine.dispose()
    assert (report.restored, report.failed) == (90, 0)
    assert any(f"plan {plan_id} is expired: no apply will finish" in n for n in said)
    assert _files(storage) == before


def test_a_permanent_delete_that_never_happened_leaves_the_objects_as_they_are(
    tmp_path: Path,
) -> None:
    """delete_mode permanent, killed before its deletes: every object is still in place.
    Restore failed each as "deleted permanently: there is no way back" (exit 1), its rows
    pending for good. They stay, and their rows go."""
    setup, storage, plan_id = build(tmp_path, "apply: {delete_mode: permanent}\n")
    before = _files(storage)
    _killed_apply(setup, storage, plan_id, DiesBeforeDelete, yes=True)
    assert _files(storage) == before
    _reject(setup, plan_id)

    report = json.loads(setup.restore(plan_id).stdout)

    assert report["failed"] == 0
    assert _files(storage) == before
    assert count(setup, "SELECT count(*) FROM removed_objects") == 0
