"""The domain model that classification produces and the planner consumes.

Objects are grouped into artifacts (what a person means: one checkpoint, one dataset, one
log stream, one piece of residue) and artifacts into runs. Every object belongs to exactly
one artifact; every object inside an artifact has one component.

Value types made by the hundred thousand on the planner's hot path (objects, members,
claims, verdicts, and the plan's refs) are `slots=True, unsafe_hash=True` dataclasses, not
`frozen=True`: a frozen dataclass's `__init__` sets each field through
`object.__setattr__`, about four times the cost of a plain one, and building them was a
sizeable share of a plan. They keep equality and hashing by value; nothing mutates them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    CHECKPOINT = "checkpoint"
    WEIGHTS = "weights"
    DATASET = "dataset"
    LOG = "log"
    EVAL = "eval"
    RESIDUE = "residue"
    OTHER = "other"


class Component(StrEnum):
    WEIGHTS = "weights"
    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    RNG = "rng"
    METADATA = "metadata"
    OTHER = "other"


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ABANDONED = "abandoned"
    UNKNOWN = "unknown"


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class CatalogObject:
    """One live object as the catalog holds it (key relative to its root).

    `last_modified` is when its content was written: policy ages count from it (the
    storage's own LastModified when govern never copied the object in place).
    """

    key: str
    size: int
    last_modified: datetime
    etag: str
    storage_class: str | None = None
    version_id: str | None = None
    upload_id: str = ""
    tags: Mapping[str, str] | None = None  # None: not read (or none exist: filesystems)
    object_id: int | None = None
    # S3 Object Lock, as read (HEAD) on a bucket with Object Lock enabled; None / False
    # otherwise. A locked object protects its whole artifact (`plan.protect`).
    lock_mode: str | None = None  # GOVERNANCE | COMPLIANCE
    retain_until: datetime | None = None
    legal_hold: bool = False
    # What protection needs of this object that the catalog has not read: "tags" (the
    # policy selects or protects by tags, the root has them), "lock" (the bucket has
    # Object Lock enabled), or "tags lock"; None: nothing missing. Unknown is protected.
    unread: str | None = None
    # `last_modified` is when the content was written; where govern's own copy in place
    # (a transition, an archive by class) came later, the copy's time, which is when the
    # object entered its storage class (minimum storage durations count from it). None:
    # `last_modified`.
    class_since: datetime | None = None


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class Member:
    """An object inside an artifact, with its role (`Artifact.members`)."""

    obj: CatalogObject
    component: Component


@dataclass(slots=True)
class Artifact:
    """A unit rules act on. `key` is a directory prefix ending in '/' or a single file key.

    Its objects and their roles are two parallel sequences, not a `Member` per object: an
    artifact is built for every checkpoint of a root, and most readers want the objects
    alone. A layout's roles are the same tuple for unit after unit (detectors memoise it),
    so a checkpoint costs one object here whatever its size. `members` pairs them up.
    """

    key: str
    kind: Kind
    layout: str
    objects: list[CatalogObject]
    roles: tuple[Component, ...]  # roles[i] is the component of objects[i]
    run: str | None = None
    step: int | None = None
    complete: bool = True
    completeness_reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    strippable: bool = False
    note: str = ""
    # Incomplete only because the file that says so could not be read: in flight at any
    # age (never residue, which is deleted), until a read tells (`grouping._judge`)
    unjudged: bool = False

    @classmethod
    def of_members(
        cls, key: str, kind: Kind, layout: str, members: Iterable[Member], **fields: Any
    ) -> Artifact:
        """An artifact from (object, component) pairs; `fields` are the other fields."""
        pairs = list(members)
        objects = [m.obj for m in pairs]
        return cls(key, kind, layout, objects, tuple(m.component for m in pairs), **fields)

    @property
    def members(self) -> list[Member]:
        """Each object with its component (a new list: the artifact holds no `Member`)."""
        return [Member(o, c) for o, c in zip(self.objects, self.roles, strict=True)]

    @property
    def bytes(self) -> int:
        return sum([o.size for o in self.objects])

    @property
    def object_count(self) -> int:
        return len(self.objects)

    @property
    def last_modified(self) -> datetime:
        """The newest write among the objects (asked for often: one list, no generator)."""
        objects = self.objects
        if len(objects) == 1:
            return objects[0].last_modified
        if len(objects) == 2:
            first, second = objects[0].last_modified, objects[1].last_modified
            return second if second > first else first  # max(): the first of equals
        return max([o.last_modified for o in objects])

    def components(self) -> dict[str, int]:
        """Bytes per component."""
        out: dict[str, int] = {}
        for o, c in zip(self.objects, self.roles, strict=True):
            out[c.value] = out.get(c.value, 0) + o.size
        return out


@dataclass(slots=True)
class Run:
    """One training run: a key prefix ending in '/', its status with evidence, attributes."""

    key: str
    name: str
    status: RunStatus
    status_reason: str
    last_write: datetime
    attributes: dict[str, str] = field(default_factory=dict)
    best_checkpoint: str | None = None
    # Completed by an earlier plan's record (`SeenCompleted`), its evidence gone since:
    # then only the final checkpoint that plan kept is final (None: gone too, or not known)
    recorded: SeenCompleted | None = None


@dataclass(slots=True)
class Group:
    """What classification yields: one run (or None for objects outside any run) and its artifacts."""

    run: Run | None
    artifacts: list[Artifact]
    unread: tuple[str, ...] = ()
    """Metadata files its classification needed and could not read (`key (why)`): over
    the size limit, or the read failed. What it says of the group (a run's end, a
    checkpoint's metrics, a tracker's step) is not known, so a plan protects the group."""


@dataclass(frozen=True, slots=True)
class SeenCompleted:
    """A run a saved plan saw completed (`catalog.completions`): why, and its last write
    then. While nothing in the run is written later, it is completed still, whatever of
    that evidence an apply removed since (an archived final checkpoint, say)."""

    reason: str
    last_write: datetime
    plan_id: str
    final: str | None = None  # the checkpoint that plan's tiers kept as the run's final


@dataclass(frozen=True, slots=True)
class ClassifyOptions:
    """Everything classification needs from the policy, and the clock it is evaluated at."""

    as_of: datetime
    run_templates: tuple[str, ...] = ()
    completed_markers: tuple[str, ...] = ("COMPLETED", "_SUCCESS")
    failed_markers: tuple[str, ...] = ("FAILED",)
    abandoned_after: timedelta = timedelta(days=7)
    grace: timedelta = timedelta(days=3)
    metadata_max_bytes: int = 64 * 1024 * 1024
    # the root's runs earlier plans saw completed, by run key (the catalog's, per root)
    seen_completed: Mapping[str, SeenCompleted] = field(
        default_factory=dict, compare=False, hash=False
    )


MetaReader = Callable[[CatalogObject], bytes | None]
"""Reads a small metadata object (cached per ETag by the caller); None when unreadable."""
