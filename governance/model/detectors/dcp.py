"""torch.distributed.checkpoint shard sets: a folder of `__<rank>_<i>.distcp` files.

The coordinator writes `.metadata` last, so a folder without it is an unfinished save.
Model and optimizer state share the shard files: such a checkpoint cannot be stripped.
"""

from __future__ import annotations

from functools import lru_cache

from governance.model.detectors.base import (
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    basename,
    parent,
    step_from_name,
)
from governance.model.types import Artifact, CatalogObject, Component, Kind
from governance.wording import counted


@lru_cache(maxsize=4096)  # a pure function of a name that repeats unit after unit
def dcp_component(name: str) -> Component:
    """`.distcp` shards hold the tensors; everything else describes them."""
    return Component.WEIGHTS if name.endswith(".distcp") else Component.METADATA


class DCPDetector(Detector):
    """Any folder holding `.distcp` shards or a DCP `.metadata` file."""

    layout = "dcp"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = ()
    suffixes = (".distcp", "/.metadata")

    def claim(self, key: str) -> Claim | None:
        if key.endswith(".distcp") or key.endswith("/.metadata"):
            unit = parent(key)
            return Claim(unit, deep=True) if unit else None
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        has_meta = any(o.key == unit + ".metadata" for o in members)
        sizes = [o.size for o in members if o.key.endswith(".distcp")]
        shards = len(sizes)
        if has_meta and shards and not any(sizes):
            # (one empty shard is a rank with nothing to write; all empty hold no tensors)
            verdict = Verdict(False, "every .distcp shard is empty")
        elif has_meta and shards:
            verdict = Verdict(True, f".metadata and {counted(shards, 'shard')} present")
        elif has_meta:
            verdict = Verdict(False, ".metadata present but no .distcp shards")
        else:
            verdict = Verdict(False, ".metadata missing (save not finished)")
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            dcp_component,
            step=step_from_name(basename(unit)),
            verdict=verdict,
            strippable=False,
            note="distributed shard set: cannot be stripped",
        )
