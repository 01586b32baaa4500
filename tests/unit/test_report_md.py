"""`--format md` and `--format table`: readable summaries with totals, rules, runs, actions."""

from __future__ import annotations

from rich.console import Console

from governance.report import format_for_path, render
from governance.report.table import print_table
from tests.unit.plan_samples import sample_plan


def test_markdown_has_totals_rules_runs_and_escaped_actions() -> None:
    plan = sample_plan()
    md = render(plan, "md")
    assert md.startswith(f"# Plan `{plan.plan_id}`")
    for heading in ("## Totals", "## By rule", "## By run", "## Actions", "## Kept"):
        assert heading in md
    # what no action touches and the kept list does not name is counted, with an example
    left = md[md.index("## Left as they are") : md.index("## By run")]
    assert "| logs | log | 12 | 3 MiB | `s3://ml-artifacts/logs/a\\|b.log`: not due <yet> |" in left
    assert (
        "| (no rule) | other | 2 | 10 B | `s3://ml-artifacts/README.md`: no rule matches |" in left
    )
    assert "$12.50 → $3.25 (saves $9.25/month)" in md
    assert "r1\\|x<&é" in md  # a pipe in a run name does not break the table
    section = md[md.index("## Actions") : md.index("## Kept")]
    action_rows = [
        line for line in section.splitlines() if line.startswith("| ") and "`s3://" in line
    ]
    assert len(action_rows) == len(plan.actions)
    for row in action_rows:
        assert row.replace("\\|", "").count("|") == 10  # 9 columns, none split by data
    # where a transition or archive goes is in its row
    assert any("| transition | STANDARD_IA |" in row for row in action_rows)
    assert any("| archive | DEEP_ARCHIVE |" in row for row in action_rows)
    assert "Refused" not in md
    assert "**Refused:** too much" in render(sample_plan(refusal="too much"), "md")


def test_table_prints_summary_rules_runs_and_actions() -> None:
    plan = sample_plan(refusal="over [limit]")
    text = render(plan, "table")
    assert plan.plan_id in text
    assert "REFUSED: over [limit]" in text  # markup in data is printed, not interpreted
    assert "by rule" in text
    assert "by run" in text
    assert "actions" in text
    assert "r2[x]" in text
    assert (
        "$12.50 -> $3.25 (saves $9.25/month); one-off: $0.01 early deletion, $0.00 requests" in text
    )
    assert "left as they are" in text
    assert "s3://ml-artifacts/logs/a|b.log: not due <yet>" in text
    console = Console(record=True, width=200)
    print_table(plan, console)
    assert "checkpoint-1000" in console.export_text()


def test_out_suffixes_pick_a_format() -> None:
    from pathlib import Path

    import pytest

    from governance.errors import ArgumentError

    assert format_for_path(Path("r.HTML")) == "html"
    assert format_for_path(Path("a/b.md")) == "md"
    assert format_for_path(Path("x.json")) == "json"
    assert format_for_path(Path("x.csv")) == "csv"
    with pytest.raises(ArgumentError, match=r"--out x\.txt"):
        format_for_path(Path("x.txt"))
