"""Everything around checkpoints: logs, evaluation outputs, datasets and exported weights.

- Logs: W&B run folders (`wandb/run-*`), TensorBoard `events.out.tfevents.*` (one stream
  per folder; in the run's own folder, one per file: see `grouping`), `*.log`, Slurm
  `slurm-*.out`, `metrics.csv` (with `hparams.yaml`, part of the event files' stream beside
  them), and `*.txt` / `*.jsonl` under a `logs/` folder.
- Evaluation: `eval/`-like folders, `eval_results*.json`, `test_results*.json`,
  `predictions*`.
- Datasets: HF `datasets` folders (`dataset_info.json` / `dataset_dict.json` with `state.json`
  and `.arrow`), MDS folders (`index.json` + `shard.*.mds`), and the shards of one folder
  for Parquet, Arrow, JSONL(.gz/.zst), WebDataset `.tar`, TFRecord, Megatron `.bin`/`.idx`.
- Exported weights: the loose weight files of one folder (`model.safetensors`, shards and
  index, `pytorch_model*.bin`, adapters) with their configs and tokenizer as companions;
  single-file formats (`.gguf`, `.onnx`, `.pt`, ...) are one artifact each.
"""

from __future__ import annotations

from governance.model.detectors.base import (
    Claim,
    Context,
    Detector,
    artifact,
    basename,
    parent,
)
from governance.model.detectors.hf import hf_component, weights_verdict
from governance.model.types import Artifact, CatalogObject, Component, Kind

_LOG_DIRS = ("logs/", "log/")
_LOG_COMPANIONS = frozenset({"metrics.csv", "hparams.yaml"})
"""What a logger writes beside TensorBoard event files in one folder."""
_EVAL_DIRS = ("eval/", "evals/", "evaluation/", "eval_results/", "evaluations/")
_DATASET_SUFFIXES = (
    ".parquet",
    ".arrow",
    ".jsonl",
    ".jsonl.gz",
    ".jsonl.zst",
    ".tar",
    ".tfrecord",
    ".tfrecords",
    ".tfrecord.gz",
    ".idx",
    "_document.bin",
    "_sentence.bin",
)
_FORMATS = (
    (".parquet", "parquet"),
    (".arrow", "arrow"),
    (".tar", "webdataset"),
    (".tfrecord", "tfrecord"),
    (".tfrecords", "tfrecord"),
    (".idx", "megatron-data"),
    (".bin", "megatron-data"),
)
_SINGLE_WEIGHTS = (".gguf", ".ggml", ".onnx", ".pt", ".pth", ".h5", ".keras", ".tflite", ".engine")
_COMPANIONS = frozenset(
    {
        "config.json",
        "generation_config.json",
        "adapter_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "tokenizer.model",
        "spiece.model",
        "chat_template.jinja",
        "preprocessor_config.json",
        "trainer_state.json",
        "training_args.bin",
        "train_results.json",
        "all_results.json",
        "README.md",
    }
)


def _shallow(key: str) -> Claim:
    """The loose files of one folder form a unit; at the root each file stands alone."""
    return Claim(parent(key) or key)


def _under(key: str, dirs: tuple[str, ...]) -> int:
    """End of the first folder segment named in `dirs`, or -1."""
    for d in dirs:
        i = key.find(d)
        while i != -1:
            if i == 0 or key[i - 1] == "/":
                return i + len(d)
            i = key.find(d, i + 1)
    return -1


