"""A veto given while an apply runs stops it before its next batch, and the plan stays
rejected (before, the apply carried out every remaining batch and marked it applied).
On local disk, a real SQLite catalog, the approval written as `govern reject` writes it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from governance.apply import executor
from governance.approval import reject
from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_support import Setup, govern, policy_text

RUN = "runs/a/"


def test_a_veto_during_an_apply_stops_it_and_the_plan_stays_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = tmp_path / "storage"
    write = local_writer(storage)
    hf_run(write, RUN, steps=tuple(range(500, 5500, 500)))
    marker(write, RUN)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage), extra="safety: {max_delete_fraction: 1}\n"))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    plan_id = doc["plan_id"]
    assert len(doc["actions"]) >= 4
    assert govern(setup.catalog, "approve", plan_id, identity="bob").exit_code == 0
    monkeypatch.setattr(executor, "CHUNK_ACTIONS", 1)  # one action a batch
    asked = 0
    real = executor.veto_of

    def veto_after_the_first_batch(engine: Any, pid: str) -> str | None:
        nonlocal asked
        asked += 1
        if asked == 2:  # carol says stop while the apply runs
            reject(engine, pid, actor="carol", comment="STOP", now=datetime.now(UTC))
        return real(engine, pid)

    monkeypatch.setattr(executor, "veto_of", veto_after_the_first_batch)

    result = setup.apply(plan_id, code=3)

    report = json.loads(result.stdout)
    assert len(report["results"]) == 1  # the batch under way when the veto came
    assert report["plan_status"] == "rejected"
    assert report["vetoed"].startswith("vetoed by carol at ")
    assert "stopped: the plan was vetoed by carol" in result.stderr
    shown = json.loads(govern(setup.catalog, "show", plan_id, "--format", "json").stdout)
    assert shown["status"] == "rejected"
    again = govern(setup.catalog, "apply", plan_id, "--policy", str(policy))
    assert again.exit_code == 3
