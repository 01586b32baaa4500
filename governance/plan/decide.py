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

Both `build_plan` and `explain` use a `Decider` (`decide_group` makes one for one group);
`trace=True` records the rules and tiers considered for each artifact (only `explain` pays
for those strings). A Decider works out once per root what does not depend on the group
(the rules' kinds, protected paths, prices) and once per group what does not depend on
the artifact (which rules the run passes, the run's expiry wording), so the work per
artifact is its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from governance.model.detectors import TRACKER_NAMES
from governance.model.detectors.base import STATE_COMPONENTS, basename, parent
from governance.model.types import (
    Artifact,
    CatalogObject,
    Component,
    Group,
    Kind,
    Run,
    RunStatus,
)
from governance.plan import tiers as tiering
from governance.plan.costs import (
    MIN_TRANSITION_BYTES,
    RESTORE_FIRST,
    Rates,
    action_costs,
    coldness,
)
from governance.plan.protect import protector_for, shielded_from_expiry
from governance.plan.selectors import (
    Subject,
    aged,
    describe,
    mismatch,
    per_artifact,
    run_matches,
    written_ago,
)
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    BestArchived,
    KeptArtifact,
    KeptHow,
    PlannedAction,
)
from governance.policy.fields import DESTRUCTIVE_ACTIONS
from governance.policy.models import Policy, Rule, Tier
from governance.policy.units import format_bytes, format_duration
from governance.wording import counted

# Enum members read once: in Python 3.11 `ActionType.DELETE` goes through the enum class's
# `__getattr__` (~100 ns a read), a module global does not (the planner reads them for
# every artifact).
_ABORT_UPLOAD = ActionType.ABORT_UPLOAD
_ARCHIVE = ActionType.ARCHIVE
_DELETE = ActionType.DELETE
_STRIP = ActionType.STRIP
_TRANSITION = ActionType.TRANSITION
_ARCHIVED = KeptHow.ARCHIVED
_IN_FLIGHT = KeptHow.IN_FLIGHT
_NO_RULE = KeptHow.NO_RULE
_PROTECTED = KeptHow.PROTECTED
_RULE_KEEPS = KeptHow.RULE_KEEPS
_STRIPPED = KeptHow.STRIPPED
_WHOLE = KeptHow.WHOLE
_CHECKPOINT = Kind.CHECKPOINT
_FROZEN = frozenset(RESTORE_FIRST)
"""Classes whose objects cannot be copied (to quarantine) before a restore."""
_CLASS_OF = attrgetter("storage_class")
_OTHER = Kind.OTHER
_TRACKER_ENDINGS = tuple(sorted({name[-4:] for name in TRACKER_NAMES}))
"""What a tracker file's key ends with: a cheap first test, for artifacts of kind other."""
_DEAD = (RunStatus.FAILED, RunStatus.ABANDONED)
_DESTRUCTIVE = frozenset(t for t in ActionType if t.value in DESTRUCTIVE_ACTIONS)
_KIND_NAME = {k: k.value for k in Kind}
_COMPONENTS = tuple(Component)
"""In definition order (iterating the enum class itself walks a generator each time)."""
_ALWAYS_KEPT = frozenset({Component.METADATA})
"""What a strip keeps whatever `keep_components` names (see `_keep_by_tier`)."""
_METADATA_STAYS = "metadata kept (without it the checkpoint is incomplete and cannot be loaded)"
_NONE: tuple[tuple[int, str], ...] = ()
_MEMO_LIMIT = 65_536
"""Texts a Decider keeps for reuse before it starts over (memory stays bounded)."""
_CLASSES: dict[str | None, str | None] = {None: None}
"""Storage class names the plan holds, one string each (every row brings its own copy)."""


class Decision:
    """What the plan does with one artifact (see `TracedDecision` for how it got there).

    One is made for every artifact of a root: slotted, and given only what every artifact
    has (`actions` stays a shared empty tuple until an action is added: replaced, never
    appended to).
    """

    __slots__ = ("actions", "age", "artifact", "kept", "protected_by", "reason", "ref", "rule")

    def __init__(
        self,
        artifact: Artifact,
        ref: ArtifactRef,
        age: timedelta,
        protected_by: str | None = None,
        rule: str | None = None,
    ) -> None:
        self.artifact = artifact
        self.ref = ref
        self.age = age  # `as_of` minus the artifact's newest write
        self.protected_by = protected_by
        self.rule = rule
        self.actions: Sequence[PlannedAction] = ()
        self.kept: KeptArtifact | None = None
        self.reason = ""

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


class TracedDecision(Decision):
    """A `Decision` with the rules and tiers considered for it (`explain`)."""

    __slots__ = ("rules_considered", "tiers")

    def __init__(
        self,
        artifact: Artifact,
        ref: ArtifactRef,
        age: timedelta,
        protected_by: str | None = None,
        rule: str | None = None,
    ) -> None:
        super().__init__(artifact, ref, age, protected_by, rule)
        self.rules_considered: list[tuple[str, str]] = []
        self.tiers: list[tuple[str, str]] = []


def _subject(d: Decision, run: Run | None) -> Subject:
    """The artifact of `d` as selectors see it."""
    return Subject(d.artifact, run, d.ref.uri, d.age)


@dataclass(slots=True)
class GroupResult:
    decisions: list[Decision]
    not_applicable: list[tuple[str, str]]  # (rule, what): class changes on a filesystem root
    unmeasured: list[Unmeasured] = field(default_factory=list)
    """Tiers that keep `best` by a metric no checkpoint of the run reports."""
    final: str | None = None
    """The key of the checkpoint the tiers kept as the run's final, if any."""
    bests: list[BestArchived] = field(default_factory=list)
    """The run's best checkpoints that tiers archive to another location."""


@dataclass(frozen=True, slots=True)
class Unmeasured:
    """A tier keeps the best checkpoint by `metric`, but none of the run's reports it: best
    keeps nothing there (the metric's name may be the framework's other spelling: a
    Lightning run logs `val_loss`, the Trainer `eval_loss`)."""

    rule: str
    tier: str
    metric: str
    run: str | None
    reported: tuple[str, ...]  # the metrics the run's checkpoints do report


_RuleView = tuple[int, Rule, bool, frozenset[Kind] | None, bool]
"""(index, rule, has tiers, its kinds or None, needs a per-artifact `mismatch`)."""

_Owner = tuple[Rule | None, int, bool, str | None, bool]
"""The rule that owns an artifact (or None), its index, whether a rule skipped the
artifact, and the rule's name and whether it has tiers (read once, not per artifact)."""


def _owned(rule: Rule | None, index: int, skipped: bool) -> _Owner:
    if rule is None:
        return (None, index, skipped, None, False)
    return (rule, index, skipped, rule.name, rule.tiers is not None)


_Alias = tuple[Decision, Decision, str]
"""(the decision of a Lightning `save_last` copy, that of the checkpoint it copies, why:
`tiers.alias_text`)."""


@dataclass(slots=True)
class _Ctx:
    """One group's decision: the Decider's figures, the run, and what the group shares."""

    policy: Policy
    as_of: datetime
    root_url: str
    classes: bool
    trace: bool
    not_applicable: list[tuple[str, str]]
    unmeasured: list[Unmeasured]
    rates: Rates
    decider: Decider
    run: Run | None
    rules: list[_RuleView]  # the rules whose conditions on the run alone hold
    final: str | None = None  # the run's final checkpoint, as a tier kept it
    owners: dict[Kind, _Owner] = field(default_factory=dict)
    """`_owner`'s answer per kind, when it depended on nothing else (no per-artifact look)."""
    texts: dict[tuple[str, int], str] = field(default_factory=dict)  # reasons of the group
    expiry: dict[int, _ExpiryFacts] = field(default_factory=dict)  # `_expiry_facts` by rule
    frozen: list[Decision] = field(default_factory=list)
    """Decisions removing an object in GLACIER or DEEP_ARCHIVE (see `_keep_frozen`)."""
    written: dict[int, datetime] = field(default_factory=dict)
    """Each artifact's `last_modified` (a max over its objects), taken once: `tiers.Written`."""
    aliases: list[_Alias] = field(default_factory=list)
    """Lightning `save_last` copies and the checkpoints they copy (`tiers.save_last_aliases`)."""
    bests: list[tuple[Decision, str, str, float]] = field(default_factory=list)
    """(decision, metric, mode, value) of each best a tier keeps to archive away."""


def _label(a: Artifact) -> str:
    return f"step {a.step}" if a.step is not None else a.key


def _action(
    ctx: _Ctx,
    d: Decision,
    rule: str,
    tier: str | None,
    kind: ActionType,
    objs: list[CatalogObject],
    reason: str,
    *,
    storage_class: str | None = None,
    dest_url: str | None = None,
) -> PlannedAction:
    """Add to `d` the action of `kind` on `objs` (sorted as the plan lists objects)."""
    if len(objs) == 2:  # (`_in_object_order` inline, for the commonest size)
        x, y = objs
        if y.key < x.key or (y.key == x.key and y.upload_id < x.upload_id):
            objs = [y, x]
    elif len(objs) > 2 and not _in_object_order(objs):
        objs = sorted(objs, key=_OBJ_ORDER)
    # The plan holds the catalog's objects themselves (`ObjectRef`), in a list of its own.
    objects = objs if objs is not d.artifact.objects else list(objs)
    classes = _CLASSES
    frozen = False
    for o in objects:  # one string per class name (every row brings its own copy)
        if (sc := o.storage_class) is not None:
            o.storage_class = classes.setdefault(sc, sc)
            frozen = frozen or sc in _FROZEN
    if frozen and kind is _DELETE:
        ctx.frozen.append(d)
    early, request, before, after = action_costs(
        objs, kind, storage_class, dest_url, ctx.as_of, ctx.rates
    )
    if early:  # leaving a class before its minimum duration: the action says what it costs
        charge = f"${early:,.2f}" if early >= 0.005 else "under $0.01"
        reason = f"{reason}; early deletion charge {charge} (minimum storage duration not met)"
    action = PlannedAction(
        0,
        rule,
        tier,
        kind,
        kind in _DESTRUCTIVE,
        d.ref,
        objects,
        reason,
        storage_class,
        dest_url,
        early,
        request,
        before,
        after,
    )
    d.actions = [*d.actions, action] if d.actions else [action]
    d.reason = d.reason or reason
    return action


_UPLOAD_ID = attrgetter("upload_id")


def _obj_order(o: CatalogObject) -> tuple[str, str]:
    return (o.key, o.upload_id)


_OBJ_ORDER = _obj_order


def _in_object_order(objs: list[CatalogObject]) -> bool:
    """Whether `objs` are already sorted by `_OBJ_ORDER` (artifacts' members almost always
    are): sorting them would then leave them as they are."""
    prev = objs[0]
    for o in objs[1:]:
        if o.key < prev.key or (o.key == prev.key and o.upload_id < prev.upload_id):
            return False
        prev = o
    return True


_RESTORE_FIRST = min(c for c in map(coldness, RESTORE_FIRST) if c is not None)
"""The first class of the waterfall whose objects cannot be copied before a restore."""
_NEEDS_RESTORE = "in GLACIER or DEEP_ARCHIVE stay where they are (a copy needs a restore first)"


def _movable(objects: list[CatalogObject], target: str) -> tuple[list[CatalogObject], list[str]]:
    """Objects to move to `target` (down the waterfall only), and why the others stay."""
    goal = coldness(target)
    assert goal is not None
    minimum = MIN_TRANSITION_BYTES.get(target, 0)
    move: list[CatalogObject] = []
    small = colder = unknown = restore = 0
    for o in objects:
        here = coldness(o.storage_class)
        if o.upload_id or here is None:
            unknown += 1
        elif here >= goal:
            colder += 1
        elif here >= _RESTORE_FIRST:  # (GLACIER to DEEP_ARCHIVE) a copy needs a restore
            restore += 1
        elif o.size < minimum:
            small += 1
        else:
            move.append(o)
    stays: list[str] = []
    if colder:
        stays.append(f"{counted(colder, 'object')} already in {target} or colder")
    if restore:
        stays.append(f"{counted(restore, 'object')} {_NEEDS_RESTORE}")
    if small:
        stays.append(
            f"{counted(small, 'object')} under {format_bytes(minimum)} "
            f"{'stays where it is' if small == 1 else 'stay where they are'} "
            f"({target} bills a minimum object size)"
        )
    if unknown:
        stays.append(
            f"{counted(unknown, 'object')} in a class outside the waterfall "
            f"{'stays' if unknown == 1 else 'stay'}"
        )
    return move, stays


def _expire_or_transition(ctx: _Ctx, d: Decision, rule: Rule, run: Run | None) -> None:
    age, art = d.age, d.artifact
    after, by_run, name = ctx.expiry.get(id(rule)) or _expiry_facts(ctx, rule, run)
    not_due = ""
    if after is not None:
        if by_run is not None:  # measured from the run's last write: the group's answer
            expired, text = by_run
        else:
            expired = age >= after
            text = _expiry(ctx, rule, age, expired)
        if expired:
            objects = art.objects
            if any(map(_UPLOAD_ID, objects)):
                uploads = [o for o in objects if o.upload_id]
                plain = [o for o in objects if not o.upload_id]
            else:
                uploads, plain = [], objects
            if uploads:
                _action(ctx, d, name, None, _ABORT_UPLOAD, uploads, text)
            if plain:
                _action(ctx, d, name, None, _DELETE, plain, text)
            return
        not_due = text
    if not rule.transition:
        d.reason = not_due
        return
    due = [step for step in rule.transition if age >= step.after]
    if not due:
        first = rule.transition[0]
        d.reason = "; ".join(
            filter(None, [f"no transition due: {aged(age)}, rule {rule.name} "
                          f"moves it after {format_duration(first.after)}", not_due])
        )  # fmt: skip
        return
    step = due[-1]
    target = step.storage_class.value
    head = (
        f"transition to {target}: {aged(age)}, rule {rule.name} moves it to "
        f"{target} after {format_duration(step.after)}"
    )
    if not ctx.classes:
        ctx.not_applicable.append((rule.name, f"transition to {target}"))
        d.reason = f"{head}, but the root has no storage classes: not applicable"
        return
    move, stays = _movable(art.objects, target)
    reason = "; ".join([head, *stays])
    if move:
        _action(ctx, d, rule.name, None, _TRANSITION, move, reason, storage_class=target)
    else:
        d.reason = f"nothing to move: {reason}"


_ExpiryFacts = tuple[timedelta | None, tuple[bool, str] | None, str]
"""A rule's `expire.after` (None: it does not expire), whether the group expires by it
when it is measured from the run's last write (with the reason), and its name."""


def _expiry_facts(ctx: _Ctx, rule: Rule, run: Run | None) -> _ExpiryFacts:
    """What `_expire_or_transition` needs of `rule` for every artifact of the group, read
    once per group (policy models are slow to read attribute by attribute)."""
    expire = rule.expire
    by_run: tuple[bool, str] | None = None
    if expire is not None and rule.select.run_status is not None and run is not None:
        expired = ctx.as_of - run.last_write >= expire.after
        by_run = (expired, _run_text(ctx, "expired" if expired else "not expired yet", rule))
    facts = ctx.expiry[id(rule)] = (expire.after if expire is not None else None, by_run, rule.name)
    return facts


def _expiry(ctx: _Ctx, rule: Rule, age: timedelta, expired: bool = False) -> str:
    """Whether (and why) the artifact expires by its own age: 'expired: ...' or 'not
    expired yet: ...'."""
    assert rule.expire is not None
    head = "expired" if expired else "not expired yet"
    what = written_ago(age)
    return (
        f"{head}: {what}, rule {rule.name} expires after {ctx.decider.duration(rule.expire.after)}"
    )


def _run_text(ctx: _Ctx, head: str, rule: Rule) -> str:
    """`_expiry` for a rule measured from the run's last write: one string per group."""
    memo = (head, id(rule))
    found = ctx.texts.get(memo)
    if found is not None:
        return found
    run = ctx.run
    assert run is not None
    assert rule.expire is not None
    elapsed = ctx.as_of - run.last_write
    what = written_ago(elapsed, f"run {run.name} ({run.status.value}) last written")
    after = ctx.decider.duration(rule.expire.after)
    text = ctx.texts[memo] = f"{head}: {what}, rule {rule.name} expires after {after}"
    return text


def _keep_by_tier(ctx: _Ctx, d: Decision, rule: Rule, tier: Tier, why: str) -> None:
    """Keep a checkpoint the way its first selecting tier says: whole, stripped, archived."""
    art = d.artifact
    notes: list[str] = []
    objects, roles = art.objects, art.roles
    remaining: list[CatalogObject] = list(objects)
    drop: list[CatalogObject] = []
    how = _WHOLE
    if ctx.decider.strips(tier):
        assert tier.keep_components is not None
        # Metadata always stays: a checkpoint without its configs, index and trainer state
        # (or commit marker) cannot be loaded, and the next scan would find it incomplete,
        # then residue, and delete the weights this tier keeps.
        keep = set(tier.keep_components) | _ALWAYS_KEPT
        unwanted = [o for o, c in zip(objects, roles, strict=True) if c not in keep]
        if not art.strippable and (
            _STATE_INSIDE in art.note or not STATE_COMPONENTS.isdisjoint(roles)
        ):
            # one Lightning .ckpt, one DCP shard set, a ZeRO-3 tag: the detector says why
            notes.append(_why_whole(art.note))
        elif not art.strippable:  # stripped already, or saved without state files
            notes.append("kept whole: no optimizer, scheduler or RNG state files to drop")
        elif not unwanted:
            notes.append("kept whole (it has no other components)")
        elif ctx.decider.quarantine and not _FROZEN.isdisjoint(map(_CLASS_OF, unwanted)):
            n = sum(1 for o in unwanted if o.storage_class in _FROZEN)
            notes.append(f"kept whole, not stripped: {_frozen_why(n)}")
        else:
            drop = unwanted
            remaining = [o for o, c in zip(objects, roles, strict=True) if c in keep]
            present = {c for c in roles if c not in keep}
            dropped = [c.value for c in _COMPONENTS if c in present]
            notes.append(f"{', '.join(dropped)} dropped")
            if Component.METADATA not in tier.keep_components and Component.METADATA in roles:
                notes.append(_METADATA_STAYS)
            how = _STRIPPED
    else:
        notes.append("kept whole")
    archiving: tuple[ActionType, list[CatalogObject], str | None, str | None] | None = None
    if tier.archive is not None:
        if tier.archive.url is not None:
            dest = tier.archive.url + art.key
            frozen = sum(1 for o in remaining if (coldness(o.storage_class) or 0) >= _RESTORE_FIRST)
            if frozen:
                notes.append(
                    f"not archived to {dest}: {counted(frozen, 'object')} {_NEEDS_RESTORE}"
                )
            else:
                notes.append(f"archived: copied to {dest}, then removed here")
                archiving = (_ARCHIVE, remaining, None, dest)
        elif not ctx.classes:
            target = tier.archive.storage_class.value if tier.archive.storage_class else "?"
            ctx.not_applicable.append((rule.name, f"archive to {target}"))
            notes.append(f"archive to {target} not applicable: the root has no storage classes")
        elif tier.archive.storage_class is not None:
            target = tier.archive.storage_class.value
            move, stays = _movable(remaining, target)
            if move:
                notes.append(f"archived to {target}")
                archiving = (_ARCHIVE, move, target, None)
            notes += stays
    reason = f"{tier.name} tier: {why}; " + "; ".join(notes)
    if drop:
        _action(ctx, d, rule.name, tier.name, _STRIP, drop, reason)
    if archiving is not None:
        kind, moved, cls, dest_url = archiving
        _action(
            ctx,
            d,
            rule.name,
            tier.name,
            kind,
            moved,
            reason,
            storage_class=cls,
            dest_url=dest_url,
        )
        how = _ARCHIVED
    d.keep(rule.name, tier.name, how, reason)


def _apply_tiers(
    ctx: _Ctx,
    rule: Rule,
    members: list[Decision],
    run: Run | None,
    complete: Sequence[Decision] = (),
) -> None:
    """The rule's tiers over its checkpoints of the run (`complete`: all the run's
    complete checkpoints, whichever rule owns them: `final` is the run's highest step)."""
    assert rule.tiers is not None
    records = ctx.decider.archived_bests.get(run.key) if run is not None else None
    archived: tiering.ArchivedBests | None = None
    if records and members:
        # only the bests archived while the run held a checkpoint it holds now: a run
        # all newer is another one trained into the same folder, not compared with them
        oldest = min(ctx.written[id(d.artifact)] for d in members)
        archived = tiering.archived_of_run(records, oldest) or None
    outcome = tiering.select(
        rule.tiers,
        [d.artifact for d in members],
        run,
        ctx.as_of,
        trace=ctx.trace,
        when=ctx.written,
        archived=archived,
        others=[d.artifact for d in complete if d.rule != rule.name] if complete else (),
    )
    names = ", ".join(t.name for t in rule.tiers)
    chosen, traced = outcome.picks, outcome.trace
    if outcome.final is not None:
        ctx.final = outcome.final
    otherwise = "delete" if rule.otherwise == "delete" else "keep"
    decider = ctx.decider
    texts = decider.unkept_texts(rule, otherwise)  # by step: `unkept` for a new step only
    name = rule.name
    best_of_run = (
        _best_of_run(rule, members, run, ctx.written, archived) if otherwise == "delete" else {}
    )
    _note_unmeasured(ctx, rule, members)
    aliases = outcome.aliases
    if aliases:  # Lightning save_last copies: each goes with the checkpoint it copies
        by_key = {d.artifact.key: d for d in members}
        ctx.aliases += [(by_key[a], by_key[o], text) for a, (o, text) in aliases.items()]
    for d in members:
        art = d.artifact
        picks = chosen.get(art.key, _NONE)
        if traced and isinstance(d, TracedDecision):
            d.tiers = traced.get(art.key, [])
        if d.protected_by is not None:
            counted = f"; counted by the {rule.tiers[picks[0][0]].name} tier" if picks else ""
            d.keep(name, None, _PROTECTED, f"protected: {d.protected_by}{counted}")
        elif picks:
            index, why = picks[0]
            tier = rule.tiers[index]
            _keep_by_tier(ctx, d, rule, tier, why)
            best = outcome.bests.get(index)
            if best is not None and best[0] == art.key and tier.best_metric is not None:
                ctx.bests.append((d, tier.best_metric.name, tier.best_metric.mode, best[1]))
        else:
            step = art.step
            if step is None and art.key in aliases:
                why = aliases[art.key][1]
                reason = f"{name}: {why}, which no tier keeps ({names}); otherwise: {otherwise}"
            else:
                reason = (texts.get(step) if step is not None else None) or decider.unkept(
                    rule, art, names, otherwise
                )
            guarded = best_of_run.get(art.key)
            if guarded is not None:  # invariant 7, past a `best` tier's max_age
                tier_name, why = guarded
                d.keep(name, tier_name, _WHOLE, f"invariant 7: {why} of all the run's "
                       f"checkpoints (the {tier_name} tier keeps best), kept whole instead "
                       f"of: {reason}")  # fmt: skip
            elif otherwise == "delete":
                _action(ctx, d, name, None, _DELETE, art.objects, reason)
            else:
                d.keep(name, None, _RULE_KEEPS, reason)


def _bests(found: list[tuple[Decision, str, str, float]], run: Run | None) -> list[BestArchived]:
    """The bests whose archive to another location the plan holds, once every guard has
    had its say (one that keeps a checkpoint whole where it is drops the archive)."""
    if not found or run is None:
        return []
    out = []
    for d, metric, mode, value in found:
        art = d.artifact
        for action in d.actions:
            if action.action is _ARCHIVE and action.dest_url is not None:
                out.append(BestArchived(run.key, metric, mode, value, art.step, art.key, action))
                break
    return out


def _note_unmeasured(ctx: _Ctx, rule: Rule, members: list[Decision]) -> None:
    """Record each tier of `rule` that keeps `best` by a metric none of `members` reports,
    where it keeps nothing for `best` (no recorded best of the run's Trainer among them)."""
    assert rule.tiers is not None
    for tier in rule.tiers:
        metric = tier.best_metric
        if metric is None or "best" not in tier.keep:
            continue
        name = metric.name
        if any(name in d.artifact.metrics for d in members):
            continue
        recorded = ctx.run.best_checkpoint if ctx.run is not None else None
        if recorded is not None and any(d.artifact.key == recorded for d in members):
            continue  # (the tier keeps the Trainer's recorded best: `tiers.best_checkpoint`)
        reported = tuple(sorted({m for d in members for m in d.artifact.metrics}))
        run = ctx.run.name if ctx.run is not None else None
        ctx.unmeasured.append(Unmeasured(rule.name, tier.name, name, run, reported))


def _best_of_run(
    rule: Rule,
    members: list[Decision],
    run: Run | None,
    when: tiering.Written,
    archived: tiering.ArchivedBests | None = None,
) -> dict[str, tuple[str, str]]:
    """Invariant 7: the run's best checkpoint by the metric of each tier that keeps `best`
    within a `max_age` (such a tier only sees its window), by key -> (tier, why). A tier
    without `max_age` sees every checkpoint and selects the best itself. A best an
    applied plan archived away (`archived`) is kept there: none of these is the best."""
    out: dict[str, tuple[str, str]] = {}
    assert rule.tiers is not None
    for tier in rule.tiers:
        metric = tier.best_metric
        if "best" not in tier.keep or metric is None or tier.max_age is None:
            continue
        found = tiering.best_checkpoint(
            [d.artifact for d in members], metric.name, metric.mode, run, when, archived
        )
        if found is not None:
            out.setdefault(found[0].key, (tier.name, found[1]))
    return out


def _is_tracker(art: Artifact) -> bool:
    """A tracker file of a layout that reads it (not any file named `latest`)."""
    return art.layout in ("deepspeed", "megatron") and basename(art.key) in TRACKER_NAMES


def _deletes(d: Decision) -> bool:
    """Whether some action of `d` deletes (a plain loop: most decisions have one action)."""
    for a in d.actions:  # noqa: SIM110  (any() over a generator costs more per decision)
        if a.action is _DELETE:
            return True
    return False


def _guard_newest(
    complete: list[Decision],
    run: Run | None,
    when: tiering.Written | None = None,
    aliases: Sequence[_Alias] = (),
) -> None:
    """Invariant 1: never delete the newest complete checkpoint of a live run (`complete`:
    the decisions of the group's complete checkpoints). A run still writing (running, or
    of unknown status, as checkpoints outside any run are) resumes from it: it is kept
    whole and where it is, neither stripped nor archived away (a finished run's final may
    be; the example policy archives it). A Lightning `save_last` copy and the checkpoint
    it copies are guarded together (`aliases`): Lightning resumes from `last.ckpt`."""
    if run is not None and run.status in _DEAD:
        return
    top = tiering.newest([d.artifact for d in complete], when)
    if top is None:
        return
    d = next(x for x in complete if x.artifact is top)
    # outside any run nothing says the writer is done: as a run of unknown status
    resumable = run is None or run.status in _RESUMABLE
    if not aliases and not (_deletes(d) or (resumable and d.actions)):
        return  # (the common case, without a word built)
    pair: list[tuple[Decision, str | None]] = [(d, None)]
    for alias, original, why in aliases:  # (few: one per Lightning folder at most)
        if alias is d:
            pair.append((original, f"{why}: {_label(original.artifact)} kept whole with it"))
        elif original is d:
            pair.append((alias, f"{why}: kept whole with it"))
    acted = [(x, with_top) for x, with_top in pair if _deletes(x) or (resumable and x.actions)]
    if not acted:
        return
    status = run.status.value if run is not None else "outside any run"
    name = f"run {run.name}" if run is not None else "its group"
    if run is None:
        where = ", which a writer may resume from,"
    else:
        where = ", which it resumes from," if resumable else ","
    head = (
        f"invariant 1: {_label(top)} is the newest complete checkpoint of {name} ({status}){where}"
    )
    for x, with_top in acted:
        instead = x.actions[0].reason
        x.actions = [a for a in x.actions if a.action is not _DELETE] if not resumable else ()
        how = f" and {with_top}" if with_top is not None else " kept whole"
        x.keep(x.rule, None, _WHOLE, f"{head}{how} instead of: {instead}")


def _keep_aliases(aliases: Sequence[_Alias]) -> None:
    """A Lightning `save_last` copy stays while the checkpoint it copies stays (they have
    the same tiers; a protection, invariant 7 or a frozen delete may keep the original
    alone): deleting it would not free a place for anything."""
    for alias, original, why in aliases:
        _keep_with(alias, original, why)


def _keep_with(goes: Decision, stays: Decision, why: str) -> None:
    """`goes` kept whole, rather than deleted, with `stays` (its pair, for `why`)."""
    if not _deletes(goes) or _deletes(stays):
        return
    instead = next(a for a in goes.actions if a.action is _DELETE).reason
    goes.actions = [a for a in goes.actions if a.action is not _DELETE]
    label = _label(stays.artifact)
    goes.keep(
        goes.rule,
        None,
        _WHOLE,
        f"kept with {label}: {why}, and {label} stays; kept whole instead of: {instead}",
    )


def _loose_aliases(loose: list[Decision], written: tiering.Written) -> list[_Alias]:
    """The Lightning `save_last` copies among checkpoints no tier rule owns (an `expire`
    rule's, or no rule's), paired with what they copy as the tiers pair theirs: each
    decided by its own age, a copy written seconds after its original stayed while the
    original went."""
    pairs = tiering.save_last_aliases([d.artifact for d in loose], written)
    if not pairs:
        return []
    by_key = {d.artifact.key: d for d in loose}
    return [(by_key[a.key], by_key[o.key], tiering.alias_text(a, o, written)) for a, o in pairs]


def _keep_originals(aliases: Sequence[_Alias]) -> None:
    """The other half of `_keep_aliases` for checkpoints no tier owns: a checkpoint whose
    `save_last` copy stays stays too (not yet expired, protected), and goes with it."""
    for alias, original, why in aliases:
        _keep_with(original, alias, why)


def _unread_words(unread: Sequence[str]) -> str:
    """Why a group whose metadata could not be read is left as it is."""
    more = f" and {len(unread) - 1} more" if len(unread) > 1 else ""
    return (
        f"metadata its decisions rest on could not be read: {unread[0]}{more} (a run's end, "
        "a checkpoint's metrics or completeness are not known): left as it is until it can be"
    )


def _keep_trackers(decisions: list[Decision], trackers: list[Decision], run: Run | None) -> None:
    """Files that checkpoints or their run depend on stay while what depends on them
    stays, whatever rule would delete them:

    - a tracker file (DeepSpeed's `latest`, Megatron's `latest_checkpointed_iteration.txt`)
      while a checkpoint of its folder stays: their completeness depends on it (a dead
      run's expiry deleted it next to a checkpoint a protection kept, which then read as
      incomplete, residue to the next plan);
    - a run's status marker (`COMPLETED`, `FAILED`, ... in the run's own folder) while an
      artifact of the run (not residue) stays: it is the run's status evidence. Without it
      a completed run reads as abandoned once idle, a rule for dead runs would expire the
      checkpoints its tiers keep, its final among them, and rules selecting `run_status`
      would stop matching what is left."""
    for t in trackers:
        if not _deletes(t):
            continue
        marker = t.artifact.layout == "marker"
        folder = parent(t.artifact.key)
        if marker:
            # only a marker in the run's own folder is its status evidence (runs.py)
            if run is None or folder != run.key:
                continue
            staying = [d.artifact for d in decisions if _stays_with_marker(d)]
        else:
            staying = [
                d.artifact
                for d in decisions
                if d.artifact.kind is _CHECKPOINT and parent(d.artifact.key) == folder and _stays(d)
            ]
        if not staying:
            continue
        names = ", ".join(_label(a) for a in staying[:3]) + (
            f" and {len(staying) - 3} more" if len(staying) > 3 else ""
        )
        name = basename(t.artifact.key)
        instead = t.actions[0].reason
        t.actions = ()
        if marker:
            why = (
                f"kept: artifacts of the run stay ({names}) and {name} is the run's status "
                f"evidence, kept instead of: {instead}"
            )
        else:
            which = (
                "a checkpoint of its folder stays"
                if len(staying) == 1
                else ("checkpoints of its folder stay")
            )
            why = (
                f"kept: {which} ({names}) and their completeness depends on {name}, "
                f"kept instead of: {instead}"
            )
        t.keep(t.rule, None, _WHOLE, why)


def _stays(d: Decision) -> bool:
    """Whether the artifact stays where it is: not deleted, not archived elsewhere."""
    return not _deletes(d) and not any(a.dest_url is not None for a in d.actions)


def _stays_with_marker(d: Decision) -> bool:
    """An artifact of the run that stays and reads its status: anything but residue and
    the markers themselves (rules select by `run_status`, tiers keep a run's final)."""
    art = d.artifact
    return art.layout != "marker" and art.kind is not Kind.RESIDUE and _stays(d)


def _keep_frozen(decisions: list[Decision]) -> None:
    """With `delete_mode: quarantine`, a delete of an object in GLACIER or DEEP_ARCHIVE
    cannot keep a way back: the quarantine copy needs a restore first, and apply failed
    those actions every time. Such an artifact stays as it is, and says why (a strip of
    such objects is not planned either: see `_keep_by_tier`)."""
    for d in decisions:
        frozen = [
            a
            for a in d.actions
            if a.action is _DELETE and not _FROZEN.isdisjoint(map(_CLASS_OF, a.objects))
        ]
        if not frozen:
            continue
        n = sum(1 for a in frozen for o in a.objects if o.storage_class in _FROZEN)
        d.actions = [a for a in d.actions if a not in frozen]
        was = frozen[0]
        why = f"{_frozen_why(n)}; instead of: {was.reason}"
        if d.artifact.kind is _CHECKPOINT:
            d.keep(d.rule, was.tier, _WHOLE, f"kept whole: {why}")
        else:
            d.reason = f"left as it is: {why}"


_STATE_INSIDE = "cannot be stripped"


def _why_whole(note: str) -> str:
    """Why a checkpoint that holds state is kept whole by a tier that strips: the
    detector's own words (a ZeRO-3 tag's weights live in its optimizer partitions; a
    Lightning file holds its state inside), else the common reason."""
    for part in note.split("; "):
        if _STATE_INSIDE in part:
            return f"kept whole: {part}"
    return "kept whole: it cannot be stripped (optimizer state is not in separate files)"


"""What a detector's note says of a checkpoint whose state is inside its files."""


def _frozen_why(n: int) -> str:
    return (
        f"{counted(n, 'object')} in GLACIER or DEEP_ARCHIVE cannot be moved to quarantine without a "
        "restore first (apply.delete_mode quarantine; versioned or permanent could remove them)"
    )


_RESUMABLE = (RunStatus.RUNNING, RunStatus.UNKNOWN)
"""Runs that may still be writing, and resume from their newest complete checkpoint."""


class Decider:
    """The decisions for the groups of one root under one policy at `as_of`.

    `build_plan` makes one per root and feeds it every group; what does not depend on the
    group is worked out here once (each rule's kinds and whether it needs a per-artifact
    look, the protected paths that can match under the root, prices per storage class).
    `links` are the root's symbolic links that point inside it, (link key, target key):
    what they point at is protected (`protect.LinkTargets`); `restored`, what `govern
    restore` brought back at the root (key, when, plan id): protected for
    `protect.restored_for` (`protect.RestoredKeys`); `archived_bests`, by run key, the
    bests applied plans archived away (`tiers.ArchivedBest`).
    """

    def __init__(
        self,
        policy: Policy,
        as_of: datetime,
        root_url: str,
        classes: bool,
        links: Sequence[tuple[str, str]] = (),
        restored: Sequence[tuple[str, datetime, str]] = (),
        archived_bests: Mapping[str, Sequence[tiering.ArchivedRecord]] | None = None,
    ) -> None:
        self.policy = policy
        self.archived_bests: Mapping[str, Sequence[tiering.ArchivedRecord]] = archived_bests or {}
        self.as_of = as_of
        self.root_url = root_url
        self.classes = classes
        self.rates = Rates(policy)
        self.protector = protector_for(policy.protect, root_url, as_of, links, restored)
        self._rules: list[_RuleView] = [
            (
                i,
                r,
                r.tiers is not None,
                frozenset(r.select.kind) if r.select.kind is not None else None,
                per_artifact(r.select),
            )
            for i, r in enumerate(policy.rules)
        ]
        # quarantine copies of GLACIER and DEEP_ARCHIVE objects need a restore first
        self.quarantine = classes and policy.apply.delete_mode == "quarantine"
        self._durations: dict[timedelta, str] = {}
        self._strips: dict[int, tuple[Tier, bool]] = {}
        self._unkept: dict[tuple[int, str], dict[int, str]] = {}

    def unkept_texts(self, rule: Rule, otherwise: str) -> dict[int, str]:
        """`unkept`'s texts of `rule` by step, so far (a group looks its steps up here,
        and asks `unkept` only for a step not seen yet)."""
        memo = (id(rule), otherwise)
        found = self._unkept.get(memo)
        if found is None:
            found = self._unkept[memo] = {}
        return found

    def unkept(self, rule: Rule, art: Artifact, names: str, otherwise: str) -> str:
        """Why a checkpoint no tier of `rule` keeps goes its `otherwise` way: one string per
        rule and step for the whole root (steps repeat run after run), so the plan's many
        such actions share their reasons."""
        texts = self.unkept_texts(rule, otherwise)
        text = texts.get(art.step) if art.step is not None else None
        if text is None:
            text = (
                f"{rule.name}: {_label(art)} is not kept by any tier ({names}); "
                f"otherwise: {otherwise}"
            )
            if art.step is not None:
                if len(texts) >= _MEMO_LIMIT:
                    texts.clear()
                texts[art.step] = text
        return text

    def strips(self, tier: Tier) -> bool:
        """`tier.strips`, once per tier (the property builds two sets each time)."""
        found = self._strips.get(id(tier))
        if found is None or found[0] is not tier:
            found = self._strips[id(tier)] = (tier, tier.strips)
        return found[1]

    def duration(self, td: timedelta) -> str:
        """`format_duration`, once per value (rules' durations are few)."""
        text = self._durations.get(td)
        if text is None:
            text = self._durations[td] = format_duration(td)
        return text

    def decide(self, group: Group, *, trace: bool = False) -> GroupResult:
        """Decide every artifact of one group; memory is bounded by the group."""
        policy, as_of, root_url = self.policy, self.as_of, self.root_url
        run = group.run
        rules = [v for v in self._rules if run_matches(v[1].select, run)]
        ctx = _Ctx(
            policy, as_of, root_url, self.classes, trace, [], [], self.rates, self, run, rules
        )
        shield = shielded_from_expiry(policy.protect, run)
        unread = _unread_words(group.unread) if group.unread else None
        protector = self.protector
        by_age = protector.by_age_alone(group.artifacts)
        min_age = protector.min_age
        run_name = run.name if run is not None else None
        decisions: list[Decision] = []
        complete: list[Decision] = []  # the complete checkpoints' decisions, in order
        trackers: list[Decision] = []  # of tracker files and markers (see `_keep_trackers`)
        loose: list[Decision] = []  # those of them no tier rule owns
        tier_members: dict[int, list[Decision]] = {}
        stepless = False  # a checkpoint without a step: its run's refs carry their times
        written = ctx.written
        owners = ctx.owners
        checkpoint = _CHECKPOINT
        make = TracedDecision if trace else Decision
        for art in group.artifacts:
            kind = art.kind
            uri = root_url + art.key
            written[id(art)] = last_modified = art.last_modified
            age = as_of - last_modified
            ref = ArtifactRef(
                uri, _KIND_NAME[kind], run_name if run is not None else art.run, art.step, root_url
            )
            protected = protector(art, uri, age) if age < min_age or not by_age else None
            if protected is None and unread is not None:
                protected = unread
            d = make(art, ref, age, protected)
            decisions.append(d)
            if kind is _OTHER and (
                art.layout == "marker" or (art.key.endswith(_TRACKER_ENDINGS) and _is_tracker(art))
            ):
                trackers.append(d)
            if trace:
                assert isinstance(d, TracedDecision)
                found = _owned(*_owner_traced(ctx, d, shield))
            else:
                found = owners.get(kind) or self._owner(ctx, kind, d, shield)
            owner, owner_index, skipped, d.rule, tiered = found
            if kind is checkpoint:
                if art.step is None:
                    stepless = True
                if not art.complete:  # in flight
                    why = art.completeness_reason or art.note or "incomplete"
                    reason = f"in flight: incomplete checkpoint ({why})"
                    d.keep(d.rule, None, _IN_FLIGHT, reason)
                    continue
                complete.append(d)
                if not tiered:
                    loose.append(d)
            if tiered:
                members = tier_members.get(owner_index)
                if members is None:
                    members = tier_members[owner_index] = []
                members.append(d)
            elif d.protected_by is not None:
                d.keep(d.rule, None, _PROTECTED, f"protected: {d.protected_by}")
            elif owner is None:
                if skipped and shield is not None:
                    d.protected_by = shield  # (explain shows it as the protection)
                    d.keep(None, None, _PROTECTED, f"protected: {shield}")
                else:
                    d.reason = "no rule matches"
            else:
                _expire_or_transition(ctx, d, owner, run)
        for index in sorted(tier_members):
            _apply_tiers(ctx, policy.rules[index], tier_members[index], run, complete)
        loose_aliases = _loose_aliases(loose, written) if stepless and len(loose) > 1 else []
        ctx.aliases += loose_aliases
        _guard_newest(complete, run, written, ctx.aliases)
        if ctx.frozen and self.quarantine:
            _keep_frozen(list(dict.fromkeys(ctx.frozen)))
        if ctx.aliases:
            _keep_aliases(ctx.aliases)
        if loose_aliases:
            _keep_originals(loose_aliases)
        if trackers:  # after everything that decides whether a checkpoint stays
            _keep_trackers(decisions, trackers, run)
        # Every other checkpoint is kept in flight already, and a tier rule keeps or
        # deletes each of its own (the guard only turns a delete into a keep).
        for d in loose:
            if d.kept is None and not (d.actions and _deletes(d)):
                how = _NO_RULE if d.rule is None else _RULE_KEEPS
                d.keep(d.rule, None, how, d.reason or "kept")
        if stepless:  # (reports order such a run's checkpoints by time: `ArtifactRef.written`)
            for d in decisions:
                d.ref.written = written[id(d.artifact)]
        return GroupResult(
            decisions, ctx.not_applicable, ctx.unmeasured, ctx.final, _bests(ctx.bests, run)
        )

    def _owner(self, ctx: _Ctx, kind: Kind, d: Decision, shield: str | None) -> _Owner:
        """`_owner_traced` without the trace: a rule owns the artifact when its selector
        matches: its kinds, the run's answer for the group, then `mismatch` only for
        selectors with per-artifact conditions. Without those the answer depends on the
        kind alone and is kept for the group."""
        found = ctx.owners.get(kind)
        if found is not None:
            return found
        skipped = False
        by_kind = True
        result: _Owner | None = None
        subject: Subject | None = None
        for i, rule, tiered, wanted, looks in ctx.rules:
            if (tiered and kind is not _CHECKPOINT) or (wanted is not None and kind not in wanted):
                continue
            if looks:
                by_kind = False
                if subject is None:
                    subject = _subject(d, ctx.run)
                if mismatch(rule.select, subject) is not None:
                    continue
            if not tiered and shield is not None:
                skipped = True
                continue
            result = _owned(rule, i, skipped)
            break
        if result is None:
            result = _owned(None, -1, skipped)
        if by_kind:
            ctx.owners[kind] = result
        return result


def decide_group(
    group: Group,
    root_url: str,
    classes: bool,
    policy: Policy,
    as_of: datetime,
    *,
    trace: bool = False,
    links: Sequence[tuple[str, str]] = (),
    restored: Sequence[tuple[str, datetime, str]] = (),
    archived_bests: Mapping[str, Sequence[tiering.ArchivedRecord]] | None = None,
) -> GroupResult:
    """Decide every artifact of one group; memory is bounded by the group."""
    decider = Decider(policy, as_of, root_url, classes, links, restored, archived_bests)
    return decider.decide(group, trace=trace)


def _owner_traced(
    ctx: _Ctx, d: TracedDecision, shield: str | None
) -> tuple[Rule | None, int, bool]:
    """The first rule that owns the artifact, its index, and whether a rule skipped it,
    with every rule considered recorded on the decision."""
    skipped = False
    rules = ctx.policy.rules
    considered = d.rules_considered
    subject = _subject(d, ctx.run)
    for i, rule in enumerate(rules):
        if rule.tiers is not None and d.artifact.kind is not _CHECKPOINT:
            considered.append((rule.name, "not matched: tiers apply to checkpoints only"))
            continue
        why = mismatch(rule.select, subject)
        if why is not None:
            considered.append((rule.name, f"not matched: {why}"))
            continue
        if rule.tiers is None and shield is not None:
            skipped = True
            considered.append((rule.name, f"matched but skipped: {shield}"))
            continue
        considered.append((rule.name, f"matched ({describe(rule.select)}): owns it"))
        considered += [(r.name, "not reached: an earlier rule owns it") for r in rules[i + 1 :]]
        return rule, i, skipped
    return None, -1, skipped
