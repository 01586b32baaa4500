"""Orbax (JAX) `CheckpointManager` steps: `<dir>/<step>/` or `<dir>/<prefix>_<step>/`,
items in subfolders (`default/`, `state/`, ...) with `_METADATA`, `manifest.ocdbt`,
`ocdbt.process_<i>/`, and `_CHECKPOINT_METADATA` at the step.

Orbax saves into `<name>.orbax-checkpoint-tmp-<ts>` and renames; on stores without rename
(GCS, S3) it writes `commit_success.txt` instead. A step folder is complete when
`_CHECKPOINT_METADATA` or `commit_success.txt` is in it. Tmp folders are residue (see
`residue.py`). Items whose name says optimizer (`opt_state/`) can be stripped.
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

COMMIT_FILES = ("_CHECKPOINT_METADATA", "commit_success.txt")
_ITEM_FILES = ("_METADATA", "manifest.ocdbt", "_sharding")
_TELLING = (*COMMIT_FILES, *_ITEM_FILES)
_META_NAMES = frozenset({*COMMIT_FILES, *_ITEM_FILES, "descriptor", "metadata"})


def _is_step_name(name: str) -> bool:
    if name.isdigit():
        return True
    head, sep, tail = name.rpartition("_")
    return bool(sep and head and tail.isdigit() and not head.startswith("ocdbt.process"))


@lru_cache(maxsize=4096)  # a pure function of a name that repeats unit after unit
def orbax_component(name: str) -> Component:
    """Items named like optimizer state are optimizer; top-level files are metadata."""
    item, sep, rest = name.partition("/")
    base = name.rpartition("/")[2]
    if not sep or base in _META_NAMES or rest.startswith("_"):
        return Component.METADATA
    if "opt" in item.lower():
        return Component.OPTIMIZER
    if item in ("metrics", "metadata", "dataset", "data_iter"):
        return Component.METADATA
    return Component.WEIGHTS


class OrbaxDetector(Detector):
    """Orbax step folders, found from their commit or item metadata files."""

    layout = "orbax"
    kind = Kind.CHECKPOINT
    defines_runs = True
    looks_up = True
    needles = ("/ocdbt.process_",)
    suffixes = _TELLING

    def claim(self, key: str) -> Claim | None:
        if not key.endswith(_TELLING) and "/ocdbt.process_" not in key:
            return None
        base = basename(key)
        item_file = base in _ITEM_FILES or "/ocdbt.process_" in key
        if not (base in COMMIT_FILES or item_file) or ".orbax-checkpoint-tmp-" in key:
            return None
        if base in COMMIT_FILES:
            unit = parent(key)
        else:
            cut = key.find("/ocdbt.process_")
            item_dir = key[: cut + 1] if cut != -1 else parent(key)
            step_dir = parent(item_dir)
            unit = step_dir if step_dir and _is_step_name(basename(step_dir)) else item_dir
        return Claim(unit, deep=True) if unit else None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        names = {o.key[len(unit) :] for o in members}
        found = [f for f in COMMIT_FILES if f in names]
        if found:
            verdict = Verdict(True, f"{found[0]} present")
        else:
            verdict = Verdict(
                False, "no _CHECKPOINT_METADATA or commit_success.txt (not committed)"
            )
        return artifact(
            unit,
            Kind.CHECKPOINT,
            self.layout,
            members,
            orbax_component,
            step=step_from_name(basename(unit)),
            verdict=verdict,
        )
