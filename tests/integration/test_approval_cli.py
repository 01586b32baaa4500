"""`govern approve / reject / audit` end to end on a small local tree and a real SQLite file.

The tree was written a month ago (real files, old mtimes), so plans made now have actions:
a plan made `--as-of` a future time is a what-if plan and can never be approved.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from governance.cli.main import cli
from tests.integration.test_plan_cli import FUTURE, tree


@pytest.fixture
def setup(tmp_path: Path) -> tuple[str, Path, Path]:
    """(catalog URL, policy path, storage folder): test_plan_cli's tree, written 30 days ago."""
    return tree(tmp_path, datetime.now(UTC) - timedelta(days=30))


def _run(catalog: str, *args: str, as_: str = "alice") -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "--as", as_, "-q", *args])


def _json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
    return json.loads(result.stdout)


def _plan(catalog: str, policy: Path, *extra: str, status: str = "pending_approval") -> str:
    doc = _json(_run(catalog, "plan", "--policy", str(policy), "--format", "json", *extra))
    assert doc["status"] == status
    assert doc["summary"]["actions"] > 0
    plan_id: str = doc["plan_id"]
    return plan_id


def test_approve_as_another_identity_then_audit_verifies(
    setup: tuple[str, Path, Path],
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
    doc = json.loads(as_json.stdout)
    assert (doc["ok"], doc["checked"]) == (False, 2)
    assert doc["problems"][:2] == [
        "event 2: hash does not match its content (edited?)",
        # the approvals table says bob approved; no event says so any more
        f"decision 1 (approve of plan {plan_id} by bob) has no audit event: written "
        "outside govern, or its event edited?",
    ]
    # and the edited event names an approval no row holds
    [third] = doc["problems"][2:]
    assert third.startswith(f"the approve of plan {plan_id} by mallory at ")
    assert third.endswith("(an audit event) has no decision row: deleted outside govern?")


def test_reject_needs_a_comment_and_is_final(setup: tuple[str, Path, Path]) -> None:
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
def test_unknown_plan_exits_2(setup: tuple[str, Path, Path], command: str) -> None:
    catalog, policy, _ = setup
    _plan(catalog, policy)
    result = _run(catalog, command, "p-nope", "--comment", "x", as_="bob")
    assert result.exit_code == 2
    assert "no plan 'p-nope'" in result.stderr


def test_empty_audit_log(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    (tmp_path / "storage").mkdir()  # audit refuses a catalog that does not exist: make one
    assert _run(catalog, "scan", "--root", str(tmp_path / "storage")).exit_code == 0
    assert _run(catalog, "audit").stdout.strip() == "no audit events"
    assert _run(catalog, "audit", "--verify").stdout.strip() == "audit chain OK: 0 events"
    assert _json(_run(catalog, "audit", "--format", "json")) == []


def test_audit_of_an_unknown_plan_exits_2(setup: tuple[str, Path, Path]) -> None:
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)
    for extra in ((), ("--format", "json"), ("--verify",)):
        result = _run(catalog, "audit", "--plan", "p-nope", *extra)
        assert result.exit_code == 2, (extra, result.stdout, result.stderr)
        assert "no plan 'p-nope' in the catalog" in result.stderr
        assert "no audit events" not in result.stdout
    events = _json(_run(catalog, "audit", "--plan", plan_id, "--format", "json"))
    assert [e["event"] for e in events] == ["plan"]


@pytest.mark.parametrize("name", ["", "   ", "\t"])
def test_an_empty_as_is_a_bad_argument(setup: tuple[str, Path, Path], name: str) -> None:
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)
    result = _run(catalog, "approve", plan_id, as_=name)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "--as" in result.stderr
    assert "empty" in result.stderr
    assert [e["event"] for e in _json(_run(catalog, "audit", "--format", "json"))] == ["plan"]


