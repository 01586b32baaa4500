"""The cost model: prices per GiB-month, early deletion, request costs, plan totals."""

from __future__ import annotations

import pytest

from governance.model.types import Kind
from governance.plan.costs import GB, early_charge_usd, monthly_usd
from governance.plan.types import ObjectRef
from tests.unit.plan_factories import (
    AS_OF,
    GiB,
    MiB,
    actions_for,
    ago,
    group,
    make_plan,
    policy,
    single,
    transition_policy,
)

EXPIRE_ALL = """
protect: {min_age: 1d}
rules:
  - name: old
    select: {older_than: 2d}
    expire: {after: 2d}
"""


def _ref(size: int, storage_class: str | None, age_days: float) -> ObjectRef:
    return ObjectRef("k", size, ago(age_days), '"e"', storage_class)


def test_gb_is_a_gib() -> None:
    assert GB == 2**30
    pol = policy(EXPIRE_ALL)
    assert monthly_usd([_ref(GiB, None, 1)], pol) == pytest.approx(0.023)
    assert monthly_usd([_ref(GiB, None, 1)], pol, "DEEP_ARCHIVE") == pytest.approx(0.00099)


def test_policy_pricing_overrides_builtin() -> None:
    pol = policy(EXPIRE_ALL + "pricing: {STANDARD: 0.02}\n")
    assert monthly_usd([_ref(2 * GiB, "STANDARD", 1)], pol) == pytest.approx(0.04)


@pytest.mark.parametrize(
    ("cls", "age", "expected"),
    [
        ("STANDARD", 1, 0.0),
        ("STANDARD_IA", 10, 0.0125 * 20 / 30),
        ("STANDARD_IA", 31, 0.0),
        ("ONEZONE_IA", 10, 0.01 * 20 / 30),
        ("GLACIER_IR", 30, 0.004 * 60 / 30),
        ("GLACIER_IR", 89, 0.004 * 1 / 30),
        ("GLACIER", 30, 0.0036 * 60 / 30),
        ("GLACIER", 90, 0.0),
        ("DEEP_ARCHIVE", 0, 0.00099 * 180 / 30),
        ("DEEP_ARCHIVE", 179, 0.00099 * 1 / 30),
        ("INTELLIGENT_TIERING", 1, 0.0),
    ],
)
def test_early_charge_is_remaining_minimum_days(cls: str, age: float, expected: float) -> None:
    assert early_charge_usd(_ref(GiB, cls, age), policy(EXPIRE_ALL), AS_OF) == pytest.approx(
        expected
    )


def test_delete_action_carries_early_charge_and_costs() -> None:
    art = single("data/x.bin", Kind.DATASET, GiB, 10, storage_class="STANDARD_IA")
    plan = make_plan([group(None, [art])], policy(EXPIRE_ALL))
    [a] = actions_for(plan, art.key)
    assert a.early_deletion_usd == pytest.approx(0.0125 * 20 / 30)
    # the action's own reason shows the charge (every report prints reasons)
    assert a.reason.endswith("; early deletion charge $0.01 (minimum storage duration not met)")
    aged = single("data/y.bin", Kind.DATASET, GiB, 40, storage_class="STANDARD_IA")
    [b] = actions_for(make_plan([group(None, [aged])], policy(EXPIRE_ALL)), aged.key)
    assert b.early_deletion_usd == 0.0
    assert "early deletion" not in b.reason
    assert a.monthly_cost_before_usd == pytest.approx(0.0125)
    assert a.monthly_cost_after_usd == 0.0
    assert plan.summary.early_deletion_usd == pytest.approx(a.early_deletion_usd)
    assert plan.summary.by_rule["old"].bytes_deleted == GiB


def test_transition_request_cost_per_thousand() -> None:
    pol = transition_policy("log", "GLACIER")
    logs = [single(f"logs/{i}.log", Kind.LOG, MiB, 5) for i in range(4)]
    plan = make_plan([group(None, logs)], pol)
    assert len(plan.actions) == 4
    assert plan.actions[0].request_cost_usd == pytest.approx(0.03 / 1000)
    assert plan.summary.request_cost_usd == pytest.approx(4 * 0.03 / 1000)
    assert plan.summary.monthly_cost_after_usd == pytest.approx(4 * MiB / GiB * 0.0036)
    assert plan.summary.bytes_transitioned == 4 * MiB


