"""The plan fingerprint: stable, order-independent, sensitive to what apply would do."""

from __future__ import annotations

import copy
from datetime import timedelta

from governance.model.types import Group, RunStatus
from governance.plan.build import build_plan
from governance.plan.fingerprint import fingerprint
from governance.plan.types import ObjectRef
from tests.unit.plan_factories import AS_OF, checkpoint, example_policy, group, make_plan, snapshot


def _groups() -> list[Group]:
    a = [
        checkpoint("runs/a/", s, 40 - s / 1000, metrics={"eval_loss": 1 / s})
        for s in range(1000, 12000, 1000)
    ]
    b = [checkpoint("runs/b/", s, 20) for s in (5, 6, 7, 8)]
    return [group("a", a), group("b", b, RunStatus.RUNNING)]


def test_same_inputs_same_fingerprint_independent_of_plan_id_and_time() -> None:
    pol = example_policy()
    p1 = make_plan(_groups(), pol)
    p2 = build_plan(
        [snapshot(_groups())],
        pol,
        AS_OF,
        plan_id="other",
        created_by="someone-else",
        created_at=AS_OF + timedelta(hours=5),
    )
    assert p1.fingerprint == p2.fingerprint
    assert p1.fingerprint.startswith("sha256:")
    assert len(p1.fingerprint) == 7 + 64
    assert fingerprint(p1.actions, p1.kept) == p1.fingerprint


def test_fingerprint_ignores_order_of_lists() -> None:
    p = make_plan(_groups(), example_policy())
    assert fingerprint(list(reversed(p.actions)), list(reversed(p.kept))) == p.fingerprint


def test_fingerprint_changes_with_an_etag_or_as_of() -> None:
    pol = example_policy()
    p = make_plan(_groups(), pol)
    actions = copy.deepcopy(p.actions)
    o = actions[0].objects[0]
    actions[0].objects[0] = ObjectRef(o.uri, o.key, o.size, '"changed"', o.last_modified)
    assert fingerprint(actions, p.kept) != p.fingerprint
    later = build_plan(
        [snapshot(_groups())], pol, AS_OF + timedelta(days=30), plan_id="x", created_by="x",
        created_at=AS_OF,
    )  # fmt: skip
    assert later.fingerprint != p.fingerprint


def test_empty_plan_has_a_fingerprint() -> None:
    assert fingerprint([], []).startswith("sha256:")
