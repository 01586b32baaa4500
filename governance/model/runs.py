"""Runs: which prefix of the root is one training run, and what state it is in.

A run is named by the first layout template that matches a key (`{team}/{project}/runs/
{run}/`: placeholders become attributes, the matched prefix is the run key). Keys no
template matches can still belong to a run found from where checkpoints live: the folder
holding checkpoint units, or its parent when that folder is a `checkpoints`-like container,
so logs, evals and weights beside the checkpoints belong to the run too. Detected runs
never nest: the outermost wins (a Trainer checkpoint holding a DeepSpeed tag is not a run).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from governance.model.detectors import REGISTRY, RUN_DETECTORS, Context
from governance.model.detectors.base import basename, parent
from governance.model.dispatch import Dispatch
from governance.model.metrics import best_info
from governance.model.types import Artifact, CatalogObject, Kind, Run, RunStatus

CONTAINER_NAMES = frozenset(
    {"checkpoints", "checkpoint", "ckpt", "ckpts", "output", "outputs", "out", "saved_models"}
)
FINAL_NAMES = frozenset(
    {"final", "final_model", "final-model", "model_final", "final_checkpoint", "final-checkpoint"}
)
CHECKPOINT_LAYOUTS = frozenset(d.layout for d in RUN_DETECTORS)
_RESIDUE = REGISTRY[0]
_LAST_MODIFIED = attrgetter("last_modified")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Template:
    """One compiled layout template."""

    text: str
    pattern: re.Pattern[str]
    segments: int


def compile_templates(templates: Iterable[str]) -> tuple[Template, ...]:
    """Compile `{name}` templates to anchored prefix patterns (each placeholder is one segment)."""
    out = []
    for text in templates:
        norm = text.strip("/") + "/"
        parts: list[str] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(norm):
            parts.append(re.escape(norm[pos : m.start()]))
            parts.append(f"(?P<{m.group(1)}>[^/]+)")
            pos = m.end()
        parts.append(re.escape(norm[pos:]))
        out.append(Template(text, re.compile("".join(parts)), norm.count("/")))
    return tuple(out)


class TemplateMatcher:
    """First-match-wins template lookup, with a shortcut for the sorted stream: a key under
    the prefix the previous key matched matches the same way, unless an earlier template
    is longer (and could match deeper)."""

    def __init__(self, templates: Iterable[str]) -> None:
        self.templates = compile_templates(templates)
        self._safe = [
            all(t.segments <= self.templates[i].segments for t in self.templates[:i])
            for i in range(len(self.templates))
        ]
        self._last: tuple[str, dict[str, str]] | None = None

    def stable_prefix(self) -> str | None:
        """The prefix every key under which `match` answers as it did last, or None."""
        return self._last[0] if self._last is not None else None

    def match(self, key: str) -> tuple[str, dict[str, str]] | None:
        """(run prefix, attributes) of the first template that matches `key`."""
        if not self.templates:
            return None
        last = self._last
        if last is not None and key.startswith(last[0]):
            return last
        for i, t in enumerate(self.templates):
            m = t.pattern.match(key)
            if m:
                found = (m.group(0), m.groupdict())
                self._last = found if self._safe[i] else None
                return found
        return None


def run_for_unit(unit: str) -> str | None:
    """The run a checkpoint unit implies: its folder, or that folder's parent when the
    folder is a `checkpoints`-like container. None at the root."""
    container = parent(unit)
    if not container:
        return None
    if basename(container).lower() in CONTAINER_NAMES:
        return parent(container) or container
    return container


_ALL_RUN = Dispatch((_RESIDUE, *RUN_DETECTORS))
"""The detectors that can name a checkpoint (or staging) unit; the residue one first."""
_UPWARD = _ALL_RUN.of_mask(_ALL_RUN.looking_up)


def unit_of_checkpoint(key: str, upward_only: bool = False) -> str | None:
    """The outermost checkpoint (or staging) unit a key belongs to, by its key alone.

    `upward_only`: the key lies in a unit already found, so only detectors that may name
    an outer folder are asked (see `Detector.looks_up`).
    """
    best: str | None = None
    for i, claim in _UPWARD if upward_only else _ALL_RUN.candidates(key):
        c = claim(key)
        if c is None or c.tracker or c.companion or (i == 0 and not c.deep):
            continue
        if best is None or len(c.unit) < len(best):
            best = c.unit
    return best


def outermost(prefixes: Iterable[str]) -> set[str]:
    """Drop every prefix that lies under another one."""
    kept: set[str] = set()
    for p in sorted(prefixes):
        i = p.find("/")
        nested = False
        while i != -1 and i < len(p) - 1:
            if p[: i + 1] in kept:
                nested = True
                break
            i = p.find("/", i + 1)
        if not nested:
            kept.add(p)
    return kept


def detected_run_of(key: str, detected: set[str]) -> str | None:
    """The detected run holding `key` (detected runs do not nest)."""
    if not detected:
        return None
    i = key.find("/")
    while i != -1:
        p = key[: i + 1]
        if p in detected:
            return p
        i = key.find("/", i + 1)
    return None


def _markers(
    key: str, objs: Iterable[CatalogObject], done: tuple[str, ...], failed: tuple[str, ...]
) -> tuple[list[CatalogObject], list[CatalogObject]]:
    """Objects directly in the run folder named one of `done`, and one of `failed`."""
    done_keys = {key + name for name in done}
    failed_keys = {key + name for name in failed}
    wanted = done_keys | failed_keys
    found = [o for o in objs if o.key in wanted]  # one look per object; markers are few
    return [o for o in found if o.key in done_keys], [o for o in found if o.key in failed_keys]


def _is_final_weights(run_key: str, art: Artifact) -> bool:
    if art.kind is not Kind.WEIGHTS or not art.complete:
        return False
    segs = [s for s in art.key[len(run_key) :].split("/") if s]
    if len(segs) <= 1:
        return True
    folders = segs if art.key.endswith("/") else segs[:-1]
    return any(s.lower() in FINAL_NAMES for s in folders) or (
        len(folders) == 1 and folders[0].lower() in CONTAINER_NAMES
    )


def _status(
    key: str,
    objs: list[CatalogObject],
    artifacts: list[Artifact],
    ctx: Context,
    last: datetime,
    last_write_age: str,
    trainer: tuple[Artifact, Any] | None = None,
) -> tuple[RunStatus, str]:
    opts = ctx.options
    done, failed = _markers(key, objs, opts.completed_markers, opts.failed_markers)
    newest_done = max(done, key=lambda o: (o.last_modified, o.key), default=None)
    newest_failed = max(failed, key=lambda o: (o.last_modified, o.key), default=None)
    # failed: a failed marker newer than any completed marker (one written at the same
    # time does not outweigh it: a finished run is not deleted as a failed one on a tie)
    if newest_failed and (
        newest_done is None or newest_failed.last_modified > newest_done.last_modified
    ):
        return RunStatus.FAILED, f"failed marker {newest_failed.key}"
    if newest_done:
        return RunStatus.COMPLETED, f"completed marker {newest_done.key}"
    weights = Kind.WEIGHTS  # (what `_is_final_weights` looks at first, asked here in a loop)
    final = [a for a in artifacts if a.kind is weights and _is_final_weights(key, a)]
    if final:
        return RunStatus.COMPLETED, f"final weights at {final[0].key}"
    finished = _trainer_finished(trainer)
    if finished is not None:
        return RunStatus.COMPLETED, finished
    if not any(
        a.layout in CHECKPOINT_LAYOUTS and a.kind in (Kind.CHECKPOINT, Kind.RESIDUE)
        for a in artifacts
    ):
        return RunStatus.UNKNOWN, "no checkpoints and no status markers"
    if last > opts.as_of:  # (a plan as of a past time)
        later = _age((last - opts.as_of).total_seconds())
        return RunStatus.RUNNING, f"last write {later} after as_of, within abandoned_after"
    if opts.as_of - last <= opts.abandoned_after:
        return RunStatus.RUNNING, f"last write {last_write_age} ago, within abandoned_after"
    return RunStatus.ABANDONED, f"no write for {last_write_age} (abandoned_after exceeded)"


def _newest_trainer_state(artifacts: list[Artifact], ctx: Context) -> tuple[Artifact, Any] | None:
    """The newest complete Trainer checkpoint with its `trainer_state.json`, read (through
    the metadata cache), or None."""
    if ctx.read_meta is None:
        return None
    states: dict[str, CatalogObject] = {}
    for a in artifacts:
        if a.layout == "hf" and a.kind is Kind.CHECKPOINT and a.complete:
            state_key = a.key + "trainer_state.json"
            for o in a.objects:
                if o.key == state_key:
                    states[a.key] = o
    if not states:
        return None
    newest = max((a for a in artifacts if a.key in states), key=lambda a: (a.step or 0, a.key))
    return newest, ctx.read_json(states[newest.key])


def _trainer_finished(newest: tuple[Artifact, Any] | None) -> str | None:
    """Why the run is complete by its newest Trainer state (`global_step` reached
    `max_steps`, which the Trainer sets when training starts), or None. The Trainer writes
    no marker file when it finishes: without this, a finished run would read as
    abandoned once quiet for `abandoned_after`, and a rule for dead runs would take its
    final checkpoint."""
    if newest is None:
        return None
    art, state = newest
    if not isinstance(state, dict):
        return None
    step, most = state.get("global_step"), state.get("max_steps")
    if type(step) is not int or type(most) is not int:  # (a bool is an int subclass)
        return None
    if most > 0 and step >= most:
        return f"{art.key}trainer_state.json: global_step {step} reached max_steps {most}"
    return None


def _best_checkpoint(newest: tuple[Artifact, Any] | None, artifacts: list[Artifact]) -> str | None:
    """`best_model_checkpoint` of the newest Trainer checkpoint's state, as an artifact key."""
    if newest is None:
        return None
    art, state = newest
    name = best_info(state).checkpoint_name
    if not name:
        return None
    candidates = sorted(
        (a for a in artifacts if a.kind is Kind.CHECKPOINT and basename(a.key) == name),
        key=lambda a: (parent(a.key) != parent(art.key), a.key),
    )
    return candidates[0].key if candidates else None


