"""Helpers shared by the apply tests (no tests here): policies, plans, snapshots.

Plans are made the real way: scan a real tree (local disk or moto over HTTP), plan it,
and approve it as a different identity when the policy wants approval.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from governance.catalog.engine import open_engine
from governance.cli.main import cli

NO_APPROVAL = "approval: {require_for: []}\n"


def policy_text(url: str, *, endpoint: str | None = None, extra: str = NO_APPROVAL) -> str:
    """Residue expires; checkpoints keep the newest whole, thin every 1000 steps to
    weights + metadata, delete the rest; logs move to STANDARD_IA after a day."""
    endpoint_line = f"\n    endpoint_url: {endpoint}" if endpoint else ""
    return f"""version: 1
storage:
  - name: root
    url: {url}{endpoint_line}
layout:
  runs: ["runs/{{run}}/"]
protect:
  min_age: 1h
rules:
  - name: residue
    select: {{kind: residue}}
    expire: {{after: 2d}}
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - name: recent
        keep_last: 1
      - name: thin
        keep_every_steps: 1000
        keep_components: [weights, metadata]
    otherwise: delete
  - name: logs
    select: {{kind: log}}
    transition: [{{after: 1d, storage_class: STANDARD_IA}}]
{extra}"""


def govern(catalog: str, *args: str, identity: str = "alice") -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "--as", identity, "-q", *args])


@dataclass
class Setup:
    catalog: str
    policy: Path

    def engine(self) -> Any:
        return open_engine(self.catalog)

    def plan(self, *extra: str, as_of: str | None = None) -> dict[str, Any]:
        args = ["plan", "--policy", str(self.policy), "--format", "json", *extra]
        if as_of:
            args += ["--as-of", as_of]
        result = govern(self.catalog, *args)
        assert result.exit_code == 0, (result.exit_code, result.stderr)
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    def apply(self, plan_id: str, *extra: str, code: int | None = 0) -> Result:
        result = govern(
            self.catalog, "apply", plan_id, "--policy", str(self.policy), "--format", "json", *extra
        )
        if code is not None:
            assert result.exit_code == code, (result.exit_code, result.stderr, result.stdout)
        return result

    def restore(self, plan_id: str, *extra: str, code: int | None = 0) -> Result:
        result = govern(
            self.catalog,
            "restore",
            plan_id,
            "--policy",
            str(self.policy),
            "--format",
            "json",
            *extra,
        )
        if code is not None:
            assert result.exit_code == code, (result.exit_code, result.stderr, result.stdout)
        return result

    def approve(self, plan_id: str) -> None:
        from governance.approval import approve

        engine = self.engine()
        try:
            approve(engine, plan_id, actor="bob", comment="looks right", now=datetime.now(UTC))
        finally:
            engine.dispose()

    def status(self, plan_id: str) -> str:
        from governance.catalog.plans import load_plan_header

        engine = self.engine()
        try:
            return load_plan_header(engine, plan_id).status.value
        finally:
            engine.dispose()


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `root`: its bytes and its mtime (ns)."""
    found = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            found[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mtime_ns)
    return found


def actions_by(doc: dict[str, Any], base: str) -> dict[str, list[str]]:
    """Artifact key (relative to `base`) -> its planned action types."""
    out: dict[str, list[str]] = {}
    for a in doc["actions"]:
        out.setdefault(a["artifact"]["uri"][len(base) :], []).append(a["action"])
    return out


def without_restore_hold(policy: Path) -> None:
    """Turn `protect.restored_for` off in a policy of `policy_text`'s shape: for tests of
    what the catalog and the next plan see after a restore, as if the policy decided
    anew (by default a restore protects what it brought back for 30 days)."""
    text = policy.read_text()
    assert "\nprotect:\n" in text, "no protect block to add restored_for to"
    policy.write_text(text.replace("\nprotect:\n", "\nprotect:\n  restored_for: 0d\n", 1))
