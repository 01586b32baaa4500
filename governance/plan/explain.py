"""`govern explain URL`: why one artifact is kept or acted on (invariant 5).

Runs exactly the planner's decision for the group that holds the artifact, with tracing
on, so the explanation can never disagree with the plan. Groups before it are only
checked for the URI, not decided.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from governance.errors import ArgumentError
from governance.model.types import Artifact, Group
from governance.plan.build import RootSnapshot
from governance.plan.decide import TracedDecision, decide_group
from governance.plan.types import ActionType, PlannedAction
from governance.policy.models import Policy


@dataclass
class Explanation:
    """Everything `explain` prints about one artifact."""

    uri: str
    kind: str
    run: str | None
    run_status: str | None
    step: int | None
    complete: bool
    protected_by: str | None
    rule: str | None
    rules_considered: list[tuple[str, str]] = field(default_factory=list)
    tiers: list[tuple[str, str]] = field(default_factory=list)
    decision: str = ""
    reason: str = ""
    # When the URL named one object of a folder artifact: that object, and what the plan
    # does with it (a strip removes some of a checkpoint's objects and keeps the rest).
    object: str | None = None
    object_fate: str | None = None


def _holds(art: Artifact, key: str) -> bool:
    """The artifact's own key (with or without its trailing '/') or one of its objects."""
    if art.key == key or art.key.rstrip("/") == key.rstrip("/"):
        return True
    if art.key.endswith("/") and key.startswith(art.key):
        return any(o.key == key for o in art.objects)
    return False


def _find(group: Group, key: str) -> Artifact | None:
    return next((a for a in group.artifacts if _holds(a, key)), None)


def _object_of(d: TracedDecision, target: Artifact, root: str, key: str) -> dict[str, str]:
    """`object` and `object_fate` of an `Explanation` when `key` is one object of the
    folder artifact `target` (else nothing): the actions that take that object, in words,
    or that it stays while the artifact's other objects are acted on."""
    if target.key.rstrip("/") == key.rstrip("/"):
        return {}
    acting = [a for a in d.actions if any(o.key == key for o in a.objects)]
    if acting:
        fate = "; ".join(_acted(a) for a in acting)
    elif d.actions:
        what = " + ".join(a.action.value for a in d.actions)
        fate = f"stays: not one of the objects the {what} acts on"
    else:
        fate = "stays, with its artifact"
    return {"object": root + key, "object_fate": fate}


def _acted(a: PlannedAction) -> str:
    """What action `a` does to each of its objects, in words."""
    if a.action is ActionType.TRANSITION:
        return f"transitioned to {a.storage_class}"
    if a.action is ActionType.ARCHIVE:
        return (
            f"archived to {a.storage_class}"
            if a.dest_url is None
            else (f"copied to {a.dest_url}, then removed here")
        )
    return {
        ActionType.DELETE: "deleted",
        ActionType.STRIP: "removed by the strip (the checkpoint's other objects stay)",
        ActionType.DEDUPE: "removed as a duplicate",
        ActionType.ABORT_UPLOAD: "its incomplete upload aborted",
    }[a.action]


def explain(
    roots: Iterable[RootSnapshot], policy: Policy, as_of: datetime, uri: str
) -> Explanation:
    """Explain the artifact at `uri` (or the artifact holding the object at `uri`).

    Raises `ArgumentError` when no artifact of the given roots has that URI.
    """
    runs: list[str] = []  # runs at or under `uri`: a run folder is not one artifact
    for root in roots:
        if not uri.startswith(root.url):
            continue
        key = uri[len(root.url) :]
        folder = key if key.endswith("/") or not key else key + "/"
        for group in root.groups:
            target = _find(group, key)
            if target is None:
                if group.run is not None and group.run.key.startswith(folder):
                    runs.append(group.run.name)
                continue
            result = decide_group(
                group,
                root.url,
                root.supports_storage_classes,
                policy,
                as_of,
                trace=True,
                links=root.links,
                restored=root.restored,
                archived_bests=root.archived_bests,
            )
            d = next(x for x in result.decisions if x.artifact is target)
            assert isinstance(d, TracedDecision)
            run = group.run
            return Explanation(
                uri=d.ref.uri,
                kind=target.kind.value,
                run=d.ref.run,
                run_status=run.status.value if run is not None else None,
                step=target.step,
                complete=target.complete,
                protected_by=d.protected_by,
                rule=d.rule,
                rules_considered=d.rules_considered,
                tiers=d.tiers,
                decision=d.decision,
                reason=d.reason or (d.kept.reason if d.kept is not None else ""),
                **_object_of(d, target, root.url, key),
            )
    hint = ""
    if runs:
        shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
        hint = (
            f"; it holds {'run' if len(runs) == 1 else 'runs'} {shown}: explain one of their artifacts or objects "
            f"(`govern ls artifacts --run {runs[0]}` lists them)"
        )
    raise ArgumentError(f"no artifact or object with URI {uri} in the catalog of these roots{hint}")
