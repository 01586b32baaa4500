"""Orbax (JAX) `CheckpointManager` steps: `<dir>/<step>/` or `<dir>/<prefix>_<step>/`,
items in subfolders (`default/`, `state/`, ...) with `_METADATA`, `manifest.ocdbt`,
`ocdbt.process_<i>/`, and `_CHECKPOINT_METADATA` at the step.

Orbax saves into a staging folder and renames it: `<name>.orbax-checkpoint-tmp/` (current
Orbax) or `<name>.orbax-checkpoint-tmp-<ts>/` (older Orbax). Staging folders are residue
under either name (see `residue.py`): never claimed here, never a step. On stores without
rename (GCS, S3) it writes `_CHECKPOINT_METADATA` when the save starts and
`commit_success.txt` when it commits. So on a filesystem (atomic rename) a step folder
under its final name is complete when `_CHECKPOINT_METADATA` is in it, or (older Orbax,
which did not write it) when each of its items has its `_METADATA`. On an object store it
is complete when `commit_success.txt` is in it, or its `_CHECKPOINT_METADATA` has
`commit_timestamp_nsecs` (read through the metadata reader, like the other small metadata
files: `scan.metadata.METADATA_NAMES`); read and not a JSON object, empty or cut short,
it is not committed.

A `_CHECKPOINT_METADATA` that could not be read (see `Context.load_json`) tells nothing,
and the step is judged against the steps of its folder whose commit is known
(`_unread_verdict`): inside the grace period it is in flight (kept, and not counted by
`keep_last`); past it, a step newer than the newest step known to be committed is kept
in flight too, at any age, never residue (counted, a save that never committed would
take the place of that step, and `keep_last` delete it); any other is not judged, as an unread DeepSpeed `latest`
is not (a root whose files cannot be read at all would otherwise be all residue). Items
whose name says optimizer (`opt_state/`) can be stripped.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from governance.model.detectors.base import (
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    basename,
    on_filesystem,
    parent,
    step_from_name,
)
from governance.model.detectors.residue import ORBAX_TMP, orbax_staging
from governance.model.types import Artifact, CatalogObject, ClassifyOptions, Component, Kind

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
        if not (base in COMMIT_FILES or item_file):
            return None
        if ORBAX_TMP in key and orbax_staging(key) is not None:
            return None  # in a staging folder, under either naming: residue
        if base in COMMIT_FILES:
            unit = parent(key)
        else:
            cut = key.find("/ocdbt.process_")
            item_dir = key[: cut + 1] if cut != -1 else parent(key)
            step_dir = parent(item_dir)
            unit = step_dir if step_dir and _is_step_name(basename(step_dir)) else item_dir
        return Claim(unit, deep=True) if unit else None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        return self.build_all([(unit, members)], ctx)[0]

    def build_all(
        self, units: Sequence[tuple[str, list[CatalogObject]]], ctx: Context
    ) -> list[Artifact]:
        """The artifacts of a group's steps. A step whose `_CHECKPOINT_METADATA` could not
        be read is judged last, against the steps of its folder known to be committed."""
        judged: list[tuple[int | None, Verdict | None]] = []
        committed: dict[str, int] = {}  # save folder -> its highest step known committed
        for unit, members in units:
            step = step_from_name(basename(unit))
            names = {o.key[len(unit) :] for o in members}
            verdict: Verdict | None
            if on_filesystem(members):
                verdict = _renamed_verdict(names)
            else:
                verdict = _object_store_verdict(unit, names, ctx)
                if verdict is not None and verdict.complete and step is not None:
                    folder = parent(unit)
                    if step > committed.get(folder, -1):
                        committed[folder] = step
            judged.append((step, verdict))
        out: list[Artifact] = []
        for (unit, members), (step, verdict) in zip(units, judged, strict=True):
            unread = verdict is None
            if verdict is None:
                newest = committed.get(parent(unit))
                verdict = _unread_verdict(members, step, newest, ctx.options)
            art = artifact(
                unit,
                Kind.CHECKPOINT,
                self.layout,
                members,
                orbax_component,
                step=step,
                verdict=verdict,
            )
            art.unjudged = unread and not verdict.complete
            out.append(art)
        return out


def _renamed_verdict(names: set[str]) -> Verdict:
    """A step folder under its final name on a filesystem: Orbax renamed it from its tmp
    name once the save was done, so it is complete if its items are there."""
    if COMMIT_FILES[0] in names:
        return Verdict(True, f"{COMMIT_FILES[0]} present (renamed from its tmp folder)")
    if COMMIT_FILES[1] in names:
        return Verdict(True, f"{COMMIT_FILES[1]} present")
    if "_METADATA" in names:
        # a PyTree saved straight into the step folder (Flax's checkpoints, a Standard
        # checkpointer): the step is its one item; `ocdbt.process_N/` and `d/` are its
        # OCDBT data (below: never an item of their own)
        return Verdict(True, "final name (renamed from its tmp folder), _METADATA present")
    items = sorted(
        {
            item
            for n in names
            if (item := n.partition("/")[0]) != n
            and not (item == "d" or item.startswith("ocdbt.process_"))
            and (n.endswith(_ITEM_FILES) or "/ocdbt.process_" in n)
        }
    )
    without = [i for i in items if f"{i}/_METADATA" not in names]
    if not items:
        return Verdict(False, "no item with _METADATA (not committed)")
    if without:
        return Verdict(False, f"item {without[0]}/ without _METADATA (not committed)")
    return Verdict(True, "final name (renamed from its tmp folder), items with _METADATA")


def _object_store_verdict(unit: str, names: set[str], ctx: Context) -> Verdict | None:
    """On a store without rename `_CHECKPOINT_METADATA` is written when the save starts:
    `commit_success.txt`, or a commit time in `_CHECKPOINT_METADATA`, says it committed.
    None: `_CHECKPOINT_METADATA` is there and could not be read (see `_unread_verdict`)."""
    if COMMIT_FILES[1] in names:
        return Verdict(True, f"{COMMIT_FILES[1]} present")
    if COMMIT_FILES[0] not in names:
        return Verdict(False, "no _CHECKPOINT_METADATA or commit_success.txt (not committed)")
    meta = ctx.lookup(unit + COMMIT_FILES[0])
    loaded = ctx.load_json(meta)
    if not loaded.read:
        return None
    broken = loaded.problem(COMMIT_FILES[0])
    if broken is not None:  # read, and not a JSON object: no commit time in it
        return Verdict(False, f"{broken} and no commit_success.txt (not committed)")
    data = loaded.data
    if isinstance(data, dict) and data.get("commit_timestamp_nsecs"):
        return Verdict(True, f"{COMMIT_FILES[0]} has commit_timestamp_nsecs")
    return Verdict(
        False,
        f"{COMMIT_FILES[0]} without commit_timestamp_nsecs and no commit_success.txt "
        "(save started, not committed)",
    )


def _unread_verdict(
    members: list[CatalogObject],
    step: int | None,
    newest_committed: int | None,
    options: ClassifyOptions,
) -> Verdict:
    """A step on an object store whose `_CHECKPOINT_METADATA` could not be read (no
    reader, the root out of reach, a failed read, another size than listed): whether it
    committed is not known. Counted as complete, a save that never committed would take
    a `keep_last` place and let a committed step be deleted; judged incomplete, a
    committed step past the grace period would be residue, and deleted. So inside the
    grace period it is in flight (kept, not counted), and past it, a step newer than the
    newest step of its folder known to be committed (`newest_committed`) too, at any age
    (`Artifact.unjudged`: never residue); any other (older, or no step of the folder
    known) is not judged, as an unread DeepSpeed `latest` is not."""
    name = COMMIT_FILES[0]
    last = max(o.last_modified for o in members)
    if options.as_of - last <= options.grace:
        return Verdict(False, f"{name} not read: commit not known (a save may be in flight)")
    if step is not None and newest_committed is not None and step > newest_committed:
        return Verdict(
            False,
            f"{name} not read: commit not known, and newer than step {newest_committed}, "
            "the newest known to be committed",
        )
    return Verdict(True, f"{name} present (unread)")
