"""What a plan is: typed actions with reasons, the kept list, a summary, and its identity.

The planner builds a `Plan` in memory (pure: no storage or catalog writes); the catalog
saves it; reports render it; apply executes its actions against their preconditions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from governance.model.types import CatalogObject

if TYPE_CHECKING:
    from governance.history import PlanHistory


class ActionType(StrEnum):
    DELETE = "delete"
    STRIP = "strip"
    TRANSITION = "transition"
    ARCHIVE = "archive"
    DEDUPE = "dedupe"
    ABORT_UPLOAD = "abort_upload"


class PlanStatus(StrEnum):
    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    REJECTED = "rejected"
    APPLIED = "applied"
    PARTIALLY_APPLIED = "partially_applied"
    EXPIRED = "expired"
    REFUSED = "refused"
    WHAT_IF = "what_if"  # made as of a time after it was made: reported on, never applied


WHAT_IF_MARGIN = timedelta(minutes=5)
"""How far `as_of` may lie past a plan's creation (clock skew) before it is a what-if plan."""


class KeptHow(StrEnum):
    WHOLE = "whole"
    STRIPPED = "stripped"
    ARCHIVED = "archived"
    PROTECTED = "protected"
    IN_FLIGHT = "in_flight"
    NO_RULE = "no_rule"
    RULE_KEEPS = "rule_keeps"


ObjectRef = CatalogObject
"""One object an action touches, with the preconditions apply re-checks (size, ETag,
modification time, storage class, version id, upload id): the catalog's own record of it,
held by the plan as the planner read it, not copied (a large plan has a million). Its key
is relative to the action's root: `PlannedAction.uri_of` gives its URL."""


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class ArtifactRef:
    uri: str
    kind: str
    run: str | None
    step: int | None
    root_url: str
    # The artifact's newest write, kept only where a step cannot place it: in a run with a
    # checkpoint that has no step (`last.ckpt`, `model_best.pt`), for each of its
    # artifacts, so reports order that run's checkpoints as the tiers do (`tiers.order_key`),
    # not by name. None elsewhere (and in plans saved before it was kept).
    written: datetime | None = field(default=None, compare=False)


@dataclass(slots=True)
class PlannedAction:
    """One action on one artifact. `objects` are exactly the objects it acts on."""

    id: int
    rule: str
    tier: str | None
    action: ActionType
    destructive: bool
    artifact: ArtifactRef
    objects: list[ObjectRef]
    reason: str
    storage_class: str | None = None  # target class (transition, archive by class)
    dest_url: str | None = None  # archive by copy to another location
    early_deletion_usd: float = 0.0  # minimum-storage-duration charge this action incurs
    request_cost_usd: float = 0.0
    monthly_cost_before_usd: float = 0.0
    monthly_cost_after_usd: float = 0.0

    @property
    def bytes(self) -> int:
        return sum([o.size for o in self.objects])

    def uri_of(self, obj: ObjectRef) -> str:
        """The URL of one of the action's objects (every one is under the action's root)."""
        return self.artifact.root_url + obj.key

    @property
    def object_uris(self) -> list[str]:
        root = self.artifact.root_url
        return [root + o.key for o in self.objects]


REMOVALS = (ActionType.DELETE, ActionType.STRIP, ActionType.DEDUPE)


def in_place_class(action: PlannedAction) -> str | None:
    """The target storage class when the action changes classes by copying onto itself
    (a transition, an archive by class)."""
    if action.action is ActionType.TRANSITION or (
        action.action is ActionType.ARCHIVE and action.dest_url is None
    ):
        return action.storage_class
    return None


def removes_objects(action: PlannedAction) -> bool:
    """Whether the action takes objects away from where they are (so `apply.delete_mode`
    decides whether they can come back): apply acts on it, reports tell reviewers."""
    return action.action in REMOVALS or (
        action.action is ActionType.ARCHIVE and action.dest_url is not None
    )


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class KeptArtifact:
    """An artifact the plan leaves in place (or keeps in a reduced form), and why."""

    artifact: ArtifactRef
    rule: str | None
    tier: str | None
    how: KeptHow
    reason: str


