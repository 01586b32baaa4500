"""Names are shown as typed, not as a terminal or a browser would redraw them, and the CSV
cannot run as a spreadsheet formula.

A folder named `prod\\x1b[21Dtmp` (an escape sequence moving the cursor back) printed raw
read as `tmp` on a terminal, in a pipe too; a right-to-left override showed a key
backwards in the HTML report; a zero-width space made two names read alike; an identity
`mallory\\x1b[7Dalice` showed as `alice` in `govern show` and `govern audit`. And a rule
named `=HYPERLINK(...)` ran as a formula in the CSV opened in a spreadsheet.
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from governance.cli.main import cli
from governance.errors import ArgumentError
from governance.plan.types import Plan
from governance.report import render
from governance.report.table import print_table
from governance.settings import resolve_identity
from governance.wording import shown
from tests.unit.plan_samples import sample_plan

SNEAKY = "prod-final\x1b[21Dscratch\x1b[K"
BACKWARDS = "\u05d0\u05d1-rtl-\u202eevil"
ALIKE = "zw\u200bsp"


def test_shown_writes_invisible_characters_as_escapes() -> None:
    assert shown("runs/r1/checkpoint-1000/") == "runs/r1/checkpoint-1000/"
    assert shown("é ü 日本 \u05d0") == "é ü 日本 \u05d0"  # letters of any script stay
    assert shown(SNEAKY) == "prod-final\\x1b[21Dscratch\\x1b[K"
    assert shown(BACKWARDS) == "\u05d0\u05d1-rtl-\\u202eevil"
    assert shown(ALIKE) == "zw\\u200bsp"
    assert shown("tag\U000e0041") == "tag\\U000e0041"  # (a Unicode tag: invisible)
    assert shown("a\nb\u2028c") == "a\\x0ab\\u2028c"
    assert shown("a\nb", newlines=True) == "a\nb"
    assert shown("\x9b31m") == "\\x9b31m"  # a C1 control (CSI)


def _odd(plan: Plan) -> Plan:
    """The sample plan with its first action's run, rule and reason oddly named."""
    first = plan.actions[0]
    artifact = replace(first.artifact, run=SNEAKY, uri=first.artifact.uri + BACKWARDS + "/")
    plan.actions[0] = replace(
        first, artifact=artifact, rule="=HYPERLINK(\"http://evil.example/\",\"x\")",
        reason=f"-{ALIKE} reason",
    )  # fmt: skip
    return plan


def _table(plan: Plan) -> str:
    console = Console(record=True, width=200, color_system=None, file=io.StringIO())
    print_table(plan, console)
    return console.export_text()


def test_no_report_a_person_reads_holds_a_raw_invisible_character() -> None:
    plan = _odd(sample_plan())
    for name, text in (
        ("table", _table(plan)),
        ("md", render(plan, "md")),
        ("html", render(plan, "html")),
    ):
        raw = [c for c in ("\x1b", "\u202e", "\u200b") if c in text]
        assert raw == [], (name, raw)
        # shown as escapes (Markdown escapes the backslash and `[` again)
        assert "x1b" in text.partition("prod-final")[2][:8], name
        assert "u202eevil" in text, name


def test_a_line_break_in_a_key_is_shown_escaped_not_as_a_space() -> None:
    """S3 keys and file names may hold a line break: Markdown's code span and HTML showed
    it as a space, so `scratch/a\\nb.tmp` read as `scratch/a b.tmp`, another file."""
    plan = sample_plan()
    first = plan.actions[0]
    odd = first.artifact.uri + "a\nb.tmp"
    plan.actions[0] = replace(first, artifact=replace(first.artifact, uri=odd))
    for name in ("md", "html"):
        text = render(plan, name)
        assert "a\nb.tmp" not in text, name
        assert "a\\x0ab.tmp" in text, name
        assert "a b.tmp" not in text, name
    # the timeline's tooltip keeps its own lines: a line for the checkpoint, one a reason
    html = render(plan, "html")
    assert 'title="' in html
    titles = [t.split('"', 1)[0] for t in html.split('title="')[1:]]
    assert any("\n" in t for t in titles)


def test_json_keeps_names_as_they_are() -> None:
    import json

    doc = json.loads(render(_odd(sample_plan()), "json"))
    assert doc["actions"][0]["artifact"]["run"] == SNEAKY


def test_csv_fields_a_spreadsheet_would_run_as_formulas_are_made_text() -> None:
    plan = _odd(sample_plan())
    rows = list(csv.DictReader(io.StringIO(render(plan, "csv"))))
    first = [r for r in rows if r["action_id"] == "1"]
    assert first
    for row in first:
        assert row["rule"] == '\'=HYPERLINK("http://evil.example/","x")'
        assert row["reason"] == f"'-{ALIKE} reason"  # (raw otherwise: CSV keeps names)
    others = [r for r in rows if r["action_id"] != "1"]
    assert all(r["rule"][:1] != "'" for r in others)  # plain names are left alone


def test_an_identity_with_a_control_character_is_refused() -> None:
    with pytest.raises(ArgumentError, match="cannot hold control characters"):
        resolve_identity("mallory\x1b[7Dalice")
    result = CliRunner().invoke(
        cli, ["--as", "mallory\x1b[7Dalice", "--catalog", "sqlite:///:memory:", "plans"]
    )
    assert result.exit_code == 2
    assert "cannot hold control characters" in result.stderr
    assert resolve_identity("zoë") == "zoë"


@pytest.mark.parametrize("name", ["\u200b", "\u2060", "\u00ad", "\ufeff", " \u200b\u200d "])
def test_an_identity_of_invisible_characters_alone_is_refused(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compared without its invisible characters (`approval.identity_key`), such a name is
    empty: it approved plans as a nameless approver, all of them one person."""
    with pytest.raises(ArgumentError, match="only invisible characters"):
        resolve_identity(name)
    monkeypatch.setenv("GOVERN_USER", name)
    result = CliRunner().invoke(cli, ["--catalog", "sqlite:///:memory:", "plans"])
    assert result.exit_code == 2
    assert "GOVERN_USER '" in result.stderr
    assert "the acting identity is only invisible characters" in result.stderr
    assert resolve_identity("zo\u200bë") == "zo\u200bë"  # (something is left: a name)


def test_the_narrow_cli_tables_hold_no_raw_invisible_character(tmp_path: Path) -> None:
    """At 80 columns `ls` and `audit` put a run's name, status reason and details on the
    lines under each row: those carried an escape sequence to the terminal raw."""
    from tests.fixtures.builders import hf_run, local_writer
    from tests.unit.plan_samples import sample_plan as _sample

    storage = tmp_path / "storage"
    hf_run(local_writer(storage), "runs/prod\x1b[4Dtmp/", steps=(100,))
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner(env={"COLUMNS": "80"})
    assert runner.invoke(cli, ["--catalog", catalog, "scan", "--root", str(storage)]).exit_code == 0
    from governance.approval import approve
    from governance.catalog.engine import open_engine
    from governance.catalog.plans import save_plan

    engine = open_engine(catalog)
    plan = _sample()
    save_plan(engine, plan)
    approve(engine, plan.plan_id, actor="bob", comment="fine\x1b[2K\rEVIL", now=plan.created_at)
    engine.dispose()
    for args in (["ls", "runs"], ["ls", "artifacts"], ["audit"]):
        result = runner.invoke(cli, ["--catalog", catalog, *args])
        assert result.exit_code == 0, (args, result.output)
        assert "\x1b" not in result.stdout, args
        assert "\\x1b" in result.stdout, (args, result.stdout)
