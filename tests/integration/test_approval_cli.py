"""`govern approve / reject / audit` end to end on a small local tree and a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from governance.cli.main import cli
from tests.integration.test_plan_cli import FUTURE, setup  # noqa: F401


def _run(catalog: str, *args: str, as_: str = "alice") -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "--as", as_, "-q", *args])


def _json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
    return json.loads(result.stdout)


def _plan(catalog: str, policy: Path) -> str:
    doc = _json(
        _run(catalog, "plan", "--policy", str(policy), "--as-of", FUTURE, "--format", "json")
    )
    assert doc["status"] == "pending_approval"
    plan_id: str = doc["plan_id"]
    return plan_id


def test_approve_as_another_identity_then_audit_verifies(
    setup: tuple[str, Path, Path],  # noqa: F811
) -> None:
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)

    mine = _run(catalog, "approve", plan_id)
    assert mine.exit_code == 3, mine.stderr
    assert "self-approval" in mine.stderr

    ok = _run(catalog, "approve", plan_id, "--comment", "checked the report", as_="bob")
    assert ok.exit_code == 0, ok.stderr
    assert f"plan {plan_id}: approved by bob (1 of 1); applicable until 20" in ok.stdout

    again = _json(_run(catalog, "approve", plan_id, "--format", "json", as_="bob"))
    assert again["status"] == "approved"
    assert again["approvers"] == ["bob"]
    assert any("counts once" in r for r in again["reasons"])
    shown = _json(_run(catalog, "show", plan_id, "--format", "json"))
    assert shown["status"] == "approved"

    verified = _run(catalog, "audit", "--verify")
    assert verified.exit_code == 0, verified.stderr
    assert verified.stdout.strip() == "audit chain OK: 2 events"
    events = _json(_run(catalog, "audit", "--plan", plan_id, "--format", "json"))
    assert [(e["event"], e["actor"]) for e in events] == [("plan", "alice"), ("approve", "bob")]
    assert events[1]["payload"]["comment"] == "checked the report"
    assert events[1]["prev_hash"] == events[0]["hash"]
    table = _run(catalog, "audit")
    assert table.exit_code == 0
    assert "approve" in table.stdout
    assert "bob" in table.stdout

    # someone with write access to the catalog edits the record
    db = sqlite3.connect(catalog.removeprefix("sqlite:///"))
    with db:
        db.execute("UPDATE audit_events SET actor = 'mallory' WHERE event = 'approve'")
    db.close()
    broken = _run(catalog, "audit", "--verify")
    assert broken.exit_code == 1
    assert "event 2: hash does not match its content (edited?)" in broken.stdout
    as_json = _run(catalog, "audit", "--verify", "--format", "json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout) == {
        "ok": False,
        "checked": 2,
        "problems": ["event 2: hash does not match its content (edited?)"],
    }


def test_reject_needs_a_comment_and_is_final(setup: tuple[str, Path, Path]) -> None:  # noqa: F811
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)

    bare = _run(catalog, "reject", plan_id, as_="carol")
    assert bare.exit_code == 2
    assert "--comment" in bare.stderr

    vetoed = _json(
        _run(catalog, "reject", plan_id, "--comment", "keep beta", "--format", "json", as_="carol")
    )
    assert vetoed["status"] == "rejected"
    assert vetoed["rejected_by"] == "carol"

    late = _run(catalog, "approve", plan_id, as_="bob")
    assert late.exit_code == 3
    assert "rejected" in late.stderr
    events = _json(_run(catalog, "audit", "--format", "json"))
    assert [e["event"] for e in events] == ["plan", "reject"]
    assert _run(catalog, "audit", "--verify").exit_code == 0


@pytest.mark.parametrize("command", ["approve", "reject"])
def test_unknown_plan_exits_2(setup: tuple[str, Path, Path], command: str) -> None:  # noqa: F811
    catalog, _, _ = setup
    result = _run(catalog, command, "p-nope", "--comment", "x", as_="bob")
    assert result.exit_code == 2
    assert "no plan 'p-nope'" in result.stderr


def test_empty_audit_log(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    assert _run(catalog, "audit").stdout.strip() == "no audit events"
    assert _run(catalog, "audit", "--verify").stdout.strip() == "audit chain OK: 0 events"
    assert _json(_run(catalog, "audit", "--format", "json")) == []
