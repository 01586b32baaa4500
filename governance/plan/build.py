"""build_plan: roots' classifications + policy + as_of -> a fingerprinted `Plan`. Pure.

Groups are consumed one at a time (see `decide.Decider`); only the actions and the
kept list the plan outputs are held. The output is sorted canonically (root URL, artifact
key, action order), so the same catalog, policy and `as_of` give the same plan whatever
order the groups and artifacts arrive in (invariant 6).

Example::

    plan = build_plan(
        [RootSnapshot("s3://b/", scan_id=7, total_bytes=10**12,
                      supports_storage_classes=True, groups=classify(...))],
        policy, as_of, plan_id="p-1", created_by="ana", created_at=now,
    )
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governance.model.types import Group
from governance.plan.costs import GB
from governance.plan.decide import Decider
from governance.plan.fingerprint import fingerprint
from governance.plan.limits import deleted_bytes, refusal
from governance.plan.types import (
    ActionType,
    KeptArtifact,
    Plan,
    PlannedAction,
    PlanStatus,
    PlanSummary,
    RuleSummary,
)
from governance.policy.models import Policy

_ACTION_ORDER = {t: i for i, t in enumerate(ActionType)}
"""Within one artifact: strip before archive (archive moves what the strip leaves)."""


@dataclass(frozen=True)
class RootSnapshot:
    """One root as the planner sees it: its URL, scan, size and classification stream."""

    url: str  # normalized root URL ending in '/', e.g. "s3://b/" or "file:///data/"
    scan_id: int
    total_bytes: int  # live bytes of the root (for max_delete_fraction)
    supports_storage_classes: bool  # False on filesystems: class changes are not applicable
    groups: Iterable[Group]  # the root's classification, streamed run by run


def _action_sort_key(a: PlannedAction) -> tuple[str, str, int, str]:
    return (a.artifact.root_url, a.artifact.uri, _ACTION_ORDER[a.action], a.objects[0].uri)


def summarize(
    actions: Iterable[PlannedAction], storage_cost_usd: float | None = None
) -> PlanSummary:
    """Totals and per-rule totals; archive by copy counts as archived, not deleted.

    With `storage_cost_usd` (the roots' whole monthly bill) the monthly costs are the
    roots' bill before and after the plan; without it, only the acted-on objects' share.
    """
    summary = PlanSummary()
    for a in actions:
        rule = summary.by_rule.setdefault(a.rule, RuleSummary())
        deleted = a.bytes if a.action not in (ActionType.TRANSITION, ActionType.ARCHIVE) else 0
        transitioned = a.bytes if a.action is ActionType.TRANSITION else 0
        archived = a.bytes if a.action is ActionType.ARCHIVE else 0
        for s in (summary, rule):
            s.actions += 1
            s.objects += len(a.objects)
            s.bytes_deleted += deleted
            s.bytes_transitioned += transitioned
            s.bytes_archived += archived
        summary.early_deletion_usd += a.early_deletion_usd
        summary.request_cost_usd += a.request_cost_usd
        summary.monthly_cost_before_usd += a.monthly_cost_before_usd
        summary.monthly_cost_after_usd += a.monthly_cost_after_usd
    if storage_cost_usd is not None:
        saved = summary.monthly_cost_before_usd - summary.monthly_cost_after_usd
        summary.monthly_cost_before_usd = storage_cost_usd
        summary.monthly_cost_after_usd = max(storage_cost_usd - saved, 0.0)
    return summary


def policy_controls(policy: Policy) -> dict[str, Any]:
    """The blocks that govern approval and apply, frozen into the plan."""
    return {
        "approval": policy.approval.model_dump(mode="json"),
        "apply": policy.apply.model_dump(mode="json"),
    }


def build_plan(
    roots: Iterable[RootSnapshot],
    policy: Policy,
    as_of: datetime,
    *,
    plan_id: str,
    created_by: str,
    created_at: datetime,
) -> Plan:
    """Plan every root's groups under `policy` at `as_of`; never touches storage."""
    if as_of.tzinfo is None:
        raise ValueError("as_of must be timezone-aware (UTC)")
    with _fewer_collections():
        return _build(roots, policy, as_of, plan_id, created_by, created_at)


@contextmanager
def _fewer_collections(young: int = 10_000) -> Iterator[None]:
    """Let the cyclic GC collect young objects every `young` allocations, not every 700.

    Planning (with the classification it streams) allocates millions of small objects
    that outlive a young collection (objects, members, artifacts, actions): at the default
    threshold each is traversed again and again, about a sixth of the build. Collections
    still run; the threshold is restored afterwards.
    """
    old = gc.get_threshold()
    if 0 < old[0] < young:
        gc.set_threshold(young, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _tally_classes(group: Group, class_bytes: Counter[str]) -> None:
    """Add the group's bytes per storage class (an empty class is STANDARD) to the tally."""
    for art in group.artifacts:
        for m in art.members:
            o = m.obj
            class_bytes[o.storage_class or "STANDARD"] += o.size


def _build(
    roots: Iterable[RootSnapshot],
    policy: Policy,
    as_of: datetime,
    plan_id: str,
    created_by: str,
    created_at: datetime,
) -> Plan:
    actions: list[PlannedAction] = []
    kept: list[KeptArtifact] = []
    scans: dict[str, int] = {}
    totals: dict[str, int] = {}
    deleted: dict[str, int] = {}
    not_applicable: Counter[tuple[str, str, str]] = Counter()
    class_bytes: Counter[str] = Counter()  # integers: the bill must not depend on input order
    for root in roots:
        scans[root.url] = root.scan_id
        totals[root.url] = root.total_bytes
        removed = deleted.setdefault(root.url, 0)
        decider = Decider(policy, as_of, root.url, root.supports_storage_classes)
        for group in root.groups:
            _tally_classes(group, class_bytes)
            result = decider.decide(group)
            for d in result.decisions:
                for a in d.actions:
                    actions.append(a)
                    removed += deleted_bytes(a)
                if d.kept is not None:
                    kept.append(d.kept)
            for rule, what in result.not_applicable:
                not_applicable[(root.url, rule, what)] += 1
        deleted[root.url] = removed
    actions.sort(key=_action_sort_key)
    for i, a in enumerate(actions, start=1):
        a.id = i
    kept.sort(key=lambda k: (k.artifact.root_url, k.artifact.uri))
    notes = [
        f"root {root}: {what} (rule {rule}) is not applicable, the root has no storage "
        f"classes; {n} artifact(s) left as they are"
        for (root, rule, what), n in sorted(not_applicable.items())
    ]
    # The roots' whole monthly bill, so the summary shows the bill before -> after.
    storage_cost = sum(policy.price(sc) * n / GB for sc, n in sorted(class_bytes.items()))
    refused = refusal(deleted, totals, policy.safety)
    if refused is not None:
        status = PlanStatus.REFUSED
    elif any(policy.requires_approval(a.action.value) for a in actions):
        status = PlanStatus.PENDING_APPROVAL
    else:
        status = PlanStatus.APPROVED
    return Plan(
        plan_id=plan_id,
        fingerprint=fingerprint(actions, kept),
        as_of=as_of,
        created_at=created_at,
        created_by=created_by,
        policy_path=str(policy.source_path) if policy.source_path is not None else None,
        policy_sha256=policy.source_sha256,
        status=status,
        scans=scans,
        actions=actions,
        kept=kept,
        summary=summarize(actions, storage_cost),
        refusal=refused,
        notes=notes,
        controls=policy_controls(policy),
    )
