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

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model.types import Artifact, Group, Kind, RunStatus
from governance.plan.build import DEDUPE_NOT_PLANNED, build_plan
from governance.plan.types import ActionType, Plan
from governance.policy import load_policy_text
from governance.policy.models import Policy
from tests.unit.plan_factories import (
    AS_OF,
    EXAMPLE_POLICY_PATH,
    OBJECT_ATTRIBUTES,
    ROOT,
    checkpoint,
    example_policy,
    group,
    kept_for,
    make_plan,
    root_groups,
    snapshot,
)

POLICY: Policy = example_policy()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIVE = (RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.UNKNOWN)


def _complete(g: Group) -> list[Artifact]:
    return [a for a in g.artifacts if a.kind is Kind.CHECKPOINT and a.complete]


def _order(arts: list[Artifact]) -> Any:
    if all(a.step is not None for a in arts):
        return lambda a: (a.step, a.last_modified, a.key)
    return lambda a: (a.last_modified, a.key)


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


@SETTINGS
@given(st.one_of(root_groups(), attributed_groups()))
def test_invariant_2_nothing_protected_is_in_the_plan(groups: list[Group]) -> None:
    plan = make_plan(groups, POLICY)
    touched = {a.artifact.uri for a in plan.actions}
    for g in groups:
        for art in g.artifacts:
            if _protected(art):
                assert ROOT + art.key not in touched
        if g.run is not None and g.run.status is RunStatus.RUNNING:
            # protect.run_status: only tiers thin a running run
            uris = {ROOT + a.key for a in g.artifacts}
            assert {a.rule for a in plan.actions if a.artifact.uri in uris} <= {"checkpoints"}


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


@SETTINGS
@given(root_groups(), st.sampled_from(["example", "windowed best"]))
def test_invariant_7_best_checkpoint_is_never_deleted(groups: list[Group], which: str) -> None:
    plan = make_plan(groups, POLICY if which == "example" else WINDOWED_BEST)
    for g in _live_groups(groups):
        scored = [a for a in _complete(g) if "eval_loss" in a.metrics]
        if not scored:
            continue
        low = min(a.metrics["eval_loss"] for a in scored)
        ties = [a for a in scored if a.metrics["eval_loss"] == low]
        best = max(ties, key=_order(_complete(g)))
        assert not _deleted(plan, best)
        assert kept_for(plan, best.key) is not None


@SETTINGS
@given(root_groups())
def test_invariant_8_incomplete_never_counted_as_keep_last(groups: list[Group]) -> None:
    """The `recent` tier keeps the 3 highest complete checkpoints within 30 days."""
    plan = make_plan(groups, POLICY)
    for g in _live_groups(groups):
        recent = [a for a in _complete(g) if AS_OF - a.last_modified <= timedelta(days=30)]
        for art in sorted(recent, key=_order(recent), reverse=True)[:3]:
            assert not _deleted(plan, art)
            kept = kept_for(plan, art.key)
            assert kept is not None


def test_invariant_8_newest_incomplete_keeps_newest_complete() -> None:
    r = "runs/a/"
    complete = [checkpoint(r, s, 40) for s in (100, 200)]  # outside every max_age
    flying = [checkpoint(r, s, 0.2, complete=False) for s in (300, 400, 500, 600)]
    plan = make_plan([group("a", [*complete, *flying], RunStatus.RUNNING)], POLICY)
    kept = kept_for(plan, complete[1].key)
    assert kept is not None
    assert not _deleted(plan, complete[1])
    assert kept.reason.startswith("invariant 1:")
    assert _deleted(plan, complete[0])
    for f in flying:
        k = kept_for(plan, f.key)
        assert k is not None
        assert k.how.value == "in_flight"


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
