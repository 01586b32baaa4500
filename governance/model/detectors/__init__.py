"""The layout detectors, in one ordered registry.

Order matters twice: when two detectors claim the *same* folder, the earlier one wins
(Megatron's `iter_*/` before the generic DCP shard set), and a loose file goes to the
first detector that claims it (a `.tmp` file is residue before anything else). Between
nested folders the outermost claim always wins, whatever the order: a Trainer
`checkpoint-500/` holding DeepSpeed's `global_step500/` is one checkpoint.

To add a layout: write a `Detector` subclass in its own module and list it here.
"""

from __future__ import annotations

from governance.model.detectors.base import Claim, Context, Detector, Verdict
from governance.model.detectors.data import (
    DatasetDetector,
    EvalDetector,
    LogDetector,
    WeightsDetector,
)
from governance.model.detectors.dcp import DCPDetector
from governance.model.detectors.deepspeed import DeepSpeedDetector
from governance.model.detectors.hf import HFDetector
from governance.model.detectors.lightning import LightningDetector
from governance.model.detectors.megatron import MegatronDetector
from governance.model.detectors.nemo import NeMoDetector
from governance.model.detectors.orbax import OrbaxDetector
from governance.model.detectors.residue import ResidueDetector, upload_artifact

REGISTRY: tuple[Detector, ...] = (
    ResidueDetector(),
    HFDetector(),
    DeepSpeedDetector(),
    MegatronDetector(),
    NeMoDetector(),
    LightningDetector(),
    OrbaxDetector(),
    DCPDetector(),
    LogDetector(),
    EvalDetector(),
    DatasetDetector(),
    WeightsDetector(),
)
"""Every detector, highest priority first."""

RUN_DETECTORS: tuple[Detector, ...] = tuple(d for d in REGISTRY if d.defines_runs)
"""Checkpoint layouts: where their units live is where a run lives."""

TRACKER_NAMES = frozenset({"latest", "latest_universal", "latest_checkpointed_iteration.txt"})
"""Small files a checkpoint's completeness depends on, kept from pass one."""

__all__ = [
    "REGISTRY",
    "RUN_DETECTORS",
    "TRACKER_NAMES",
    "Claim",
    "Context",
    "Detector",
    "Verdict",
    "upload_artifact",
]
