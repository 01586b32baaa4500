"""Each tier kind on its own (governance.plan.tiers.select)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from governance.model.types import Artifact, RunStatus, SeenCompleted
from governance.plan.tiers import newest, select
from governance.policy.models import Tier
from tests.unit.plan_factories import AS_OF, checkpoint, run

R = "runs/a/"


def _kept(
    tier: Tier, ckpts: list[Artifact], status: RunStatus = RunStatus.COMPLETED
) -> set[int | None]:
    outcome = select([tier], ckpts, run("a", status, artifacts=ckpts), AS_OF)
    by_key = {c.key: c for c in ckpts}
    return {by_key[k].step for k in outcome.picks}


def test_keep_last_takes_highest_steps_not_newest_writes() -> None:
    ckpts = [checkpoint(R, s, age) for s, age in ((100, 1), (300, 9), (200, 5), (400, 20))]
    assert _kept(Tier(name="t", keep_last=2), ckpts) == {400, 300}


def test_max_age_limits_what_a_tier_sees() -> None:
    ckpts = [checkpoint(R, s, age) for s, age in ((100, 1), (300, 9), (200, 5), (400, 40))]
    tier = Tier(name="t", keep_last=2, max_age=timedelta(days=30))
    assert _kept(tier, ckpts) == {300, 200}


def test_keep_every_steps_keeps_highest_in_each_bucket() -> None:
    ckpts = [checkpoint(R, s) for s in (0, 4000, 4999, 5000, 9000, 12000)]
    outcome = select([Tier(name="mid", keep_every_steps=5000)], ckpts, None, AS_OF)
    steps = {c.step: c.key for c in ckpts}
    assert set(outcome.picks) == {steps[4999], steps[9000], steps[12000]}
    assert outcome.picks[steps[4999]][0][1] == "step 4999 is kept as the newest in bucket 0-4999"


def test_keep_daily_restic_semantics() -> None:
    """The newest in each of the N most recent days that have a checkpoint (gaps skipped)."""
    # AS_OF is 2026-11-30 02:15 UTC: 2h ago is Nov 30; 3h and 26h ago are Nov 29; 27h ago
    # is Nov 28; then Nov 25 and Nov 21. Three days kept: Nov 30, Nov 29 (3h), Nov 28.
    hours = [2, 3, 26, 27, 24 * 5, 24 * 9]
    ckpts = [checkpoint(R, i, h / 24) for i, h in enumerate(hours)]
    assert _kept(Tier(name="d", keep_daily=3), ckpts) == {0, 1, 3}


def test_keep_weekly_uses_iso_weeks() -> None:
    ckpts = [checkpoint(R, i, d) for i, d in enumerate((1, 2, 8, 9, 40))]
    weeks: dict[tuple[int, int], list[Artifact]] = {}
    for c in ckpts:
        iso = c.last_modified.isocalendar()
        weeks.setdefault((iso[0], iso[1]), []).append(c)
    recent = sorted(weeks, reverse=True)[:2]
    expected = {max(weeks[w], key=lambda c: c.last_modified).step for w in recent}
    assert _kept(Tier(name="w", keep_weekly=2), ckpts) == expected


def test_final_only_for_completed_runs() -> None:
    ckpts = [checkpoint(R, s) for s in (1, 2, 3)]
    tier = Tier(name="f", keep=("final",))
    assert _kept(tier, ckpts, RunStatus.COMPLETED) == {3}
    assert _kept(tier, ckpts, RunStatus.RUNNING) == set()


def test_best_min_max_and_tie_goes_to_higher_step() -> None:
    ckpts = [
        checkpoint(R, 1, metrics={"eval_loss": 0.5}),
        checkpoint(R, 2, metrics={"eval_loss": 0.3}),
        checkpoint(R, 3, metrics={"eval_loss": 0.3}),
        checkpoint(R, 4, metrics={"eval_loss": 0.9}),
        checkpoint(R, 5),
    ]
    best_min = Tier(name="b", keep=("best",), best_metric={"name": "eval_loss", "mode": "min"})
    best_max = Tier(name="b", keep=("best",), best_metric={"name": "eval_loss", "mode": "max"})
    assert _kept(best_min, ckpts) == {3}
    assert _kept(best_max, ckpts) == {4}


def test_best_falls_back_to_the_runs_recorded_best() -> None:
    ckpts = [checkpoint(R, s) for s in (1, 2, 3)]
    r = run("a", artifacts=ckpts)
    r.best_checkpoint = ckpts[0].key
    tier = Tier(name="b", keep=("best",), best_metric={"name": "eval_loss", "mode": "min"})
    outcome = select([tier], ckpts, r, AS_OF)
    assert list(outcome.picks) == [ckpts[0].key]


def test_union_within_a_tier_and_picks_in_tier_order() -> None:
    ckpts = [checkpoint(R, s, metrics={"eval_loss": float(s)}) for s in (1, 2, 3, 4)]
    t1 = Tier(name="one", keep_last=1)
    t2 = Tier(
        name="two", keep_last=1, keep=("best",), best_metric={"name": "eval_loss", "mode": "min"}
    )
    outcome = select([t1, t2], ckpts, None, AS_OF)
    steps = {c.key: c.step for c in ckpts}
    assert {steps[k] for k in outcome.picks} == {4, 1}
    assert [i for i, _ in outcome.picks[ckpts[3].key]] == [0, 1]


def test_without_steps_order_by_age() -> None:
    ckpts = [checkpoint(R, None, age, name=n) for n, age in (("last", 1), ("old", 9), ("mid", 5))]
    assert newest(ckpts) is ckpts[0]
    outcome = select([Tier(name="t", keep_last=2)], ckpts, None, AS_OF)
    assert set(outcome.picks) == {ckpts[0].key, ckpts[2].key}


def test_a_step_orders_its_checkpoint_even_beside_ones_without_a_step() -> None:
    """A Lightning run copied with `aws s3 sync` (keys in order, so `epoch=10` and
    `epoch=11` were written before `epoch=2`) and its `last.ckpt` copied last: the highest
    steps and `last.ckpt` are the newest three, whatever the copy did to the times."""
    names = [*sorted(f"epoch={e}-step={(e + 1) * 100}" for e in range(12)), "last"]
    ckpts = [
        checkpoint(R, None if n == "last" else int(n.rsplit("=", 1)[1]), 5 - i / 1000, name=n)
        for i, n in enumerate(names)
    ]
    last = ckpts[-1]
    assert newest(ckpts) is last
    outcome = select([Tier(name="t", keep_last=3)], ckpts, None, AS_OF)
    by_key = {c.key: c for c in ckpts}
    assert {by_key[k].step for k in outcome.picks} == {1200, 1100, None}
    assert "last is one of the newest 3" in outcome.picks[last.key][0][1]
    done = run(R, RunStatus.COMPLETED)
    final = select([Tier(name="fin", keep=["final"])], ckpts, done, AS_OF)
    assert list(final.picks) == [last.key]


def test_a_checkpoint_without_a_step_written_first_is_the_oldest() -> None:
    """A stepless file put in the run before training (weights to start from) does not
    take the place of the newest steps."""
    start = checkpoint(R, None, 30, name="pretrained")
    later = [checkpoint(R, s, 20 - s / 100) for s in (100, 200, 300)]
    assert newest([start, *later]) is later[-1]
    assert _kept(Tier(name="t", keep_last=1), [start, *later]) == {300}
    # written between steps 100 and 200 (a resumed run's export): above 100, below 200
    middle = checkpoint(R, None, 18.5, name="export")
    outcome = select([Tier(name="t", keep_last=3)], [*later, middle], None, AS_OF)
    assert set(outcome.picks) == {later[2].key, later[1].key, middle.key}


def test_the_order_of_a_mixed_run_does_not_depend_on_a_tiers_window() -> None:
    """Ordered once over the whole run: a stepless checkpoint written after step 300 ranks
    above step 200 (written later still), also in a window that leaves step 300 out."""
    c200, c300 = checkpoint(R, 200, 10), checkpoint(R, 300, 50)
    loose = checkpoint(R, None, 20, name="loose")
    assert newest([c200, c300, loose]) is loose
    tier = Tier(name="t", keep_last=1, max_age=timedelta(days=30))
    outcome = select([tier], [c200, c300, loose], None, AS_OF)
    assert set(outcome.picks) == {loose.key}


def test_trace_explains_every_tier() -> None:
    ckpts = [checkpoint(R, s, age) for s, age in ((1, 40), (2, 5))]
    tier = Tier(name="recent", keep_last=1, max_age=timedelta(days=30))
    outcome = select([tier], ckpts, None, AS_OF, trace=True)
    assert outcome.trace[ckpts[0].key] == [("recent", "not selected: older than max_age 30d")]
    assert outcome.trace[ckpts[1].key][0][1].startswith("selected: step 2 is one of the newest 1")


def test_final_is_the_runs_final_checkpoint_only_within_the_window() -> None:
    # The final (step 300) is outside the tier's 30 days; step 200, rewritten recently, is
    # inside: it is not the final checkpoint and the `final` key must not claim it.
    c100, c200, c300 = checkpoint(R, 100, 50), checkpoint(R, 200, 5), checkpoint(R, 300, 40)
    done = run(R, RunStatus.COMPLETED)
    windowed = Tier(name="fin", keep=["final"], max_age=timedelta(days=30))
    assert select([windowed], [c100, c200, c300], done, AS_OF).picks == {}
    plain = Tier(name="fin", keep=["final"])
    out = select([plain], [c100, c200, c300], done, AS_OF)
    assert list(out.picks) == [c300.key]
    assert "final checkpoint of the completed run" in out.picks[c300.key][0][1]


def test_days_and_weeks_are_utc_whatever_zone_a_time_is_given_in() -> None:
    a, b = checkpoint(R, 1, 10), checkpoint(R, 2, 10)
    plus5 = timezone(timedelta(hours=5))
    for art, hour in ((a, 18), (b, 20)):  # 18:00 and 20:00 UTC of one day (the next day at +05)
        for o in art.objects:
            o.last_modified = datetime(2026, 11, 20, hour, tzinfo=UTC).astimezone(plus5)
    assert list(select([Tier(name="d", keep_daily=2)], [a, b], None, AS_OF).picks) == [b.key]


def test_a_run_completed_by_record_keeps_the_final_that_plan_kept_or_none() -> None:
    """A run completed by an earlier plan's record (its evidence archived away since):
    its final is the checkpoint that plan kept as final while it is still here, and none
    once it is gone, not the newest of those left (each plan would archive one more)."""
    ckpts = [checkpoint(R, s) for s in (1, 2, 3)]
    tier = Tier(name="f", keep=("final",))
    for final, expected in ((ckpts[2].key, {3}), (f"{R}checkpoint-4/", set())):
        r = run("a", artifacts=ckpts)
        r.recorded = SeenCompleted("marker", AS_OF, "p-1", final)
        outcome = select([tier], ckpts, r, AS_OF)
        assert {c.step for c in ckpts if c.key in outcome.picks} == expected
        assert outcome.final == (final if expected else None)
    r = run("a", artifacts=ckpts)  # a record without a final: the newest, as before
    r.recorded = SeenCompleted("marker", AS_OF, "p-1", None)
    assert select([tier], ckpts, r, AS_OF).final == ckpts[2].key
