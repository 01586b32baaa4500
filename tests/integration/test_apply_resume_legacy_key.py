"""A resumed apply copies an object to the quarantine key its pending row names, not to
the key this release would name: the row (and restore, and purge) know only that one.
A row left by an earlier release that named keys otherwise would else be recorded
removed with a key that holds no copy. Local disk, a real SQLite catalog.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from governance.apply import StoreOpener, apply_plan
from tests.fixtures.builders import local_writer, residue
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text


class _DiesBeforeDelete:
    """The root's real store; the process "dies" when apply first asks it to delete
    (after the quarantine copies and their pending rows, before any source is removed)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def delete(self, keys: Any, etags: Any = None) -> Any:
        raise KeyboardInterrupt


def test_a_resumed_apply_copies_to_the_key_its_pending_row_names(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    keys = residue(local_writer(storage), "scratch")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(str(storage), extra=f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n")
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    plan_id = setup.plan()["plan_id"]
    root = storage.as_uri() + "/"
    opener = StoreOpener()
    dying = _DiesBeforeDelete(opener(root))
    engine = setup.engine()
    with pytest.raises(KeyboardInterrupt):
        apply_plan(
            engine,
            plan_id,
            actor="ops",
            now=datetime.now(UTC),
            stores=lambda url: dying if url == root else opener(url),
        )
    with engine.begin() as conn:  # as an earlier release would have named them
        conn.execute(
            text("UPDATE removed_objects SET quarantine_key = 'legacy/' || quarantine_key")
        )

    report = apply_plan(engine, plan_id, actor="ops", now=datetime.now(UTC), stores=opener)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT state, quarantine_key FROM removed_objects")).all()
    engine.dispose()

    assert {r.outcome.value for r in report.results} == {"ok"}
    assert {state for state, _ in rows} == {"removed"}
    quarantine = tmp_path / ".govern-quarantine"
    assert all((quarantine / key).is_file() for _, key in rows)
    assert not any((storage / k).exists() for k in keys)
    assert json.loads(setup.restore(plan_id).stdout)["restored"] == len(keys)
    assert all((storage / k).is_file() for k in keys)
