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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum


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
    """One live object as the catalog holds it (key relative to its root)."""

    key: str
    size: int
    last_modified: datetime
    etag: str
    storage_class: str | None = None
    version_id: str | None = None
    upload_id: str = ""
    tags: Mapping[str, str] | None = None
    object_id: int | None = None


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class Member:
    """An object inside an artifact, with its role."""

    obj: CatalogObject
    component: Component


@dataclass(slots=True)
class Artifact:
    """A unit rules act on. `key` is a directory prefix ending in '/' or a single file key."""

    key: str
    kind: Kind
    layout: str
    members: list[Member]
    run: str | None = None
    step: int | None = None
    complete: bool = True
    completeness_reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    strippable: bool = False
    note: str = ""

    @property
    def bytes(self) -> int:
        return sum([m.obj.size for m in self.members])

    @property
    def object_count(self) -> int:
        return len(self.members)

    @property
    def last_modified(self) -> datetime:
        """The newest write among the members (asked for often: one list, no generator)."""
        members = self.members
        if len(members) == 1:
            return members[0].obj.last_modified
        if len(members) == 2:
            first, second = members[0].obj.last_modified, members[1].obj.last_modified
            return second if second > first else first  # max(): the first of equals
        return max([m.obj.last_modified for m in members])

    def components(self) -> dict[str, int]:
        """Bytes per component."""
        out: dict[str, int] = {}
        for m in self.members:
            out[m.component.value] = out.get(m.component.value, 0) + m.obj.size
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


@dataclass(slots=True)
class Group:
    """What classification yields: one run (or None for objects outside any run) and its artifacts."""

    run: Run | None
    artifacts: list[Artifact]


@dataclass(frozen=True, slots=True)
class ClassifyOptions:
    """Everything classification needs from the policy, and the clock it is evaluated at."""

    as_of: datetime
    run_templates: tuple[str, ...] = ()
    completed_markers: tuple[str, ...] = ("COMPLETED", "_SUCCESS")
    failed_markers: tuple[str, ...] = ("FAILED",)
    abandoned_after: timedelta = timedelta(days=7)
    grace: timedelta = timedelta(days=3)
    metadata_max_bytes: int = 4 * 1024 * 1024


MetaReader = Callable[[CatalogObject], bytes | None]
"""Reads a small metadata object (cached per ETag by the caller); None when unreadable."""