def test_a_copy_out_of_an_infrequent_access_class_pays_retrieval() -> None:
    """A transition is a copy, which reads its source: per GB out of IA and Glacier IR."""
    pol = transition_policy("dataset", "DEEP_ARCHIVE", rule="data")
    arts = [
        single(f"data/{cls}.bin", Kind.DATASET, 2 * GiB, 200, storage_class=cls)
        for cls in ("STANDARD", "STANDARD_IA", "GLACIER_IR")
    ]
    plan = make_plan([group(None, arts)], pol)
    request = 0.05 / 1000  # one DEEP_ARCHIVE transition request each
    costs = {a.artifact.uri.rsplit("/", 1)[1]: a.request_cost_usd for a in plan.actions}
    assert costs == {
        "STANDARD.bin": pytest.approx(request),
        "STANDARD_IA.bin": pytest.approx(request + 2 * 0.01),
        "GLACIER_IR.bin": pytest.approx(request + 2 * 0.03),
    }


def test_summary_costs_are_the_roots_whole_bill_before_and_after() -> None:
    old = single("data/old.bin", Kind.DATASET, 2 * GiB, 10)
    young = single("data/young.bin", Kind.DATASET, 3 * GiB, 1, storage_class="STANDARD_IA")
    plan = make_plan([group(None, [old, young])], policy(EXPIRE_ALL))
    assert [a.artifact.uri.rsplit("/", 1)[1] for a in plan.actions] == ["old.bin"]
    before = 2 * 0.023 + 3 * 0.0125
    assert plan.summary.monthly_cost_before_usd == pytest.approx(before)
    assert plan.summary.monthly_cost_after_usd == pytest.approx(3 * 0.0125)


@pytest.mark.parametrize(
    ("cls", "billed"),
    [
        ("STANDARD_IA", 128 * 1024),
        ("ONEZONE_IA", 128 * 1024),
        ("GLACIER_IR", 128 * 1024),
        ("GLACIER", 40 * 1024),
        ("DEEP_ARCHIVE", 40 * 1024),
        ("STANDARD", 1000),
        ("INTELLIGENT_TIERING", 1000),
    ],
)
def test_a_small_object_is_billed_its_class_minimum_size(cls: str, billed: int) -> None:
    """reference.md: IA classes and Glacier IR bill at least 128 KB an object, Glacier and
    Deep Archive 40 KB; the bill and the early-deletion charge both count that size."""
    # (permanent: a quarantine copy out of GLACIER or DEEP_ARCHIVE needs a restore first)
    pol = policy(EXPIRE_ALL + "apply: {delete_mode: permanent}\n")
    price = pol.price(cls)
    small = _ref(1000, cls, 1)
    assert monthly_usd([small], pol) == pytest.approx(billed / GB * price)
    # a day old: the rest of the class's minimum days (none for STANDARD or INTELLIGENT_TIERING)
    left = {"STANDARD_IA": 29, "ONEZONE_IA": 29, "GLACIER_IR": 89, "GLACIER": 89}
    expected_early = billed / GB * price * left.get(cls, 179 if cls == "DEEP_ARCHIVE" else 0) / 30
    assert early_charge_usd(small, pol, AS_OF) == pytest.approx(expected_early)
    # the same figures in a planned delete and in the roots' whole bill
    art = single("data/small.bin", Kind.DATASET, 1000, 10, storage_class=cls)
    plan = make_plan([group(None, [art])], pol)
    [a] = actions_for(plan, art.key)
    assert a.monthly_cost_before_usd == pytest.approx(billed / GB * price)
    assert plan.summary.monthly_cost_before_usd == pytest.approx(billed / GB * price)
    assert a.early_deletion_usd == pytest.approx(early_charge_usd(art.objects[0], pol, AS_OF))


def test_the_whole_bill_counts_minimum_sizes_in_a_group_of_mixed_classes() -> None:
    """A group holding several classes is tallied object by object: each small object in
    a class with a minimum is billed that minimum, the rest as they are."""
    pol = policy("protect: {min_age: 1d}\nrules: []\n")
    arts = [
        single("data/a.bin", Kind.DATASET, 1000, 10, storage_class="STANDARD_IA"),
        single("data/b.bin", Kind.DATASET, 1000, 10, storage_class="STANDARD"),
        single("data/c.bin", Kind.DATASET, GiB, 10, storage_class="GLACIER"),
    ]
    plan = make_plan([group(None, arts)], pol)
    expected = 128 * 1024 / GB * 0.0125 + 1000 / GB * 0.023 + 0.0036
    assert plan.summary.monthly_cost_before_usd == pytest.approx(expected)
