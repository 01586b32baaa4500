"""`govern demo`, the README's first command: it scans and plans its sample tree, prints
the report and writes the HTML one, and every next step it prints works as printed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner

from governance.cli.main import cli


def test_the_demo_and_every_next_step_it_prints(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    runner = CliRunner(env={"COLUMNS": "200"})
    result = runner.invoke(cli, ["--as", "planner", "demo", "--dir", str(workdir)])
    assert result.exit_code == 0, (result.stderr, result.exception)
    page = (workdir / "plan.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "HTML report: " in result.stdout
    steps = result.stdout.split("Next steps", 1)[1].splitlines()[1:]
    commands = [shlex.split(line)[1:] for line in steps if line.strip().startswith("govern ")]
    verbs = [next(w for w in c if w in {"explain", "approve", "apply", "restore", "audit"})
             for c in commands]  # fmt: skip
    assert verbs == ["explain", "approve", "apply", "restore", "audit"]
    assert "URL" not in commands[0]  # a real artifact to explain, not a placeholder
    for command in commands:
        done = runner.invoke(cli, command)
        assert done.exit_code == 0, (command, done.stdout, done.stderr)
    assert "audit chain OK" in done.stdout + done.stderr


def test_the_demo_as_json(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(workdir), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["plan"]["actions"]
    assert doc["plan"]["status"] == "pending_approval"
    assert doc["scan"]["objects"] > 0
    assert Path(doc["html"]).is_file()
    again = CliRunner().invoke(cli, ["demo", "--dir", str(workdir), "--format", "json"])
    assert again.exit_code == 0, again.stderr  # its own folder is made afresh


def test_the_demo_uses_a_catalog_named_with_catalog_but_never_the_environments(
    tmp_path: Path,
) -> None:
    """`govern --catalog URL demo` wrote to the demo folder's own catalog all the same
    (the demo on PostgreSQL was not possible); GOVERN_CATALOG_URL, which may name the
    real catalog of the shell's user, is still never used by the demo."""
    import sqlite3

    chosen = tmp_path / "chosen.db"
    result = CliRunner().invoke(
        cli, ["--catalog", f"sqlite:///{chosen}", "demo", "--dir", str(tmp_path / "a")]
    )
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "a" / "catalog.db").exists()
    with sqlite3.connect(chosen) as db:
        assert db.execute("SELECT count(*) FROM plans").fetchone() == (1,)
    assert f"govern --catalog sqlite:///{chosen} audit --verify" in result.stdout

    real = tmp_path / "real.db"
    result = CliRunner(env={"GOVERN_CATALOG_URL": f"sqlite:///{real}"}).invoke(
        cli, ["demo", "--dir", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b" / "catalog.db").exists()
    assert not real.exists()
