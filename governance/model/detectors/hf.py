"""Hugging Face Trainer checkpoints: `<output_dir>/checkpoint-<N>/`.

Complete when `trainer_state.json` and the weights are there, with every shard named by
the index's `weight_map` present. The Trainer writes `trainer_state.json` after the model,
so `config.json` (`adapter_config.json` for PEFT) is there by then whenever the model has
one: a model that is not a `PreTrainedModel` is saved as its state dict alone, without
one, and its checkpoints load all the same (reference.md lists `config.json` for the
usual case; its absence is noted, not held against the checkpoint). A
`trainer_state.json` or index that was read and is not a JSON object (empty, cut short)
makes it incomplete; one that could not be read is not judged (see `Context.load_json`).
Optimizer, scheduler, RNG and scaler state are separate files, so the checkpoint can be
stripped.
A Trainer run under DeepSpeed or FSDP nests its state (`global_step<N>/`,
`pytorch_model_fsdp_0/`, `optimizer_0/`) inside the same directory: it is one unit.

FSDP with `SHARDED_STATE_DICT` writes no `config.json` (the Trainer saves it only for a full
state dict): such a checkpoint is complete with `trainer_state.json` and a weight shard
folder holding `.metadata` (written last) and non-empty `*.distcp` shards; everything in
that folder is weights, and a strip keeps it whole. With `LOCAL_STATE_DICT` (or a full
state dict saved through accelerate) the weights are `pytorch_model_fsdp[_<i>][_rank<r>].bin`
files. Under DeepSpeed ZeRO-3
(`global_step<N>/zero_pp_rank_*_model_states.pt`) the weights live only in the optimizer
partitions (`zero_to_fp32.py` rebuilds them from there): such a checkpoint cannot be stripped.

A `checkpoint-<N>/` folder written by accelerate's `save_state` (diffusers' and many other
training scripts name theirs so) has no `trainer_state.json`: the models (or what a save
hook writes, such as `unet/`), `optimizer.bin`, `scheduler.bin`, `scaler.pt`, then
`random_states_<process>.pkl`. The main process writes `random_states_0.pkl` after its
models and optimizers, so it marks the save complete. Under accelerate's automatic naming
the folders are `checkpoints/checkpoint_<i>/`: that file claims such a folder whole, with
what DeepSpeed or FSDP nested in it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from governance.model.detectors.base import (
    UNREAD,
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    basename,
    digit_segment,
)
from governance.model.metrics import log_history_metrics
from governance.model.types import Artifact, CatalogObject, Component, Kind
from governance.wording import counted

_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.")
INDEX_NAMES = (
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors.index.json",
)
SINGLE_WEIGHTS = (
    "model.safetensors",
    "pytorch_model.bin",
    "adapter_model.safetensors",
    "adapter_model.bin",
    "tf_model.h5",
    "flax_model.msgpack",
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".h5", ".msgpack", ".distcp", "model_states.pt", ".pth")
_META_SUFFIXES = (".json", ".txt", ".model", ".yaml", ".yml", ".py", ".md", ".jinja", ".tiktoken")


_ZERO3_MODEL = re.compile(r"(?:^|/)zero_pp_rank_\d+_mp_rank_\d+_model_states\.pt$")
"""ZeRO-3 model states: without the optimizer partitions they hold no weights."""
FSDP_MODEL_DIR = "pytorch_model_fsdp"
"""accelerate's `save_fsdp_model` folder for a sharded state dict: `pytorch_model_fsdp_<i>/`."""
_FSDP_FILE = re.compile(r"^pytorch_model_fsdp(?:_\d+)?(?:_rank\d+)?\.bin$")
"""accelerate's `save_fsdp_model` files for a full or a local (per rank) state dict."""
ACCELERATE_DONE = "random_states_0.pkl"
"""accelerate's `save_state`: the main process writes it after its models and optimizers."""
_ACCELERATE_MARK = "/" + ACCELERATE_DONE
_ACCELERATE_DIR = re.compile(r"checkpoint_\d+")
"""accelerate's automatic checkpoint naming: `<project_dir>/checkpoints/checkpoint_<i>/`,
`<i>` counting saves (it stands for the step: it grows as they do)."""
_STEP = re.compile(r"checkpoint[-_](\d+)$")


