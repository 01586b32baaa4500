"""A best an applied plan archived away is compared with what is left
(`tiers.best_scored`, `Decider(archived_bests=...)`): only a better checkpoint (or one as
good and newer: the spec's tie rule) is the run's best again; the plan records the bests
it archives away (`Plan.bests_archived`), and none it keeps in place."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from governance.model.types import Group
from governance.plan.decide import TracedDecision, decide_group
from governance.plan.tiers import ArchivedBest, ArchivedRecord, archived_of_run, best_scored
from governance.plan.types import Plan
from tests.unit.plan_factories import (
    AS_OF,
    ROOT,
    checkpoint,
    group,
    make_plan,
    policy,
    snapshot,
)

POLICY_TEXT = """
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - name: best
        keep: [best]
        best_metric: {name: eval_loss, mode: min}
        archive: {url: "s3://cold/"}
      - {name: recent, keep_last: 1}
    otherwise: delete
safety: {max_delete_fraction: 1}
"""
POLICY = policy(POLICY_TEXT)
BY_CLASS = POLICY_TEXT.replace(
    'archive: {url: "s3://cold/"}', "archive: {storage_class: GLACIER_IR}"
)
assert BY_CLASS != POLICY_TEXT
IN_PLACE = policy(BY_CLASS)


def run_of(losses: dict[int, float]) -> Group:
    arts = [
        checkpoint("runs/x/", s, age_days=40 - s / 100, metrics={"eval_loss": v})
        for s, v in sorted(losses.items())
    ]
    return group("x", arts)


def archived(
    value: float, step: int | None = 400, since: datetime = AS_OF
) -> dict[str, list[ArchivedRecord]]:
    gone = ArchivedBest(value, step, f"runs/x/checkpoint-{step}/", "p-0", since)
    return {"runs/x/": [(("eval_loss", "min"), gone)]}


def archives(plan: Plan) -> set[str]:
    return {a.artifact.uri for a in plan.actions if a.action.value == "archive"}


def test_the_best_of_what_is_left_is_archived_only_when_it_beats_the_archived_one() -> None:
    x = run_of({500: 2.0, 600: 1.8, 700: 2.5})
    fresh = make_plan([snapshot([x])], POLICY)
    assert archives(fresh) == {f"{ROOT}runs/x/checkpoint-600/"}
    [best] = fresh.bests_archived[ROOT]
    assert (best.run_key, best.metric, best.mode, best.value, best.step) == (
        "runs/x/", "eval_loss", "min", 1.8, 600,
    )  # fmt: skip
    assert best.action.id > 0
    assert best.action.artifact.uri.endswith("checkpoint-600/")
    worse = make_plan([replace(snapshot([x]), archived_bests=archived(1.5))], POLICY)
    assert archives(worse) == set()
    assert worse.bests_archived == {}
    # with no best to keep, rotation is the recent tier's alone: 700 kept, the rest deleted
    assert {a.artifact.uri for a in worse.actions} == {
        f"{ROOT}runs/x/checkpoint-500/", f"{ROOT}runs/x/checkpoint-600/",
    }  # fmt: skip
    better = make_plan([replace(snapshot([x]), archived_bests=archived(1.9))], POLICY)
    assert archives(better) == {f"{ROOT}runs/x/checkpoint-600/"}


def test_a_tie_goes_to_the_newer_as_the_spec_says() -> None:
    left = [checkpoint("runs/x/", s, metrics={"eval_loss": 1.5}) for s in (300, 500)]
    newer = best_scored(left, "eval_loss", "min", archived=dict(archived(1.5, step=400)["runs/x/"]))
    assert newer is not None
    assert newer[0].step == 500
    older = best_scored(
        left[:1], "eval_loss", "min", archived=dict(archived(1.5, step=400)["runs/x/"])
    )
    assert older is None


def test_an_archive_in_place_records_no_best() -> None:
    """A best archived by class stays in the root and is compared with the others as it
    is: nothing to remember."""
    plan = make_plan([snapshot([run_of({500: 2.0, 600: 1.8})])], IN_PLACE)
    assert archives(plan) == {f"{ROOT}runs/x/checkpoint-600/"}
    assert plan.bests_archived == {}


@settings(deadline=None)  # (a plan per example: the first pays for warm-up)
@given(
    losses=st.dictionaries(
        st.integers(1, 30).map(lambda i: i * 100), st.floats(0, 10), min_size=1, max_size=8
    ),
    gone=st.floats(0, 10),
)
def test_a_checkpoint_is_archived_as_best_only_if_it_beats_the_archived_best(
    losses: dict[int, float], gone: float
) -> None:
    x = run_of(losses)
    plan = make_plan([replace(snapshot([x]), archived_bests=archived(gone, step=1))], POLICY)
    best_step, best_value = min(losses.items(), key=lambda sv: (sv[1], -sv[0]))
    beats = best_value <= gone  # (a tie: every step here is newer than the archived 1)
    expected = {f"{ROOT}runs/x/checkpoint-{best_step}/"} if beats else set()
    assert archives(plan) == expected


def test_a_run_newer_than_the_archiving_plan_is_another_run_and_not_compared() -> None:
    """A rerun into the same folder (the run wiped, a new one written): none of its
    checkpoints is as old as the plan that archived the old run's best. Compared with
    that best, its own was neither archived nor kept, and `otherwise: delete` took it."""
    x = run_of({500: 2.0, 600: 1.8, 700: 2.5})  # written 33-35 days before AS_OF
    old_run = archived(1.0, since=AS_OF - timedelta(days=60))
    plan = make_plan([replace(snapshot([x]), archived_bests=old_run)], POLICY)
    assert archives(plan) == {f"{ROOT}runs/x/checkpoint-600/"}


def test_explain_names_the_archived_best_that_keeps_the_tier_from_choosing() -> None:
    x = run_of({500: 2.0, 600: 1.8, 700: 2.5})
    result = decide_group(x, ROOT, True, POLICY, AS_OF, trace=True, archived_bests=archived(1.5))
    [d] = [d for d in result.decisions if d.artifact.step == 600]
    assert isinstance(d, TracedDecision)
    assert (
        "best",
        "not selected: not the best by eval_loss: runs/x/checkpoint-400/ (1.5), archived "
        "away by plan p-0, is",
    ) in d.tiers


def test_of_the_bests_recorded_for_a_folder_the_run_planned_now_keeps_its_own() -> None:
    """A rerun's own archived best is compared with, the old run's is not (it was all
    dropped when the old run's, the better value, was the one recorded: the rerun's
    next best was archived night after night)."""
    old = ArchivedBest(1.0, 400, "runs/x/checkpoint-400/", "p-old", AS_OF - timedelta(days=60))
    mine = ArchivedBest(1.9, 300, "runs/x/checkpoint-300/", "p-new", AS_OF - timedelta(days=10))
    records: list[ArchivedRecord] = [(("eval_loss", "min"), old), (("eval_loss", "min"), mine)]
    rerun_started = AS_OF - timedelta(days=35)  # after the old plan, before the new one
    assert archived_of_run(records, rerun_started) == {("eval_loss", "min"): mine}
    assert archived_of_run(records, AS_OF - timedelta(days=90)) == {("eval_loss", "min"): old}
    assert archived_of_run(records, AS_OF) == {}
    x = run_of({500: 2.0, 600: 1.95, 700: 2.5})  # written 33-35 days before AS_OF
    plan = make_plan([replace(snapshot([x]), archived_bests={"runs/x/": records})], POLICY)
    assert archives(plan) == set()  # 1.95 is no better than its own archived 1.9
