"""Runs by template and by detection, every status, grace, best checkpoint, streaming."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from governance.model.classify import classify
from governance.model.runs import TemplateMatcher, outermost, run_for_unit
from governance.model.types import ClassifyOptions, Group, Kind, RunStatus
from tests.fixtures import builders as b

TEMPLATE = "{team}/{project}/runs/{run}/"


def groups(tree: b.MemoryTree, days: float = 1, **opts) -> list[Group]:
    options = ClassifyOptions(as_of=b.T0 + timedelta(days=days), **opts)
    return list(classify(tree.objects, options, tree.read_meta))


def runs(tree: b.MemoryTree, days: float = 1, **opts) -> dict[str, Group]:
    return {g.run.key: g for g in groups(tree, days, **opts) if g.run is not None}


def test_template_runs_with_attributes() -> None:
    t = b.MemoryTree()
    b.hf_run(t, "nlp/llama/runs/r1/output")
    b.logs(t, "nlp/llama/runs/r1")
    found = runs(t, run_templates=(TEMPLATE, "runs/{run}/"))
    g = found["nlp/llama/runs/r1/"]
    assert g.run is not None
    assert g.run.name == "r1"
    assert g.run.attributes == {"team": "nlp", "project": "llama", "run": "r1"}
    assert {a.kind for a in g.artifacts} >= {Kind.CHECKPOINT, Kind.LOG}
    assert all(a.run == "nlp/llama/runs/r1/" for a in g.artifacts)


def test_template_first_match_wins() -> None:
    m = TemplateMatcher(("a/{x}/b/{run}/", "a/{run}/"))
    assert m.match("a/foo/c") == ("a/foo/", {"run": "foo"})
    assert m.match("a/foo/b/r/x") == ("a/foo/b/r/", {"x": "foo", "run": "r"})
    assert m.match("zzz") is None


def test_detected_run_is_parent_of_checkpoint_container() -> None:
    assert run_for_unit("exp/a/checkpoints/checkpoint-5/") == "exp/a/"
    assert run_for_unit("exp/a/checkpoint-5/") == "exp/a/"
    assert run_for_unit("checkpoints/checkpoint-5/") == "checkpoints/"
    assert run_for_unit("checkpoint-5/") is None
    assert outermost({"a/", "a/b/", "c/d/"}) == {"a/", "c/d/"}


def test_logs_beside_checkpoints_join_the_detected_run() -> None:
    t = b.MemoryTree()
    b.deepspeed_run(t, "exp/ds/checkpoints")
    b.logs(t, "exp/ds")
    g = runs(t)["exp/ds/"]
    kinds = {a.kind for a in g.artifacts}
    assert Kind.LOG in kinds
    assert Kind.CHECKPOINT in kinds


def test_nested_checkpoint_does_not_make_a_run() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "exp/out", steps=(10,))
    b.deepspeed_run(t, units[0].rstrip("/"), steps=(10,))  # HF + DeepSpeed nesting
    found = runs(t)
    assert list(found) == ["exp/"]
    ck = [a for a in found["exp/"].artifacts if a.kind is Kind.CHECKPOINT]
    assert [a.key for a in ck] == [units[0]]


def test_status_completed_by_marker_and_by_final_weights() -> None:
    t = b.MemoryTree()
    b.lightning_run(t, "a")
    b.marker(t, "a/lightning_logs/version_0", "_SUCCESS")
    b.hf_run(t, "b/out", final_weights=True)
    found = runs(t, days=60)
    assert found["a/lightning_logs/version_0/"].run.status is RunStatus.COMPLETED  # type: ignore[union-attr]
    r = found["b/"].run
    assert r is not None
    assert r.status is RunStatus.COMPLETED
    assert "final weights" in r.status_reason


def test_status_failed_running_abandoned_unknown() -> None:
    t = b.MemoryTree()
    b.deepspeed_run(t, "runs/f")
    b.marker(t, "runs/f", "FAILED", mtime=b.T0 + timedelta(days=1))
    b.deepspeed_run(t, "runs/live", start=b.T0 + timedelta(days=9))
    b.deepspeed_run(t, "runs/dead")
    b.logs(t, "runs/empty")
    found = runs(t, days=10, run_templates=("runs/{run}/",))
    status = {k: g.run.status for k, g in found.items() if g.run}
    assert status == {
        "runs/f/": RunStatus.FAILED,
        "runs/live/": RunStatus.RUNNING,
        "runs/dead/": RunStatus.ABANDONED,
        "runs/empty/": RunStatus.UNKNOWN,
    }
    assert all(g.run and g.run.status_reason for g in found.values())


def test_a_trainer_run_that_reached_max_steps_is_completed_without_a_marker() -> None:
    """The Trainer writes no marker when it finishes; its last `trainer_state.json` says
    `global_step == max_steps`. Such a run is completed, never abandoned (a rule for dead
    runs would otherwise take its final checkpoint), however quiet it has been; a run
    that stopped short of `max_steps` is abandoned once quiet for `abandoned_after`."""
    t = b.MemoryTree()
    b.hf_run(t, "runs/done", steps=(100, 200), finished=True)
    b.hf_run(t, "runs/short", steps=(100, 200))
    found = runs(t, days=60, run_templates=("runs/{run}/",))
    done, short = found["runs/done/"].run, found["runs/short/"].run
    assert done is not None
    assert short is not None
    assert done.status is RunStatus.COMPLETED
    assert done.status_reason == (
        "runs/done/checkpoint-200/trainer_state.json: global_step 200 reached max_steps 200"
    )
    assert short.status is RunStatus.ABANDONED
    recent = runs(t, days=0.5, run_templates=("runs/{run}/",))
    assert recent["runs/done/"].run.status is RunStatus.COMPLETED  # type: ignore[union-attr]
    assert recent["runs/short/"].run.status is RunStatus.RUNNING  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "state",
    [
        {"global_step": 200},  # no max_steps
        {"global_step": 200, "max_steps": 0},
        {"global_step": 200, "max_steps": True},
        {"global_step": "200", "max_steps": 200},
        [200, 200],
    ],
)
def test_a_trainer_state_that_does_not_say_finished_leaves_the_run_abandoned(state: object) -> None:
    t = b.MemoryTree()
    b.hf_run(t, "runs/x", steps=(100, 200), finished=True)
    key = "runs/x/checkpoint-200/trainer_state.json"
    t(key, json.dumps(state).encode(), b.T0 + timedelta(hours=2))
    run = runs(t, days=60, run_templates=("runs/{run}/",))["runs/x/"].run
    assert run is not None
    assert run.status is RunStatus.ABANDONED


def test_newer_completed_marker_beats_older_failed() -> None:
    t = b.MemoryTree()
    b.deepspeed_run(t, "r1")
    b.marker(t, "r1", "FAILED", mtime=b.T0)
    b.marker(t, "r1", "COMPLETED", mtime=b.T0 + timedelta(hours=5))
    assert runs(t)["r1/"].run.status is RunStatus.COMPLETED  # type: ignore[union-attr]


def test_a_failed_marker_written_with_the_completed_one_does_not_fail_the_run() -> None:
    """Failed needs a failed marker newer than any completed marker (docs/policy.md): one
    of the same time made the run failed, and a rule for dead runs deleted it whole."""
    t = b.MemoryTree()
    b.deepspeed_run(t, "r1")
    b.marker(t, "r1", "COMPLETED", mtime=b.T0 + timedelta(hours=5))
    b.marker(t, "r1", "FAILED", mtime=b.T0 + timedelta(hours=5))
    assert runs(t)["r1/"].run.status is RunStatus.COMPLETED  # type: ignore[union-attr]
    b.marker(t, "r1", "FAILED", mtime=b.T0 + timedelta(hours=6))
    assert runs(t)["r1/"].run.status is RunStatus.FAILED  # type: ignore[union-attr]


def test_incomplete_within_and_outside_grace() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "r/out", incomplete_last=True)
    inside = {a.key: a for g in groups(t, days=1) for a in g.artifacts}[units[-1]]
    assert inside.kind is Kind.CHECKPOINT
    assert not inside.complete
    assert "in flight" in inside.note
    outside = {a.key: a for g in groups(t, days=10) for a in g.artifacts}[units[-1]]
    assert outside.kind is Kind.RESIDUE
    assert "trainer_state.json missing" in outside.completeness_reason


def test_best_checkpoint_from_trainer_state() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "r/out", best_step=1000)
    r = runs(t)["r/"].run
    assert r is not None
    assert r.best_checkpoint == units[1]


def test_last_write_is_newest_object() -> None:
    t = b.MemoryTree()
    b.deepspeed_run(t, "r")
    late = b.T0 + timedelta(days=2)
    t("r/logs/train.log", b"x", late)
    assert runs(t, days=3)["r/"].run.last_write == late  # type: ignore[union-attr]


def test_objects_outside_runs_grouped_by_top_level_folder() -> None:
    t = b.MemoryTree()
    b.datasets(t, "data")
    b.residue(t, "scratch")
    t("README.md", b"x", b.T0)
    gs = [g for g in groups(t) if g.run is None]
    tops = [{a.key.split("/")[0] for a in g.artifacts} for g in gs]
    assert tops == [{"README.md"}, {"data"}, {"scratch"}] or sorted(map(sorted, tops)) == sorted(
        map(sorted, [{"README.md"}, {"data"}, {"scratch"}])
    )


def test_checkpoint_folders_at_the_root_are_one_group() -> None:
    """A root that is one run's output folder: its checkpoints are one group, as a run's
    are, so tiers see them all (each used to be a group of its own, never thinned)."""
    t = b.MemoryTree()
    b.hf_run(t, "", steps=(1000, 2000, 3000))
    b.deepspeed_run(t, "", steps=(100, 200))
    b.datasets(t, "data")
    t("README.md", b"x", b.T0)
    gs = [g for g in groups(t) if g.run is None]
    by_top = [sorted({a.key.split("/")[0] for a in g.artifacts}) for g in gs]
    units = [top for top in by_top if "checkpoint-1000" in top]
    assert units == [
        ["checkpoint-1000", "checkpoint-2000", "checkpoint-3000", "global_step100",
         "global_step200"]
    ]  # fmt: skip
    assert ["data"] in by_top  # a top-level folder that is no checkpoint: a group of its own
    [root_group] = [
        g for g in gs if "checkpoint-1000" in {a.key.split("/")[0] for a in g.artifacts}
    ]
    steps = sorted(a.step for a in root_group.artifacts if a.kind is Kind.CHECKPOINT)
    assert steps == [100, 200, 1000, 2000, 3000]


def test_mixed_layouts_in_one_root() -> None:
    t = b.MemoryTree()
    b.hf_run(t, "exp/hf/output")
    b.lightning_run(t, "exp/pl")
    b.deepspeed_run(t, "exp/ds/checkpoints")
    b.megatron_run(t, "exp/mg")
    b.orbax_run(t, "exp/ox/ckpts")
    b.nemo_run(t, "exp/nemo")
    b.dcp_checkpoint(t, "exp/dcp/ckpts/step_1")
    found = runs(t)
    layouts = {
        k: {a.layout for a in g.artifacts if a.kind is Kind.CHECKPOINT} for k, g in found.items()
    }
    assert layouts == {
        "exp/hf/": {"hf"},
        "exp/pl/lightning_logs/version_0/": {"lightning"},
        "exp/ds/": {"deepspeed"},
        "exp/mg/": {"megatron"},
        "exp/ox/": {"orbax"},
        "exp/nemo/": {"nemo"},
        "exp/dcp/": {"dcp"},
    }


def test_a_run_inside_a_runs_folder_is_a_sign_of_life_of_the_run_holding_it() -> None:
    """The Trainer logs to `output_dir/runs/<date>_<host>/`: under `runs/{run}/`, the
    example layout's first template `{team}/{project}/runs/{run}/` matches that folder
    too (team `runs`, project the run), and it was a run of its own. Training between
    checkpoints writes only there: the run holding it read as abandoned, and a rule for
    dead runs expired the checkpoints it was training from."""
    t = b.MemoryTree()
    b.hf_run(t, "runs/live", steps=(100, 200))
    tb = "runs/live/runs/Dec07_23-30-00_host/events.out.tfevents.1.host"
    t(tb, b"event", b.T0 + timedelta(days=20))
    found = runs(t, days=20.5, run_templates=("{team}/{project}/runs/{run}/", "runs/{run}/"))
    outer, inner = found["runs/live/"], found["runs/live/runs/Dec07_23-30-00_host/"]
    assert outer.run is not None
    assert inner.run is not None
    assert [o.key for a in inner.artifacts for o in a.objects] == [tb]  # its own objects
    assert outer.run.last_write == b.T0 + timedelta(days=20)
    assert outer.run.status is RunStatus.RUNNING
    assert outer.run.status_reason.startswith("last write 12.0h ago")
    # without the nested folder's write the run is abandoned: the same tree, quiet
    quiet = b.MemoryTree()
    b.hf_run(quiet, "runs/live", steps=(100, 200))
    alone = runs(quiet, days=20.5, run_templates=("{team}/{project}/runs/{run}/", "runs/{run}/"))
    assert alone["runs/live/"].run is not None
    assert alone["runs/live/"].run.status is RunStatus.ABANDONED


@pytest.mark.parametrize(
    "name",
    [
        ".model.safetensors.govern.tmp",
        ".model.safetensors.govern-0123456789ab.tmp",
        ".govern-" + "f" * 32 + ".tmp",
    ],
)
def test_a_temporary_file_govern_left_is_residue_of_its_own(name: str) -> None:
    """A restore killed between its link and its unlink leaves `.NAME.govern.tmp`, a
    second name of the restored file: read as a partial file of the checkpoint holding
    it, the restored checkpoint became residue, and the next plan deleted it whole."""
    t = b.MemoryTree()
    b.hf_run(t, "runs/r1", steps=(100, 200))
    t(f"runs/r1/checkpoint-200/{name}", b.BLOB, b.T0)
    found = {a.key: a for g in groups(t, days=30) for a in g.artifacts}
    ckpt = found["runs/r1/checkpoint-200/"]
    assert (ckpt.kind, ckpt.complete) == (Kind.CHECKPOINT, True), ckpt.completeness_reason
    debris = found[f"runs/r1/checkpoint-200/{name}"]
    assert debris.kind is Kind.RESIDUE
    assert "govern's own temporary file" in debris.note
    # a user's own temporary file still makes its checkpoint partial
    t("runs/r1/checkpoint-100/model.safetensors.tmp", b.BLOB, b.T0)
    found = {a.key: a for g in groups(t, days=30) for a in g.artifacts}
    assert not found["runs/r1/checkpoint-100/"].complete