@lru_cache(maxsize=4096)  # a pure function of a name that repeats unit after unit
def hf_component(name: str) -> Component:
    """Role of a file inside a Trainer checkpoint or an exported model folder."""
    base = name.rpartition("/")[2]
    lower = name.lower()
    if lower.startswith(FSDP_MODEL_DIR) and "/" in name:
        return Component.WEIGHTS  # the whole shard set (with its `.metadata`) is the weights
    if base == ACCELERATE_DONE:
        # accelerate's commit marker as well as the main process's RNG state: a strip
        # keeps it, or the checkpoint it leaves reads as an unfinished save, residue
        return Component.METADATA
    if base.startswith(("rng_state", "random_states")):
        return Component.RNG
    if base.startswith("scheduler"):
        return Component.SCHEDULER
    if "optim" in lower or base.startswith("scaler"):
        return Component.OPTIMIZER
    if base == ".metadata" and "/" in name:
        return Component.WEIGHTS  # a distributed-checkpoint shard set's index: never dropped
    if base in ("training_args.bin", "latest") or base.endswith(_META_SUFFIXES):
        return Component.METADATA
    if base.endswith(_WEIGHT_SUFFIXES):
        return Component.WEIGHTS
    return Component.OTHER


def weights_verdict(names: set[str], members: dict[str, CatalogObject], ctx: Context) -> Verdict:
    """Whether the weights in one folder are whole: a single file, or every indexed shard.

    The index's `weight_map` is read through `read_meta`; when it cannot be read the
    expected shards come from the `-0000k-of-0000n` names themselves. An index that was
    read and is not a JSON object (empty, cut short) makes the weights incomplete: no
    loader can use them through it.
    """
    for index_name in INDEX_NAMES:
        if index_name not in names:
            continue
        loaded = ctx.load_json(members[index_name])
        broken = loaded.problem(index_name)
        if broken is not None:
            return Verdict(False, broken)
        data = loaded.data
        wanted: set[str] = set()
        if isinstance(data, dict) and isinstance(data.get("weight_map"), dict):
            wanted = {str(v) for v in data["weight_map"].values()}
            source = "weight_map"
        else:
            stem = index_name.removesuffix(".index.json").rpartition(".")[0]
            shards = [n for n in names if n.startswith(stem) and _SHARD.search(n)]
            totals = {int(m.group(2)) for n in shards if (m := _SHARD.search(n))}
            if not totals:
                return Verdict(False, f"{index_name} unreadable and no shards found")
            total = max(totals)
            found = {int(m.group(1)) for n in shards if (m := _SHARD.search(n))}
            missing_n = sorted(set(range(1, total + 1)) - found)
            if missing_n:
                return Verdict(False, f"shards {missing_n} of {total} missing (index unreadable)")
            return Verdict(True, f"{total}/{total} shards by name")
        missing = sorted(wanted - names)
        if missing:
            return Verdict(
                False, f"{counted(len(missing), 'shard')} in {source} missing: {missing[0]}"
            )
        return Verdict(True, f"{len(wanted)}/{len(wanted)} shards of {index_name}")
    for single in SINGLE_WEIGHTS:
        if single in names:
            return Verdict(True, single)
    if any(_SHARD.search(n) for n in names):
        return Verdict(False, "sharded weights without an index file")
    shard_dirs = dcp_weight_dirs(names)
    for folder, shards in sorted(shard_dirs.items()):
        if folder + ".metadata" not in names:
            return Verdict(False, f"{folder}.metadata missing (save not finished)")
        if not any(members[n].size > 0 for n in shards):
            return Verdict(False, f"{folder}: every .distcp shard is empty")
    nested = [n for n in names if n.endswith("model_states.pt") or _FSDP_FILE.match(n)]
    nested += [n for shards in shard_dirs.values() for n in shards]
    if nested:
        return Verdict(True, f"{counted(len(nested), 'sharded weight file')}")
    return Verdict(False, "no weights")


def dcp_weight_dirs(names: set[str]) -> dict[str, list[str]]:
    """Folders of `*.distcp` weight shards (not optimizer ones) -> their shards."""
    dirs: dict[str, list[str]] = {}
    for n in names:
        if n.endswith(".distcp") and hf_component(n) is Component.WEIGHTS:
            head, sep, _ = n.rpartition("/")
            dirs.setdefault(head + sep, []).append(n)
    return dirs


