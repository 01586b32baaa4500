"""Reports are written as they render (`write_report`): the same documents as before,
in bounded memory. The JSON stream is exactly `plan_document`, one action per line."""

from __future__ import annotations

import gc
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from governance.plan.types import Plan
from governance.report import PLAN_FORMATS, render, write_report
from governance.report.common import action_dict, iso, timeline
from governance.report.json_report import plan_document
from tests.unit.plan_samples import sample_plan


def test_the_json_stream_is_the_plan_document_with_an_action_per_line() -> None:
    plan = sample_plan()
    text = render(plan, "json")
    assert json.loads(text) == json.loads(json.dumps(plan_document(plan)))
    lines = [line.rstrip(",") for line in text.splitlines() if line.startswith('    {"id": ')]
    assert [json.loads(line) for line in lines] == [
        json.loads(json.dumps(action_dict(a))) for a in plan.actions
    ]
    assert text.endswith("\n  ]\n}\n")


def test_a_plan_without_actions_or_kept_is_valid_json() -> None:
    plan = replace(sample_plan(), actions=[], kept=[])
    doc = json.loads(render(plan, "json"))
    assert doc["actions"] == []
    assert doc["kept"] == []
    assert doc["plan_id"] == plan.plan_id


@pytest.mark.parametrize("fmt", [f for f in PLAN_FORMATS if f != "table"])
def test_a_report_written_to_a_file_is_the_rendered_text(tmp_path: Path, fmt: str) -> None:
    plan = sample_plan()
    path = tmp_path / f"plan.{fmt}"
    with path.open("w", encoding="utf-8") as out:
        write_report(plan, fmt, out)
    assert path.read_text(encoding="utf-8") == render(plan, fmt)
    assert gc.get_freeze_count() == 0  # the plan is handed back to the collector


def test_the_timeline_does_not_depend_on_the_order_of_actions() -> None:
    """Cells are looked up run by run as actions come; a plan whose runs interleave
    (or come in any order) draws the same timeline."""
    plan = sample_plan()

    def drawn(p: Plan) -> list[tuple[str, str, list[tuple[str, str, tuple[str, ...]]]]]:
        return [
            (
                row.root_url,
                row.run,
                [(c.label, c.state, tuple(sorted(c.reasons))) for c in row.cells],
            )
            for row in timeline(p)
        ]

    shuffled = replace(plan, actions=plan.actions[::-1], kept=plan.kept[::-1])
    interleaved = replace(plan, actions=plan.actions[::2] + plan.actions[1::2])
    assert drawn(plan)
    assert drawn(shuffled) == drawn(plan)
    assert drawn(interleaved) == drawn(plan)


def test_iso_remembers_only_the_same_datetime_object() -> None:
    a = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
    b = a + timedelta(microseconds=1)
    same_value = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
    assert [iso(a), iso(a), iso(b), iso(same_value), iso(a)] == [
        "2026-11-30T02:15:00Z",
        "2026-11-30T02:15:00Z",
        "2026-11-30T02:15:00.000001Z",
        "2026-11-30T02:15:00Z",
        "2026-11-30T02:15:00Z",
    ]
    later = datetime(2026, 11, 30, 3, 15, tzinfo=UTC).astimezone(timezone(timedelta(hours=1)))
    assert iso(later) == "2026-11-30T03:15:00Z"
