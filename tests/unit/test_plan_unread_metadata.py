"""Metadata a plan's decisions rest on that could not be read protects its run.

A Trainer run's end (`global_step` reached `max_steps`), its checkpoints' metrics (which
one is the best) and a DeepSpeed run's resume point (`latest`) are read from small files.
One that could not be read (over the size limit, a permission, a read that failed) was
taken as saying nothing: the finished run read as abandoned and a rule for dead runs
deleted all of it, its final checkpoint too; a `best` tier kept the best of the others
and deleted the real best; tags newer than the unread `latest` read as complete and the
one training resumes from was rotated away. The run is now left as it is, and says why.
"""

from __future__ import annotations

from datetime import timedelta

from governance.model.classify import classify
from governance.model.types import CatalogObject, ClassifyOptions, Group, RunStatus
from governance.plan.types import KeptHow
from tests.fixtures import builders as b
from tests.unit.plan_factories import make_plan, policy

DEAD_RUNS_FIRST = """
layout: {runs: ["runs/{run}/"]}
protect: {min_age: 1d}
rules:
  - name: failed-runs
    select: {run_status: [failed, abandoned]}
    expire: {after: 7d}
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: best, keep: [best], best_metric: {name: eval_loss, mode: min}}
    otherwise: delete
safety: {max_delete_fraction: 1.0}
"""

AS_OF = b.T0 + timedelta(days=60)


def _groups(tree: b.MemoryTree, unreadable: set[str], limit: int | None = None) -> list[Group]:
    def read(obj: CatalogObject) -> bytes | None:
        if obj.key in unreadable:
            raise PermissionError(13, "Permission denied")
        return tree.read_meta(obj)

    options = ClassifyOptions(as_of=AS_OF, run_templates=("runs/{run}/",))
    if limit is not None:
        options = ClassifyOptions(
            as_of=AS_OF, run_templates=("runs/{run}/",), metadata_max_bytes=limit
        )
    return list(classify(tree.objects, options, read))


def _hf(tree: b.MemoryTree) -> str:
    b.hf_run(tree, "runs/hf", steps=(500, 1000, 1500), finished=True, best_step=1000)
    return "runs/hf/checkpoint-1500/trainer_state.json"


def test_a_finished_run_whose_trainer_state_cannot_be_read_is_left_as_it_is() -> None:
    t = b.MemoryTree()
    newest_state = _hf(t)
    readable = _groups(t, set())
    assert readable[0].run is not None
    assert readable[0].run.status is RunStatus.COMPLETED  # (the file says it finished)
    assert readable[0].unread == ()
    assert make_plan(readable, policy(DEAD_RUNS_FIRST)).actions  # (readable: acted on)

    [group] = _groups(t, {newest_state})
    assert group.unread == (f"{newest_state} (Permission denied)",)
    plan = make_plan([group], policy(DEAD_RUNS_FIRST))
    assert plan.actions == []
    checkpoints = [k for k in plan.kept if k.artifact.kind == "checkpoint"]
    assert len(checkpoints) == 3
    for kept in checkpoints:
        assert kept.how is KeptHow.PROTECTED
        assert kept.reason.startswith(
            f"protected: metadata its decisions rest on could not be read: {newest_state} "
            "(Permission denied)"
        )


def test_a_trainer_state_over_the_size_limit_is_unread_too() -> None:
    t = b.MemoryTree()
    newest_state = _hf(t)
    size = len(t.content[newest_state])
    [group] = _groups(t, set(), limit=size - 1)
    assert group.unread
    assert all("over the" in u and "metadata limit" in u for u in group.unread)
    assert any(u.startswith(newest_state) for u in group.unread)
    assert make_plan([group], policy(DEAD_RUNS_FIRST)).actions == []


def test_an_unreadable_deepspeed_latest_leaves_its_run_as_it_is() -> None:
    t = b.MemoryTree()
    b.deepspeed_run(t, "runs/ds", steps=(100, 200, 300))
    assert make_plan(_groups(t, set()), policy(DEAD_RUNS_FIRST)).actions  # (readable)
    [group] = _groups(t, {"runs/ds/latest"})
    assert group.unread == ("runs/ds/latest (Permission denied)",)
    plan = make_plan([group], policy(DEAD_RUNS_FIRST))
    assert plan.actions == []


def test_other_runs_are_planned_as_before() -> None:
    t = b.MemoryTree()
    newest_state = _hf(t)
    b.hf_run(t, "runs/other", steps=(100, 200, 300), finished=True)
    groups = _groups(t, {newest_state})
    plan = make_plan(groups, policy(DEAD_RUNS_FIRST))
    touched = {a.artifact.uri.split("/")[4] for a in plan.actions}
    assert touched == {"other"}
