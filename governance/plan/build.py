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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
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


def _kept_sort_key(k: KeptArtifact) -> tuple[str, str]:
    return (k.artifact.root_url, k.artifact.uri)


def _in_plan_order(actions: list[PlannedAction]) -> bool:
    """Whether sorting by `_action_sort_key` (stable) would leave `actions` as they are.

    Groups arrive in key order almost always, so their actions do too: comparing
    neighbours (by artifact URI first, the sort key only on a tie of root and URI) is
    cheaper than building a key per action and sorting.
    """
    for a, b in pairwise(actions):
        x, y = a.artifact, b.artifact
        if x.root_url == y.root_url and x.uri < y.uri:
            continue
        if _action_sort_key(a) > _action_sort_key(b):
            return False
    return True


def summarize(
    actions: Iterable[PlannedAction], storage_cost_usd: float | None = None
) -> PlanSummary:
    """Totals and per-rule totals; archive by copy counts as archived, not deleted.

    With `storage_cost_usd` (the roots' whole monthly bill) the monthly costs are the
    roots' bill before and after the plan; without it, only the acted-on objects' share.
    Counts and bytes are integers (any order gives the same totals); the costs are summed
    action by action in the given order, as floats must be for the same result.
    """
    per_rule: dict[str, list[int]] = {}  # actions, objects, deleted, transitioned, archived
    early = request = before = after = 0.0
    transition, archive = ActionType.TRANSITION, ActionType.ARCHIVE
    for a in actions:
        counts = per_rule.get(a.rule)
        if counts is None:
            counts = per_rule[a.rule] = [0, 0, 0, 0, 0]
        objects = a.objects
        counts[0] += 1
        counts[1] += len(objects)
        size = sum([o.size for o in objects])
        kind = a.action
        counts[3 if kind is transition else 4 if kind is archive else 2] += size
        early += a.early_deletion_usd
        request += a.request_cost_usd
        before += a.monthly_cost_before_usd
        after += a.monthly_cost_after_usd
    summary = PlanSummary(
        early_deletion_usd=early,
        request_cost_usd=request,
        monthly_cost_before_usd=before,
        monthly_cost_after_usd=after,
    )
    for rule, counts in per_rule.items():
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
    with _settled_collections() as settle:
        return _build(roots, policy, as_of, plan_id, created_by, created_at, settle)


@contextmanager
def _settled_collections(young: int = 10_000) -> Iterator[Callable[[], None]]:
    """Keep the cyclic GC off what the plan already holds; yields `settle`, called after
    each group.

    Planning (with the classification it streams) allocates millions of small objects,
    and what a group adds to the plan (actions, objects, kept artifacts) lives to the end:
    traversed again by every young and full collection, that was a tenth of a large
    build. `settle` moves every object alive between two groups into the permanent
    generation (`gc.freeze`, constant time), so collections only ever look at the group
    in hand; the plan itself makes no reference cycles, and anything frozen is handed
    back to the oldest generation (`gc.unfreeze`) when the build ends. Young collections
    still run, every `young` allocations instead of 700. When the caller froze objects
    of its own, only the threshold changes (unfreezing would release theirs too).
    """
    old = gc.get_threshold()
    if 0 < old[0] < young:
        gc.set_threshold(young, *old[1:])
    freezing = gc.isenabled() and gc.get_freeze_count() == 0
    try:
        yield gc.freeze if freezing else _no_settle
    finally:
        if freezing:
            gc.unfreeze()
        gc.set_threshold(*old)


def _no_settle() -> None:
    return None


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
    settle: Callable[[], None] = _no_settle,
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
            settle()
        deleted[root.url] = removed
    if not _in_plan_order(actions):
        actions.sort(key=_action_sort_key)
    for i, a in enumerate(actions, start=1):
        a.id = i
    kept.sort(key=_kept_sort_key)
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
