"""Reports group a plan by run: two runs of one name under different folders are two runs."""

from __future__ import annotations

from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    PlannedAction,
)
from governance.report import render
from governance.report.common import by_run, run_path, timeline
from tests.unit.plan_samples import AS_OF, ROOT, sample_plan


def _ref(path: str, step: int) -> ArtifactRef:
    return ArtifactRef(f"{ROOT}{path}checkpoint-{step}/", "checkpoint", "r1", step, ROOT)


def _delete(i: int, ref: ArtifactRef) -> PlannedAction:
    key = ref.uri[len(ROOT) :] + "model.bin"
    obj = ObjectRef(key=key, size=100, etag=f'"e{i}"', last_modified=AS_OF)
    return PlannedAction(i, "checkpoints", None, ActionType.DELETE, True, ref, [obj], "old")


def test_runs_of_one_name_in_two_folders_are_reported_apart() -> None:
    """`teama/p/runs/r1/` lost step 100; `teamb/p/runs/r1/` keeps step 200: a report that
    merged them by name showed one run losing some of its steps and keeping others."""
    gone, stays = _ref("teama/p/runs/r1/", 100), _ref("teamb/p/runs/r1/", 200)
    plan = sample_plan()
    plan.actions = [_delete(1, gone)]
    plan.kept = [KeptArtifact(stays, "checkpoints", "recent", KeptHow.WHOLE, "newest")]
    totals = {t.run: (t.actions, t.kept) for t in by_run(plan)}
    assert totals == {"teama/p/runs/r1": (1, 0), "teamb/p/runs/r1": (0, 1)}
    rows = {r.run: [(c.label, c.state) for c in r.cells] for r in timeline(plan)}
    assert rows == {"teama/p/runs/r1": [("100", "deleted")], "teamb/p/runs/r1": [("200", "kept")]}
    md = render(plan, "md")
    assert "teama/p/runs/r1" in md
    assert "teamb/p/runs/r1" in md


def test_a_run_with_a_name_of_its_own_keeps_its_name() -> None:
    plan = sample_plan()
    plan.actions = [_delete(1, _ref("teama/p/runs/r1/", 100))]
    plan.kept = []
    assert [t.run for t in by_run(plan)] == ["r1"]
    assert [r.run for r in timeline(plan)] == ["r1"]


def test_run_path_is_the_runs_folder_as_the_uri_shows_it() -> None:
    assert run_path(_ref("teama/p/runs/r1/", 1)) == "teama/p/runs/r1/"
    assert run_path(_ref("r1/", 1)) == "r1/"
    outside = ArtifactRef(f"{ROOT}data/x.bin", "dataset", None, None, ROOT)
    assert run_path(outside) is None


def test_the_html_run_line_counts_protected_and_in_flight_checkpoints() -> None:
    """A running run whose six checkpoints are all protected read "0 kept, ..., 0 deleted":
    the line must account for every checkpoint it counts."""
    plan = sample_plan()
    plan.actions = []
    refs = [_ref("runs/r1/", s) for s in (100, 200, 300)]
    plan.kept = [
        KeptArtifact(refs[0], None, None, KeptHow.PROTECTED, "protected: run r1 is running"),
        KeptArtifact(refs[1], None, None, KeptHow.PROTECTED, "protected: run r1 is running"),
        KeptArtifact(refs[2], "checkpoints", None, KeptHow.IN_FLIGHT, "in flight"),
    ]
    html = render(plan, "html")
    assert "3 checkpoints: 0 kept, 2 protected, 1 in flight, 0 stripped" in html
