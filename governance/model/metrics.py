"""Metrics of checkpoints, for `best` selection and for reports.

Two sources: `name=value` parts of checkpoint names (Lightning `epoch=3-step=1200-
val_loss=0.35.ckpt`, NeMo `model--val_loss=2.1-step=99-last`) and Hugging Face
`trainer_state.json` (`log_history` entries of the checkpoint's step, `best_metric`,
`best_model_checkpoint`). Values are floats; anything unparseable is skipped, never fatal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_NAME_VALUE = re.compile(r"(?:^|[-/ ])([A-Za-z][\w.]*)=(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_SKIP_KEYS = frozenset({"step"})
_SUFFIXES = (".ckpt", ".nemo", ".pt", ".pth", ".safetensors")


def name_metrics(name: str) -> tuple[int | None, dict[str, float]]:
    """The step and the other `key=value` numbers in a checkpoint name.

    >>> name_metrics("epoch=3-step=1200-val_loss=0.35.ckpt")
    (1200, {'epoch': 3.0, 'val_loss': 0.35})
    """
    if "=" not in name:
        return None, {}
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    step: int | None = None
    out: dict[str, float] = {}
    for key, value in _NAME_VALUE.findall(name):
        if key in _SKIP_KEYS:
            try:
                step = int(float(value))
            except ValueError:
                continue
            continue
        number = float(value)
        if math.isfinite(number):
            out[key] = number
    return step, out


def _floats(entry: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in entry.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def log_history_metrics(state: Any, step: int | None) -> dict[str, float]:
    """Numbers logged at `step` in a trainer_state.json (training and eval entries merged).

    A later entry for the same step overrides an earlier one, as the Trainer logs them.
    """
    if not isinstance(state, dict) or step is None:
        return {}
    history = state.get("log_history")
    if not isinstance(history, list):
        return {}
    out: dict[str, float] = {}
    for entry in history:
        if isinstance(entry, dict) and entry.get("step") == step:
            out.update(_floats(entry))
    return out


@dataclass(frozen=True, slots=True)
class BestInfo:
    """What trainer_state.json says is the best checkpoint so far."""

    metric: float | None
    checkpoint_name: str | None
    """Last path segment of `best_model_checkpoint` (a path on the training machine)."""


def best_info(state: Any) -> BestInfo:
    """`best_metric` and the name of `best_model_checkpoint` from a trainer state."""
    if not isinstance(state, dict):
        return BestInfo(None, None)
    metric = state.get("best_metric")
    path = state.get("best_model_checkpoint")
    name = None
    if isinstance(path, str) and path.strip("/"):
        name = path.rstrip("/").replace("\\", "/").rpartition("/")[2]
    value = (
        float(metric) if isinstance(metric, int | float) and not isinstance(metric, bool) else None
    )
    return BestInfo(value, name)
