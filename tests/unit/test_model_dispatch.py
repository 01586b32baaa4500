"""Dispatch by folder and file name never leaves out a detector that claims the key."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from governance.model.detectors import REGISTRY
from governance.model.dispatch import Dispatch

# Pieces of every name a detector looks for, and near misses.
PIECES = st.sampled_from(
    [
        "a", "runs", "checkpoints", "checkpoint-7", "tmp-checkpoint-3", "global_step3",
        "global_step4_universal", "iter_0000001", "release", "weights", "context", "wandb",
        "run-1", "offline-run-2", "latest-run", "x.ckpt", "100", "step_5", "default",
        "ocdbt.process_0", "s.orbax-checkpoint-tmp-9", "m--val_loss=1.0-step=9-last", "eval",
        "evals", "logs", "log", "data", "model.safetensors", "config.json", ".metadata",
        "__0_0.distcp", "latest", "latest_universal", "latest_checkpointed_iteration.txt",
        "zero_to_fp32.py", "mp_rank_00_model_states.pt", "layer_01-model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "model_optim_rng.pt", "_METADATA",
        "_CHECKPOINT_METADATA", "commit_success.txt", "manifest.ocdbt", "_sharding", "io.json",
        "x.tmp", "y.partial", "f.log", "f.log.gz", "metrics.csv", "slurm-1.out", "stdout.txt",
        "train_log.txt", "a.jsonl", "b.jsonl.gz", "events.out.tfevents.1", "eval_results.json",
        "test_results_x.json", "predictions.txt", "generated_predictions.jsonl",
        "dataset_info.json", "dataset_dict.json", "shard.00000.mds", "c.tfrecord-00001",
        "d_document.bin", "d.idx", "e.parquet", "e.arrow", "f.tar", "pytorch_model.bin",
        "adapter_model.bin", "model.safetensors.index.json", "w.gguf", "m.onnx", "x.pt",
        "m.nemo", "tokenizer.json", "README.md", "z", "",
    ]
)  # fmt: skip
KEYS = st.tuples(
    st.lists(PIECES, min_size=1, max_size=5), st.sampled_from(["/", "-", "_", ".", ""])
).map(lambda t: t[1].join(t[0]) if t[1] != "/" else "/".join(t[0]))
KEYS = st.one_of(
    KEYS, KEYS.map(lambda k: k + "/"), st.text(alphabet="/a-_.ckptlogeva", max_size=20)
)


@settings(max_examples=3000, deadline=None)
@given(keys=st.lists(KEYS, min_size=1, max_size=8))
def test_candidates_hold_every_claiming_detector(keys: list[str]) -> None:
    dispatch = Dispatch(REGISTRY)  # a fresh cache, then the same one across keys
    for key in sorted(keys):
        asked = {i for i, _ in dispatch.candidates(key)}
        for i, det in enumerate(REGISTRY):
            if det.claim(key) is not None:
                assert i in asked, (type(det).__name__, key)


def test_candidates_are_in_registry_order() -> None:
    dispatch = Dispatch(REGISTRY)
    found = [i for i, _ in dispatch.candidates("r/checkpoint-5/global_step5/latest")]
    assert found == sorted(found)
    assert len(found) >= 2


@settings(max_examples=500, deadline=None)
@given(key=KEYS)
def test_shallow_only_detectors_never_claim_deeply(key: str) -> None:
    """`claims_deep = False` lets grouping skip a detector once a folder owns the key."""
    for det in REGISTRY:
        if not det.claims_deep:
            c = det.claim(key)
            assert c is None or not c.deep, (type(det).__name__, key)
    shallow = Dispatch(REGISTRY).shallow_only
    assert shallow == sum(1 << i for i, d in enumerate(REGISTRY) if not d.claims_deep)
