"""DeepSpeed `save_checkpoint` tags: `<save_dir>/global_step<N>/` (or any tag folder holding
`mp_rank_XX_model_states.pt`), with ZeRO optimizer partitions
`[bf16_]zero_pp_rank_<dp>_mp_rank_<mp>_optim_states.pt` and pipeline `layer_XX-model_states.pt`.

DeepSpeed writes the text file `<save_dir>/latest` (the tag) after a save finishes, so a tag
is complete when `latest` names it or a later step, and model and optimizer files are there
for every rank found (every model-parallel rank with model states has its optimizer
partitions, and the other way round). Tags that are not `global_step<N>` (Lightning's
`checkpoint`, accelerate's `pytorch_model`, `epoch1`) cannot be compared by step: such a
tag is judged by its files alone (write times cannot tell a save in flight from a copy:
`aws s3 sync` or `cp -r` stamps every file with its own time, after `latest`'s).
`latest`, `latest_universal` and `zero_to_fp32.py` in the save folder are small metadata
artifacts of their own. Universal tags (`global_step<N>_universal/`) are judged by
`latest_universal`, which `ds_to_universal` writes last, offline and in whatever order of
steps a person converts them: a universal tag newer than the one it names is a
conversion in flight only while its files are newer than `latest_universal`'s write.

ZeRO-3 (model states named `zero_pp_rank_<dp>_mp_rank_<mp>_model_states.pt`) keeps no real
weights in the model states: the fp32 weights are rebuilt from the optimizer partitions
(`zero_to_fp32.py`), so such a tag cannot be stripped.

What the names prove about ranks (`ranks_verdict`): ranks are numbered from 0 without gaps,
so a data- or model-parallel rank below the highest one found is missing; ZeRO-3 writes
each rank's model states, then its optimizer partition (`save_checkpoint`: `_save_checkpoint`,
then `_save_zero_checkpoint`), so model states without any partition are a save in flight
(but in a universal checkpoint, `ds_to_universal`'s copy beside its `zero/` folder). What
they cannot prove: that the *highest* ranks are there. The world size is only inside the
files (`dp_world_size`/`mp_world_size` in the model states, `partition_count` in each
partition: what `load_checkpoint` and `zero_to_fp32.py` read); `latest` holds just a tag
name; other tags of the run may have been saved at another world size (a resume on fewer or
more GPUs); and ZeRO-1/2 model states without partitions are also what a save without
optimizer state (Megatron-DeepSpeed's `save_ds_checkpoint_no_optim`) or a strip leaves. So
a tag missing only its highest ranks is judged complete: judging it incomplete would make a
complete tag saved at a smaller world size residue.

A tag nested in a Trainer checkpoint (`checkpoint-<N>/global_step<N>/`) belongs to the
Hugging Face detector's artifact, which does not judge its ranks: when ZeRO-3 gathers the
weights at save they are in `model.safetensors` too, and a checkpoint whose partitions a
person removed still loads (judged by the tag, it would be residue and deleted).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from governance.model.detectors.base import (
    STATE_COMPONENTS,
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    basename,
    digit_segment,
    parent,
)
from governance.model.types import Artifact, CatalogObject, Component, Kind
from governance.wording import counted

TRACKERS = frozenset({"latest", "latest_universal", "zero_to_fp32.py"})
_MODEL = re.compile(r"mp_rank_(\d+)_model_states\.pt$")
_OPTIM = re.compile(r"zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
_Z3_MODEL = re.compile(r"zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt$")
_TAG_STEP = re.compile(r"global_step(\d+)")
ZERO3_NOTE = "ZeRO-3: the weights are in the optimizer partitions: cannot be stripped"


@lru_cache(maxsize=4096)  # a pure function of a name that repeats unit after unit
def ds_component(name: str) -> Component:
    """Model states are weights; ZeRO partitions are optimizer state."""
    if name.endswith("optim_states.pt"):
        return Component.OPTIMIZER
    if name.endswith("model_states.pt"):
        return Component.WEIGHTS
    return Component.METADATA


def ranks_verdict(names: list[str]) -> Verdict:
    """Model states for every model-parallel rank, optimizer partitions for every dp rank."""
    return _ranks_verdict(tuple(names))


@lru_cache(maxsize=1024)  # tag folders of one run (and of many) hold the same file names
def _ranks_verdict(names: tuple[str, ...]) -> Verdict:
    model = {int(m.group(1)) for n in names if (m := _MODEL.search(n))}
    optim = {(int(m.group(1)), int(m.group(2))) for n in names if (m := _OPTIM.search(n))}
    # ZeRO-3 model states: one file per (dp, mp) rank, like the optimizer partitions
    zero3 = {(int(m.group(1)), int(m.group(2))) for n in names if (m := _Z3_MODEL.search(n))}
    layers = any(n.rpartition("/")[2].startswith("layer_") for n in names)
    mp = model | {r for _, r in optim}
    if not mp and not layers:
        return Verdict(False, "no model states")
    # model-parallel ranks are 0..mp_world_size-1: every one up to the highest seen
    mps = range(max(mp) + 1) if mp else range(0)
    missing = [f"mp_rank_{r:02d}_model_states.pt" for r in mps if r not in model]
    if optim or zero3:
        # every dp rank up to the highest seen, for every model-parallel rank
        dps = range(max(d for d, _ in optim | zero3) + 1)
        # ZeRO-3 model states and no partition at all: the partitions (written after the
        # model states) are the weights; `ds_to_universal` copies the model states beside
        # its `zero/` folder instead
        if optim or not _universal(names):
            missing += [f"optim dp{d}/mp{r}" for r in mps for d in dps if (d, r) not in optim]
        if zero3:
            missing += [
                f"zero_pp_rank_{d}_mp_rank_{r:02d}_model_states.pt"
                for r in mps
                for d in dps
                if (d, r) not in zero3
            ]
    if missing:
        return Verdict(False, f"missing {counted(len(missing), 'shard')}: {missing[0]}")
    n_optim = len(optim)
    return Verdict(
        True,
        ("ZeRO-3, " if zero3 else "")
        + f"{counted(len(mp), 'model rank')}, {counted(n_optim, 'optimizer partition')}",
    )


def _universal(names: tuple[str, ...]) -> bool:
    """A universal checkpoint's tag: parameters in `zero/<name>/` (`ds_to_universal`)."""
    return any(n.startswith("zero/") or "/zero/" in n for n in names)


