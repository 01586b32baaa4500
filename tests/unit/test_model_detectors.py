"""Each layout detector on its fixture tree."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.model.classify import classify
from governance.model.types import Artifact, ClassifyOptions, Component, Kind
from tests.fixtures import builders as b

SOON = b.T0 + timedelta(days=1)  # inside the 3-day grace of the builders' writes
LATE = b.T0 + timedelta(days=30)  # far outside it


def run_tree(tree: b.MemoryTree, as_of=SOON, meta: bool = True, **opts) -> dict[str, Artifact]:
    options = ClassifyOptions(as_of=as_of, **opts)
    reader = tree.read_meta if meta else None
    return {a.key: a for g in classify(tree.objects, options, reader) for a in g.artifacts}


def test_hf_checkpoints_complete_with_components_and_metrics() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "r/out", sharded=True)
    arts = run_tree(t)
    a = arts[units[1]]
    assert (a.kind, a.layout, a.step, a.complete, a.strippable) == (
        Kind.CHECKPOINT,
        "hf",
        1000,
        True,
        True,
    )
    comps = {m.obj.key.rpartition("/")[2]: m.component for m in a.members}
    assert comps["optimizer.pt"] is Component.OPTIMIZER
    assert comps["scheduler.pt"] is Component.SCHEDULER
    assert comps["rng_state.pth"] is Component.RNG
    assert comps["model-00001-of-00002.safetensors"] is Component.WEIGHTS
    assert comps["trainer_state.json"] is Component.METADATA
    assert comps["tokenizer.json"] is Component.METADATA
    assert a.metrics["eval_loss"] == pytest.approx(1.5)
    assert a.metrics["loss"] == pytest.approx(1.9)


def test_hf_missing_shard_is_incomplete_even_without_reader() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "r/out", sharded=True, incomplete_last=True)
    for meta in (True, False):
        a = run_tree(t, meta=meta)[units[-1]]
        assert not a.complete
        assert a.kind is Kind.CHECKPOINT
        assert "model-00002-of-00002" in a.completeness_reason or "[2]" in a.completeness_reason


def test_hf_peft_needs_adapter_config() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "r/out", peft=True)
    a = run_tree(t)[units[0]]
    assert a.complete
    assert "adapter_config.json" in a.completeness_reason
    assert a.note == "peft adapter"


def test_zero_byte_weights_are_incomplete() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "r/out", steps=(10,))
    t(units[0] + "model.safetensors", b"", b.T0)
    a = run_tree(t)[units[0]]
    assert not a.complete
    assert "zero-byte" in a.completeness_reason


def test_lightning_files() -> None:
    t = b.MemoryTree()
    units = b.lightning_run(t, "pl", empty_last_epoch=True)
    arts = run_tree(t, as_of=LATE)
    first = arts[units[0]]
    assert (first.layout, first.step, first.strippable, first.complete) == (
        "lightning",
        100,
        False,
        True,
    )
    assert first.metrics == {"epoch": 0.0, "val_loss": 1.0}
    assert arts[units[-1]].step is None  # last.ckpt
    empty = arts[units[2]]
    assert empty.kind is Kind.RESIDUE
    assert "empty" in empty.completeness_reason


def test_deepspeed_latest_and_ranks() -> None:
    t = b.MemoryTree()
    units = b.deepspeed_run(t, "ds/checkpoints", steps=(100, 200, 300), latest=200, bf16=True)
    arts = run_tree(t, as_of=LATE)
    assert arts[units[0]].complete
    assert arts[units[1]].complete
    assert arts[units[2]].kind is Kind.RESIDUE
    assert "latest" in arts[units[2]].completeness_reason
    assert arts["ds/checkpoints/latest"].kind is Kind.OTHER
    assert arts[units[0]].strippable


def test_deepspeed_missing_optimizer_partition() -> None:
    t = b.MemoryTree()
    units = b.deepspeed_run(t, "ds", steps=(100,), missing_optim=True)
    a = run_tree(t)[units[0]]
    assert not a.complete
    assert "optim" in a.completeness_reason


@pytest.mark.parametrize("torch_dist", [False, True])
def test_megatron_tracker(torch_dist: bool) -> None:
    t = b.MemoryTree()
    units = b.megatron_run(t, "mg", iters=(1000, 2000, 3000), tracker=2000, torch_dist=torch_dist)
    arts = run_tree(t, as_of=LATE)
    assert arts[units[1]].complete
    assert arts[units[1]].step == 2000
    assert arts[units[2]].kind is Kind.RESIDUE
    assert "past" in arts[units[2]].completeness_reason
    assert arts[units[0]].strippable is (not torch_dist)


def test_dcp_needs_metadata() -> None:
    t = b.MemoryTree()
    ok = b.dcp_checkpoint(t, "x/ckpts/step_100")
    bad = b.dcp_checkpoint(t, "x/ckpts/step_200", complete=False)
    arts = run_tree(t)
    assert arts[ok].complete
    assert arts[ok].step == 100
    assert not arts[ok].strippable
    assert not arts[bad].complete
    assert arts[bad].kind is Kind.CHECKPOINT


def test_orbax_commit_and_tmp() -> None:
    t = b.MemoryTree()
    units = b.orbax_run(t, "jx/ckpts", uncommitted_last=True)
    arts = run_tree(t, as_of=LATE)
    assert arts[units[0]].complete
    assert arts[units[0]].step == 1000
    assert arts[units[1]].kind is Kind.RESIDUE
    tmp = [a for a in arts.values() if ".orbax-checkpoint-tmp-" in a.key]
    assert len(tmp) == 1
    assert tmp[0].kind is Kind.RESIDUE


def test_orbax_commit_success_on_object_stores() -> None:
    t = b.MemoryTree()
    units = b.orbax_run(t, "jx", commit="commit_success.txt", tmp=False)
    assert all(run_tree(t)[u].complete for u in units)


def test_nemo2_and_archive() -> None:
    t = b.MemoryTree()
    units = b.nemo_run(t, "nm", incomplete_last=True)
    arts = run_tree(t)
    a = arts[units[0]]
    assert a.complete
    assert a.step == 99
    assert a.metrics["val_loss"] == pytest.approx(2.5)
    assert not arts[units[1]].complete
    assert arts[units[2]].layout == "nemo"
    assert not arts[units[2]].strippable


def test_datasets_logs_eval() -> None:
    t = b.MemoryTree()
    ds = b.datasets(t, "data")
    lg = b.logs(t, "r")
    ev = b.eval_outputs(t, "r")
    arts = run_tree(t)
    for fmt, key in ds.items():
        assert arts[key].kind is Kind.DATASET, fmt
        assert arts[key].layout == fmt
    for layout, key in lg.items():
        assert arts[key].kind is Kind.LOG, layout
    assert arts[lg["wandb"]].layout == "wandb"
    assert arts[lg["tensorboard"]].layout == "tensorboard"
    for key in ev:
        assert arts[key].kind is Kind.EVAL


def test_residue_kinds() -> None:
    t = b.MemoryTree()
    keys = b.residue(t, "scratch")
    t.add_upload("scratch/big.safetensors", "u-1")
    b.hf_run(t, "r/out", steps=(5,), tmp_checkpoint=True)
    groups = list(classify(t.objects, ClassifyOptions(as_of=SOON), t.read_meta))
    arts = [a for g in groups for a in g.artifacts]
    by_key = {a.key: a for a in arts}
    for k in keys:
        assert by_key[k].kind is Kind.RESIDUE
    upload = [a for a in arts if a.layout == "multipart-upload"]
    assert len(upload) == 1
    assert "u-1" in upload[0].completeness_reason
    assert by_key["r/out/tmp-checkpoint-10/"].kind is Kind.RESIDUE


def test_exported_weights_and_single_files() -> None:
    t = b.MemoryTree()
    t("m/final/model.safetensors", b.BLOB, b.T0)
    t("m/final/config.json", b"{}", b.T0)
    t("m/model.gguf", b.BLOB, b.T0)
    t("lonely/config.json", b"{}", b.T0)
    arts = run_tree(t)
    assert arts["m/final/"].kind is Kind.WEIGHTS
    assert arts["m/final/"].object_count == 2
    assert arts["m/model.gguf"].kind is Kind.WEIGHTS
    assert arts["lonely/config.json"].kind is Kind.OTHER
