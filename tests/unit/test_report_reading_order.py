"""Reports list actions and runs as a person reads them: numbers in names as numbers.

The plan's own order is URI text (the fingerprint and the action ids follow it), which put
`checkpoint-10000/` before `checkpoint-2000/`: a run's deletes read out of step order, and
a reviewer took the newest checkpoints for the oldest.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from governance.model.types import RunStatus
from governance.plan.types import ActionType, ArtifactRef, Plan, PlannedAction
from governance.report import render
from governance.report.common import by_run, natural_key, reading_order, timeline
from tests.unit.plan_factories import ROOT, checkpoint, group, make_plan, policy
from tests.unit.test_report_runs import KEEP_NEWEST  # keep the newest, delete the rest

STEPS = (500, 2000, 10000, 30000)  # in URI text order: 10000, 2000, 30000, 500


def _plan_of_one_run() -> Plan:
    arts = [checkpoint("runs/r1/", s, age_days=40 - s / 1000) for s in STEPS]
    return make_plan([group("r1", arts, RunStatus.COMPLETED, key="runs/r1/")], policy(KEEP_NEWEST))


def _steps_in(text: str) -> list[int]:
    return [int(s) for s in re.findall(r"checkpoint-(\d+)/", text)]


def test_every_listing_report_shows_a_runs_deletes_in_step_order() -> None:
    plan = _plan_of_one_run()
    deleted = [a.artifact.step for a in plan.actions]
    assert deleted == [10000, 2000, 500], "the plan's own order is URI text"
    ids = {a.artifact.step: a.id for a in plan.actions}

    md = render(plan, "md")
    actions_md = md.split("## Actions", 1)[1].split("\n## ", 1)[0]
    assert _steps_in(actions_md) == [500, 2000, 10000]
    # each row keeps its action's id: ids name actions, they are not row numbers
    rows = [line for line in actions_md.splitlines() if "checkpoint-" in line]
    assert [int(r.split("|")[1]) for r in rows] == [ids[500], ids[2000], ids[10000]]

    html = render(plan, "html")
    actions_html = html.split("<h2>Actions</h2>", 1)[1].split("<h2>", 1)[0]
    shown = list(dict.fromkeys(_steps_in(actions_html)))  # (a URI may be written twice)
    assert shown == [500, 2000, 10000]

    table = render(plan, "table")
    actions_table = table.rsplit("actions", 1)[1]
    assert _steps_in(actions_table) == [500, 2000, 10000]


def test_runs_named_with_numbers_are_listed_in_number_order() -> None:
    """Equal totals list runs by name: `run-9` before `run-10`, in the by-run totals and
    in the timeline."""
    groups = [
        group(
            name,
            [checkpoint(f"runs/{name}/", 100, age_days=30)],
            RunStatus.COMPLETED,
            key=f"runs/{name}/",
        )
        for name in ("run-10", "run-9", "run-100")
    ]
    plan = make_plan(groups, policy(KEEP_NEWEST))
    assert [t.run for t in by_run(plan)] == ["run-9", "run-10", "run-100"]
    assert [r.run for r in timeline(plan)] == ["run-9", "run-10", "run-100"]


def _action(i: int, uri: str) -> PlannedAction:
    return PlannedAction(
        id=i,
        rule="r",
        tier=None,
        action=ActionType.DELETE,
        destructive=True,
        artifact=ArtifactRef(uri, "checkpoint", "r1", None, ROOT),
        objects=[],
        reason="x",
    )


@given(
    st.lists(st.integers(0, 10**12), unique=True, min_size=1, max_size=40),
    st.integers(0, 45),
)
def test_a_shortened_list_is_the_head_of_the_whole_one(steps: list[int], limit: int) -> None:
    """Whatever the numbers, checkpoints read in number order, and a report that shows
    only the first `limit` actions shows the first `limit` of that order."""
    uris = sorted(f"{ROOT}runs/r1/checkpoint-{s}/" for s in steps)  # the plan's order
    actions = [_action(i, u) for i, u in enumerate(uris, 1)]
    whole = reading_order(actions, len(actions))
    assert [int(_steps_in(a.artifact.uri)[0]) for a in whole] == sorted(steps)
    assert reading_order(actions, limit) == whole[:limit]


def test_natural_key_compares_numbers_as_numbers_and_text_as_text() -> None:
    names = ["b", "a10", "a9", "a9b", "a", "10", "9", "a09x", "a9a"]
    expected = ["9", "10", "a", "a9", "a9a", "a9b", "a09x", "a10", "b"]
    assert sorted(names, key=natural_key) == expected


def test_numbers_of_any_length_compare_and_equal_numbers_keep_the_plans_order() -> None:
    """A number past `int`'s 4,300 digits still compares (a `memory://` key can hold one),
    and `run-09` / `run-9`, equal as numbers, follow the text."""
    huge = "7" * 5000
    uris = [f"{ROOT}ckpt-{huge}/", f"{ROOT}ckpt-8/", f"{ROOT}run-9/", f"{ROOT}run-09/"]
    actions = [_action(i, u) for i, u in enumerate(sorted(uris), 1)]
    shown = [a.artifact.uri[len(ROOT) :] for a in reading_order(actions, 10)]
    assert shown == ["ckpt-8/", f"ckpt-{huge}/", "run-09/", "run-9/"]
