"""A strip and the archive of what it keeps, on one checkpoint, through an interrupted apply.

The tier strips checkpoint-500 to its weights and metadata and moves those to an archive
URL: the plan's own archive takes the files the strip keeps away. An apply killed after
storage changed and before anything was recorded, then run again, must finish both (the
strip is not stale because its kept files moved: the plan moved them), journal every
removal, and let restore bring every object back.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from governance.apply import StoreOpener, apply_plan
from governance.apply import actions as runner
from governance.storage.base import KeyResult
from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_support import NO_APPROVAL, Setup, snapshot

RUN = "runs/a/"
STRIPPED = f"{RUN}checkpoint-500/"

POLICY = """version: 1
storage:
  - name: root
    url: {url}
layout:
  runs: ["runs/{{run}}/"]
protect:
  min_age: 1h
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - name: recent
        keep_last: 1
      - name: thin
        keep_every_steps: 1000
        keep_components: [weights, metadata]
        archive: {{url: {dest}}}
    otherwise: delete
{approval}safety: {{max_delete_fraction: 1}}
"""


def _tree(tmp_path: Path) -> tuple[Setup, Path]:
    """A finished HF run on local disk under POLICY, archiving to a folder beside it."""
    storage = tmp_path / "storage"
    write = local_writer(storage)
    hf_run(write, RUN, steps=(500, 1000, 1500, 2000))
    marker(write, RUN)
    archive = tmp_path / "archive"
    archive.mkdir()
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(url=storage, dest=archive.as_uri() + "/", approval=NO_APPROVAL))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage


def _killed_before_commit(self: Any, *args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt("killed after storage changed, before the commit")


def test_an_interrupted_strip_and_archive_finish_and_come_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup, storage = _tree(tmp_path)
    before = snapshot(storage)
    doc = setup.plan()
    base = storage.as_uri() + "/"
    on_it = [a["action"] for a in doc["actions"] if a["artifact"]["uri"] == base + STRIPPED]
    assert on_it == ["strip", "archive"]

    with monkeypatch.context() as patch:
        patch.setattr(runner.ActionRunner, "_commit", _killed_before_commit)
        engine = setup.engine()
        try:
            with pytest.raises(KeyboardInterrupt):
                apply_plan(engine, doc["plan_id"], actor="ops", now=datetime.now(UTC),
                           stores=StoreOpener())  # fmt: skip
        finally:
            engine.dispose()
    assert not (storage / STRIPPED).exists() or not any((storage / STRIPPED).iterdir())

    report = json.loads(setup.apply(doc["plan_id"]).stdout)

    assert {r["outcome"] for r in report["results"]} == {"ok"}, [
        (r["action"], r["reason"]) for r in report["results"] if r["outcome"] != "ok"
    ]
    assert report["plan_status"] == "applied"
    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert restored["failed"] == 0
    after = snapshot(storage)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}


def test_a_strip_that_failed_while_its_archive_went_through_is_finished_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first apply could not remove the optimizer state (a failure, retried later)
    but archived the weights away: the next apply finishes the strip (the files it keeps
    were moved by the plan's own archive, an earlier apply's doing, not vanished)."""
    setup, storage = _tree(tmp_path)
    doc = setup.plan()
    strip_id = next(a["id"] for a in doc["actions"] if a["action"] == "strip"
                    and a["artifact"]["uri"].endswith(STRIPPED))  # fmt: skip
    real = runner.remove

    def failing_strips(items: Any, *args: Any) -> Any:
        answers = real([i for i in items if i.action_id != strip_id], *args)
        for i in items:
            if i.action_id == strip_id:
                answers[(i.action_id, i.key)] = KeyResult(i.key, False, error="throttled")
        return answers

    with monkeypatch.context() as patch:
        patch.setattr(runner, "remove", failing_strips)
        first = json.loads(setup.apply(doc["plan_id"], code=1).stdout)
    by_id = {r["action_id"]: r for r in first["results"]}
    assert by_id[strip_id]["outcome"] == "failed"
    assert by_id[strip_id + 1]["outcome"] == "ok"  # the archive of what it keeps
    assert (storage / STRIPPED / "optimizer.pt").exists()

    second = json.loads(setup.apply(doc["plan_id"]).stdout)

    by_id = {r["action_id"]: r for r in second["results"]}
    assert by_id[strip_id]["outcome"] == "ok", by_id[strip_id]["reason"]
    assert not (storage / STRIPPED / "optimizer.pt").exists()
    assert second["plan_status"] == "applied"
