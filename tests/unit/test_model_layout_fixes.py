"""Checkpoint completeness and strippability the frameworks' own sources decide: ZeRO-3
tags, DeepSpeed tags that are not `global_step<N>`, ranks missing from a tag, and Orbax
commits on object stores and filesystems."""

from __future__ import annotations

from datetime import timedelta

from governance.model.classify import classify
from governance.model.types import Artifact, ClassifyOptions, Group, Kind
from tests.fixtures import builders as b
from tests.unit.plan_factories import AS_OF, actions_for, kept_for, make_plan, policy

LATE = b.T0 + timedelta(days=30)  # far outside the 3-day grace of the builders' writes
DAY = timedelta(days=1)

STRIP = """
protect: {min_age: 1d}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: thin, keep_every_steps: 1, keep_components: [weights, metadata]}
    otherwise: delete
"""

KEEP_LAST_1 = """
protect: {min_age: 1d}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""


def groups(tree: b.MemoryTree, as_of=LATE) -> list[Group]:
    return list(classify(tree.objects, ClassifyOptions(as_of=as_of), tree.read_meta))


def arts(tree: b.MemoryTree, as_of=LATE) -> dict[str, Artifact]:
    return {a.key: a for g in groups(tree, as_of) for a in g.artifacts}


# ------------------------------------------------------------------- DeepSpeed ZeRO-3


def _zero3(tree: b.MemoryTree) -> list[str]:
    units = [
        b.deepspeed_tag(tree, "z3/ckpt", f"global_step{s}", mtime=b.T0 + i * DAY, zero3=True)
        for i, s in enumerate((100, 200))
    ]
    b.deepspeed_latest(tree, "z3/ckpt", "global_step200", b.T0 + DAY)
    return units


def test_zero3_tag_is_complete_but_not_strippable() -> None:
    t = b.MemoryTree()
    units = _zero3(t)
    a = arts(t)
    for u in units:
        assert a[u].complete, a[u].completeness_reason
        assert not a[u].strippable
        assert "cannot be stripped" in a[u].note
        assert "ZeRO-3" in a[u].note


def test_zero3_model_states_missing_for_one_dp_rank() -> None:
    t = b.MemoryTree()
    u = b.deepspeed_tag(
        t,
        "z3/ckpt",
        "global_step100",
        zero3=True,
        drop=("zero_pp_rank_1_mp_rank_00_model_states.pt",),
    )
    b.deepspeed_latest(t, "z3/ckpt", "global_step100")
    a = arts(t, as_of=b.T0 + DAY)[u]
    assert not a.complete
    assert "zero_pp_rank_1_mp_rank_00_model_states.pt" in a.completeness_reason


def test_strip_keeps_zero3_optimizer_partitions() -> None:
    t = b.MemoryTree()
    units = _zero3(t)
    plan = make_plan(groups(t, AS_OF), policy(STRIP))
    assert [x.action for x in actions_for(plan, units[0])] == []
    kept = kept_for(plan, units[0])
    assert kept is not None
    assert "cannot be stripped" in kept.reason


# ------------------------------------------- DeepSpeed tags that are not global_step<N>


def test_a_tag_copied_after_latest_is_judged_by_its_files() -> None:
    """Tags that cannot be compared by step are judged by their files alone: a copy
    (`aws s3 sync`, `cp -r`) stamps each tag after `latest`, and write times cannot tell
    that from a save in flight (a review found complete tags made residue that way)."""
    t = b.MemoryTree()
    b.deepspeed_tag(t, "acc/out", "epoch1", mtime=b.T0)
    late = b.deepspeed_tag(t, "acc/out", "epoch2", mtime=b.T0 + DAY)
    b.deepspeed_latest(t, "acc/out", "epoch1", b.T0 + timedelta(seconds=30))
    a = arts(t, as_of=b.T0 + DAY + timedelta(hours=1))[late]
    assert a.complete, a.completeness_reason
    assert a.kind is Kind.CHECKPOINT


def test_tag_files_closed_just_after_latest_still_count() -> None:
    """Rank 0 writes `latest` while other ranks close their files: a tag written seconds
    after `latest` is not judged in flight."""
    t = b.MemoryTree()
    u = b.deepspeed_tag(t, "pl/ckpt", "epoch1", mtime=b.T0 + timedelta(seconds=20))
    b.deepspeed_latest(t, "pl/ckpt", "checkpoint", b.T0)
    assert arts(t, as_of=b.T0 + DAY)[u].complete


# --------------------------------------------------------------------- missing ranks


def test_megatron_rank_folder_without_model_file() -> None:
    t = b.MemoryTree()
    units = b.megatron_run(t, "mgA/checkpoints", iters=(100, 200, 300), tracker=300)
    del t.objects_by_key[units[2] + "mp_rank_01/model_optim_rng.pt"]
    a = arts(t)
    assert a[units[1]].complete
    assert not a[units[2]].complete
    assert "mp_rank_01/ without model_optim_rng.pt" in a[units[2]].completeness_reason


def test_megatron_rank_folder_without_distrib_optim() -> None:
    t = b.MemoryTree()
    units = b.megatron_run(t, "mg", iters=(100, 200), tracker=200)
    del t.objects_by_key[units[1] + "mp_rank_00/distrib_optim.pt"]
    a = arts(t, as_of=b.T0 + DAY)[units[1]]
    assert not a.complete
    assert "mp_rank_00/ without distrib_optim.pt" in a.completeness_reason


def test_megatron_newest_iteration_on_fewer_ranks_is_complete() -> None:
    """A run resumed on fewer ranks that ended there: its newest iteration, the one the
    tracker names, has fewer rank folders than those before and is complete (a rule
    comparing siblings made it residue, the run's resume point deleted)."""
    t = b.MemoryTree()
    old = b.megatron_run(t, "mg", iters=(100, 200), tp=4, tracker=None)
    new = b.megatron_run(
        t, "mg", iters=(300,), tp=2, tracker=300, start=b.T0 + 2 * timedelta(hours=1)
    )
    a = arts(t)
    assert all(a[u].complete for u in old + new), [a[u].completeness_reason for u in new]


def test_megatron_resumed_on_fewer_ranks_is_complete_once_the_next_iteration_is_saved() -> None:
    t = b.MemoryTree()
    old = b.megatron_run(t, "mg", iters=(100, 200), tp=4, tracker=None)
    new = b.megatron_run(
        t, "mg", iters=(300, 400), tp=2, tracker=400, start=b.T0 + 2 * timedelta(hours=1)
    )
    a = arts(t)
    assert all(a[u].complete for u in old + new), [a[u].completeness_reason for u in new]


def test_keep_last_skips_megatron_iteration_missing_a_rank() -> None:
    t = b.MemoryTree()
    units = b.megatron_run(t, "mgA/checkpoints", iters=(100, 200, 300), tracker=300)
    del t.objects_by_key[units[2] + "mp_rank_01/model_optim_rng.pt"]
    plan = make_plan(groups(t, AS_OF), policy(KEEP_LAST_1))
    assert kept_for(plan, units[1]) is not None
    assert kept_for(plan, units[2]) is None


def test_deepspeed_zero3_optimizer_partitions_without_model_states_in_one_rank() -> None:
    t = b.MemoryTree()
    u = b.deepspeed_tag(
        t,
        "z3",
        "global_step1",
        zero3=True,
        dp=4,
        drop=("zero_pp_rank_3_mp_rank_00_model_states.pt",),
    )
    b.deepspeed_latest(t, "z3", "global_step1")
    assert not arts(t, as_of=b.T0 + DAY)[u].complete


# ---------------------------------------------------------------------------- Orbax


def _orbax_s3(tree: b.MemoryTree) -> list[str]:
    return [
        b.orbax_step(tree, "oxB/ckpt", "100", mtime=b.T0, commit_success=True),
        b.orbax_step(tree, "oxB/ckpt", "200", mtime=b.T0 + DAY, commit_success=True),
        # save started (`_CHECKPOINT_METADATA` first), never committed
        b.orbax_step(tree, "oxB/ckpt", "300", mtime=b.T0 + 2 * DAY, commit_timestamp=False),
    ]


def test_orbax_object_store_step_started_but_not_committed() -> None:
    t = b.MemoryTree()
    s1, s2, s3 = _orbax_s3(t)
    a = arts(t)
    assert a[s1].complete
    assert a[s2].complete
    assert a[s3].kind is Kind.RESIDUE
    assert "commit_timestamp_nsecs" in a[s3].completeness_reason


def test_orbax_object_store_commit_time_in_checkpoint_metadata() -> None:
    t = b.MemoryTree()
    u = b.orbax_step(t, "ox", "100")
    assert arts(t, as_of=b.T0 + DAY)[u].complete


def test_keep_last_skips_uncommitted_orbax_step() -> None:
    t = b.MemoryTree()
    _s1, s2, s3 = _orbax_s3(t)
    plan = make_plan(groups(t, AS_OF), policy(KEEP_LAST_1))
    assert kept_for(plan, s2) is not None
    assert kept_for(plan, s3) is None


def test_older_orbax_on_a_filesystem_is_complete_by_its_final_name() -> None:
    t = b.FilesystemTree()
    units = [
        b.orbax_step(t, "oxC/ckpt", name, mtime=b.T0, items=("state",), checkpoint_metadata=False)
        for name in ("1000", "2000")
    ]
    a = arts(t)
    for u in units:
        assert a[u].kind is Kind.CHECKPOINT
        assert a[u].complete, a[u].completeness_reason


def test_a_pytree_saved_into_the_step_folder_on_a_filesystem_is_complete() -> None:
    """Flax's checkpoints or a Standard checkpointer write the PyTree straight into the
    step folder: its `_METADATA` at the top, `ocdbt.process_0/` and `d/` its OCDBT data,
    not items without metadata (a review found such steps made residue)."""
    t = b.FilesystemTree()
    step = "jax/ckpt/checkpoint_100/"
    for name in ("_METADATA", "_sharding", "manifest.ocdbt", "ocdbt.process_0/manifest.ocdbt",
                 "ocdbt.process_0/d/abc", "d/0123"):  # fmt: skip
        t(step + name, b"{}", b.T0)
    a = arts(t, as_of=b.T0 + DAY)
    assert a[step].kind is Kind.CHECKPOINT
    assert a[step].complete, a[step].completeness_reason


def test_orbax_on_a_filesystem_item_without_metadata_is_incomplete() -> None:
    t = b.FilesystemTree()
    u = b.orbax_step(t, "ox", "1000", items=("params", "opt_state"), checkpoint_metadata=False)
    del t.objects_by_key[u + "opt_state/_METADATA"]
    assert not arts(t, as_of=b.T0 + DAY)[u].complete


def test_orbax_tmp_folder_on_a_filesystem_is_still_residue() -> None:
    t = b.FilesystemTree()
    b.orbax_run(t, "jx", steps=(1000,), tmp=True)
    tmp = [a for a in arts(t).values() if ".orbax-checkpoint-tmp-" in a.key]
    assert tmp
    assert all(a.kind is Kind.RESIDUE for a in tmp)


# ------------------------------------------- logs straight in the run's own folder


def test_tensorboard_events_in_the_run_folder_are_artifacts_of_their_own() -> None:
    """Lightning writes its TensorBoard event files straight into the run folder
    (`lightning_logs/version_0/`): one log stream named by that folder read as the whole
    run ("delete .../version_0/"). Each event file is an artifact of its own there; in a
    folder of their own (`runs/<date>_<host>/`) they stay one stream."""
    t = b.MemoryTree()
    b.lightning_run(t, "exp/r1")
    run = "exp/r1/lightning_logs/version_0/"
    extra = run + "events.out.tfevents.1704070800.host.42.1"
    t(extra, b.BLOB, b.T0)
    g = [g for g in groups(t) if g.run is not None and g.run.key == run]
    assert len(g) == 1
    by_key = {a.key: a for a in g[0].artifacts}
    assert run not in by_key
    logs = [a for a in g[0].artifacts if a.layout == "tensorboard"]
    assert sorted(a.key for a in logs) == [
        run + "events.out.tfevents.1704067200.host.42.0",
        extra,
    ]
    assert {(a.kind, a.run, len(a.objects)) for a in logs} == {(Kind.LOG, run, 1)}
    # the logger's files beside them are logs of their own too
    for name in ("hparams.yaml", "metrics.csv"):
        assert (by_key[run + name].kind, by_key[run + name].layout) == (Kind.LOG, "log")
    nested = b.MemoryTree()
    b.hf_run(nested, "hf/r2", final_weights=True)
    streams = [a for a in arts(nested).values() if a.layout == "tensorboard"]
    assert len(streams) == 1
    assert streams[0].key.endswith("/runs/Jan01_00-00-00_host/")


def test_a_loggers_files_beside_its_event_files_are_one_log_with_them() -> None:
    """Lightning's TensorBoardLogger (and NeMo's) writes `hparams.yaml` and, with a CSV
    logger too, `metrics.csv` beside the event files: the folder is one log. Left apart,
    `hparams.yaml` was an artifact of kind other, so a plan that expired the log said
    "delete .../version_0/" and left a file in it. `metrics.csv` alone (CSVLogger) is still
    a log of its own, and `hparams.yaml` beside it stays what it was."""
    t = b.MemoryTree()
    tb = "team/runs/pl/lightning_logs/version_0/"
    for name in ("events.out.tfevents.1704067200.host.42.0", "hparams.yaml", "metrics.csv"):
        t(tb + name, b.BLOB, b.T0)
    csv = "team/runs/pl/csv_logs/version_0/"
    for name in ("hparams.yaml", "metrics.csv"):
        t(csv + name, b.BLOB, b.T0)
    found = arts(t)
    log = found[tb]
    assert (log.kind, log.layout) == (Kind.LOG, "tensorboard")
    assert sorted(o.key[len(tb) :] for o in log.objects) == [
        "events.out.tfevents.1704067200.host.42.0",
        "hparams.yaml",
        "metrics.csv",
    ]
    assert not [k for k in found if k.startswith(tb) and k != tb]
    assert found[csv + "metrics.csv"].kind is Kind.LOG
    assert found[csv + "hparams.yaml"].kind is Kind.OTHER
    assert csv not in found
