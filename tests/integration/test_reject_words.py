"""`govern reject` of a plan nobody can approve says why in plain words: a what-if plan
is never approved or applied (it once read "plan P is already what_if")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner, Result

from governance.cli.main import cli
from tests.integration.test_plan_cli import FUTURE, tree


def _run(catalog: str, *args: str, as_: str = "alice") -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "--as", as_, "-q", *args])


def test_rejecting_a_what_if_plan_says_what_a_what_if_plan_is(tmp_path: Path) -> None:
    catalog, policy, _ = tree(tmp_path, datetime.now(UTC) - timedelta(days=30))
    made = _run(catalog, "plan", "--policy", str(policy), "--format", "json", "--as-of", FUTURE)
    assert made.exit_code == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["status"] == "what_if"
    plan_id = doc["plan_id"]
    vetoed = _run(catalog, "reject", plan_id, "--comment", "no", as_="bob")
    assert vetoed.exit_code == 3, (vetoed.stdout, vetoed.stderr)
    assert (
        f"plan {plan_id} is a what-if plan (made as of a time after it was made): it is never "
        "approved or applied, so there is nothing to reject"
    ) in vetoed.stderr.replace("\n", " ")
    assert "already what_if" not in vetoed.stderr