def is_zero3(names: set[str]) -> bool:
    """A nested DeepSpeed ZeRO-3 tag: model states named `zero_pp_rank_*` (the weights are
    in the optimizer partitions)."""
    return any(_ZERO3_MODEL.search(n) for n in names if n.endswith("model_states.pt"))


class HFDetector(Detector):
    """`checkpoint-<N>/` folders of the Hugging Face Trainer."""

    layout = "hf"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = ("checkpoint-",)
    suffixes = ("/" + ACCELERATE_DONE,)

    def claim(self, key: str) -> Claim | None:
        if key.endswith(_ACCELERATE_MARK):
            # accelerate's automatic naming, `checkpoints/checkpoint_<i>/`: the main
            # process's RNG state claims the whole folder (whatever DeepSpeed or FSDP
            # nested in it), so a save is one checkpoint of one run
            folder = key[: -len(ACCELERATE_DONE)]
            if _ACCELERATE_DIR.fullmatch(basename(folder)):
                return Claim(folder, deep=True)
        if "checkpoint-" not in key:
            return None
        unit = digit_segment(key, "checkpoint-")
        return Claim(unit, deep=True) if unit else None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        by_name = {o.key[len(unit) :]: o for o in members}
        names = set(by_name)
        found = _STEP.search(unit.rstrip("/"))  # (every unit `claim` makes has a number)
        step = int(found.group(1)) if found else None
        peft = "adapter_config.json" in names or any(n.startswith("adapter_model") for n in names)
        config = "adapter_config.json" if peft else "config.json"
        weights = weights_verdict(names, by_name, ctx)
        notes = ["peft adapter"] if peft else []
        if "trainer_state.json" not in names and _by_accelerate(names):
            verdict = _accelerate_verdict(names, weights)
            notes.append("accelerate save_state")
            loaded = UNREAD  # (no trainer state: no metrics from one)
        else:
            problems = [] if "trainer_state.json" in names else ["trainer_state.json missing"]
            # Read once, for metrics and for completeness: a state that was read and is not
            # a JSON object (empty, cut short) cannot be resumed from. One that could not be
            # read (no reader, root out of reach, too big) is not judged.
            loaded = ctx.load_json(by_name.get("trainer_state.json"))
            broken = loaded.problem("trainer_state.json")
            if broken is not None:
                problems.append(broken)
            if not weights.complete:
                problems.append(weights.reason)
            if problems:
                verdict = Verdict(False, "; ".join(problems))
            else:
                present = ", ".join(n for n in ("trainer_state.json", config) if n in names)
                verdict = Verdict(True, f"{present}, {weights.reason}")
            if config not in names and not dcp_weight_dirs(names):
                # (FSDP SHARDED_STATE_DICT never writes one: nothing worth a note)
                notes.append(f"no {config} (the model's state dict alone)")
        state = loaded.value()
        zero3 = is_zero3(names)
        if zero3:
            notes.append(
                "DeepSpeed ZeRO-3: weights are in the optimizer partitions, cannot be stripped"
            )
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            hf_component,
            step=step,
            verdict=verdict,
            strippable=False if zero3 else None,
            metrics=log_history_metrics(state, step),
            note="; ".join(notes),
        )


def _by_accelerate(names: set[str]) -> bool:
    """Whether a folder without `trainer_state.json` is accelerate's `save_state`: its RNG
    states or its optimizer's and scheduler's files (`optimizer.bin`, `scheduler.bin`)."""
    return any(
        n.startswith("random_states_") or n in ("optimizer.bin", "scheduler.bin")
        for n in names
        if "/" not in n
    )


def _accelerate_verdict(names: set[str], weights: Verdict) -> Verdict:
    """An accelerate checkpoint is complete once the main process wrote its RNG state;
    weights a save hook wrote into sub-folders (`unet/`) count as any weights do."""
    if ACCELERATE_DONE not in names:
        return Verdict(False, f"{ACCELERATE_DONE} missing (accelerate save_state not finished)")
    if not weights.complete and weights.reason != "no weights":
        return Verdict(False, weights.reason)  # an index naming a missing shard, say
    return Verdict(True, f"{ACCELERATE_DONE} (accelerate save_state finished)")