class LogDetector(Detector):
    """Log streams."""

    layout = "log"
    kind = Kind.LOG
    needles = ("wandb/", "events.out.tfevents.", "slurm-")
    suffixes = (".log", ".log.gz", "metrics.csv", "hparams.yaml", ".txt", ".jsonl", ".jsonl.gz")

    def claim(self, key: str) -> Claim | None:
        if "wandb/" in key:
            i = _under(key, ("wandb/",))
            end = key.find("/", i) if i != -1 else -1
            if end != -1 and key[i:end].startswith(("run-", "offline-run-", "latest-run")):
                return Claim(key[: end + 1], deep=True)
        base = basename(key)
        if base.startswith("events.out.tfevents."):
            return _shallow(key)
        if base in _LOG_COMPANIONS:
            # Lightning's and NeMo's loggers write these beside the event files: one log
            # folder with them; metrics.csv alone (CSVLogger) is a log of its own
            unit = parent(key)
            return Claim(unit, companion=True, alone=base == "metrics.csv") if unit else None
        if base.endswith((".log", ".log.gz")):
            return Claim(key)
        if base.startswith("slurm-") and base.endswith((".out", ".err")):
            return Claim(key)
        if base.endswith((".txt", ".jsonl", ".jsonl.gz")) and (
            "log" in base or base.startswith(("stdout", "stderr")) or _under(key, _LOG_DIRS) != -1
        ):
            return Claim(key)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        if "wandb/" in unit and unit.endswith("/"):
            layout = "wandb"
        elif any("events.out.tfevents." in o.key for o in members):
            layout = "tensorboard"
        else:
            layout = "log"
        return artifact(unit, Kind.LOG, layout, members, lambda _n: Component.OTHER)


class EvalDetector(Detector):
    """Evaluation outputs."""

    layout = "eval"
    kind = Kind.EVAL
    needles = ("eval", "test_results", "predictions")

    def claim(self, key: str) -> Claim | None:
        if "eval" in key:
            end = _under(key, _EVAL_DIRS)
            if end != -1 and end < len(key):
                return Claim(key[:end], deep=True)
        base = basename(key)
        if base.startswith(("eval_results", "test_results")) and base.endswith(".json"):
            return Claim(key)
        if base.startswith(("predictions", "generated_predictions")):
            return Claim(key)
        return None


def _dataset_format(members: list[CatalogObject]) -> str:
    names = {basename(o.key) for o in members}
    if "dataset_info.json" in names or "dataset_dict.json" in names:
        return "hf-datasets"
    if any(".mds" in n for n in names):
        return "mds"
    for suffix, layout in _FORMATS:
        if any(n.endswith(suffix) or suffix + "-" in n for n in names):
            return layout
    return "jsonl"


class DatasetDetector(Detector):
    """Dataset folders and shard sets."""

    layout = "dataset"
    kind = Kind.DATASET
    needles = (".mds", ".tfrecord-")
    suffixes = ("dataset_info.json", "dataset_dict.json", *_DATASET_SUFFIXES)

    def claim(self, key: str) -> Claim | None:
        base = basename(key)
        if base in ("dataset_info.json", "dataset_dict.json") or (
            base.startswith("shard.") and ".mds" in base
        ):
            unit = parent(key)
            return Claim(unit, deep=True) if unit else Claim(key)
        if key.endswith(_DATASET_SUFFIXES) or ".tfrecord-" in base:
            return _shallow(key)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        meta = ("dataset_info.json", "dataset_dict.json", "state.json", "index.json")
        return artifact(
            unit,
            Kind.DATASET,
            _dataset_format(members),
            members,
            lambda n: Component.METADATA if n.rpartition("/")[2] in meta else Component.OTHER,
        )


class WeightsDetector(Detector):
    """Exported weights outside any checkpoint folder."""

    layout = "weights"
    kind = Kind.WEIGHTS
    claims_deep = False
    needles = ()
    suffixes = (".safetensors", ".index.json", ".bin", *sorted(_COMPANIONS), *_SINGLE_WEIGHTS)

    def claim(self, key: str) -> Claim | None:
        base = basename(key)
        if (
            base.endswith(".safetensors")
            or (base.endswith(".index.json") and ("model" in base))
            or (base.startswith(("pytorch_model", "adapter_model")) and base.endswith(".bin"))
        ):
            return _shallow(key)
        if base in _COMPANIONS:
            unit = parent(key)
            return Claim(unit, companion=True) if unit else None
        if base.endswith(_SINGLE_WEIGHTS) and "optim" not in base:
            return Claim(key)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        if not unit.endswith("/"):
            layout = unit.rpartition(".")[2] if "." in basename(unit) else self.layout
            return artifact(
                unit, Kind.WEIGHTS, layout, members, lambda _n: Component.WEIGHTS, strippable=False
            )
        by_name = {o.key[len(unit) :]: o for o in members}
        verdict = weights_verdict(set(by_name), by_name, ctx)
        return artifact(
            unit,
            Kind.WEIGHTS,
            "hf-weights",
            members,
            hf_component,
            verdict=verdict,
            strippable=False,
        )
