"""A plan edited in the catalog after it was made is neither approved nor applied.

The fingerprint covers the actions; what else approve and apply decide by (a veto, the
frozen approval rules, a refusal, when the plan was made, when it was approved) lives in
rows a database editor can change, and each was written into the hash-chained audit log
when it happened. Each edit below let a plan through (apply exit 0, `audit --verify`
OK); each now refuses it (exit 3, "changed after review") and `audit --verify` names it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.fixtures.builders import hf_run, local_writer
from tests.integration.test_apply_support import Setup, govern

RUN = "runs/a/"


def _setup(tmp_path: Path, fraction: float = 1.0, code: int = 0) -> tuple[Setup, Path, str]:
    """A run of three checkpoints, the policy keeping the newest (deleting 2 of 3 is
    over a `max_delete_fraction` under 0.67: refused, exit 3), and its plan."""
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), RUN, steps=(100, 200, 300))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage: [{{name: root, url: {storage}}}]
layout: {{runs: ["runs/{{run}}/"]}}
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers: [{{name: recent, keep_last: 1}}]
    otherwise: delete
safety: {{max_delete_fraction: {fraction}}}
"""
    )
    db = tmp_path / "catalog.db"
    setup = Setup(f"sqlite:///{db}", policy)
    made = govern(setup.catalog, "plan", "--policy", str(policy), "--format", "json")
    assert made.exit_code == code, made.stderr
    return setup, db, json.loads(made.stdout)["plan_id"]


def _edit(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()


def _verify(setup: Setup) -> list[str]:
    done = govern(setup.catalog, "audit", "--verify", "--format", "json")
    assert done.exit_code == 1, done.stdout
    problems: list[str] = json.loads(done.stdout)["problems"]
    return problems


def _refused(setup: Setup, plan_id: str, storage: Path) -> str:
    before = sorted(p.name for p in (storage / RUN).iterdir())
    applied = setup.apply(plan_id, code=3)
    assert "the catalog was changed after review" in applied.stderr, applied.stderr
    assert sorted(p.name for p in (storage / RUN).iterdir()) == before
    return applied.stderr


def test_a_deleted_veto_is_still_a_veto(tmp_path: Path) -> None:
    setup, db, plan_id = _setup(tmp_path)
    assert govern(setup.catalog, "approve", plan_id, identity="bob").exit_code == 0
    vetoed = govern(setup.catalog, "reject", plan_id, "--comment", "no", identity="carol")
    assert vetoed.exit_code == 0
    _edit(
        db,
        "DELETE FROM approvals WHERE decision = 'reject'",
        "UPDATE plans SET status = 'approved'",
    )
    stderr = _refused(setup, plan_id, tmp_path / "storage")
    assert "its reject by carol at" in stderr
    assert any("by carol at" in p and "has no decision row" in p for p in _verify(setup))


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        # no approval needed any more: "approved on creation"
        ("UPDATE plans SET controls = json_set(controls, '$.approval.require_for', "
         "json('[]')), status = 'approved'", "its set of frozen rules"),
        # made three days earlier: a notice period (or an approval's age) run out sooner
        ("UPDATE plans SET created_at = datetime(created_at, '-3 days')", "its creation time"),
    ],
)  # fmt: skip
def test_edited_plan_rows_are_refused(tmp_path: Path, edit: str, said: str) -> None:
    setup, db, plan_id = _setup(tmp_path)
    _edit(db, edit)
    assert said in _refused(setup, plan_id, tmp_path / "storage")
    approved = govern(setup.catalog, "approve", plan_id, identity="bob")
    assert approved.exit_code == 3
    assert "the catalog was changed after review" in approved.stderr
    assert any(p.startswith(f"plan {plan_id}: {said}") for p in _verify(setup))


def test_a_cleared_refusal_is_refused(tmp_path: Path) -> None:
    setup, db, plan_id = _setup(tmp_path, fraction=0.1, code=3)  # refused by the limit
    _edit(db, "UPDATE plans SET refusal = NULL, status = 'pending_approval'")
    approved = govern(setup.catalog, "approve", plan_id, identity="bob")
    assert approved.exit_code == 3
    assert "its refusal is not what its audit event" in approved.stderr
    assert any(p.startswith(f"plan {plan_id}: it was made refused") for p in _verify(setup))


def test_an_approval_moved_in_time_is_refused(tmp_path: Path) -> None:
    setup, db, plan_id = _setup(tmp_path)
    assert govern(setup.catalog, "approve", plan_id, identity="bob").exit_code == 0
    _edit(db, "UPDATE approvals SET at = datetime(at, '+2 days')")
    stderr = _refused(setup, plan_id, tmp_path / "storage")
    assert "its approve by bob (decision 1) has no audit event of its own" in stderr
    problems = _verify(setup)
    assert any(p.startswith("decision 1 (approve of plan") for p in problems)


def test_an_untouched_plan_is_approved_and_applied(tmp_path: Path) -> None:
    setup, _, plan_id = _setup(tmp_path)
    assert govern(setup.catalog, "approve", plan_id, identity="bob").exit_code == 0
    applied = setup.apply(plan_id)
    assert applied.exit_code == 0
    done = govern(setup.catalog, "audit", "--verify")
    assert done.exit_code == 0, done.stdout
