"""Complete checkpoints in the forms training scripts really leave under `checkpoint-<N>/`
and in shard sets: none of them may be judged incomplete (past the grace period an
incomplete checkpoint is residue, and residue is deleted).

- A Trainer whose model is not a `PreTrainedModel` saves its state dict without
  `config.json` (transformers `Trainer._save`); `trainer_state.json` comes after it.
- accelerate's `save_state` (diffusers' scripts name its folders `checkpoint-<N>/`) writes
  no `trainer_state.json`: a save hook's `unet/`, `optimizer.bin`, `scheduler.bin`,
  `scaler.pt`, then `random_states_0.pkl`.
- FSDP through accelerate with a local state dict: `pytorch_model_fsdp_rank<r>.bin`.
- torch.distributed.checkpoint leaves an empty `__<r>_0.distcp` for a rank with nothing
  to write; `.metadata` (written last) makes the set complete.
"""

from __future__ import annotations

from governance.model.classify import classify
from governance.model.types import ClassifyOptions, Component, Kind
from tests.fixtures import builders as b
from tests.unit.test_model_detectors import LATE, run_tree


def _state(step: int) -> bytes:
    return b._json({"global_step": step, "log_history": [{"step": step, "loss": 1.0}]})


def _common(t: b.MemoryTree, d: str) -> None:
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        t(d + name, b.BLOB, b.T0)


def test_a_trainer_checkpoint_without_config_json_is_complete() -> None:
    t = b.MemoryTree()
    d = "r/out/checkpoint-500/"
    t(d + "model.safetensors", b.BLOB, b.T0)
    _common(t, d)
    t(d + "trainer_state.json", _state(500), b.T0)
    a = run_tree(t, as_of=LATE)[d]
    assert (a.kind, a.complete) == (Kind.CHECKPOINT, True), a.completeness_reason
    assert "no config.json" in a.note
    assert a.strippable


def test_a_trainer_checkpoint_without_its_state_is_still_incomplete() -> None:
    """What makes a Trainer checkpoint complete is unchanged: its state, written last."""
    t = b.MemoryTree()
    d = "r/out/checkpoint-500/"
    t(d + "model.safetensors", b.BLOB, b.T0)
    t(d + "config.json", b"{}", b.T0)
    _common(t, d)
    a = run_tree(t, as_of=LATE)[d]
    assert not a.complete
    assert a.kind is Kind.RESIDUE
    assert "trainer_state.json missing" in a.completeness_reason


def _accelerate(t: b.MemoryTree, d: str, *, done: bool = True, lora: bool = False) -> None:
    """diffusers' train_text_to_image: the save hook writes `unet/` (or LoRA weights)."""
    if lora:
        t(d + "pytorch_lora_weights.safetensors", b.BLOB, b.T0)
    else:
        t(d + "unet/config.json", b"{}", b.T0)
        t(d + "unet/diffusion_pytorch_model.safetensors", b.BLOB, b.T0)
    for name in ("optimizer.bin", "scheduler.bin", "scaler.pt"):
        t(d + name, b.BLOB, b.T0)
    if done:
        t(d + "random_states_0.pkl", b.BLOB, b.T0)


def test_an_accelerate_save_state_checkpoint_is_complete_and_strippable() -> None:
    t = b.MemoryTree()
    full, lora = "sd/checkpoint-500/", "lora/checkpoint-1000/"
    _accelerate(t, full)
    _accelerate(t, lora, lora=True)
    arts = run_tree(t, as_of=LATE)
    for d, step in ((full, 500), (lora, 1000)):
        a = arts[d]
        assert (a.kind, a.complete, a.step) == (Kind.CHECKPOINT, True, step), a.completeness_reason
        assert "random_states_0.pkl" in a.completeness_reason
        assert a.strippable
    roles = {m.obj.key.removeprefix(full): m.component for m in arts[full].members}
    assert roles["unet/diffusion_pytorch_model.safetensors"] is Component.WEIGHTS
    assert roles["unet/config.json"] is Component.METADATA
    assert roles["optimizer.bin"] is Component.OPTIMIZER
    assert roles["scheduler.bin"] is Component.SCHEDULER
    # the main process's RNG state, and accelerate's commit marker: kept by a strip
    assert roles["random_states_0.pkl"] is Component.METADATA


def test_an_accelerate_checkpoint_a_strip_leaves_is_still_complete() -> None:
    """A strip to `weights` removed `random_states_0.pkl` with the RNG state: what it
    left read as an unfinished save, residue, and the next plan deleted the weights."""
    t = b.MemoryTree()
    d = "sd/checkpoint-500/"
    _accelerate(t, d)
    before = run_tree(t, as_of=LATE)[d]
    kept = {Component.WEIGHTS, Component.METADATA}  # what a strip to [weights] leaves
    left = b.MemoryTree()
    for m in before.members:
        if m.component in kept:
            left(m.obj.key, t.content[m.obj.key], m.obj.last_modified)
    assert sorted(left.content) != sorted(t.content)  # the strip removed something
    after = run_tree(left, as_of=LATE)[d]
    assert (after.kind, after.complete) == (Kind.CHECKPOINT, True), after.completeness_reason


def test_an_accelerate_save_without_its_rng_state_is_unfinished() -> None:
    t = b.MemoryTree()
    d = "sd/checkpoint-500/"
    _accelerate(t, d, done=False)
    a = run_tree(t, as_of=LATE)[d]
    assert not a.complete
    assert "random_states_0.pkl missing" in a.completeness_reason


