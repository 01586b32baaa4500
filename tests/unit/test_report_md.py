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
    # (outside code spans, what HTML would take for markup is escaped: it shows as typed)
    assert (
        "| logs | log | 12 | 3 MiB | `s3://ml-artifacts/logs/a\\|b.log`: not due &lt;yet&gt; |"
        in left
    )
    assert (
        "| (no rule) | other | 2 | 10 B | `s3://ml-artifacts/README.md`: no rule matches |" in left
    )
    assert "$12.50 → $3.25 (saves $9.25/month)" in md
    assert "r1\\|x&lt;&amp;é" in md  # a pipe in a run name does not break the table
    assert "- **r1\\|x&lt;&amp;é**: 3 checkpoints: " in md  # nor is its < taken for a tag
    assert "`s3://ml-artifacts/runs/r1\\|x<&é/checkpoint-1000/`" in md  # code: as it is
    section = md[md.index("## Actions") : md.index("## Kept")]
    action_rows = [
        line for line in section.splitlines() if line.startswith("| ") and "`s3://" in line
    ]
    assert len(action_rows) == len(plan.actions)
    for row in action_rows:
        assert row.replace("\\|", "").count("|") == 11  # 10 columns, none split by data
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
        "$12.50 -> $3.25 (saves $9.25/month); one-off: $0.01 early deletion, < $0.01 requests"
        in text
    )
    assert "left as they are" in text
    # two roots: numbered in the header, artifacts shown by their path in theirs
    assert "root [1] file:///data/scratch/\nroot [2] s3://ml-artifacts/\n" in text
    assert "[2] logs/a|b.log: not due <yet>" in text
    assert "s3://ml-artifacts/runs" not in text
    assert "[2] runs/r2[x]/checkpoint-9000/" in text
    console = Console(record=True, width=200)
    print_table(plan, console)
    assert "checkpoint-1000" in console.export_text()


def test_a_one_root_table_shows_paths_in_it_and_no_root_column() -> None:
    plan = sample_plan()
    del plan.scans["file:///data/scratch/"]
    console = Console(record=True, width=80, color_system=None)  # a terminal's default
    print_table(plan, console)
    text = console.export_text()
    assert "root s3://ml-artifacts/\n" in text
    for path in ("runs/", "tmp/", "logs/", "README"):
        assert f"s3://ml-artifacts/{path}" not in text
    assert "tmp/big.bin" in text
    assert "logs/a|b.log: not due <yet>" in text
    runs = text[text.index("by run") : text.index("actions  ")]
    assert "root" not in runs
    # 80 columns: each reason goes under its artifact instead of a column of its own
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "runs/r2[x]/checkpoint-9000/" in line)
    assert "checkpoints: long-term tier: final" in lines[at + 1]  # the rule, once
    assert "residue: stale multipart upload, 9d old" in text
    assert all(len(line) <= 80 for line in lines)


def test_the_fingerprint_is_printed_whole_on_any_width() -> None:
    plan = sample_plan()
    plan.fingerprint = "sha256:" + "0123456789abcdef" * 4  # as long as every real one
    for width in (80, 120):
        console = Console(record=True, width=width, color_system=None)
        print_table(plan, console)
        lines = console.export_text().splitlines()
        [line] = [x for x in lines if plan.fingerprint in x]  # on one line, not cut
        if width == 80:  # under its label, which no longer ends in a space
            assert line == f"  {plan.fingerprint}"
            assert lines[lines.index(line) - 1] == "fingerprint"
        else:
            assert line.endswith(f"fingerprint {plan.fingerprint}")


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


def test_an_unmatched_backtick_opens_no_code_span_for_markup() -> None:
    from governance.report.markdown import _cell

    assert _cell("a`<img src=x onerror=alert(1)>") == "a\\`&lt;img src=x onerror=alert(1)&gt;"
    # nor does a pair: text holds no code span, its backticks show as typed
    assert _cell("`<both>` and <escaped>") == "\\`&lt;both&gt;\\` and &lt;escaped&gt;"


def test_a_step_less_checkpoints_name_in_the_timeline_is_text_not_markup() -> None:
    """A checkpoint without a step is named by its file in the per-run timeline: a name
    such as `<img src=x onerror=...>` must show as typed, not run in a viewer."""
    from governance.model.types import RunStatus
    from tests.unit.plan_factories import checkpoint, group, make_plan, policy

    run = "runs/a/"
    odd = checkpoint(run, None, 20, name="<img src=x onerror=alert(1)>")
    cks = [checkpoint(run, s, 10 - s / 100) for s in (100, 200)] + [odd]
    body = "rules:\n  - {name: c, select: {kind: checkpoint}, tiers: [{name: r, keep_last: 1}], otherwise: delete}\nsafety: {max_delete_fraction: 1}\n"
    md = render(make_plan([group("a", cks, RunStatus.COMPLETED)], policy(body)), "md")
    timeline = md[md.index("## Checkpoints per run") :].split("\n\n")[1]
    assert "&lt;img src=x onerror=alert(1)&gt;" in timeline
    assert "<img" not in timeline


def test_the_kept_tables_say_how_in_words() -> None:
    """`in flight`, not the JSON value `in_flight`, in the Markdown and HTML kept tables."""
    plan = sample_plan()
    md = render(plan, "md")
    kept = md[md.index("## Kept") :]
    assert "| in flight |" in kept
    assert "in_flight" not in kept
    page = render(plan, "html")
    assert "<td>in flight</td>" in page
    assert "in_flight" in render(plan, "json")  # the JSON keeps its values


def test_a_key_holding_backticks_is_one_code_span() -> None:
    """A single-backtick span ends at the key's own backtick (`job `7`.log` read as code,
    text, code): the fence is one backtick longer than the longest run inside."""
    from governance.report.markdown import _code

    assert _code("s3://b/logs/job `7`.log") == "``s3://b/logs/job `7`.log``"
    assert _code("`edge") == "`` `edge ``"
    assert _code("plain") == "`plain`"
    plan = sample_plan()
    ref = plan.actions[0].artifact
    ref.uri = ref.root_url + "logs/job `7` | *x*.log"
    md = render(plan, "md")
    [row] = [line for line in md.splitlines() if "job `7`" in line and line.startswith("| 1 ")]
    assert "``s3://ml-artifacts/logs/job `7` \\| *x*.log``" in row
    assert row.replace("\\|", "").count("|") == 11  # still 10 columns
