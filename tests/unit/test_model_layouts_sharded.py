"""Checkpoint forms whose state is sharded across folders: Trainer + FSDP
`SHARDED_STATE_DICT`, Trainer + DeepSpeed ZeRO-3, Lightning's `DeepSpeedStrategy` folder,
and NeMo's `-unfinished` marker (each once judged wrongly, see the detectors' docstrings)."""

from __future__ import annotations

from datetime import timedelta

from governance.model.classify import classify
from governance.model.detectors.hf import hf_component
from governance.model.types import Artifact, ClassifyOptions, Component, Kind
from tests.fixtures import builders as b

SOON = b.T0 + timedelta(days=1)  # inside the 3-day grace of the builders' writes
LATE = b.T0 + timedelta(days=30)  # far outside it


def run_tree(tree: b.MemoryTree, as_of=LATE, meta: bool = True) -> dict[str, Artifact]:
    options = ClassifyOptions(as_of=as_of)
    reader = tree.read_meta if meta else None
    return {a.key: a for g in classify(tree.objects, options, reader) for a in g.artifacts}


def comps(a: Artifact) -> dict[str, Component]:
    return {m.obj.key[len(a.key) :]: m.component for m in a.members}


# ---------------------------------------------------------------- Trainer + FSDP


def test_hf_fsdp_sharded_state_dict_is_complete_without_config() -> None:
    t = b.MemoryTree()
    units = b.hf_fsdp_run(t, "r/out")
    for meta in (True, False):
        arts = run_tree(t, meta=meta)
        for unit in units:
            a = arts[unit]
            assert (a.kind, a.layout, a.complete) == (Kind.CHECKPOINT, "hf", True), (
                a.completeness_reason
            )
            assert "config.json" not in a.completeness_reason
            assert a.strippable


def test_hf_fsdp_components_keep_the_weight_shard_set_whole() -> None:
    t = b.MemoryTree()
    unit = b.hf_fsdp_run(t, "r/out", steps=(100,))[0]
    c = comps(run_tree(t)[unit])
    assert c["pytorch_model_fsdp_0/.metadata"] is Component.WEIGHTS
    assert c["pytorch_model_fsdp_0/__0_0.distcp"] is Component.WEIGHTS
    assert c["optimizer_0/.metadata"] is Component.OPTIMIZER
    assert c["optimizer_0/__1_0.distcp"] is Component.OPTIMIZER
    assert c["scheduler.pt"] is Component.SCHEDULER
    assert c["rng_state_1.pth"] is Component.RNG
    assert c["trainer_state.json"] is Component.METADATA
    assert hf_component("pytorch_model_fsdp_1/.metadata") is Component.WEIGHTS


def test_hf_fsdp_weight_shards_need_metadata() -> None:
    t = b.MemoryTree()
    units = b.hf_fsdp_run(t, "r/out", weights_metadata=False)
    arts = run_tree(t)
    assert arts[units[0]].complete
    bad = arts[units[1]]
    assert not bad.complete
    assert bad.kind is Kind.RESIDUE
    assert "pytorch_model_fsdp_0/.metadata missing" in bad.completeness_reason
    # with the shard folders complete, empty weight shards or no trainer state still fail
    t2 = b.MemoryTree()
    unit = b.hf_fsdp_run(t2, "r/out", steps=(100,))[0]
    for r in range(2):
        t2(f"{unit}pytorch_model_fsdp_0/__{r}_0.distcp", b"", b.T0)
    assert not run_tree(t2)[unit].complete
    t3 = b.MemoryTree()
    unit = b.hf_fsdp_run(t3, "r/out", steps=(100,))[0]
    del t3.objects_by_key[unit + "trainer_state.json"]
    a = run_tree(t3)[unit]
    assert not a.complete
    assert "trainer_state.json missing" in a.completeness_reason


# ---------------------------------------------------------------- Trainer + ZeRO-3


def test_hf_zero3_nested_tag_cannot_be_stripped() -> None:
    for placeholder in (False, True):
        t = b.MemoryTree()
        units = b.hf_zero3_run(t, "r/out", placeholder_weights=placeholder)
        for unit in units:
            a = run_tree(t)[unit]
            assert a.complete, a.completeness_reason
            assert a.strippable is False
            assert "ZeRO-3" in a.note
    # ZeRO-1/2 (`mp_rank_00_model_states.pt` holds the weights): still strippable
    t = b.MemoryTree()
    d = "r/out/checkpoint-100/"
    t(d + "config.json", b"{}", b.T0)
    t(d + "model.safetensors", b.BLOB, b.T0)
    t(d + "trainer_state.json", b'{"global_step": 100, "log_history": []}', b.T0)
    t(d + "global_step100/mp_rank_00_model_states.pt", b.BLOB, b.T0)
    t(d + "global_step100/zero_pp_rank_0_mp_rank_00_optim_states.pt", b.BLOB, b.T0)
    a = run_tree(t)[d]
    assert a.complete
    assert a.strippable


# ---------------------------------------------------------------- Lightning DeepSpeedStrategy