def test_fsdp_local_state_dict_files_are_weights() -> None:
    t = b.MemoryTree()
    d = "r/out/checkpoint-200/"
    for r in range(2):
        t(d + f"pytorch_model_fsdp_rank{r}.bin", b.BLOB, b.T0)
    t(d + "optimizer_0/__0_0.distcp", b.BLOB, b.T0)
    t(d + "optimizer_0/.metadata", b.BLOB, b.T0)
    _common(t, d)
    t(d + "trainer_state.json", _state(200), b.T0)
    a = run_tree(t, as_of=LATE)[d]
    assert a.complete, a.completeness_reason
    roles = {m.obj.key.removeprefix(d): m.component for m in a.members}
    assert roles["pytorch_model_fsdp_rank1.bin"] is Component.WEIGHTS


def test_an_empty_distcp_shard_beside_metadata_is_complete() -> None:
    t = b.MemoryTree()
    d = b.dcp_checkpoint(t, "titan/outputs/checkpoint/step-1000", ranks=2)
    t(d + "__2_0.distcp", b"", b.T0)  # a rank with nothing to write
    a = run_tree(t, as_of=LATE)[d]
    assert (a.kind, a.complete) == (Kind.CHECKPOINT, True), a.completeness_reason


def test_a_shard_set_of_empty_shards_only_is_incomplete() -> None:
    t = b.MemoryTree()
    d = "x/ckpts/step_100/"
    for r in range(2):
        t(d + f"__{r}_0.distcp", b"", b.T0)
    t(d + ".metadata", b.BLOB, b.T0)
    a = run_tree(t, as_of=LATE)[d]
    assert not a.complete
    assert "every .distcp shard is empty" in a.completeness_reason


def test_an_empty_safetensors_file_still_makes_a_checkpoint_incomplete() -> None:
    """The zero-byte rule keeps holding for single-file weights."""
    t = b.MemoryTree()
    d = "r/out/checkpoint-500/"
    t(d + "model.safetensors", b"", b.T0)
    _common(t, d)
    t(d + "trainer_state.json", _state(500), b.T0)
    a = run_tree(t, as_of=LATE)[d]
    assert not a.complete
    assert "zero-byte" in a.completeness_reason


def _accelerate_auto(t: b.MemoryTree, i: int, *, nested: str, done: bool = True) -> str:
    """`ProjectConfiguration(automatic_checkpoint_naming=True)`: `checkpoints/checkpoint_<i>/`,
    with DeepSpeed's tag (`pytorch_model/` and `latest`) or FSDP's folders nested in it."""
    d = f"proj/checkpoints/checkpoint_{i}/"
    if nested == "deepspeed":
        t(d + "latest", b"pytorch_model", b.T0)
        t(d + "pytorch_model/mp_rank_00_model_states.pt", b.BLOB, b.T0)
        t(d + "pytorch_model/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", b.BLOB, b.T0)
        t(d + "zero_to_fp32.py", b"#", b.T0)
    else:
        t(d + "pytorch_model_fsdp_0/__0_0.distcp", b.BLOB, b.T0)
        t(d + "pytorch_model_fsdp_0/.metadata", b.BLOB, b.T0)
        t(d + "optimizer_0/__0_0.distcp", b.BLOB, b.T0)
        t(d + "optimizer_0/.metadata", b.BLOB, b.T0)
    t(d + "scheduler.bin", b.BLOB, b.T0)
    if done:
        t(d + "random_states_0.pkl", b.BLOB, b.T0)
    return d


def test_accelerate_automatic_naming_makes_one_run_of_whole_checkpoints() -> None:
    """Each `checkpoint_<i>/` is one checkpoint (what DeepSpeed or FSDP nested in it is
    part of it, not a checkpoint or a run of its own), and the project is their run: were
    each folder a run, the older ones would read as abandoned runs and expire whole."""
    for nested in ("deepspeed", "fsdp"):
        t = b.MemoryTree()
        units = [_accelerate_auto(t, i, nested=nested) for i in range(3)]
        groups = classify(t.objects, ClassifyOptions(as_of=LATE), t.read_meta)
        checkpoints = {
            a.key: (g.run.key if g.run else None, a)
            for g in groups
            for a in g.artifacts
            if a.kind is Kind.CHECKPOINT
        }
        assert sorted(checkpoints) == units, nested
        for i, d in enumerate(units):
            run, a = checkpoints[d]
            assert run == "proj/"
            assert (a.complete, a.step, a.strippable) == (True, i, True), a.completeness_reason
        roles = {
            m.obj.key.removeprefix(units[0]): m.component for m in checkpoints[units[0]][1].members
        }
        if nested == "deepspeed":
            assert roles["pytorch_model/mp_rank_00_model_states.pt"] is Component.WEIGHTS
            optim = "pytorch_model/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"
            assert roles[optim] is Component.OPTIMIZER
        else:
            assert roles["pytorch_model_fsdp_0/__0_0.distcp"] is Component.WEIGHTS
            assert roles["optimizer_0/__0_0.distcp"] is Component.OPTIMIZER


def test_an_accelerate_folder_without_its_rng_state_is_not_claimed_whole() -> None:
    """Until `random_states_0.pkl` is written, nothing says the folder is accelerate's:
    its nested parts are judged as they are (here an in-flight DeepSpeed tag)."""
    t = b.MemoryTree()
    d = _accelerate_auto(t, 0, nested="deepspeed", done=False)
    arts = run_tree(t, as_of=LATE)
    assert d not in arts
    assert d + "pytorch_model/" in arts