@dataclass(slots=True)
class RuleSummary:
    actions: int = 0
    objects: int = 0
    bytes_deleted: int = 0
    bytes_transitioned: int = 0
    bytes_archived: int = 0


@dataclass(slots=True)
class LeftSummary:
    """Artifacts of one kind that a rule (or no rule) leaves as they are, and that neither
    an action nor the kept list names: logs not due yet, files matching no rule. Counted,
    not listed one by one (a bucket can hold millions); `govern explain` tells any one's
    story."""

    rule: str | None
    kind: str
    artifacts: int = 0
    bytes: int = 0
    example_uri: str = ""  # the first of them by URI,
    example_reason: str = ""  # and why it is left: "no transition due: 12 days old, ..."


@dataclass(slots=True)
class PlanSummary:
    actions: int = 0
    objects: int = 0
    bytes_deleted: int = 0
    bytes_transitioned: int = 0
    bytes_archived: int = 0
    early_deletion_usd: float = 0.0
    request_cost_usd: float = 0.0
    monthly_cost_before_usd: float = 0.0
    monthly_cost_after_usd: float = 0.0
    by_rule: dict[str, RuleSummary] = field(default_factory=dict)
    left: list[LeftSummary] = field(default_factory=list)  # by rule then kind


class CompletedRun(NamedTuple):
    """A run a plan saw completed (keys relative to the root)."""

    key: str
    reason: str  # the evidence, as the run's status reason says
    last_write: datetime
    final: str | None  # the checkpoint its tiers kept as the run's final, if any


class QuietRun(NamedTuple):
    """A run a plan read as failed or abandoned and removes from (key relative to the
    root): what it removes rests on the run having stopped, so apply checks that nothing
    was written in it after `live_after` (`catalog.quiet_runs`)."""

    key: str
    status: str  # failed | abandoned
    last_write: datetime
    live_after: datetime
    """A write after this shows the run alive: after its last write, and within the
    policy's `abandoned_after` of the plan's `as_of` (a write older than that would have
    left it abandoned, and a failed run's expiry due)."""


class BestArchived(NamedTuple):
    """A run's best checkpoint by a metric that the plan archives to another location
    (keys relative to the root): recorded with the plan (`catalog.bests`), and once its
    archive action is carried out, later plans compare what is left with it."""

    run_key: str
    metric: str
    mode: str  # min | max
    value: float
    step: int | None
    key: str
    action: PlannedAction  # its archive (the id is the plan's, once numbered)


@dataclass(slots=True)
class Plan:
    """A whole plan. `fingerprint` is over the canonical action list (see plan.fingerprint)."""

    plan_id: str
    fingerprint: str
    as_of: datetime
    created_at: datetime
    created_by: str
    policy_path: str | None
    policy_sha256: str | None
    status: PlanStatus
    scans: dict[str, int]  # root URL -> the scan id the plan was made from
    actions: list[PlannedAction]
    kept: list[KeptArtifact]
    summary: PlanSummary
    refusal: str | None = None  # which safety limit, by how much
    notes: list[str] = field(
        default_factory=list
    )  # e.g. transitions not applicable on a filesystem
    controls: dict[str, Any] = field(default_factory=dict)
    """The policy's `approval` and `apply` blocks as JSON, frozen at plan time: who may
    approve and how deletes are carried out cannot change after the plan is reviewed."""
    history: PlanHistory | None = None
    """What happened to it since it was made (`govern show` reads it; a new plan has none)."""
    completed_runs: dict[str, list[CompletedRun]] = field(default_factory=dict)
    """Root URL -> each run it saw completed: saved with it (`catalog.completions`), so an
    apply that removes that evidence (an archived final checkpoint) does not make the run
    read as abandoned. Not part of its identity."""
    quiet_runs: dict[str, list[QuietRun]] = field(default_factory=dict)
    """Root URL -> each failed or abandoned run the plan removes from: saved with it, and
    re-checked by apply. Not part of its identity."""
    bests_archived: dict[str, list[BestArchived]] = field(default_factory=dict)
    """Root URL -> each run's best checkpoint the plan archives away: saved with it. Not
    part of its identity."""