def latest_verdict(
    unit: str, step: int | None, ctx: Context, members: Sequence[CatalogObject] = ()
) -> Verdict:
    """Does `<save_dir>/latest` (or `latest_universal`) name this tag or a later one?"""
    head, sep, tag = unit.rstrip("/").rpartition("/")
    # `parent(unit)`, `basename(unit)`
    return _latest_verdict(head + sep, tag, step, ctx, members)


def _latest_verdict(
    save_dir: str,
    tag: str,
    step: int | None,
    ctx: Context,
    members: Sequence[CatalogObject] = (),
) -> Verdict:
    tracker_name = "latest_universal" if tag.endswith("_universal") else "latest"
    named = _tracker_tag(save_dir + tracker_name, ctx)
    if named is None:
        if ctx.lookup(save_dir + tracker_name) is None:
            return Verdict(False, f"no {tracker_name} file in {save_dir or 'the root'}")
        return Verdict(True, f"{tracker_name} present (unread)")
    text, named_step = named
    if text == tag:
        return Verdict(True, f"{tracker_name} names {tag}")
    if named_step is not None and step is not None:
        if named_step >= step:
            return _later(tracker_name, text)
        if tracker_name == "latest_universal" and _converted_before(save_dir, members, ctx):
            return _converted_out_of_order(text)
        return _unfinished(tracker_name, text)
    return Verdict(True, f"{tracker_name} names {text} (not comparable)")


def _tracker_tag(key: str, ctx: Context) -> tuple[str, int | None] | None:
    """The tag a tracker file names and its step, read once per group (None: no file, or
    unread; not kept, so a passing read failure is retried as before)."""
    memo_key = ("deepspeed", key)
    found: tuple[str, int | None] | None = ctx.memo.get(memo_key)
    if found is not None:
        return found
    tracker = ctx.lookup(key)
    if tracker is None:
        return None
    text = ctx.read_text(tracker)
    if text is None:
        return None
    m = _TAG_STEP.search(text)
    found = ctx.memo[memo_key] = (text, int(m.group(1)) if m else None)
    return found


@lru_cache(maxsize=4096)  # tag names repeat run after run
def _tag_step(tag: str) -> int | None:
    """The step in a tag's name (`global_step1000` -> 1000), or None."""
    m = _TAG_STEP.search(tag)
    return int(m.group(1)) if m else None


def _converted_before(save_dir: str, members: Sequence[CatalogObject], ctx: Context) -> bool:
    """Whether `latest_universal` was written after every file of the tag: universal tags
    are made offline by `ds_to_universal`, one conversion at a time and in any order of
    steps, each writing `latest_universal` last. A tag converted before a later
    conversion of an older step finished its files then: it is not a save in flight."""
    tracker = ctx.lookup(save_dir + "latest_universal")
    if tracker is None or not members:
        return False
    return tracker.last_modified >= max(o.last_modified for o in members)


@lru_cache(maxsize=1024)
def _converted_out_of_order(named: str) -> Verdict:
    return Verdict(
        True, f"latest_universal names earlier tag {named}, written after this tag's files"
    )


