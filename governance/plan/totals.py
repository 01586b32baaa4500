"""A plan's totals: the summary per rule and in all, and the bytes each action removes.

`build_plan` adds each group's actions as they are decided, while they are still in the
processor's cache, instead of walking the whole plan again at the end. Counts and bytes
are integers (any order gives the same totals), but the costs are float sums, whose last
bits depend on the order: a `Totals` holds the summary of its actions in the order they
were added, so the plan's summary is that only when the plan keeps that order.

Example::

    totals = Totals()
    removed = totals.add(actions)   # bytes the actions remove from their root
    summary = totals.summary(storage_cost_usd=1234.5)
"""

from __future__ import annotations

from collections.abc import Iterable

from governance.plan.limits import REMOVING
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    LeftSummary,
    PlannedAction,
    PlanSummary,
    RuleSummary,
)

_TRANSITION, _ARCHIVE = ActionType.TRANSITION, ActionType.ARCHIVE


class Totals:
    """Per-rule counts and cost sums of the actions added so far, in the order added."""

    __slots__ = ("_after", "_before", "_early", "_per_rule", "_request", "moved")

    def __init__(self) -> None:
        # rule -> [actions, objects, deleted, transitioned, archived]
        self._per_rule: dict[str, list[int]] = {}
        self._early: float = 0.0
        self._request: float = 0.0
        self._before: float = 0.0
        self._after: float = 0.0
        self.moved = 0  # of the bytes removed, those an archive copies to another location

    def add(self, actions: Iterable[PlannedAction]) -> int:
        """Count `actions` in; returns the bytes they remove from their root (as
        `limits.deleted_bytes` counts them: an archive by copy removes its objects too)."""
        per_rule = self._per_rule
        early, request = self._early, self._request
        before, after = self._before, self._after
        transition, archive, removing = _TRANSITION, _ARCHIVE, REMOVING
        removed = 0
        for a in actions:
            counts = per_rule.get(a.rule)
            if counts is None:
                counts = per_rule[a.rule] = [0, 0, 0, 0, 0]
            objects = a.objects
            counts[0] += 1
            counts[1] += len(objects)
            size = 0
            for o in objects:  # (a loop: cheaper than sum() for an action's few objects)
                size += o.size
            kind = a.action
            counts[3 if kind is transition else 4 if kind is archive else 2] += size
            if kind in removing:
                removed += size
            elif kind is archive and a.dest_url is not None:
                removed += size
                self.moved += size
            early += a.early_deletion_usd
            request += a.request_cost_usd
            before += a.monthly_cost_before_usd
            after += a.monthly_cost_after_usd
        self._early, self._request = early, request
        self._before, self._after = before, after
        return removed

    def summary(self, storage_cost_usd: float | None = None) -> PlanSummary:
        """The summary; with `storage_cost_usd` (the roots' whole monthly bill) the monthly
        costs are the roots' bill before and after the plan, else the acted-on objects'
        share alone."""
        summary = PlanSummary(
            early_deletion_usd=self._early,
            request_cost_usd=self._request,
            monthly_cost_before_usd=self._before,
            monthly_cost_after_usd=self._after,
        )
        for rule, counts in self._per_rule.items():
            summary.by_rule[rule] = RuleSummary(*counts)
            summary.actions += counts[0]
            summary.objects += counts[1]
            summary.bytes_deleted += counts[2]
            summary.bytes_transitioned += counts[3]
            summary.bytes_archived += counts[4]
        if storage_cost_usd is not None:
            saved = summary.monthly_cost_before_usd - summary.monthly_cost_after_usd
            summary.monthly_cost_before_usd = storage_cost_usd
            summary.monthly_cost_after_usd = max(storage_cost_usd - saved, 0.0)
        return summary


def summarize(
    actions: Iterable[PlannedAction], storage_cost_usd: float | None = None
) -> PlanSummary:
    """Totals and per-rule totals of `actions`, costs summed in their order; archive by
    copy counts as archived, not deleted (see `Totals.summary` for `storage_cost_usd`)."""
    totals = Totals()
    totals.add(actions)
    return totals.summary(storage_cost_usd)


class Left:
    """The artifacts a plan neither acts on nor keeps by name, counted by rule and kind
    (`PlanSummary.left`), each count with its first artifact by URI as the example, so
    that any input order gives the same summary."""

    __slots__ = ("_by",)

    def __init__(self) -> None:
        self._by: dict[tuple[str | None, str], LeftSummary] = {}

    def add(self, rule: str | None, ref: ArtifactRef, size: int, reason: str) -> None:
        found = self._by.get((rule, ref.kind))
        if found is None:
            found = self._by[(rule, ref.kind)] = LeftSummary(rule, ref.kind)
        found.artifacts += 1
        found.bytes += size
        if not found.example_uri or ref.uri < found.example_uri:
            found.example_uri, found.example_reason = ref.uri, reason or "no rule matches"

    def summaries(self) -> list[LeftSummary]:
        """By rule (no rule last), then kind."""
        return [
            self._by[k] for k in sorted(self._by, key=lambda k: (k[0] is None, k[0] or "", k[1]))
        ]
