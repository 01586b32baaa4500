"""PyTorch Lightning `ModelCheckpoint` files: one `*.ckpt` per checkpoint.

The default name is `epoch={e}-step={s}.ckpt` (`-v1` on a clash), metrics may be in the
name as `name=value`, and `last.ckpt` has no step. The optimizer state is inside the file,
so it cannot be stripped. Complete when the file is non-empty. FSDP's sharded save writes a
*directory* named `*.ckpt/` holding a torch.distributed.checkpoint shard set and `meta.pt`;
that one is complete when `.metadata` (written last) is present.
"""

from __future__ import annotations

from governance.model.detectors.base import (
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    basename,
    non_empty_file,
)
from governance.model.metrics import name_metrics
from governance.model.types import Artifact, CatalogObject, Component, Kind


def _dir_component(name: str) -> Component:
    return Component.WEIGHTS if name.endswith(".distcp") else Component.METADATA


class LightningDetector(Detector):
    """`*.ckpt` files (and `*.ckpt/` sharded folders)."""

    layout = "lightning"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = (".ckpt",)

    def claim(self, key: str) -> Claim | None:
        if ".ckpt" not in key:
            return None
        if key.endswith(".ckpt"):
            return Claim(key)
        i = key.find(".ckpt/")
        return Claim(key[: i + 6], deep=True) if i > 0 and key[i - 1] != "/" else None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        step, metrics = name_metrics(basename(unit))
        if not unit.endswith("/"):
            return artifact(
                unit,
                Kind.CHECKPOINT,
                self.layout,
                members,
                lambda _n: Component.WEIGHTS,
                step=step,
                verdict=non_empty_file(members, "checkpoint file"),
                strippable=False,
                metrics=metrics,
                note="optimizer state inside the file: cannot be stripped",
            )
        has_meta = any(o.key == unit + ".metadata" for o in members)
        verdict = (
            Verdict(True, "sharded .ckpt folder with .metadata")
            if has_meta
            else Verdict(False, ".metadata missing (save not finished)")
        )
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            _dir_component,
            step=step,
            verdict=verdict,
            strippable=False,
            metrics=metrics,
            note="sharded (distributed checkpoint): cannot be stripped",
        )
