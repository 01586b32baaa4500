"""What a restore brought back is protected for `protect.restored_for` from the restore
(`protect.RestoredKeys`): inside that window only, named by plan and date, a part
restored said as such, the per-group shortcut agreeing, and a property: a restored
checkpoint is never acted on while protected, whatever the tiers would do."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from governance.model.types import Artifact, RunStatus
from governance.plan.decide import Decider
from governance.plan.protect import HeldProtector, Protector, protector_for
from tests.unit.plan_factories import (
    AS_OF,
    ROOT,
    checkpoint,
    group,
    kept_for,
    make_plan,
    policy,
    snapshot,
)
from tests.unit.test_plan_link_targets import STEPS, TIERS, run_x

PLAN = "p-20261201-093000-ab12"


Restore = tuple[str, datetime, str]


def restored(art: Artifact, days_ago: float, keys: int | None = None) -> list[Restore]:
    when = AS_OF - timedelta(days=days_ago)
    return [(o.key, when, PLAN) for o in art.objects[:keys]]


def why(restores: list[Restore], art: Artifact, keep_for: str = "30d") -> str | None:
    protect = TIERS.protect.model_copy(update={"restored_for": _days(keep_for)})
    protector = protector_for(protect, ROOT, AS_OF, (), restores)
    return protector(art, ROOT + art.key, AS_OF - art.last_modified)


def _days(text: str) -> timedelta:
    return timedelta(days=int(text.removesuffix("d")))


def test_a_restore_protects_its_artifact_inside_the_window_only() -> None:
    ckpt = checkpoint("runs/x/", 500, age_days=40)
    assert why(restored(ckpt, 2), ckpt) == (
        f"restored from plan {PLAN} on {(AS_OF - timedelta(days=2)):%Y-%m-%d %H:%M} UTC: kept "
        f"until {(AS_OF + timedelta(days=28)):%Y-%m-%d} (protect.restored_for 30d; protect it "
        "for good with a tag or a path)"
    )
    assert why(restored(ckpt, 31), ckpt) is None  # past the 30 days
    # after as_of (a plan as of a past time): storage as it is now holds the restore
    assert why(restored(ckpt, -1), ckpt) is not None
    assert why(restored(ckpt, 2), ckpt, keep_for="0d") is None  # turned off
    other = checkpoint("runs/x/", 600, age_days=40)
    assert why(restored(ckpt, 2), other) is None


def test_a_part_restored_says_how_much() -> None:
    ckpt = checkpoint("runs/x/", 500, age_days=40)
    reason = why(restored(ckpt, 1, keys=2), ckpt)
    assert reason is not None
    assert reason.startswith(f"2 of its objects restored from plan {PLAN} on ")


def test_the_group_shortcut_agrees_and_no_restore_costs_nothing() -> None:
    x = run_x()
    ckpt = x.artifacts[3]
    far = group("y", [checkpoint("runs/y/", 1, age_days=40)])
    restores = restored(ckpt, 1)
    protector = protector_for(TIERS.protect, ROOT, AS_OF, (), restores)
    assert isinstance(protector, HeldProtector)
    assert protector.by_age_alone(x.artifacts) is False
    assert protector.by_age_alone(far.artifacts) is True
    # restores outside the window make no held protector at all
    stale = restored(ckpt, 45)
    assert type(protector_for(TIERS.protect, ROOT, AS_OF, (), stale)) is Protector
    assert type(Decider(TIERS, AS_OF, ROOT, True).protector) is Protector


@settings(deadline=None)  # (a plan per example: the first pays for warm-up)
@given(
    picks=st.sets(st.sampled_from(STEPS), min_size=1, max_size=4),
    days_ago=st.floats(0.01, 29.9),
)
def test_a_restored_checkpoint_is_never_acted_on_and_still_counts(
    picks: set[int], days_ago: float
) -> None:
    x = run_x()
    by_step = {a.step: a for a in x.artifacts}
    restores = [r for s in picks for r in restored(by_step[s], days_ago)]
    plan = make_plan([replace(snapshot([x]), restored=tuple(restores))], TIERS)
    acted = {a.artifact.uri for a in plan.actions}
    for step in picks:
        uri = f"{ROOT}runs/x/checkpoint-{step}/"
        assert uri not in acted
        kept = kept_for(plan, f"runs/x/checkpoint-{step}/")
        assert kept is not None
        assert "restored from plan" in kept.reason
    # the tiers still count them: keep_last 2 keeps the two newest whatever was restored
    for step in (900, 1000):
        assert kept_for(plan, f"runs/x/checkpoint-{step}/") is not None
    unrestored = set(STEPS) - picks - {900, 1000}
    assert acted == {f"{ROOT}runs/x/checkpoint-{s}/" for s in unrestored}


EXPIRE = policy(
    """
rules:
  - name: dead-runs
    select: {run_status: [abandoned]}
    expire: {after: 14d}
safety: {max_delete_fraction: 1}
"""
)


def test_an_expire_rule_does_not_undo_a_restore_either() -> None:
    ckpt = checkpoint("runs/z/", 5, age_days=60)
    g = group("z", [ckpt], RunStatus.ABANDONED)
    assert [a.action.value for a in make_plan([snapshot([g])], EXPIRE).actions] == ["delete"]
    plan = make_plan([replace(snapshot([g]), restored=tuple(restored(ckpt, 3)))], EXPIRE)
    assert plan.actions == []
