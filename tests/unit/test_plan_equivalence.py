"""The planner's fast paths give exactly what their plain definitions give.

The fingerprint is rendered a chunk of actions at a time and fed in order when the order
is canonical; a plan's summary is totted up group by group as actions are made; a root's
bytes default to what it streams; tiers sort a run's checkpoints once; an action's costs
are priced before it is made; and `explain`'s traced decisions are the plan's. Each is
checked against the plain definition over generated input.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from unittest.mock import patch
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model.types import (
    Artifact,
    CatalogObject,
    Component,
    Group,
    Kind,
    Member,
    RunStatus,
)
from governance.plan import fingerprint as fingerprint_module
from governance.plan import tiers as tiering
from governance.plan.build import RootSnapshot
from governance.plan.costs import (
    DAYS_PER_MONTH,
    GB,
    MIN_DAYS,
    Rates,
    action_costs,
    billable_bytes,
)
from governance.plan.decide import Decider, Decision
from governance.plan.fingerprint import fingerprint
from governance.plan.selectors import storage_class_of
from governance.plan.totals import summarize
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    PlannedAction,
)
from governance.policy.models import Tier
from tests.unit.plan_factories import (
    AS_OF,
    ROOT,
    checkpoints_of,
    example_policy,
    make_plan,
    root_groups,
    run,
    snapshot,
)
from tests.unit.test_plan_fingerprint import _canonical

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POLICY = example_policy()

# ----------------------------------------------------------------------------- fingerprint

_TEXT = st.sampled_from(["a", "a b", "é", 'q"', "back\\slash", "z", "\u2603", "tab\t", "/"])
_NAMES = st.lists(_TEXT, min_size=1, max_size=3).map("".join)


@st.composite
def _actions(draw: st.DrawFn) -> PlannedAction:
    art = ROOT + draw(_NAMES) + draw(st.sampled_from(["/", ""]))
    objects = []
    for _ in range(draw(st.integers(1, 4))):
        under = draw(st.booleans())
        uri = (art if under else ROOT) + draw(_NAMES)
        objects.append(
            ObjectRef(
                uri.removeprefix(ROOT),
                draw(st.integers(0, 10**12)),
                AS_OF,
                draw(st.sampled_from(['"e"', '"é"', "x\\y"])),
                None,
                draw(st.sampled_from([None, "v1", "v\u00e9", "v1"])),
            )
        )
    kind = draw(st.sampled_from(list(ActionType)))
    return PlannedAction(
        0,
        draw(st.sampled_from(["r", "rule é"])),
        draw(st.sampled_from([None, "t"])),
        kind,
        True,
        ArtifactRef(art, "checkpoint", None, None, ROOT),
        objects,
        "why",
        draw(st.sampled_from([None, "GLACIER"])),
        draw(st.sampled_from([None, "s3://cold/" + art.removeprefix(ROOT)])),
    )


@st.composite
def _kept(draw: st.DrawFn) -> KeptArtifact:
    ref = ArtifactRef(ROOT + draw(_NAMES), "checkpoint", None, None, ROOT)
    how = draw(st.sampled_from(list(KeptHow)))
    return KeptArtifact(ref, draw(st.sampled_from([None, "r"])), None, how, "")


@SETTINGS
@given(
    st.lists(_actions(), max_size=12),
    st.lists(_kept(), max_size=6),
    st.integers(1, 5),
    st.booleans(),
)
def test_fingerprint_is_the_literal_canonical_text(
    actions: list[PlannedAction], kept: list[KeptArtifact], chunk: int, in_order: bool
) -> None:
    if in_order:  # the plan's own order (as `build_plan` sorts), streamed when canonical
        actions.sort(key=lambda a: (a.artifact.uri, a.objects[0].key))
        kept.sort(key=lambda k: k.artifact.uri)
    with patch.object(fingerprint_module, "_CHUNK", chunk):
        assert fingerprint(actions, kept) == _canonical(actions, kept)


# ----------------------------------------------------------------------------- build_plan


def _shuffled(groups: list[Group], rnd: random.Random) -> list[Group]:
    out = [Group(g.run, rnd.sample(g.artifacts, len(g.artifacts))) for g in groups]
    rnd.shuffle(out)
    return out


@SETTINGS
@given(root_groups(), st.randoms(use_true_random=False))
def test_the_running_summary_is_the_summary_of_the_plans_actions(
    groups: list[Group], rnd: random.Random
) -> None:
    left = []
    for gs in (groups, _shuffled(groups, rnd)):  # kept in order, and sorted afterwards
        plan = make_plan(gs, POLICY)
        bill = plan.summary.monthly_cost_before_usd  # the roots' bill, when there is one
        assert replace(plan.summary, left=[]) == summarize(plan.actions, bill)
        assert [a.id for a in plan.actions] == list(range(1, len(plan.actions) + 1))
        left.append(plan.summary.left)
    assert left[0] == left[1]  # what is left, and its examples, whatever the input order


@SETTINGS
@given(root_groups(), st.integers(1, 3))
def test_a_roots_bytes_default_to_the_objects_it_streams(groups: list[Group], share: int) -> None:
    streamed = sum(a.bytes for g in groups for a in g.artifacts)
    for total in (streamed, streamed * share // 2):  # the limit met or not
        given_total = make_plan([snapshot(groups, total_bytes=total)], POLICY)
        counted = make_plan(
            [RootSnapshot(ROOT, 1, None if total == streamed else total, True, groups)], POLICY
        )
        assert counted.refusal == given_total.refusal
        assert counted.status == given_total.status
        assert counted.fingerprint == given_total.fingerprint


def _decided(d: Decision) -> tuple[object, ...]:
    actions = [(a.action, a.reason, a.objects, a.early_deletion_usd) for a in d.actions]
    return (d.ref, d.protected_by, d.rule, d.kept, d.reason, actions)


@SETTINGS
@given(root_groups(), st.booleans())
def test_explains_traced_decisions_are_the_plans(groups: list[Group], files: bool) -> None:
    root, classes = ("file:///data/", False) if files else (ROOT, True)
    plain = Decider(POLICY, AS_OF, root, classes)
    traced = Decider(POLICY, AS_OF, root, classes)
    for g in groups:
        a, b = plain.decide(g), traced.decide(g, trace=True)
        assert [_decided(d) for d in a.decisions] == [_decided(d) for d in b.decisions]
        assert a.not_applicable == b.not_applicable


# ----------------------------------------------------------------------------- tiers

_TIERS = [
    Tier(name="recent", keep_last=3, max_age=timedelta(days=30)),
    Tier(name="mid", keep_every_steps=5000, max_age=timedelta(days=45)),
    Tier(name="daily", keep_daily=2, max_age=timedelta(days=20)),
    Tier(name="weekly", keep_weekly=2),
    Tier(name="lt", keep=["final", "best"], best_metric={"name": "eval_loss", "mode": "min"}),
    Tier(name="huge", keep_last=1, max_age=timedelta(days=999_999_999)),
]


def _select_tier_by_tier(
    tiers: list[Tier], ckpts: list[Artifact], status: RunStatus, as_of: datetime
) -> dict[str, list[tuple[int, str]]]:
    """`tiers.select` as it was: each tier filters by subtracting ages, and sorts alone
    (by the run's order: where only some checkpoints have a step, a stepless one's place
    depends on steps outside a tier's window)."""
    r = run("a", status, artifacts=ckpts)
    at = tiering.written(ckpts)
    newer = tiering.order_key(ckpts, at)
    # the run's final checkpoint: the newest of all, whatever a tier's window
    final = tiering.newest(ckpts, at) if status is RunStatus.COMPLETED else None
    picks: dict[str, list[tuple[int, str]]] = {}
    for index, tier in enumerate(tiers):
        if tier.max_age is None:
            candidates = list(ckpts)
        else:
            candidates = [c for c in ckpts if as_of - at[id(c)] <= tier.max_age]
        ordered = sorted(candidates, key=newer, reverse=True)
        for key, whys in tiering._tier_select(tier, candidates, r, at, ordered, final).items():
            picks.setdefault(key, []).append((index, "; ".join(whys)))
    return picks


@SETTINGS
@given(
    checkpoints_of("runs/a/"),
    st.lists(st.sampled_from(_TIERS), min_size=1, max_size=4),
    st.sampled_from(list(RunStatus)),
    st.sampled_from([UTC, ZoneInfo("America/New_York"), ZoneInfo("Asia/Kolkata")]),
)
def test_tiers_select_as_they_did_tier_by_tier(
    ckpts: list[Artifact], tiers: list[Tier], status: RunStatus, zone: object
) -> None:
    complete = [c for c in ckpts if c.complete]
    as_of = AS_OF.astimezone(zone)  # type: ignore[arg-type]
    outcome = tiering.select(tiers, complete, run("a", status, artifacts=complete), as_of)
    assert outcome.picks == _select_tier_by_tier(tiers, complete, status, as_of)


def test_a_tier_window_holds_its_bound_in_any_zone() -> None:
    """A checkpoint exactly `max_age` old is in the window; a microsecond older is not,
    whatever the zone `as_of` is given in (across a daylight-saving change too)."""
    window = timedelta(days=30)
    tier = Tier(name="w", keep_last=5, max_age=window)
    for zone in (UTC, ZoneInfo("America/New_York")):
        as_of = datetime(2026, 3, 9, 12, tzinfo=zone)  # the day after clocks change there
        ckpts = []
        for step, older in enumerate((-1, 0, 1)):
            written = as_of.astimezone(UTC) - window - timedelta(microseconds=older)
            objs = [CatalogObject(f"runs/a/c{step}/w", 1, written, '"e"')]
            roles = (Component.WEIGHTS,)
            ckpts.append(
                Artifact(f"runs/a/c{step}/", Kind.CHECKPOINT, "hf", objs, roles, step=step)
            )
        picks = tiering.select([tier], ckpts, None, as_of).picks
        assert set(picks) == {"runs/a/c0/", "runs/a/c1/"}
        assert picks == _select_tier_by_tier([tier], ckpts, RunStatus.COMPLETED, as_of)


# ----------------------------------------------------------------------------- costs

_CLASSES = [None, "STANDARD", "STANDARD_IA", "GLACIER", "DEEP_ARCHIVE", "REDUCED_REDUNDANCY"]


@st.composite
def _priced(draw: st.DrawFn) -> CatalogObject:
    age = timedelta(hours=draw(st.integers(0, 24 * 400)))
    return CatalogObject(
        "k", draw(st.integers(0, 10**13)), AS_OF - age, '"e"', draw(st.sampled_from(_CLASSES))
    )


@SETTINGS
@given(
    st.lists(_priced(), max_size=5),
    st.sampled_from(list(ActionType)),
    st.sampled_from([None, "GLACIER", "DEEP_ARCHIVE"]),
    st.sampled_from([None, "s3://cold/x"]),
)
def test_an_actions_costs_are_the_sums_of_the_cost_model(
    objs: list[CatalogObject], kind: ActionType, target: str | None, dest: str | None
) -> None:
    """Every object's price and early charge, added one by one in the action's order (as
    `monthly_usd` and `early_charge_usd` define them)."""
    pol = POLICY
    before: float = 0
    early: float = 0
    for o in objs:
        billed = billable_bytes(o.size, o.storage_class)  # a class's minimum size
        before += billed / GB * pol.price(o.storage_class)
        cls = storage_class_of(o.storage_class)
        if cls in MIN_DAYS:
            days_in = (AS_OF - o.last_modified).total_seconds() / 86_400
            remaining = max(MIN_DAYS[cls] - days_in, 0.0)
            early += billed / GB * pol.price(cls) * remaining / DAYS_PER_MONTH
        else:
            early += 0.0
    got = action_costs(objs, kind, target, dest, AS_OF, Rates(pol))
    assert got[0] == early
    assert type(got[0]) is type(early)
    assert got[2] == before
    assert type(got[2]) is type(before)
    if kind not in (ActionType.TRANSITION, ActionType.ARCHIVE):
        assert got[1] == 0.0
        assert got[3] == 0.0


def test_an_artifact_pairs_its_objects_with_their_roles() -> None:
    """An artifact holds its objects and their roles side by side; `members` pairs them."""
    objs = [CatalogObject("c/w.bin", 4, AS_OF, '"a"'), CatalogObject("c/o.pt", 8, AS_OF, '"b"')]
    members = [Member(objs[0], Component.WEIGHTS), Member(objs[1], Component.OPTIMIZER)]
    art = Artifact.of_members("c/", Kind.CHECKPOINT, "hf", members, step=3, strippable=True)
    assert art.objects == objs
    assert art.roles == (Component.WEIGHTS, Component.OPTIMIZER)
    assert art.members == members
    assert (art.step, art.strippable, art.complete, art.metrics) == (3, True, True, {})
    assert art.components() == {"weights": 4, "optimizer": 8}
    assert art == Artifact("c/", Kind.CHECKPOINT, "hf", objs, art.roles, None, 3, strippable=True)
