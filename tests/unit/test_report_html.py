"""`--format html`: one self-contained file a reviewer reads top to bottom."""

from __future__ import annotations

import html
import re

from governance.report import render
from tests.unit.plan_samples import sample_plan


def test_self_contained_no_external_resources() -> None:
    doc = render(sample_plan(), "html")
    assert doc.lstrip().startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", doc, re.IGNORECASE)
    assert "<script" not in doc.lower()
    assert "<link" not in doc.lower()
    assert "@import" not in doc
    assert "url(" not in doc
    assert "<style>" in doc


def test_contains_each_run_action_and_totals_escaped() -> None:
    plan = sample_plan()
    doc = render(plan, "html")
    text = html.unescape(doc)
    assert "r1|x<&é" in text
    assert "r2[x]" in text
    assert "r1|x<&é" not in doc  # user data is escaped, never raw markup
    for a in plan.actions:
        assert f'id="action-{a.id}"' in doc
        assert a.reason in text
        assert a.artifact.uri in text
    assert "$12.50" in doc
    assert "$3.25" in doc
    assert "$9.25" in doc
    from governance.policy.units import format_bytes

    assert format_bytes(plan.summary.bytes_deleted) in doc
    assert "Refused" not in doc
    # what is left as it is: counted per rule and kind, with an escaped example
    assert "<h2>Left as they are</h2>" in doc
    assert "not due <yet>" not in doc
    assert "s3://ml-artifacts/logs/a|b.log</span>: not due <yet>" in text
    assert '<td>(no rule)</td><td>other</td><td class="r">2</td>' in doc


def test_timeline_has_a_cell_per_checkpoint_with_its_state() -> None:
    doc = render(sample_plan(), "html")
    cells = re.findall(r'<span class="step (\w+)" title="[^"]*">([^<]+)</span>', doc)
    assert ("deleted", "1000") in cells
    assert ("stripped", "4000") in cells
    assert ("kept", "5000") in cells
    assert ("archived", "9000") in cells
    assert ("in_flight", "9500") in cells
    assert [label for _, label in cells[:3]] == ["1000", "4000", "5000"]  # step order
    for state in ("kept as it is", "stripped", "archived", "deleted"):
        assert state in doc  # legend


def test_refused_plan_shows_a_banner() -> None:
    doc = render(sample_plan(refusal="deletes 60% of s3://ml-artifacts/, over 50%"), "html")
    assert 'class="refusal"' in doc
    assert "over 50%" in doc


def test_the_action_list_comes_in_tables_of_500_rows_drawn_when_near() -> None:
    """50,000 actions in one auto-laid table took a browser 40 s to show (every row laid
    out before the first paint). They come in tables of 500 rows with fixed column
    widths, each in a block the browser draws only near the screen."""
    from dataclasses import replace

    plan = sample_plan()
    first = plan.actions[0]
    plan.actions = [replace(first, id=i) for i in range(1, 1202)]
    doc = render(plan, "html")
    chunks = re.findall(r'<div class="chunk"><table class="acts">(.*?)</table></div>', doc, re.S)
    assert [c.count('<tr id="action-') for c in chunks] == [500, 500, 201]
    assert chunks[0].count("<th") == 7  # the header once, over the first
    assert all("<th" not in c for c in chunks[1:])
    assert all(len(re.findall(r"<col[ >]", c)) == 7 for c in chunks)  # the same widths
    assert ".chunk { content-visibility: auto;" in doc
    assert [int(i) for i in re.findall(r'<tr id="action-(\d+)"', doc)] == list(range(1, 1202))
