"""Megatron-LM checkpoints: `<save>/iter_<7 digits>/` (and `release/`).

Legacy form: `mp_rank_<tp:02d>[_<pp:03d>]/model_optim_rng.pt` (+ `distrib_optim.pt` with
the distributed optimizer). `torch_dist` form: a DCP shard set with `.metadata`,
`common.pt`, `metadata.json`. Megatron writes `<save>/latest_checkpointed_iteration.txt`
after a save, so an iteration past the tracker is unfinished; the dist form also needs
`.metadata`. Only `distrib_optim.pt` is separable optimizer state.

Each rank writes its own `mp_rank_*` folder and the tracker does not prove that every rank
finished: in the legacy form every rank folder needs `model_optim_rng.pt`, and
`distrib_optim.pt` too when any has it. An iteration with fewer rank folders than the one
before it is not judged incomplete for that: a run resumed on fewer ranks (and ended
there) saves exactly such an iteration, the one its tracker names.
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
    digit_segment,
    find_segment,
    parent,
)
from governance.model.types import Artifact, CatalogObject, Component, Kind

TRACKER = "latest_checkpointed_iteration.txt"


@lru_cache(maxsize=4096)  # a pure function of a name that repeats unit after unit
def megatron_component(name: str) -> Component:
    """`distrib_optim.pt` is optimizer state; the shards and `model_optim_rng.pt` are weights."""
    base = name.rpartition("/")[2]
    if base == "distrib_optim.pt":
        return Component.OPTIMIZER
    if base.endswith((".pt", ".distcp")) and base != "common.pt":
        return Component.WEIGHTS
    return Component.METADATA


def tracker_verdict(unit: str, step: int | None, ctx: Context) -> Verdict:
    """Is this iteration at or before the one `latest_checkpointed_iteration.txt` names?"""
    tracker = ctx.lookup(parent(unit) + TRACKER)
    if tracker is None:
        return Verdict(False, f"no {TRACKER} beside it")
    text = ctx.read_text(tracker)
    if text is None:
        return Verdict(True, f"{TRACKER} present (unread)")
    if text == "release":
        return Verdict(True, f"{TRACKER} says release")
    if not text.isdigit() or step is None:
        return Verdict(True, f"{TRACKER} says {text!r} (not comparable)")
    if int(text) >= step:
        return Verdict(True, f"{TRACKER} is {int(text)}")
    return Verdict(False, f"iteration {step} is past {TRACKER} ({int(text)}): save not finished")


class MegatronDetector(Detector):
    """`iter_<N>/` and `release/` folders, and the tracker file beside them."""

    layout = "megatron"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = ("iter_", "release/")
    suffixes = (TRACKER,)

    def claim(self, key: str) -> Claim | None:
        if "iter_" in key:
            unit = digit_segment(key, "iter_")
            if unit:
                return Claim(unit, deep=True)
        if "release/" in key:
            i = find_segment(key, "release/")
            rest = key[i + 8 :] if i != -1 else ""
            if rest.startswith(("mp_rank_", ".metadata", "__", "common.pt", "metadata.json")):
                return Claim(key[: i + 8], deep=True)
        if key.endswith(TRACKER):
            return Claim(key, tracker=True)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        if not unit.endswith("/"):
            return artifact(
                unit,
                Kind.OTHER,
                self.layout,
                members,
                lambda _n: Component.METADATA,
                note="Megatron iteration tracker",
            )
        name = basename(unit)
        step = int(name[5:]) if name.startswith("iter_") else None
        names = {o.key[len(unit) :] for o in members}
        dist = any(n.endswith(".distcp") for n in names)
        problems: list[str] = []
        if dist and ".metadata" not in names:
            problems.append("torch_dist form without .metadata")
        if not dist and not any(n.endswith(("model_optim_rng.pt", "model_rng.pt")) for n in names):
            problems.append("no model_optim_rng.pt")
        elif not dist:
            problems += _rank_problems(names)
        tracked = tracker_verdict(unit, step, ctx)
        if not tracked.complete:
            problems.append(tracked.reason)
        form = "torch_dist" if dist else "legacy"
        strippable = not dist and "distrib_optim.pt" in {n.rpartition("/")[2] for n in names}
        verdict = Verdict(not problems, "; ".join(problems) or f"{form} form; {tracked.reason}")
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            megatron_component,
            step=step,
            verdict=verdict,
            strippable=strippable,
            # (torch_dist shards, or legacy without a distributed optimizer: the state is
            # in model_optim_rng.pt with the weights)
            note=f"{form} form" if strippable else f"{form} form: cannot be stripped",
        )


def _rank_problems(names: set[str]) -> list[str]:
    """Legacy form: every rank folder has its model file, and `distrib_optim.pt` when any
    rank folder has one (each rank writes its own folder)."""
    model: set[str] = set()
    optim: set[str] = set()
    dirs: set[str] = set()
    for n in names:
        head, sep, base = n.partition("/")
        if not sep or not head.startswith("mp_rank_"):
            continue
        dirs.add(head)
        if base in ("model_optim_rng.pt", "model_rng.pt"):
            model.add(head)
        elif base == "distrib_optim.pt":
            optim.add(head)
    problems = [f"{d}/ without model_optim_rng.pt" for d in sorted(dirs - model)]
    if optim:
        problems += [f"{d}/ without distrib_optim.pt" for d in sorted(dirs - optim)]
    return problems