@lru_cache(maxsize=1024)  # one per save folder state: shared by the tags it names later
def _later(tracker_name: str, named: str) -> Verdict:
    return Verdict(True, f"{tracker_name} names later tag {named}")


@lru_cache(maxsize=1024)
def _unfinished(tracker_name: str, named: str) -> Verdict:
    return Verdict(False, f"newer than {tracker_name} ({named}): save not finished")


@lru_cache(maxsize=4096)  # the verdicts are shared (see above): so are their combinations
def _combined(ranks: Verdict, latest: Verdict) -> Verdict:
    """Complete when both are; the reason lists the problems, else both reasons."""
    verdicts = (ranks, latest)
    problems = [v.reason for v in verdicts if not v.complete]
    reason = "; ".join(problems) if problems else "; ".join(v.reason for v in verdicts)
    return Verdict(not problems, reason)


class DeepSpeedDetector(Detector):
    """`global_step<N>/` tags and tag folders holding DeepSpeed model states."""

    layout = "deepspeed"
    kind = Kind.CHECKPOINT
    defines_runs = True
    needles = ("global_step",)
    suffixes = ("_states.pt", *sorted(TRACKERS))

    def claim(self, key: str) -> Claim | None:
        i = key.find("global_step")
        if i != -1:
            # `digit_segment`'s answer when the first `global_step` folder has plain digits
            end = key.find("/", i) if i == 0 or key[i - 1] == "/" else -1
            if end != -1 and key[i + 11 : end].isdigit():
                return Claim(key[: end + 1], True)  # deep
            unit = digit_segment(key, "global_step", "_universal")
            if unit:
                return Claim(unit, True)
        if key.endswith("_states.pt") and ("mp_rank_" in key or "/layer_" in key):
            unit = parent(key)
            return Claim(unit, True) if unit else None
        if basename(key) in TRACKERS:
            return Claim(key, tracker=True)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        return self.build_all([(unit, members)], ctx)[0]

    def build_all(
        self, units: Sequence[tuple[str, list[CatalogObject]]], ctx: Context
    ) -> list[Artifact]:
        """The artifacts of a group's units, in one loop: a save folder's tags share its
        `latest` (read once per save folder), and their file names repeat run after run
        (what the names decide is memoised)."""
        out: list[Artifact] = []
        layout, checkpoint = self.layout, Kind.CHECKPOINT
        for unit, members in units:
            if unit[-1:] != "/":
                out.append(
                    artifact(
                        unit,
                        Kind.OTHER,
                        layout,
                        members,
                        lambda _n: Component.METADATA,
                        note="DeepSpeed save-folder metadata",
                    )
                )
                continue
            head, sep, tag = unit.rstrip("/").rpartition("/")
            n = len(unit)
            # `basename(unit)` is `tag` unless the unit ends in '//'
            step, ranks, components, strippable, note = _tag_facts(
                tag if unit[-2:-1] != "/" else basename(unit), tuple([o.key[n:] for o in members])
            )
            save_dir = head + sep  # `parent(unit)`
            complete, reason = _combined(ranks, _latest_verdict(save_dir, tag, step, ctx, members))
            # = artifact(unit, CHECKPOINT, layout, members, ds_component, step=, verdict=,
            # names=), with what a tag's file names decide memoised
            out.append(
                Artifact(
                    unit,
                    checkpoint,
                    layout,
                    members,
                    components,  # one tuple per set of file names
                    None,
                    step,
                    complete,
                    reason,
                    {},
                    strippable,
                    note,
                )
            )
        return out


@lru_cache(maxsize=4096)  # tag names and their file names repeat run after run
def _tag_facts(
    name: str, names: tuple[str, ...]
) -> tuple[int | None, Verdict, tuple[Component, ...], bool, str]:
    """`_tag_step(name)` and `_tag_files(names)` in one look-up."""
    return (_tag_step(name), *_tag_files(names))


@lru_cache(maxsize=1024)  # tag folders of one run (and of many) hold the same file names
def _tag_files(names: tuple[str, ...]) -> tuple[Verdict, tuple[Component, ...], bool, str]:
    """What a tag's file names decide: `ranks_verdict`, each file's component, whether
    some state is in files of its own (`artifact`'s default `strippable`), and the note.
    ZeRO-3 model states hold no real weights (they are rebuilt from the optimizer
    partitions): such a tag cannot be stripped."""
    components = tuple([ds_component(name) for name in names])
    if any(_Z3_MODEL.search(name) for name in names):
        return _ranks_verdict(names), components, False, ZERO3_NOTE
    return _ranks_verdict(names), components, not STATE_COMPONENTS.isdisjoint(components), ""
