"""PyTorch Lightning `ModelCheckpoint` files: one `*.ckpt` per checkpoint.

The default name is `epoch={e}-step={s}.ckpt` (`-v1` on a clash), metrics may be in the
name as `name=value`, and `last.ckpt` has no step. The optimizer state is inside the file,
so it cannot be stripped. Complete when the file is non-empty. FSDP's sharded save writes a
*directory* named `*.ckpt/` holding a torch.distributed.checkpoint shard set and `meta.pt`;
that one is complete when `.metadata` (written last) is present.

`DeepSpeedStrategy` also saves a *directory* named `*.ckpt/`: DeepSpeed's
`save_checkpoint(filepath, tag="checkpoint")` writes `checkpoint/mp_rank_00_model_states.pt`
and `checkpoint/[bf16_]zero_pp_rank_<dp>_mp_rank_<mp>_optim_states.pt`, then the text file
`latest` naming the tag, and `zero_to_fp32.py`. It is complete when `latest` is there and the
tag folder it names has model states for every rank (and optimizer partitions for every
data-parallel rank found); the partitions are optimizer state, strippable except under
ZeRO-3 (model states named `zero_pp_rank_*`), where they are the only copy of the weights.

NeMo writes `<name>-unfinished` next to `<name>.ckpt` before a save and removes it after:
while the marker is there the checkpoint is incomplete. The marker joins the unit of the
`.ckpt` file it names (and is removed with it).

`ModelCheckpoint(save_last=True)` (`_save_last_checkpoint`) saves the state again as
`last.ckpt` (`CHECKPOINT_NAME_LAST`, `-v1`... when the name is taken by an older file) in
the same hook, right after its top-k save (`_save_topk_checkpoint`): then it is a copy of
the newest `epoch=E-step=S.ckpt`, saved one save's time later. But it is saved even when
no top-k file is (the monitored value is not in the top `save_top_k`, `every_n_epochs` > 1,
`save_top_k=0`), and Lightning removes top-k files it no longer ranks: then `last.ckpt` is
the only copy of the newest state. `save_last="link"` (local paths only) makes it a
symbolic link to the last top-k file instead, which a scan does not list (what it points at
is protected). `SAVE_LAST` recognises the name; which copies are aliases is the planner's
business (`plan.tiers.save_last_aliases`).
"""

from __future__ import annotations

import re

from governance.model.detectors.base import (
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    basename,
    non_empty_file,
    parent,
)
from governance.model.detectors.deepspeed import ds_component, ranks_verdict
from governance.model.metrics import name_metrics
from governance.model.types import Artifact, CatalogObject, Component, Kind

UNFINISHED = "-unfinished"
"""NeMo's `ModelCheckpoint.UNFINISHED_CHECKPOINT_SUFFIX`: a marker present while saving."""
_ZERO3_MODEL = re.compile(r"(?:^|/)zero_pp_rank_\d+_mp_rank_\d+_model_states\.pt$")
SAVE_LAST = re.compile(r"(?:^|-)last(?:-v\d+)?\.ckpt$")
"""The name of `ModelCheckpoint(save_last=True)`'s copy: `last.ckpt`, `last-v1.ckpt`, or a
`CHECKPOINT_NAME_LAST` template ending in `-last` (`epoch=3-last.ckpt`); a file, or the
folder of a sharded (FSDP, DeepSpeed) save."""


def save_last_name(key: str) -> bool:
    """Whether `key` is named as Lightning names its `save_last` copy (see `SAVE_LAST`)."""
    return SAVE_LAST.search(basename(key)) is not None


def _dir_component(name: str) -> Component:
    return Component.WEIGHTS if name.endswith(".distcp") else Component.METADATA


_MODEL_PARALLEL_DIR = re.compile(r"(?:^|(?<=/))(?:mp_rank_\d+|tp_rank_\d+_pp_rank_\d+)/")
"""A model-parallel rank's folder in a NeMo checkpoint path (`checkpoints/mp_rank_01/X.ckpt`):
NeMo writes the marker without it (`uninject_model_parallel_rank`)."""


def unfinished_marker(unit: str) -> str:
    """The key of NeMo's `-unfinished` marker for a checkpoint unit (`X.ckpt`, `X.ckpt/`,
    `X-EMA.ckpt`, `X.nemo`, a NeMo 2 folder `X/`): `X-unfinished`, without the rank folder
    of a model-parallel save (`mp_rank_01/X.ckpt`: `X-unfinished` one folder up)."""
    name = _MODEL_PARALLEL_DIR.sub("", unit.rstrip("/"))
    for suffix in (".ckpt", ".nemo", "-EMA"):
        name = name.removesuffix(suffix)
    return name + UNFINISHED


