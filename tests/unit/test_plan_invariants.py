"""The plan invariants of policy.md, as hypothesis properties over generated runs.

Each property plans a generated root (1-4 runs with random steps, ages, completeness,
statuses, metrics and tags, plus logs, residue, uploads and a protected release folder)
under the shipped example policy, then checks one invariant against an oracle written
here, independently of the planner's own helpers.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from governance.model.types import Artifact, Group, Kind, RunStatus
from governance.plan.build import DEDUPE_NOT_PLANNED, build_plan
from governance.plan.types import ActionType, KeptHow, Plan
from governance.policy import load_policy_text
from governance.policy.models import Policy
from tests.unit.plan_factories import (
    AS_OF,
    EXAMPLE_POLICY_PATH,
    OBJECT_ATTRIBUTES,
    PROTECTED_PREFIX,
    ROOT,
    KiB,
    MiB,
    actions_for,
    checkpoint,
    example_policy,
    group,
    kept_for,
    kinds,
    make_plan,
    released_groups,
    root_groups,
    single,
    snapshot,
    upload,
)

POLICY: Policy = example_policy()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIVE = (RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.UNKNOWN)


def _complete(g: Group) -> list[Artifact]:
    return [a for a in g.artifacts if a.kind is Kind.CHECKPOINT and a.complete]


def _order(arts: list[Artifact]) -> Any:
    """policy.md's order of a run's checkpoints, newest highest (plan.tiers, spelled out):
    by step, by write without steps; where only some have one, each stepless checkpoint
    just above the highest step written at or before it."""
    if all(a.step is not None for a in arts):
        return lambda a: (a.step, a.last_modified, a.key)
    if all(a.step is None for a in arts):
        return lambda a: (a.last_modified, a.key)
    stepped = sorted(
        (a for a in arts if a.step is not None), key=lambda a: (a.step, a.last_modified, a.key)
    )

    def key(a: Artifact) -> tuple[Any, ...]:
        if a.step is not None:
            return (stepped.index(a), 0, a.last_modified, a.key)
        before = [i for i, b in enumerate(stepped) if b.last_modified <= a.last_modified]
        return (max(before, default=-1), 1, a.last_modified, a.key)

    return key


def _deleted(plan: Plan, art: Artifact) -> bool:
    return any(
        a.action is ActionType.DELETE for a in plan.actions if a.artifact.uri == ROOT + art.key
    )


def _live_groups(groups: list[Group]) -> Iterator[Group]:
    for g in groups:
        if g.run is None or g.run.status in LIVE:
            yield g


def _thin_everything() -> Policy:
    text = EXAMPLE_POLICY_PATH.read_text(encoding="utf-8")
    marker = "        max_age: 30d\n      - name: mid-term\n"
    assert marker in text
    return load_policy_text(
        text.replace(
            marker,
            "        max_age: 30d\n        keep_components: [weights, metadata]\n"
            "      - name: mid-term\n",
        )
    )


THIN_EVERYTHING = _thin_everything()
"""The example policy with its `recent` tier stripping too: every checkpoint a tier keeps
is stripped or archived, so only invariant 1 can keep one whole."""


@SETTINGS
@given(root_groups(), st.sampled_from(["example", "thin everything"]))
def test_invariant_1_newest_complete_checkpoint_is_kept(groups: list[Group], which: str) -> None:
    plan = make_plan(groups, POLICY if which == "example" else THIN_EVERYTHING)
    for g in _live_groups(groups):
        complete = _complete(g)
        if not complete:
            continue
        top = max(complete, key=_order(complete))
        assert not _deleted(plan, top), (top.key, [a.reason for a in plan.actions])
        assert kept_for(plan, top.key) is not None
        if g.run is not None and g.run.status in (RunStatus.RUNNING, RunStatus.UNKNOWN):
            # a run still writing resumes from it: whole, where it is
            acted = [a for a in plan.actions if a.artifact.uri == ROOT + top.key]
            assert acted == [], (top.key, [a.reason for a in acted])


def _protected(art: Artifact) -> bool:
    if AS_OF - art.last_modified < timedelta(days=3):
        return True
    if art.key.startswith("releases/"):
        return True
    if any(
        o.legal_hold or (o.retain_until is not None and o.retain_until > AS_OF) or o.unread
        for o in art.objects
    ):
        return True  # locked, or tags / lock state not read: cannot be proven unprotected
    return any(
        (m.obj.tags or {}).get("retain") == "true" or "legal-hold" in (m.obj.tags or {})
        for m in art.members
    )


@st.composite
def attributed_groups(draw: st.DrawFn) -> list[Group]:
    """`root_groups`, with some objects locked, under legal hold, or with their tags or
    lock state not read (as the catalog marks them when protection needs them)."""
    groups = draw(root_groups())
    for g in groups:
        for i, art in enumerate(g.artifacts):
            if draw(st.integers(0, 3)) != 0:  # a quarter of the artifacts
                continue
            objects = list(art.objects)
            j = draw(st.integers(0, len(objects) - 1))
            objects[j] = dataclasses.replace(objects[j], **draw(st.sampled_from(OBJECT_ATTRIBUTES)))
            g.artifacts[i] = dataclasses.replace(art, objects=objects)
    return groups


PROTECTED_PATH = "s3://ml-artifacts/releases/**"
assert tuple(POLICY.protect.paths) == (PROTECTED_PATH,), (
    POLICY.protect.paths
)  # what `_protected` says


def _shielded_tree(prefix: str) -> list[Group]:
    """Under `prefix`: a failed run last written 400 days ago (checkpoints, an unfinished
    save, a log, a stale upload) and a completed run whose checkpoints and logs are 100 days
    old, with old logs outside any run; every one of them due for some rule of the example
    policy."""
    dead, done = f"{prefix}dead/", f"{prefix}done/"
    failed = [
        checkpoint(dead, 1000, 400, metrics={"eval_loss": 0.5}),
        checkpoint(dead, 2000, 400),
        checkpoint(dead, 3000, 400, complete=False),  # residue by now
        single(f"{dead}logs/train.log", Kind.LOG, 300 * KiB, 400, run_key=dead),
        upload(f"{dead}upload.bin", 2 * MiB, 400),
    ]
    completed = [
        *(
            checkpoint(done, s, 100, metrics={"eval_loss": 2000 / s})
            for s in range(1000, 6001, 1000)
        ),
        single(f"{done}logs/train.log", Kind.LOG, 300 * KiB, 100, run_key=done),
    ]
    loose = [single(f"{prefix}notes/build.log", Kind.LOG, 300 * KiB, 500)]
    return [
        group("dead", failed, RunStatus.FAILED, key=dead),
        group("done", completed, RunStatus.COMPLETED, key=done),
        group(None, loose),
    ]


def _every_artifact_with(attributes: dict[str, Any]) -> list[Group]:
    """`_shielded_tree` under runs/ (every artifact due for some rule), each artifact's
    first object carrying `attributes` (one of `OBJECT_ATTRIBUTES`)."""
    groups = _shielded_tree("runs/")
    for g in groups:
        for i, art in enumerate(g.artifacts):
            objects = [dataclasses.replace(art.objects[0], **attributes), *art.objects[1:]]
            g.artifacts[i] = dataclasses.replace(art, objects=objects)
    return groups


def _with_each_attribute(test: Any) -> Any:
    """Explicit examples of the property: the `ci` profile's fixed draws rarely put a lock
    on an artifact a rule would act on (a check that ignored object lock passed them)."""
    for attributes in OBJECT_ATTRIBUTES:
        test = example(groups=_every_artifact_with(attributes))(test)
    return test


@SETTINGS
@given(st.one_of(root_groups(), attributed_groups(), released_groups()))
@_with_each_attribute
def test_invariant_2_nothing_protected_is_in_the_plan(groups: list[Group]) -> None:
    plan = make_plan(groups, POLICY)
    touched = {a.artifact.uri for a in plan.actions}
    for a in plan.actions:  # not one object under the protected path, whatever artifact
        assert not [u for u in a.object_uris if u.startswith(ROOT + PROTECTED_PREFIX)], a.reason
    for g in groups:
        for art in g.artifacts:
            if _protected(art):
                assert ROOT + art.key not in touched
            if art.key.startswith(PROTECTED_PREFIX):
                kept = kept_for(plan, art.key)
                assert kept is not None, art.key
                assert kept.how in (KeptHow.PROTECTED, KeptHow.IN_FLIGHT), (art.key, kept)
        if g.run is not None and g.run.status is RunStatus.RUNNING:
            # protect.run_status: only tiers thin a running run
            uris = {ROOT + a.key for a in g.artifacts}
            assert {a.rule for a in plan.actions if a.artifact.uri in uris} <= {"checkpoints"}


def test_invariant_2_protected_path_shields_what_rules_would_delete_or_move() -> None:
    """The same tree, due for `failed-runs`, `residue`, the tiers (delete, strip, archive)
    and `logs` (transition, expire) under runs/, is not in the plan at all under the
    protected path releases/**: every artifact there is kept as protected, by that path."""
    control = make_plan(_shielded_tree("runs/"), POLICY)
    assert {a.action for a in control.actions} == {
        ActionType.DELETE,
        ActionType.STRIP,
        ActionType.ARCHIVE,
        ActionType.TRANSITION,
        ActionType.ABORT_UPLOAD,
    }
    tree = _shielded_tree(PROTECTED_PREFIX)
    plan = make_plan(tree, POLICY)
    assert plan.actions == []
    assert plan.summary.bytes_deleted == 0
    for g in tree:
        for art in g.artifacts:
            kept = kept_for(plan, art.key)
            assert kept is not None, art.key
            assert kept.how is KeptHow.PROTECTED, (art.key, kept)
            assert kept.reason.startswith(f"protected: under protected path {PROTECTED_PATH}")


def _without_dedupe() -> Policy:
    text = EXAMPLE_POLICY_PATH.read_text(encoding="utf-8")
    start = text.index("dedupe:")
    end = text.index("\napproval:")
    return load_policy_text(text[:start] + text[end + 1 :])


WITHOUT_DEDUPE = _without_dedupe()


@st.composite
def duplicated_groups(draw: st.DrawFn) -> list[Group]:
    """`root_groups` where some weights files hold the same content (the same base
    weights copied into several runs): one shared ETag and size."""
    groups = draw(root_groups())
    for g in groups:
        for art in g.artifacts:
            for o in art.objects:
                if o.key.endswith(".safetensors") and draw(st.booleans()):
                    o.etag, o.size = '"base-weights"', 4 * 1024 * 1024
    return groups


@SETTINGS
@given(duplicated_groups(), st.sampled_from(["delete", "report", "stub"]))
def test_invariant_3_dedupe_never_removes_the_last_copy(groups: list[Group], action: str) -> None:
    """Content dedupe is not planned yet: whatever `dedupe.action` says, the plan has no
    dedupe action (so no content group loses a copy to dedupe), says so in a note, and is
    otherwise the plan of the same policy without the block."""
    with_block = POLICY.model_copy(
        update={"dedupe": POLICY.dedupe.model_copy(update={"action": action})}  # type: ignore[union-attr]
    )
    plan = make_plan(groups, with_block)
    assert not [a for a in plan.actions if a.action is ActionType.DEDUPE]
    assert DEDUPE_NOT_PLANNED in plan.notes
    plain = make_plan(groups, WITHOUT_DEDUPE)
    assert DEDUPE_NOT_PLANNED not in plain.notes
    assert _canonical(plan) == _canonical(plain)


@SETTINGS
@given(root_groups())
def test_invariant_5_every_action_and_kept_checkpoint_has_a_reason(groups: list[Group]) -> None:
    plan = make_plan(groups, POLICY)
    for a in plan.actions:
        assert a.rule
        assert a.reason.strip()
        assert a.objects
    for k in plan.kept:
        assert k.reason.strip()
    for g in groups:
        for art in _complete(g):
            kept, deleted = kept_for(plan, art.key) is not None, _deleted(plan, art)
            assert kept != deleted, art.key  # every complete checkpoint: kept xor deleted
    assert [a.id for a in plan.actions] == list(range(1, len(plan.actions) + 1))


def _canonical(plan: Plan) -> tuple[Any, ...]:
    actions = [
        (a.id, a.rule, a.tier, a.action, a.artifact, a.objects, a.reason, a.storage_class,
         a.dest_url, a.early_deletion_usd)
        for a in plan.actions
    ]  # fmt: skip
    return plan.fingerprint, actions, plan.kept, plan.status, plan.refusal, plan.summary


@SETTINGS
@given(root_groups(), st.randoms(use_true_random=False))
def test_invariant_6_determinism_under_shuffled_input(
    groups: list[Group], rnd: random.Random
) -> None:
    first = make_plan(groups, POLICY)
    shuffled = [Group(g.run, rnd.sample(g.artifacts, len(g.artifacts))) for g in groups]
    rnd.shuffle(shuffled)
    second = build_plan(
        [snapshot(shuffled)], POLICY, AS_OF, plan_id="other", created_by="b", created_at=AS_OF
    )
    assert _canonical(first) == _canonical(second)


def _best_within(days: int) -> Policy:
    """The example policy with a `max_age` on the tier that keeps `best`: that tier sees
    only its window, and invariant 7 must hold beyond it."""
    text = EXAMPLE_POLICY_PATH.read_text(encoding="utf-8")
    marker = "        best_metric: {name: eval_loss, mode: min}\n"
    assert marker in text
    return load_policy_text(text.replace(marker, marker + f"        max_age: {days}d\n"))


WINDOWED_BEST = _best_within(20)
WINDOW = timedelta(days=20)
"""WINDOWED_BEST's `long-term` tier (keep: [final, best]) sees checkpoints this young."""


@st.composite
def old_best_groups(draw: st.DrawFn) -> list[Group]:
    """`root_groups` where every run gets one more complete checkpoint, scored as well as
    or better than any other (eval_loss 0.1, or 0.5: the lowest `checkpoints_of` draws),
    written 21-120 days ago: beyond WINDOWED_BEST's 20-day window of `best`, and below the
    run's other steps where it can be (so that often no tier and no other invariant keeps
    it, and only invariant 7 does)."""
    out: list[Group] = []
    for g in draw(root_groups()):
        if g.run is None:
            out.append(g)
            continue
        run_key = g.run.key
        step: int | None = None
        name: str | None = None
        if any("/ckpt-" in a.key for a in g.artifacts):  # no steps: ordered by time
            name = "ckpt-best"
        else:
            steps = {a.step for a in g.artifacts if a.step is not None}
            low = min(steps, default=40_001)
            if low > 0:
                step = draw(st.integers(0, low - 1))
            else:
                step = draw(
                    st.integers(0, 40_000).filter(lambda s, used=frozenset(steps): s not in used)
                )
        best = checkpoint(
            run_key,
            step,
            draw(st.integers(21 * 24, 120 * 24)) / 24,
            metrics={"eval_loss": draw(st.sampled_from([0.1, 0.5]))},
            strippable=draw(st.booleans()),
            name=name,
        )
        artifacts = sorted([*g.artifacts, best], key=lambda a: a.key)
        out.append(group(g.run.name, artifacts, g.run.status, key=run_key))
    return out


def _scored(
    run: str, *specs: tuple[int | None, float, float], status: RunStatus | None = None
) -> Group:
    """A group of complete checkpoints (step or None, age in days, eval_loss); `status`
    None: checkpoints outside any run, named `ckpt-<i>` (no steps: ordered by time)."""
    key = f"runs/{run}/"
    arts = [
        checkpoint(key, step, age, metrics={"eval_loss": loss},
                   name=None if step is not None else f"ckpt-{i}")
        for i, (step, age, loss) in enumerate(specs)
    ]  # fmt: skip
    if status is None:
        return group(None, [dataclasses.replace(a, run=None) for a in arts])
    return group(run, arts, status)


OLD_BEST: dict[str, list[Group]] = {
    # completed: the best (step 1000) is 60 days old, beyond every tier's window; the
    # window's own best (step 12000) goes to the long-term tier, the final to `recent`
    "completed, best beyond every window": [
        _scored(
            "a",
            (1000, 60, 0.5),
            (2000, 60, 1.0),
            (12000, 10, 0.9),
            (14000, 8, 1.25),
            (16000, 6, 1.25),
            (18000, 4, 1.25),
            status=RunStatus.COMPLETED,
        )
    ],
    # running: the best (step 5000, 25 days) is inside `recent`'s 30 days but not among
    # its newest 3, and not the newest of its 5000-step bucket: only past best's 20 days
    "running, best inside recent's window only": [
        _scored(
            "b",
            (5000, 25, 0.5),
            (6000, 22, 1.0),
            (7000, 5, 1.0),
            (8000, 4, 1.0),
            (9000, 3.5, 1.0),
            status=RunStatus.RUNNING,
        )
    ],
    # outside any run, no steps: ordered by time, the oldest is the best
    "outside any run, no steps": [
        _scored(
            "c",
            (None, 90, 0.5),
            (None, 10, 1.25),
            (None, 8, 1.25),
            (None, 6, 1.25),
            (None, 4, 1.25),
        )
    ],
    # a tie for best, both beyond the window: the newer of the two (step 200) is the best
    "tie beyond the window": [
        _scored(
            "d",
            (100, 50, 0.5),
            (200, 45, 0.5),
            (300, 10, 1.0),
            (400, 8, 1.0),
            (500, 6, 1.0),
            (600, 4, 1.0),
            status=RunStatus.COMPLETED,
        )
    ],
}
"""Groups whose best checkpoint lies beyond WINDOWED_BEST's window of `best` and that no
tier keeps: only invariant 7 keeps it (`test_invariant_7_examples_reach_past_the_window`
checks that they still do)."""


def _best_of(g: Group) -> Artifact | None:
    """The oracle: the best complete checkpoint by eval_loss (min), ties to the newest."""
    scored = [a for a in _complete(g) if "eval_loss" in a.metrics]
    if not scored:
        return None
    low = min(a.metrics["eval_loss"] for a in scored)
    ties = [a for a in scored if a.metrics["eval_loss"] == low]
    return max(ties, key=_order(_complete(g)))


def _with_old_best(test: Any) -> Any:
    for groups in OLD_BEST.values():
        test = example(groups=groups, which="windowed best")(test)
    return test


@SETTINGS
@_with_old_best
@given(st.one_of(root_groups(), old_best_groups()), st.sampled_from(["example", "windowed best"]))
def test_invariant_7_best_checkpoint_is_never_deleted(groups: list[Group], which: str) -> None:
    plan = make_plan(groups, POLICY if which == "example" else WINDOWED_BEST)
    for g in _live_groups(groups):
        best = _best_of(g)
        if best is None:
            continue
        assert not _deleted(plan, best)
        kept = kept_for(plan, best.key)
        assert kept is not None
        if kept.reason.startswith("invariant 7:"):
            # only past the window of a tier with a max_age: without one, the tier sees all
            assert which == "windowed best"
            assert AS_OF - best.last_modified > WINDOW
            assert (kept.rule, kept.tier, kept.how) == ("checkpoints", "long-term", KeptHow.WHOLE)
            assert actions_for(plan, best.key) == []


@pytest.mark.parametrize("name", list(OLD_BEST))
def test_invariant_7_examples_reach_past_the_window(name: str) -> None:
    """The explicit examples of the property above do test invariant 7 beyond the window:
    only the invariant keeps their best (the example policy's unwindowed tier keeps it
    itself, stripped and archived)."""
    (g,) = OLD_BEST[name]
    best = _best_of(g)
    assert best is not None
    assert AS_OF - best.last_modified > WINDOW
    kept = kept_for(make_plan([g], WINDOWED_BEST), best.key)
    assert kept is not None
    assert kept.reason.startswith("invariant 7:"), kept.reason
    unwindowed = kept_for(make_plan([g], POLICY), best.key)
    assert unwindowed is not None
    assert (unwindowed.tier, unwindowed.how) == ("long-term", KeptHow.ARCHIVED)


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.RUNNING, RunStatus.UNKNOWN])
def test_invariant_7_best_older_than_the_best_tiers_max_age_is_kept_whole(
    status: RunStatus,
) -> None:
    """The run's best (step 1000, 60 days old) is outside every tier's window under
    WINDOWED_BEST (recent and mid-term: 30 days, long-term: 20): the tiers select nothing
    and `otherwise: delete` would delete it, as it deletes step 2000, as old and worse.
    Invariant 7 keeps it whole instead, in the long-term tier's name; that tier still keeps
    the best of its own window (step 12000), stripped and archived as it says."""
    [g] = OLD_BEST["completed, best beyond every window"]
    g = group("a", g.artifacts, status)
    best, twin, window_best = (f"runs/a/checkpoint-{s}/" for s in (1000, 2000, 12000))
    plan = make_plan([g], WINDOWED_BEST)
    assert actions_for(plan, best) == []
    kept = kept_for(plan, best)
    assert kept is not None
    assert (kept.rule, kept.tier, kept.how) == ("checkpoints", "long-term", KeptHow.WHOLE)
    assert kept.reason == (
        "invariant 7: step 1000 has the best eval_loss (0.5, min) of all the run's "
        "checkpoints (the long-term tier keeps best), kept whole instead of: checkpoints: "
        "step 1000 is not kept by any tier (recent, mid-term, long-term); otherwise: delete"
    )
    assert kinds(plan, twin) == ["delete"]
    assert kept_for(plan, twin) is None
    assert kinds(plan, window_best) == ["strip", "archive"]
    by_window = kept_for(plan, window_best)
    assert by_window is not None
    assert (by_window.tier, by_window.how) == ("long-term", KeptHow.ARCHIVED)
    assert by_window.reason.startswith("long-term tier: step 12000 has the best eval_loss (0.9")
    # without the window the tier sees step 1000 itself: no invariant needed
    plain = kept_for(make_plan([g], POLICY), best)
    assert plain is not None
    assert (plain.tier, plain.how) == ("long-term", KeptHow.ARCHIVED)
    assert plain.reason.startswith("long-term tier: step 1000 has the best eval_loss")


def _newest_incomplete(complete_ages: tuple[float, ...]) -> Group:
    """A running run: complete checkpoints at steps 100, 200, ... (`complete_ages` days
    old), and four newer incomplete saves (in flight, 5 hours old) above them."""
    r = "runs/a/"
    complete = [checkpoint(r, 100 * (i + 1), age) for i, age in enumerate(complete_ages)]
    top = 100 * len(complete_ages)
    flying = [checkpoint(r, top + 100 * i, 0.2, complete=False) for i in range(1, 5)]
    return group("a", [*complete, *flying], RunStatus.RUNNING)


@SETTINGS
@example(groups=[_newest_incomplete((10, 9, 8, 7))])
@example(groups=[_newest_incomplete((2.9, 2.5, 2, 1.5))])  # inside protect.min_age
@example(groups=[_newest_incomplete((40, 35, 8))])  # only one within 30 days
@given(root_groups())
def test_invariant_8_incomplete_never_counted_as_keep_last(groups: list[Group]) -> None:
    """The `recent` tier keeps the 3 highest complete checkpoints within 30 days, whole
    (incomplete ones, however new, take none of the 3 places). One that a protection
    (min_age, tags) keeps is kept as protected, and still counted by the tier."""
    plan = make_plan(groups, POLICY)
    for g in _live_groups(groups):
        recent = [a for a in _complete(g) if AS_OF - a.last_modified <= timedelta(days=30)]
        # (ordered as the whole run is: a stepless one's place depends on steps outside)
        for art in sorted(recent, key=_order(_complete(g)), reverse=True)[:3]:
            assert not _deleted(plan, art)
            kept = kept_for(plan, art.key)
            assert kept is not None
            if kept.how is KeptHow.PROTECTED:
                assert kept.reason.startswith("protected: "), kept.reason
                assert kept.reason.endswith("; counted by the recent tier"), kept.reason
                assert kept.tier is None
            else:
                assert (kept.rule, kept.tier, kept.how) == ("checkpoints", "recent", KeptHow.WHOLE)
            assert actions_for(plan, art.key) == []


def test_invariant_8_newest_incomplete_keeps_newest_complete() -> None:
    """Outside every max_age no tier keeps the newest complete checkpoint (it is not the
    `recent` tier's: 40 days > 30): invariant 1 keeps it, whole and where it is (the run is
    running), in the name of the rule that owns it."""
    r = "runs/a/"
    complete = [checkpoint(r, s, 40) for s in (100, 200)]  # outside every max_age
    flying = [checkpoint(r, s, 0.2, complete=False) for s in (300, 400, 500, 600)]
    plan = make_plan([group("a", [*complete, *flying], RunStatus.RUNNING)], POLICY)
    kept = kept_for(plan, complete[1].key)
    assert kept is not None
    assert not _deleted(plan, complete[1])
    assert kept.reason.startswith("invariant 1: step 200 is the newest complete checkpoint")
    assert (kept.rule, kept.tier, kept.how) == ("checkpoints", None, KeptHow.WHOLE)
    assert actions_for(plan, complete[1].key) == []  # not stripped or archived either
    assert _deleted(plan, complete[0])
    for f in flying:
        k = kept_for(plan, f.key)
        assert k is not None
        assert k.how is KeptHow.IN_FLIGHT


@pytest.mark.parametrize(
    ("ages", "how"),
    [((10, 9, 8, 7), KeptHow.WHOLE), ((2.9, 2.5, 2, 1.5), KeptHow.PROTECTED)],
    ids=["past min_age", "inside min_age"],
)
def test_invariant_8_newest_incomplete_takes_no_recent_place(
    ages: tuple[float, ...], how: KeptHow
) -> None:
    """Within 30 days, the newest complete checkpoint below four incomplete saves is the
    `recent` tier's (with the next two): kept whole by the tier, or, while inside
    protect.min_age, kept as protected and counted by the tier. The fourth complete one,
    in the same 5000-step bucket and without a metric, is deleted once old enough."""
    g = _newest_incomplete(ages)
    plan = make_plan([g], POLICY)
    newest3 = [f"runs/a/checkpoint-{s}/" for s in (400, 300, 200)]
    for key in newest3:
        assert actions_for(plan, key) == []
        kept = kept_for(plan, key)
        assert kept is not None
        assert (kept.rule, kept.how) == ("checkpoints", how)
        if how is KeptHow.WHOLE:
            assert kept.tier == "recent"
            assert kept.reason.startswith("recent tier: step ")
            assert "is one of the newest 3 complete checkpoints within 30d; kept whole" in (
                kept.reason
            )
        else:
            assert kept.tier is None
            assert kept.reason.startswith("protected: last written ")
            assert kept.reason.endswith("inside protect.min_age 3d; counted by the recent tier")
    fourth = "runs/a/checkpoint-100/"
    if how is KeptHow.WHOLE:
        assert kinds(plan, fourth) == ["delete"]
    else:
        kept = kept_for(plan, fourth)
        assert kept is not None
        assert kept.how is KeptHow.PROTECTED
        assert "counted by" not in kept.reason  # no tier selects it
    for key in (f"runs/a/checkpoint-{s}/" for s in (500, 600, 700, 800)):
        flying = kept_for(plan, key)
        assert flying is not None
        assert flying.how is KeptHow.IN_FLIGHT


def test_groups_are_consumed_as_a_stream() -> None:
    """build_plan takes one-shot iterators of groups (it never needs them twice)."""

    def stream() -> Iterator[Group]:
        for i in range(3):
            key = f"runs/r{i}/"
            yield group(f"r{i}", [checkpoint(key, s, 40 - s) for s in range(1, 8)])

    root = snapshot([])
    root = type(root)(root.url, 1, 10**12, True, stream())
    plan = build_plan([root], POLICY, AS_OF, plan_id="p", created_by="x", created_at=AS_OF)
    assert plan.actions
    assert plan.kept
