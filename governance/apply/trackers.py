"""A run's tracker file must say at apply what it said at plan: the checkpoint training
resumes from is decided by it.

DeepSpeed's `latest` (and `latest_universal`) and Megatron's
`latest_checkpointed_iteration.txt` name the checkpoint a run resumes from, and the plan's
decisions rest on them (which tag is complete, which is the newest a live run keeps).
Rewritten since the plan (a rollback: training will resume from an older tag), they make
every removal among that folder's checkpoints stale: the plan would strip or delete what
training now needs. The trackers are the catalog's rows beside an action's artifact at the
plan's scan (`kept.files_held_at_plan`), read in the batch's own requests and compared as
the action's objects are. A tracker gone since is not judged here (the plan may remove it
itself, with a dead run), only one rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from governance.apply.kept import KeptFile
from governance.model.detectors import TRACKER_NAMES
from governance.plan.types import ActionType, PlannedAction, removes_objects

HeldFiles = Callable[[Sequence[tuple[str, str]]], Mapping[tuple[str, str], KeptFile]]
"""(root URL, key) pairs -> the objects the catalog held at those keys at the plan's scan."""

_CHECKPOINTS = ("checkpoint", "residue")
_NAMES = sorted(TRACKER_NAMES)


def trackers_of(
    actions: Sequence[PlannedAction], held: HeldFiles | None
) -> dict[int, list[KeptFile]]:
    """action id -> the tracker files beside each removal of a checkpoint (a delete, a
    strip, an archive by copy) that the catalog held at the plan's scan."""
    if held is None:
        return {}
    beside: dict[int, list[tuple[str, str]]] = {}
    for a in actions:
        if a.artifact.kind not in _CHECKPOINTS or not _removes(a):
            continue
        root = a.artifact.root_url
        key = a.artifact.uri[len(root) :].rstrip("/")
        folder = key[: key.rfind("/") + 1]
        if folder:  # (a checkpoint at the root has no run folder to hold a tracker)
            beside[a.id] = [(root, folder + name) for name in _NAMES]
    if not beside:
        return {}
    found = held(sorted({k for keys in beside.values() for k in keys}))
    out: dict[int, list[KeptFile]] = {}
    for action_id, keys in beside.items():
        files = [found[k] for k in keys if k in found]
        if files:
            out[action_id] = files
    return out


def _removes(action: PlannedAction) -> bool:
    return removes_objects(action) or action.action is ActionType.STRIP