def test_identity_is_stripped_so_a_trailing_space_is_the_same_person(
    setup: tuple[str, Path, Path],
) -> None:
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)  # made by alice
    mine = _run(catalog, "approve", plan_id, as_="alice ")
    assert mine.exit_code == 3, (mine.stdout, mine.stderr)
    assert "self-approval" in mine.stderr
    mine_too = _run(catalog, "approve", plan_id, as_=" alice\n")
    assert mine_too.exit_code == 3
    ok = _json(_run(catalog, "approve", plan_id, "--format", "json", as_=" bob "))
    assert ok["approvers"] == ["bob"]
    assert ok["status"] == "approved"

    # GOVERN_USER is stripped too: a plan made as " carol " was made by carol
    made = CliRunner().invoke(
        cli,
        ["--catalog", catalog, "-q", "plan", "--policy", str(policy), "--format", "json"],
        env={"GOVERN_USER": " carol "},
    )
    assert made.exit_code == 0, made.stderr
    other = json.loads(made.stdout)["plan_id"]
    listed = {p["plan_id"]: p for p in _json(_run(catalog, "plans", "--format", "json"))}
    assert listed[other]["created_by"] == "carol"
    assert _run(catalog, "approve", other, as_="carol").exit_code == 3


def test_a_what_if_plan_made_as_of_the_future_cannot_be_approved(
    setup: tuple[str, Path, Path],
) -> None:
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy, "--as-of", FUTURE, status="what_if")
    refused = _run(catalog, "approve", plan_id, "--comment", "ok", as_="bob")
    assert refused.exit_code == 3, (refused.stdout, refused.stderr)
    assert (
        f"plan {plan_id} was made as of 2100-01-01T00:00:00Z, in the future: a what-if plan "
        "cannot be approved or applied; plan again without --as-of"
    ) in refused.stderr
    assert [e["event"] for e in _json(_run(catalog, "audit", "--format", "json"))] == ["plan"]
    # it can still be shown and reported on, as it is
    shown = _json(_run(catalog, "show", plan_id, "--format", "json"))
    assert shown["status"] == "what_if"  # and `plans` says so, as approve and apply decide
    # its history says it can never be approved: not "needs 1 more approver", nor, with
    # no action needing approval, "approved on creation ... applicable until ..."
    assert shown["history"]["approval"] == (
        "what_if: made as of a time after it was made: it is reported on, never approved "
        "or applied (plan again without --as-of)"
    )
    assert "approval: what_if: made as of a time after it was made" in (
        _run(catalog, "show", plan_id, "--format", "table").stdout
    )
    assert shown["as_of"] == "2100-01-01T00:00:00Z"
    listed = {p["plan_id"]: p for p in _json(_run(catalog, "plans", "--format", "json"))}
    assert listed[plan_id]["status"] == "what_if"
    # a clock a little ahead of the catalog's is no what-if: a few minutes are allowed
    soon = (datetime.now(UTC) + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fine = _plan(catalog, policy, "--as-of", soon)
    assert _run(catalog, "approve", fine, as_="bob").exit_code == 0


def test_plans_and_show_say_expired_once_the_approval_has_expired(
    setup: tuple[str, Path, Path],
) -> None:
    """bob approved four days ago; the default `expires_after` is 72h. Nothing has run
    since, so the catalog still says approved: what people read must say expired."""
    from governance.approval import approve
    from governance.catalog.engine import open_engine
    from governance.catalog.plans import load_plan_header

    catalog, policy, _ = setup
    past = datetime.now(UTC) - timedelta(days=5)
    plan_id = _plan(catalog, policy, "--as-of", past.strftime("%Y-%m-%dT%H:%M:%SZ"))
    fresh = _plan(catalog, policy)
    engine = open_engine(catalog)
    try:
        approve(engine, plan_id, actor="bob", comment=None, now=past + timedelta(days=1))
        approve(engine, fresh, actor="bob", comment=None, now=datetime.now(UTC))
        assert load_plan_header(engine, plan_id).status.value == "approved"  # as stored

        listed = {p["plan_id"]: p for p in _json(_run(catalog, "plans", "--format", "json"))}
        assert listed[plan_id]["status"] == "expired"
        assert listed[fresh]["status"] == "approved"
        assert _json(_run(catalog, "show", plan_id, "--format", "json"))["status"] == "expired"
        assert _json(_run(catalog, "show", fresh, "--format", "json"))["status"] == "approved"
        table = _run(catalog, "plans")
        assert table.exit_code == 0
        line = next(ln for ln in table.stdout.splitlines() if plan_id in ln)
        assert "expired" in line
        assert "approved" not in line
        shown = _run(catalog, "show", plan_id)
        assert shown.exit_code == 0
        assert "expired" in shown.stdout
        # reading wrote nothing: the catalog and the audit log are as they were
        assert load_plan_header(engine, plan_id).status.value == "approved"
        events = _json(_run(catalog, "audit", "--plan", plan_id, "--format", "json"))
        assert [e["event"] for e in events] == ["plan", "approve"]

        late = _run(catalog, "approve", plan_id, as_="carol")
        assert late.exit_code == 3
        assert "expired" in late.stderr
    finally:
        engine.dispose()


def test_show_tells_the_plans_history_approvals_applies_and_restores(
    setup: tuple[str, Path, Path],
) -> None:
    """A lead reads in `show` who signed off, with their comment, and what was done since."""
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)
    fresh = _json(_run(catalog, "show", plan_id, "--format", "json"))["history"]
    assert fresh["decisions"] == []
    assert fresh["executions"] == []
    assert fresh["removed_objects"] == {}
    assert "needs 1 more approver" in fresh["approval"]

    assert _run(catalog, "approve", plan_id, "--comment", "checked it", as_="bob").exit_code == 0
    applied = _run(catalog, "apply", plan_id, "--yes", "--policy", str(policy))
    assert applied.exit_code == 0, applied.stderr
    history = _json(_run(catalog, "show", plan_id, "--format", "json"))["history"]
    assert [
        (d["decision"], d["actor"], d["comment"], d["current"]) for d in history["decisions"]
    ] == [("approve", "bob", "checked it", True)]
    [run] = history["executions"]
    assert (run["actor"], run["status"], run["actions_failed"]) == ("alice", "applied", 0)
    assert run["actions_ok"] > 0
    removed = history["removed_objects"]
    assert set(removed) == {"removed"}
    assert removed["removed"] > 0

    restored = _run(catalog, "restore", plan_id, "--policy", str(policy))
    assert restored.exit_code == 0, restored.stderr
    history = _json(_run(catalog, "show", plan_id, "--format", "json"))["history"]
    assert history["removed_objects"] == {"restored": removed["removed"]}
    [back] = history["restores"]  # who brought them back, and when
    assert (back["actor"], back["restored"], back["failed"]) == ("alice", removed["removed"], 0)
    assert back["at"] >= run["started_at"]

    table = _run(catalog, "show", plan_id)
    assert table.exit_code == 0
    assert "approved by bob: checked it" in table.stdout
    assert f"apply #{run['id']} by alice: applied" in table.stdout
    assert f"removed objects: {removed['removed']:,} restored" in table.stdout
    assert f"restore by alice: {removed['removed']:,} restored" in table.stdout
    md = _run(catalog, "show", plan_id, "--format", "md")
    assert "## History" in md.stdout
    assert "approved by bob: checked it" in md.stdout
    html = _run(catalog, "show", plan_id, "--format", "html")
    assert "<h2>History</h2>" in html.stdout
    assert "approved by bob: checked it" in html.stdout
    # a new plan's report has no history: nothing has happened to it yet
    made = _json(_run(catalog, "plan", "--policy", str(policy), "--format", "json"))
    assert "history" not in made


def test_self_approval_names_the_maker_as_recorded(setup: tuple[str, Path, Path]) -> None:
    """`--as ' ALICE '` is alice: the refusal names the plan's maker as the catalog has
    it (alice), and says that the spelling typed is the same identity."""
    catalog, policy, _ = setup
    plan_id = _plan(catalog, policy)  # made by alice
    mine = _run(catalog, "approve", plan_id, as_=" ALICE ")
    assert mine.exit_code == 3, (mine.stdout, mine.stderr)
    assert f"error: alice made plan {plan_id} (ALICE is alice: " in mine.stderr
    assert "ALICE made plan" not in mine.stderr