def _age(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f}d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{max(seconds, 0) / 60:.0f}m"


def build_run(
    key: str,
    attributes: Mapping[str, str],
    objs: list[CatalogObject],
    artifacts: list[Artifact],
    ctx: Context,
    inner_last: datetime | None = None,
) -> Run:
    """The run record for one buffered run: status with evidence, last write (of its own
    objects, or `inner_last`, of a run inside its folder, when newer), best checkpoint."""
    last_write = max(map(_LAST_MODIFIED, objs))
    if inner_last is not None and inner_last > last_write:
        last_write = inner_last
    age = _age((ctx.options.as_of - last_write).total_seconds())
    trainer = _newest_trainer_state(artifacts, ctx)
    status, reason = _status(key, objs, artifacts, ctx, last_write, age, trainer)
    # No evidence of an end here, but an earlier plan saw the run completed, and nothing
    # was written in it since: its evidence is gone (archived away, expired), not its end.
    seen = ctx.options.seen_completed.get(key)
    recorded = None
    if status in _NO_END and seen is not None and last_write <= seen.last_write:
        status, recorded = RunStatus.COMPLETED, seen
        reason = (
            f"completed when plan {seen.plan_id} was made ({seen.reason}); nothing written since"
        )
    elif (
        status is RunStatus.COMPLETED
        and seen is not None
        and seen.final is not None
        and last_write <= seen.last_write
    ):
        # Completed by its own evidence still (a marker), and as that plan saw it: its
        # final is the one that plan kept (archived away since, most likely), not the
        # newest checkpoint left, which each later plan took for the final and moved too.
        recorded = seen
    return Run(
        key=key,
        name=attributes.get("run") or basename(key),
        status=status,
        status_reason=reason,
        last_write=last_write,
        attributes=dict(attributes),
        best_checkpoint=_best_checkpoint(trainer, artifacts),
        recorded=recorded,
    )


_NO_END = (RunStatus.UNKNOWN, RunStatus.RUNNING, RunStatus.ABANDONED)
"""What `_status` says of a run with no evidence of how it ended (no marker, no final
weights, no finished Trainer state)."""
