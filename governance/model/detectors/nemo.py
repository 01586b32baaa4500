"""NeMo: `.nemo` archives, and NeMo 2 checkpoint folders named like
`<model>--val_loss=2.10-epoch=0-step=999[-last]/` holding `weights/` (a distributed
checkpoint) and `context/` (`io.json`, `model.yaml`, tokenizer).

A NeMo 2 folder is complete with both `weights/` (with `.metadata` when it has shards) and
`context/`. Neither form can be stripped: optimizer state lives in the shards or the archive.
Either is incomplete while NeMo's `<name>-unfinished` marker is next to it (see
`lightning.unfinished_verdict`; the marker itself is claimed by the Lightning detector).
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
    non_empty_file,
)
from governance.model.detectors.lightning import unfinished_verdict
from governance.model.metrics import name_metrics
from governance.model.types import Artifact, CatalogObject, Component, Kind


@lru_cache(maxsize=4096)  # a pure function of a name that repeats unit after unit
def nemo_component(name: str) -> Component:
    """Shards under `weights/` are weights; `context/` and shard metadata are metadata."""
    if name.startswith("weights/") and name.endswith(".distcp"):
        return Component.WEIGHTS
    return Component.METADATA


def _nemo2_dir(key: str, seg: str) -> str | None:
    i = key.find(seg)
    while i != -1:
        unit = key[: i + 1]
        name = basename(unit)
        if "step=" in name or name.endswith("-last") or key.endswith("/context/io.json"):
            return unit
        i = key.find(seg, i + 1)
    return None


class NeMoDetector(Detector):
    """`.nemo` archives and NeMo 2 `weights/` + `context/` folders."""

    layout = "nemo"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = ("/weights/", "/context/")
    suffixes = (".nemo",)

    def claim(self, key: str) -> Claim | None:
        if key.endswith(".nemo"):
            return Claim(key)
        for seg in ("/weights/", "/context/"):
            if seg in key:
                unit = _nemo2_dir(key, seg)
                if unit:
                    return Claim(unit, deep=True)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        step, metrics = name_metrics(basename(unit))
        if not unit.endswith("/"):
            return artifact(
                unit,
                Kind.WEIGHTS,
                self.layout,
                members,
                lambda _n: Component.WEIGHTS,
                step=step,
                verdict=unfinished_verdict(unit, ctx, non_empty_file(members, ".nemo archive")),
                strippable=False,
                metrics=metrics,
                note=".nemo archive: cannot be stripped",
            )
        names = {o.key[len(unit) :] for o in members}
        problems = [
            f"{d} missing"
            for d in ("weights/", "context/")
            if not any(n.startswith(d) for n in names)
        ]
        if any(n.endswith(".distcp") for n in names) and "weights/.metadata" not in names:
            problems.append("weights/.metadata missing (save not finished)")
        verdict = Verdict(not problems, "; ".join(problems) or "weights/ and context/ present")
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            nemo_component,
            step=step,
            verdict=unfinished_verdict(unit, ctx, verdict),
            strippable=False,
            metrics=metrics,
            note="NeMo 2 distributed checkpoint: cannot be stripped",
        )