def unfinished_verdict(unit: str, ctx: Context, verdict: Verdict) -> Verdict:
    """`verdict`, unless NeMo's `-unfinished` marker for `unit` is in the group."""
    marker = unfinished_marker(unit)
    if ctx.lookup(marker) is None:
        return verdict
    why = f"NeMo marker {basename(marker)} present (save not finished)"
    return Verdict(False, f"{verdict.reason}; {why}" if not verdict.complete else why)


class LightningDetector(Detector):
    """`*.ckpt` files (and `*.ckpt/` sharded folders)."""

    layout = "lightning"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = (".ckpt",)
    suffixes = (UNFINISHED,)

    def claim(self, key: str) -> Claim | None:
        if key.endswith(UNFINISHED):
            # NeMo's marker: in the unit of the `.ckpt` file it names
            # (only names a checkpoint callback writes, or in NeMo's `checkpoints/` folder:
            # any other `*-unfinished` file is not a checkpoint's, and must not become residue)
            name = key.removesuffix(UNFINISHED)
            base = basename(name)
            if "step=" in base or "epoch=" in base or basename(parent(name)) == "checkpoints":
                return Claim(name + ".ckpt")
            return None
        if ".ckpt" not in key:
            return None
        if key.endswith(".ckpt"):
            return Claim(key)
        i = key.find(".ckpt/")
        return Claim(key[: i + 6], deep=True) if i > 0 and key[i - 1] != "/" else None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        step, metrics = name_metrics(basename(unit))
        if not unit.endswith("/"):
            files = [o for o in members if o.key == unit]
            verdict = (
                non_empty_file(files, "checkpoint file")
                if files
                else Verdict(False, "checkpoint file missing")
            )
            return artifact(
                unit,
                Kind.CHECKPOINT,
                self.layout,
                members,
                lambda n: Component.METADATA if n.endswith(UNFINISHED) else Component.WEIGHTS,
                step=step,
                verdict=unfinished_verdict(unit, ctx, verdict),
                strippable=False,
                metrics=metrics,
                note="optimizer state inside the file: cannot be stripped",
            )
        names = [o.key[len(unit) :] for o in members]
        if any(n.endswith("_states.pt") for n in names):
            return self._deepspeed(unit, members, names, ctx, step, metrics)
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
            verdict=unfinished_verdict(unit, ctx, verdict),
            strippable=False,
            metrics=metrics,
            note="sharded (distributed checkpoint): cannot be stripped",
        )

    def _deepspeed(
        self,
        unit: str,
        members: list[CatalogObject],
        names: list[str],
        ctx: Context,
        step: int | None,
        metrics: dict[str, float],
    ) -> Artifact:
        """A `DeepSpeedStrategy` folder: `latest` names the tag folder holding the states."""
        by_name = dict(zip(names, members, strict=True))
        tags = sorted({n.partition("/")[0] for n in names if n.endswith("_states.pt")})
        latest = by_name.get("latest")
        named = ctx.read_text(latest)  # as DeepSpeed's detector reads `latest`
        if latest is None:
            tag, found = "", "latest missing (save not finished)"
        elif named is None:  # no reader, or unreadable: the tag folder holding model states
            tag = tags[0] if len(tags) == 1 else "checkpoint"
            found = f"latest present (unread), tag {tag}"
        else:
            tag, found = named, f"latest names {named}"
        in_tag = [n for n in names if n.startswith(tag + "/")]
        if latest is None:
            verdict = Verdict(False, found)
        elif not tag or "/" in tag or not in_tag:
            verdict = Verdict(False, f"{found}: no such tag folder")
        else:
            ranks = ranks_verdict(in_tag)
            verdict = (
                Verdict(True, f"{found}; {ranks.reason}")
                if ranks.complete
                else Verdict(False, f"{found}: {ranks.reason}")
            )
        zero3 = any(_ZERO3_MODEL.search(n) for n in names)
        note = (
            "DeepSpeed ZeRO-3: weights are in the optimizer partitions, cannot be stripped"
            if zero3
            else "DeepSpeed strategy folder"
        )
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            ds_component,
            step=step,
            verdict=unfinished_verdict(unit, ctx, verdict),
            strippable=False if zero3 else None,
            metrics=metrics,
            note=note,
            names=names,
        )
