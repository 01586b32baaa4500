"""A quarantine copy that fails fails its whole action, and apply then removes only the
quarantine copies it made itself: never a key its failed copy did not write (another
apply, or the one that took over this apply's lock, may hold its own copy there).
Local disk, a real SQLite catalog, real stores; one copy is refused by a wrapper.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from governance.apply import StoreOpener, apply_plan
from governance.apply.actions import quarantine_key
from governance.storage.base import KeyResult
from tests.fixtures.builders import deepspeed_run, local_writer
from tests.integration.test_apply_support import NO_APPROVAL, Setup, policy_text

RUN = "runs/ds/"


class _RefusesOneCopy:
    """The root's real store, but the copy of `refused` fails (a copy S3 refused)."""

    def __init__(self, real: Any, refused: str) -> None:
        self._real = real
        self._refused = refused

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def copy(self, key: str, *args: Any, **kwargs: Any) -> KeyResult:
        if key == self._refused:
            return KeyResult(key, False, error="AccessDenied: refused")
        return self._real.copy(key, *args, **kwargs)


def test_a_failed_copy_leaves_what_another_apply_holds_at_its_quarantine_key(
    tmp_path: Path,
) -> None:
    storage = tmp_path / "storage"
    deepspeed_run(local_writer(storage), RUN, steps=(500, 1000, 1500, 2000))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text(str(storage), extra=f"{NO_APPROVAL}safety: {{max_delete_fraction: 1}}\n")
    )
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    root = storage.as_uri() + "/"
    # an action removing two objects or more (a strip of a tag's optimizer shards)
    action = next(a for a in doc["actions"] if len(a["objects"]) >= 2)
    folder = action["artifact"]["uri"][len(root) :]
    files = sorted(o["uri"][len(root) :] for o in action["objects"])
    refused = files[-1]
    # what another apply holds at the refused object's quarantine key
    quarantine = tmp_path / ".govern-quarantine"
    theirs = quarantine / quarantine_key(doc["plan_id"], root, refused)
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"another apply's copy")

    opener = StoreOpener()
    refusing = _RefusesOneCopy(opener(root), refused)

    def stores(url: str) -> Any:
        return refusing if url == root else opener(url)

    engine = setup.engine()
    report = apply_plan(engine, doc["plan_id"], actor="ops", now=datetime.now(UTC), stores=stores)
    engine.dispose()

    failed = {r.artifact_uri: r.reason for r in report.results if r.outcome.value == "failed"}
    assert list(failed) == [root + folder]
    assert f"quarantine copy of {refused} failed" in failed[root + folder]
    assert theirs.read_bytes() == b"another apply's copy"  # never this apply's to remove
    for name in files:  # the action removed nothing
        assert (storage / name).is_file()
        if name != refused:  # and the copies it made are gone again
            assert not (quarantine / quarantine_key(doc["plan_id"], root, name)).exists()
