"""Runs of one name in different folders stay apart in a plan and in its reports."""

from __future__ import annotations

from governance.model.types import Artifact, RunStatus
from governance.plan.types import ArtifactRef, KeptArtifact, KeptHow
from governance.report import render
from governance.report.common import by_run, timeline
from tests.catalogs import catalog_url  # noqa: F401
from tests.unit.plan_factories import ROOT, checkpoint, group, make_plan, policy
from tests.unit.plan_samples import sample_plan

KEEP_NEWEST = """
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""


def _run(key: str, steps: tuple[int, ...]) -> list[Artifact]:
    return [checkpoint(key, s, age_days=20 - s / 100) for s in steps]


def test_runs_of_one_name_are_named_by_their_folders() -> None:
    """`runs/{run}-seed{seed}/` names two runs `r1`; one name under two teams does too.
    Merged under one name, a reviewer saw one run lose steps another kept: each is named
    by its folder instead, in the plan and so in every report. A run with a name of its
    own keeps it."""
    seed1, seed2 = "runs/r1-seed1/", "runs/r1-seed2/"
    groups = [
        group("r1", _run(seed1, (100, 200)), RunStatus.COMPLETED, key=seed1),
        group("r1", _run(seed2, (100, 200, 300)), RunStatus.COMPLETED, key=seed2),
        group("solo", _run("runs/solo/", (100, 200)), RunStatus.COMPLETED, key="runs/solo/"),
    ]
    plan = make_plan(groups, policy(KEEP_NEWEST))
    runs = {a.artifact.uri[len(ROOT) :]: a.artifact.run for a in plan.actions}
    assert runs == {
        f"{seed1}checkpoint-100/": "runs/r1-seed1",
        f"{seed2}checkpoint-100/": "runs/r1-seed2",
        f"{seed2}checkpoint-200/": "runs/r1-seed2",
        "runs/solo/checkpoint-100/": "solo",
    }
    assert {k.artifact.run for k in plan.kept} == {"runs/r1-seed1", "runs/r1-seed2", "solo"}
    totals = {t.run: (t.actions, t.kept) for t in by_run(plan)}
    assert totals == {"runs/r1-seed1": (1, 1), "runs/r1-seed2": (2, 1), "solo": (1, 1)}
    rows = {r.run: len(r.cells) for r in timeline(plan)}
    assert rows == {"runs/r1-seed1": 2, "runs/r1-seed2": 3, "solo": 2}
    assert "runs/r1-seed2" in render(plan, "md")


def _ref(path: str, step: int) -> ArtifactRef:
    return ArtifactRef(f"{ROOT}{path}checkpoint-{step}/", "checkpoint", "r1", step, ROOT)


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


def test_the_markdown_timeline_names_the_root_when_there_are_several() -> None:
    other = "s3://other-bucket/"
    plan = sample_plan()
    plan.actions = []
    plan.kept = [
        KeptArtifact(_ref("runs/r1/", 100), "checkpoints", None, KeptHow.WHOLE, "newest"),
        KeptArtifact(
            ArtifactRef(f"{other}runs/r1/checkpoint-200/", "checkpoint", "r1", 200, other),
            "checkpoints",
            None,
            KeptHow.WHOLE,
            "newest",
        ),
    ]
    md = render(plan, "md")
    counts = "1 checkpoint: 1 kept, 0 stripped, 0 archived, 0 deleted"
    assert f"- **r1** ({ROOT}): {counts} — 100 kept as it is" in md
    assert f"- **r1** ({other}): {counts} — 200 kept as it is" in md


def test_a_half_written_checkpoint_deleted_as_residue_is_a_step_of_the_timeline() -> None:
    """Past the grace period an incomplete checkpoint is residue, and deleted: the run's
    timeline shows that step deleted (before, it left it out, one step short of what the
    by-run table and the actions count); residue without a step stays out of it."""
    done = _run("runs/a/", (100, 200))
    torn = checkpoint("runs/a/", 300, age_days=10, complete=False)  # residue (past grace)
    body = KEEP_NEWEST + "  - {name: residue, select: {kind: residue}, expire: {after: 1d}}\n"
    plan = make_plan(
        [group("a", [*done, torn])], policy(body + "safety: {max_delete_fraction: 1}\n")
    )
    assert any(a.artifact.uri.endswith("checkpoint-300/") for a in plan.actions)
    [row] = timeline(plan)
    assert [(c.label, c.state) for c in row.cells] == [
        ("100", "deleted"),
        ("200", "kept"),
        ("300", "deleted"),
    ]


def test_checkpoints_outside_any_run_have_a_timeline_row_after_the_runs() -> None:
    """Checkpoints no run holds (a root that is one job's output folder) are tiered
    together, as one run's: the timeline left them out of every format, and with no run
    at all it had no section, while the plan deleted some of them."""
    loose = _run("", (100, 200, 300))
    groups = [group("r1", _run("runs/r1/", (100, 200))), group(None, loose)]
    plan = make_plan(groups, policy(KEEP_NEWEST))
    assert {a.artifact.uri[len(ROOT) :] for a in plan.actions} == {
        "runs/r1/checkpoint-100/",
        "checkpoint-100/",
        "checkpoint-200/",
    }
    rows = timeline(plan)
    assert [(r.run, [c.label for c in r.cells]) for r in rows] == [
        ("r1", ["100", "200"]),
        ("(outside runs)", ["100", "200", "300"]),
    ]
    assert rows[1].counts_line() == "3 checkpoints: 1 kept, 0 stripped, 0 archived, 2 deleted"
    md = render(plan, "md")
    assert "- **(outside runs)**: 3 checkpoints: 1 kept, 0 stripped, 0 archived, 2 deleted" in md
    assert "(outside runs)" in render(plan, "html")
    assert "(outside runs)" in render(plan, "table")

    alone = make_plan([group(None, loose)], policy(KEEP_NEWEST))
    assert [r.run for r in timeline(alone)] == ["(outside runs)"]
    assert "## Checkpoints per run" in render(alone, "md")


def _stepless(name: str, age_days: float) -> Artifact:
    return checkpoint("runs/r1/", None, age_days, name=name)


def test_checkpoints_without_steps_are_in_the_order_the_tiers_rank_them() -> None:
    """By name, `alpha.ckpt` (newer) came before `zeta.ckpt` (older) and `last.ckpt` after
    every step: the timeline read as though the newest checkpoints were deleted. It now
    orders a run's checkpoints as the tiers do: by time where none has a step, and each
    one without a step just above the highest step written before it."""
    names = {"zeta.ckpt": 40, "mid.ckpt": 30, "alpha.ckpt": 20, "last.ckpt": 10}
    plan = make_plan(
        [group("r1", [_stepless(n, age) for n, age in names.items()])], policy(KEEP_NEWEST)
    )
    [row] = timeline(plan)
    assert [(c.label, c.state) for c in row.cells] == [
        ("zeta.ckpt", "deleted"),
        ("mid.ckpt", "deleted"),
        ("alpha.ckpt", "deleted"),
        ("last.ckpt", "kept"),
    ]
    mixed = [
        checkpoint("runs/r1/", 100, 30),
        _stepless("last.ckpt", 25),  # written after step 100, before 200
        checkpoint("runs/r1/", 200, 20),
        checkpoint("runs/r1/", 300, 10),
    ]
    plan = make_plan([group("r1", mixed)], policy(KEEP_NEWEST))
    [row] = timeline(plan)
    assert [c.label for c in row.cells] == ["100", "last.ckpt", "200", "300"]
    assert [c.state for c in row.cells][-1] == "kept"
    # a run whose checkpoints all have steps carries no times: nothing changes for it
    plain = make_plan([group("r1", _run("runs/r1/", (100, 200)))], policy(KEEP_NEWEST))
    assert {a.artifact.written for a in plain.actions} | {
        k.artifact.written for k in plain.kept
    } == {None}


def test_the_times_that_order_a_run_survive_saving_the_plan(catalog_url: str) -> None:  # noqa: F811
    from governance.catalog.engine import open_engine
    from governance.catalog.plans import load_plan, save_plan

    names = {"zeta.ckpt": 40, "mid.ckpt": 30, "alpha.ckpt": 20, "last.ckpt": 10}
    plan = make_plan(
        [group("r1", [_stepless(n, age) for n, age in names.items()])], policy(KEEP_NEWEST)
    )
    engine = open_engine(catalog_url)
    try:
        save_plan(engine, plan)
        loaded = load_plan(engine, plan.plan_id)
    finally:
        engine.dispose()
    written = {a.artifact.uri: a.artifact.written for a in [*plan.actions, *plan.kept]}
    assert None not in written.values()
    assert {a.artifact.uri: a.artifact.written for a in [*loaded.actions, *loaded.kept]} == written
    assert [c.label for c in timeline(loaded)[0].cells] == list(names)