def test_lightning_deepspeed_folder_is_complete() -> None:
    t = b.MemoryTree()
    units = b.lightning_deepspeed_run(t, "ds_run")
    for meta in (True, False):
        arts = run_tree(t, meta=meta)
        for unit in units:
            a = arts[unit]
            assert (a.kind, a.layout, a.complete) == (Kind.CHECKPOINT, "lightning", True), (
                a.completeness_reason
            )
            assert a.strippable
            assert a.step == int(unit.rstrip("/").rpartition("step=")[2].removesuffix(".ckpt"))
    c = comps(run_tree(t)[units[0]])
    assert c["checkpoint/mp_rank_00_model_states.pt"] is Component.WEIGHTS
    assert c["checkpoint/zero_pp_rank_1_mp_rank_00_optim_states.pt"] is Component.OPTIMIZER
    assert c["latest"] is Component.METADATA
    assert c["zero_to_fp32.py"] is Component.METADATA


def test_lightning_deepspeed_zero3_cannot_be_stripped() -> None:
    t = b.MemoryTree()
    units = b.lightning_deepspeed_run(t, "ds_run", zero3=True)
    a = run_tree(t)[units[0]]
    assert a.complete, a.completeness_reason
    assert a.strippable is False
    assert "ZeRO-3" in a.note


def test_lightning_deepspeed_needs_latest_and_partitions() -> None:
    t = b.MemoryTree()
    units = b.lightning_deepspeed_run(t, "ds_run", latest=False)
    arts = run_tree(t)
    assert arts[units[0]].complete
    assert not arts[units[1]].complete
    assert "latest" in arts[units[1]].completeness_reason
    t2 = b.MemoryTree()
    unit = b.lightning_deepspeed_run(t2, "ds_run", steps=(100,), dp=3)[0]
    del t2.objects_by_key[unit + "checkpoint/zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert not run_tree(t2)[unit].complete
    t3 = b.MemoryTree()
    unit = b.lightning_deepspeed_run(t3, "ds_run", steps=(100,))[0]
    t3(unit + "latest", b"other_tag", b.T0)
    assert not run_tree(t3)[unit].complete


# ---------------------------------------------------------------- NeMo -unfinished


def test_nemo_unfinished_marker_makes_its_checkpoint_incomplete() -> None:
    t = b.MemoryTree()
    first, second, marker = b.nemo1_run(t, "nemoU")
    young = run_tree(t, as_of=SOON)
    assert young[first].complete
    assert not young[second].complete
    assert young[second].kind is Kind.CHECKPOINT
    assert "unfinished" in young[second].completeness_reason
    assert "in flight" in young[second].note
    old = run_tree(t, as_of=LATE)
    assert old[second].kind is Kind.RESIDUE
    # the marker goes with its checkpoint, not left as `other`
    assert marker in {o.key for o in old[second].objects}
    assert marker not in old


def test_nemo_marker_alone_and_beside_folders() -> None:
    t = b.MemoryTree()
    units = b.nemo_run(t, "n2", steps=(99, 199), archive=True)
    t(units[1].rstrip("/") + "-unfinished", b"", b.T0)  # NeMo 2 folder `...-last-unfinished`
    t(units[2].removesuffix(".nemo") + "-unfinished", b"", b.T0)
    arts = run_tree(t)
    assert arts[units[0]].complete
    assert not arts[units[1]].complete
    assert not arts[units[2]].complete
    others = [a for a in arts.values() if a.kind is Kind.OTHER]
    assert not [a for a in others if a.key.endswith("-unfinished")]
    t2 = b.MemoryTree()  # a marker whose checkpoint never appeared: residue when old
    t2("c/checkpoints/x--step=5-unfinished", b"", b.T0)
    t2("c/checkpoints/x--step=4.ckpt", b.BLOB, b.T0)
    arts2 = run_tree(t2)
    assert arts2["c/checkpoints/x--step=5.ckpt"].kind is Kind.RESIDUE
    assert arts2["c/checkpoints/x--step=4.ckpt"].complete
    t3 = b.MemoryTree()  # a file that only ends like a marker is no checkpoint's
    t3("c/checkpoints/x--step=4.ckpt", b.BLOB, b.T0)
    t3("c/notes/report-unfinished", b"x", b.T0)
    assert run_tree(t3)["c/notes/report-unfinished"].kind is Kind.OTHER


def test_nemo_model_parallel_marker_holds_every_ranks_file() -> None:
    """A model-parallel NeMo save writes `checkpoints/mp_rank_XX/NAME.ckpt` per rank and
    its marker without the rank folder (`uninject_model_parallel_rank`): each rank's file
    is unfinished while the marker is there (they were judged complete, and the lone
    marker became residue: deleted, NeMo could no longer tell the save was unfinished)."""
    t = b.MemoryTree()
    name = "megatron_gpt--val_loss=2.0-step=200"
    ranks = [f"run/checkpoints/mp_rank_0{r}/{name}.ckpt" for r in (0, 1)]
    for key in ranks:
        t(key, b"x" * 100, b.T0)
    t(f"run/checkpoints/{name}-unfinished", b"", b.T0)
    arts = run_tree(t, as_of=SOON)
    for key in ranks:
        assert not arts[key].complete
        assert "unfinished" in arts[key].completeness_reason
