"""The decision for every artifact of one group (one run): the heart of the planner.

Order of evaluation, per policy.md:

1. protections (`protect.py`): a protected artifact is kept, never acted on, but a
   protected complete checkpoint still counts for its rule's tiers;
2. incomplete checkpoints are in flight: kept, never counted;
3. the first rule whose selector matches owns the artifact (expire and transition rules
   skip runs in `protect.run_status`; tier rules only own checkpoints);
4. expire / transition, or the tiers of the run's complete checkpoints;
5. invariant 1, a final guard: the newest complete checkpoint of a run that is not failed
   or abandoned is never deleted, whatever the policy says.

Both `build_plan` and `explain` use `decide_group`; `trace=True` records the rules and
tiers considered for each artifact (only `explain` pays for those strings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from governance.model.types import (
    Artifact,
    CatalogObject,
    Component,
    Group,
    Kind,
    Member,
    Run,
    RunStatus,
)
from governance.plan import tiers as tiering
from governance.plan.costs import MIN_TRANSITION_BYTES, apply_costs, coldness
from governance.plan.protect import protection, shielded_from_expiry
from governance.plan.selectors import Subject, artifact_age, describe, human_age, mismatch
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    PlannedAction,
)
from governance.policy.fields import DESTRUCTIVE_ACTIONS
from governance.policy.models import Policy, Rule, Tier
from governance.policy.units import format_bytes, format_duration

_DEAD = (RunStatus.FAILED, RunStatus.ABANDONED)
_DESTRUCTIVE = frozenset(t for t in ActionType if t.value in DESTRUCTIVE_ACTIONS)
_KIND_NAME = {k: k.value for k in Kind}
_CLASSES: dict[str | None, str | None] = {None: None}
"""Storage class names the plan holds, one string each (every row brings its own copy)."""


@dataclass(slots=True)
class Decision:
    """What the plan does with one artifact, and (when traced) how it got there."""

    artifact: Artifact
    ref: ArtifactRef
    subject: Subject
    protected_by: str | None = None
    rule: str | None = None
    actions: list[PlannedAction] = field(default_factory=list)
    kept: KeptArtifact | None = None
    reason: str = ""
    rules_considered: list[tuple[str, str]] = field(default_factory=list)
    tiers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def decision(self) -> str:
        """'delete', 'strip + archive', 'kept (whole)', or 'no action'."""
        if self.actions:
            return " + ".join(a.action.value for a in self.actions)
        if self.kept is not None:
            return f"kept ({self.kept.how.value})"
        return "no action"

    def keep(self, rule: str | None, tier: str | None, how: KeptHow, reason: str) -> None:
        self.kept = KeptArtifact(self.ref, rule, tier, how, reason)
        self.reason = reason


@dataclass(slots=True)
class GroupResult:
    decisions: list[Decision]
    not_applicable: list[tuple[str, str]]  # (rule, what): class changes on a filesystem root


@dataclass(frozen=True, slots=True)
class _Ctx:
    policy: Policy
    as_of: datetime
    root_url: str
    classes: bool
    trace: bool
    not_applicable: list[tuple[str, str]]


def _label(a: Artifact) -> str:
    return f"step {a.step}" if a.step is not None else a.key


def _action(
    ctx: _Ctx,
    d: Decision,
    rule: str,
    tier: str | None,
    kind: ActionType,
    members: Sequence[Member],
    reason: str,
    *,
    storage_class: str | None = None,
    dest_url: str | None = None,
) -> PlannedAction:
    root_url = ctx.root_url
    objs = [m.obj for m in members]
    if len(objs) > 1:
        objs.sort(key=_OBJ_ORDER)
    objects = [
        ObjectRef(
            root_url + o.key,
            o.key,
            o.size,
            o.etag,
            o.last_modified,
            _CLASSES.setdefault(o.storage_class, o.storage_class),  # one string per class
            o.version_id,
            o.upload_id,
        )
        for o in objs
    ]
    action = PlannedAction(
        id=0,
        rule=rule,
        tier=tier,
        action=kind,
        destructive=kind in _DESTRUCTIVE,
        artifact=d.ref,
        objects=objects,
        reason=reason,
        storage_class=storage_class,
        dest_url=dest_url,
    )
    apply_costs(action, ctx.policy, ctx.as_of)
    d.actions.append(action)
    d.reason = d.reason or reason
    return action


def _obj_order(o: CatalogObject) -> tuple[str, str]:
    return (o.key, o.upload_id)


_OBJ_ORDER = _obj_order


def _movable(members: Sequence[Member], target: str) -> tuple[list[Member], list[str]]:
    """Members to move to `target` (down the waterfall only), and why the others stay."""
    goal = coldness(target)
    assert goal is not None
    minimum = MIN_TRANSITION_BYTES.get(target, 0)
    move: list[Member] = []
    small = colder = unknown = 0
    for m in members:
        here = coldness(m.obj.storage_class)
        if m.obj.upload_id or here is None:
            unknown += 1
        elif here >= goal:
            colder += 1
        elif m.obj.size < minimum:
            small += 1
        else:
            move.append(m)
    stays: list[str] = []
    if colder:
        stays.append(f"{colder} object(s) already in {target} or colder")
    if small:
        stays.append(
            f"{small} object(s) under {format_bytes(minimum)} stay where they are "
            f"({target} bills a minimum object size)"
        )
    if unknown:
        stays.append(f"{unknown} object(s) in a class outside the waterfall stay")
    return move, stays


def _expire_or_transition(ctx: _Ctx, d: Decision, rule: Rule, run: Run | None) -> None:
    s, art = d.subject, d.artifact
    not_due = ""
    if rule.expire is not None:
        after = format_duration(rule.expire.after)
        if rule.select.run_status is not None and run is not None:
            elapsed = ctx.as_of - run.last_write
            what = f"run {run.name} ({run.status.value}) last written {human_age(elapsed)} ago"
        else:
            elapsed, what = s.age, f"last written {human_age(s.age)} ago"
        if elapsed >= rule.expire.after:
            reason = f"expired: {what}, rule {rule.name} expires after {after}"
            uploads = [m for m in art.members if m.obj.upload_id]
            plain = [m for m in art.members if not m.obj.upload_id]
            if uploads:
                _action(ctx, d, rule.name, None, ActionType.ABORT_UPLOAD, uploads, reason)
            if plain:
                _action(ctx, d, rule.name, None, ActionType.DELETE, plain, reason)
            return
        not_due = f"not expired yet: {what}, rule {rule.name} expires after {after}"
    if not rule.transition:
        d.reason = not_due
        return
    due = [step for step in rule.transition if s.age >= step.after]
    if not due:
        first = rule.transition[0]
        d.reason = "; ".join(
            filter(None, [f"no transition due: {human_age(s.age)} old, rule {rule.name} "
                          f"moves it after {format_duration(first.after)}", not_due])
        )  # fmt: skip
        return
    step = due[-1]
    target = step.storage_class.value
    head = (
        f"transition to {target}: {human_age(s.age)} old, rule {rule.name} moves it to "
        f"{target} after {format_duration(step.after)}"
    )
    if not ctx.classes:
        ctx.not_applicable.append((rule.name, f"transition to {target}"))
        d.reason = f"{head}, but the root has no storage classes: not applicable"
        return
    move, stays = _movable(art.members, target)
    reason = "; ".join([head, *stays])
    if move:
        _action(ctx, d, rule.name, None, ActionType.TRANSITION, move, reason, storage_class=target)
    else:
        d.reason = f"nothing to move: {reason}"


def _keep_by_tier(ctx: _Ctx, d: Decision, rule: Rule, tier: Tier, why: str) -> None:
    """Keep a checkpoint the way its first selecting tier says: whole, stripped, archived."""
    art = d.artifact
    notes: list[str] = []
    remaining: list[Member] = list(art.members)
    drop: list[Member] = []
    how = KeptHow.WHOLE
    if tier.strips:
        assert tier.keep_components is not None
        keep = set(tier.keep_components)
        unwanted = [m for m in art.members if m.component not in keep]
        if not art.strippable:  # one Lightning .ckpt, one DCP shard set: state is inside
            notes.append(
                "kept whole: it cannot be stripped (optimizer state is not in separate files)"
            )
        elif not unwanted:
            notes.append("kept whole (it has no other components)")
        else:
            drop = unwanted
            remaining = [m for m in art.members if m.component in keep]
            dropped = [c.value for c in Component if any(m.component is c for m in drop)]
            notes.append(f"{', '.join(dropped)} dropped")
            how = KeptHow.STRIPPED
    else:
        notes.append("kept whole")
    archiving: tuple[ActionType, list[Member], str | None, str | None] | None = None
    if tier.archive is not None:
        if tier.archive.url is not None:
            dest = tier.archive.url + art.key
            notes.append(f"archived: copied to {dest}, then removed here")
            archiving = (ActionType.ARCHIVE, remaining, None, dest)
        elif not ctx.classes:
            target = tier.archive.storage_class.value if tier.archive.storage_class else "?"
            ctx.not_applicable.append((rule.name, f"archive to {target}"))
            notes.append(f"archive to {target} not applicable: the root has no storage classes")
        elif tier.archive.storage_class is not None:
            target = tier.archive.storage_class.value
            move, stays = _movable(remaining, target)
            if move:
                notes.append(f"archived to {target}")
                archiving = (ActionType.ARCHIVE, move, target, None)
            notes += stays
    reason = f"{tier.name} tier: {why}; " + "; ".join(notes)
    if drop:
        _action(ctx, d, rule.name, tier.name, ActionType.STRIP, drop, reason)
    if archiving is not None:
        kind, members, cls, dest_url = archiving
        _action(
            ctx,
            d,
            rule.name,
            tier.name,
            kind,
            members,
            reason,
            storage_class=cls,
            dest_url=dest_url,
        )
        how = KeptHow.ARCHIVED
    d.keep(rule.name, tier.name, how, reason)


def _apply_tiers(ctx: _Ctx, rule: Rule, members: list[Decision], run: Run | None) -> None:
    assert rule.tiers is not None
    outcome = tiering.select(
        rule.tiers, [d.artifact for d in members], run, ctx.as_of, trace=ctx.trace
    )
    names = ", ".join(t.name for t in rule.tiers)
    for d in members:
        picks = outcome.picks.get(d.artifact.key, [])
        d.tiers = outcome.trace.get(d.artifact.key, [])
        if d.protected_by is not None:
            counted = f"; counted by the {rule.tiers[picks[0][0]].name} tier" if picks else ""
            d.keep(rule.name, None, KeptHow.PROTECTED, f"protected: {d.protected_by}{counted}")
        elif picks:
            index, why = picks[0]
            _keep_by_tier(ctx, d, rule, rule.tiers[index], why)
        elif rule.otherwise == "delete":
            reason = (
                f"{rule.name}: {_label(d.artifact)} is not kept by any tier ({names}); "
                "otherwise: delete"
            )
            _action(ctx, d, rule.name, None, ActionType.DELETE, d.artifact.members, reason)
        else:
            reason = (
                f"{rule.name}: {_label(d.artifact)} is not kept by any tier ({names}); "
                "otherwise: keep"
            )
            d.keep(rule.name, None, KeptHow.RULE_KEEPS, reason)


def _guard_newest(decisions: list[Decision], run: Run | None) -> None:
    """Invariant 1: never delete the newest complete checkpoint of a live run."""
    if run is not None and run.status in _DEAD:
        return
    complete = [
        d.artifact for d in decisions if d.artifact.kind is Kind.CHECKPOINT and d.artifact.complete
    ]
    top = tiering.newest(complete)
    if top is None:
        return
    d = next(x for x in decisions if x.artifact is top)
    if not any(a.action is ActionType.DELETE for a in d.actions):
        return
    instead = d.actions[0].reason
    d.actions = [a for a in d.actions if a.action is not ActionType.DELETE]
    status = run.status.value if run is not None else "outside any run"
    name = f"run {run.name}" if run is not None else "its group"
    d.keep(
        d.rule,
        None,
        KeptHow.WHOLE,
        f"invariant 1: {_label(top)} is the newest complete checkpoint of {name} "
        f"({status}), kept whole instead of: {instead}",
    )


def decide_group(
    group: Group,
    root_url: str,
    classes: bool,
    policy: Policy,
    as_of: datetime,
    *,
    trace: bool = False,
) -> GroupResult:
    """Decide every artifact of one group; memory is bounded by the group."""
    ctx = _Ctx(policy, as_of, root_url, classes, trace, [])
    run = group.run
    shield = shielded_from_expiry(policy.protect, run)
    decisions: list[Decision] = []
    tier_members: dict[int, list[Decision]] = {}
    for art in group.artifacts:
        uri = root_url + art.key
        s = Subject(art, run, uri, artifact_age(art, as_of))
        ref = ArtifactRef(
            uri=uri,
            kind=_KIND_NAME[art.kind],
            run=run.name if run is not None else art.run,
            step=art.step,
            root_url=root_url,
        )
        d = Decision(art, ref, s, protected_by=protection(policy.protect, s, as_of))
        decisions.append(d)
        owner, owner_index, skipped = _owner(ctx, d, shield)
        d.rule = owner.name if owner is not None else None
        in_flight = art.kind is Kind.CHECKPOINT and not art.complete
        if in_flight:
            why = art.completeness_reason or art.note or "incomplete"
            d.keep(d.rule, None, KeptHow.IN_FLIGHT, f"in flight: incomplete checkpoint ({why})")
        elif owner is not None and owner.tiers is not None:
            tier_members.setdefault(owner_index, []).append(d)
        elif d.protected_by is not None:
            d.keep(d.rule, None, KeptHow.PROTECTED, f"protected: {d.protected_by}")
        elif owner is None:
            if skipped and shield is not None:
                d.keep(None, None, KeptHow.PROTECTED, f"protected: {shield}")
            else:
                d.reason = "no rule matches"
        else:
            _expire_or_transition(ctx, d, owner, run)
    for index in sorted(tier_members):
        _apply_tiers(ctx, policy.rules[index], tier_members[index], run)
    _guard_newest(decisions, run)
    for d in decisions:
        if (
            d.kept is None
            and d.artifact.kind is Kind.CHECKPOINT
            and not any(a.action is ActionType.DELETE for a in d.actions)
        ):
            how = KeptHow.NO_RULE if d.rule is None else KeptHow.RULE_KEEPS
            d.keep(d.rule, None, how, d.reason or "kept")
    return GroupResult(decisions, ctx.not_applicable)


def _owner(ctx: _Ctx, d: Decision, shield: str | None) -> tuple[Rule | None, int, bool]:
    """The first rule that owns the artifact, its index, and whether a rule skipped it."""
    skipped = False
    rules = ctx.policy.rules
    for i, rule in enumerate(rules):
        if rule.tiers is not None and d.artifact.kind is not Kind.CHECKPOINT:
            if ctx.trace:
                d.rules_considered.append(
                    (rule.name, "not matched: tiers apply to checkpoints only")
                )
            continue
        why = mismatch(rule.select, d.subject)
        if why is not None:
            if ctx.trace:
                d.rules_considered.append((rule.name, f"not matched: {why}"))
            continue
        if rule.tiers is None and shield is not None:
            skipped = True
            if ctx.trace:
                d.rules_considered.append((rule.name, f"matched but skipped: {shield}"))
            continue
        if ctx.trace:
            d.rules_considered.append((rule.name, f"matched ({describe(rule.select)}): owns it"))
            d.rules_considered += [
                (r.name, "not reached: an earlier rule owns it") for r in rules[i + 1 :]
            ]
        return rule, i, skipped
    return None, -1, skipped
