"""Every plan report says how its deletes will be carried out and whether they can come
back, from the `apply` block frozen into the plan (`plan.controls["apply"]`)."""

from __future__ import annotations

import csv
import html
import io
import json
from typing import Any

import pytest
from rich.console import Console

from governance.plan.types import ActionType, Plan
from governance.report import render
from governance.report.common import deletes
from governance.report.table import print_table
from tests.unit.plan_samples import sample_plan

QUARANTINE = {
    "apply": {"delete_mode": "quarantine", "quarantine_url": None, "quarantine_for": "14d"}
}
ELSEWHERE = {
    "apply": {
        "delete_mode": "quarantine",
        "quarantine_url": "s3://hold/q/",
        "quarantine_for": "30d",
    }
}
VERSIONED = {"apply": {"delete_mode": "versioned"}}
PERMANENT = {"apply": {"delete_mode": "permanent"}}


def _plan(controls: dict[str, Any]) -> Plan:
    return sample_plan(controls=controls)


def _without_destructive_actions() -> Plan:
    plan = _plan(PERMANENT)
    plan.actions = [a for a in plan.actions if not a.destructive]
    return plan


def _only_in_place_archive() -> Plan:
    """An archive to a storage class, in place: destructive by policy, but nothing is
    taken away from where it is."""
    plan = _plan(PERMANENT)
    plan.actions = [a for a in plan.actions if a.action is ActionType.ARCHIVE]
    return plan


def test_the_mode_is_read_from_the_frozen_apply_block() -> None:
    found = deletes(_plan(QUARANTINE))
    assert found is not None
    assert (found.mode, found.restorable, found.permanent) == ("quarantine", True, False)
    assert found.quarantine_urls == ("s3://ml-artifacts/.govern-quarantine/",)
    assert found.quarantine_for == "14d"
    # delete, strip and dedupe take objects away; the abort is counted apart
    assert (found.actions, found.aborted_uploads) == (3, 1)
    assert found.text.startswith(
        "deletes: moved to quarantine s3://ml-artifacts/.govern-quarantine/, kept 14d: "
        "govern restore brings them back until then"
    )
    assert "1 incomplete upload aborted, which cannot be restored" in found.text

    elsewhere = deletes(_plan(ELSEWHERE))
    assert elsewhere is not None
    assert (elsewhere.quarantine_urls, elsewhere.quarantine_for) == (("s3://hold/q/",), "30d")

    versioned = deletes(_plan(VERSIONED))
    assert versioned is not None
    assert versioned.restorable
    assert "versioned: delete markers, old versions kept" in versioned.text

    permanent = deletes(_plan(PERMANENT))
    assert permanent is not None
    assert (permanent.restorable, permanent.permanent) == (False, True)
    assert permanent.text.startswith("deletes: PERMANENT: nothing can be restored")
    assert (permanent.quarantine_urls, permanent.quarantine_for) == ((), None)


def test_a_plan_frozen_without_an_apply_block_quarantines_as_apply_does() -> None:
    found = deletes(_plan({}))
    assert found is not None
    assert (found.mode, found.quarantine_for) == ("quarantine", "14d")


def test_nothing_is_said_when_nothing_destructive_is_planned() -> None:
    plan = _without_destructive_actions()
    assert deletes(plan) is None
    for fmt in ("table", "md", "html"):
        assert "PERMANENT" not in render(plan, fmt), fmt
    assert json.loads(render(plan, "json"))["deletes"] is None
    # an archive to a storage class changes objects in place: no delete mode applies
    in_place = deletes(_only_in_place_archive())
    assert in_place is None


@pytest.mark.parametrize("width", [80, 200])
def test_table_says_it_in_the_header_and_emphasises_permanent(width: int) -> None:
    console = Console(record=True, width=width, file=io.StringIO(), color_system="standard")
    print_table(_plan(PERMANENT), console)
    styled = console.export_text(styles=True, clear=False)
    text = console.export_text()
    head = text[: text.index("by rule")]
    flat = " ".join(head.split())  # at 80 columns the line wraps
    assert "deletes: PERMANENT: nothing can be restored" in flat
    assert "\x1b[1;31mPERMANENT" in styled  # bold red
    quarantine = render(_plan(QUARANTINE), "table")
    head = quarantine[: quarantine.index("by rule")]
    assert "deletes: moved to quarantine s3://ml-artifacts/.govern-quarantine/, kept 14d" in head
    assert "PERMANENT" not in quarantine


def test_markdown_says_it_under_the_totals_and_quotes_permanent() -> None:
    md = render(_plan(PERMANENT), "md")
    totals = md[md.index("## Totals") : md.index("## Notes")]
    assert "> **Deletes: PERMANENT: nothing can be restored" in totals
    md = render(_plan(VERSIONED), "md")
    totals = md[md.index("## Totals") : md.index("## Notes")]
    assert "**Deletes:** versioned: delete markers, old versions kept" in totals
    md = render(_plan(ELSEWHERE), "md")
    assert "**Deletes:** moved to quarantine s3://hold/q/, kept 30d" in md


def test_html_says_it_in_the_totals_with_an_alert_for_permanent() -> None:
    page = render(_plan(PERMANENT), "html")
    totals = page[page.index("<h2>Totals</h2>") : page.index("<h2>By rule</h2>")]
    assert '<div class="permanent" role="alert"><strong>Deletes: PERMANENT' in totals
    page = render(_plan(QUARANTINE), "html")
    totals = html.unescape(page[page.index("<h2>Totals</h2>") : page.index("<h2>By rule</h2>")])
    assert (
        "<strong>Deletes:</strong> moved to quarantine s3://ml-artifacts/.govern-quarantine/"
        in (totals)
    )
    assert 'class="permanent"' not in page


def test_json_has_a_deletes_object_beside_the_summary() -> None:
    doc = json.loads(render(_plan(PERMANENT), "json"))
    assert doc["deletes"] == {
        "mode": "permanent",
        "restorable": False,
        "actions": 3,
        "aborted_uploads": 1,
        "quarantine_urls": [],
        "quarantine_for": None,
        "text": deletes(_plan(PERMANENT)).text,  # type: ignore[union-attr]
    }
    doc = json.loads(render(_plan(ELSEWHERE), "json"))
    assert doc["deletes"]["mode"] == "quarantine"
    assert doc["deletes"]["restorable"] is True
    assert doc["deletes"]["quarantine_urls"] == ["s3://hold/q/"]
    assert doc["deletes"]["quarantine_for"] == "30d"
    assert list(doc)[-2:] == ["actions", "kept"]  # the streamed lists still come last


def test_csv_keeps_its_columns() -> None:
    from governance.report.csv_report import COLUMNS

    rows = list(csv.reader(io.StringIO(render(_plan(PERMANENT), "csv"))))
    assert tuple(rows[0]) == COLUMNS
    assert all(len(row) == len(COLUMNS) for row in rows)
