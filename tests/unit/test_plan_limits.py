"""Invariant 4: safety limits refuse the plan with a clear message; actions are not trimmed."""

from __future__ import annotations

from governance.model.types import Artifact, Kind
from governance.plan.types import PlanStatus
from tests.unit.plan_factories import GiB, checkpoint, group, make_plan, policy, single, snapshot

EXPIRE = """
protect: {min_age: 1d}
rules:
  - name: old
    select: {kind: dataset}
    expire: {after: 2d}
"""


def _data(n: int, size: int = 10 * GiB) -> list[Artifact]:
    return [single(f"data/{i}.bin", Kind.DATASET, size, 10) for i in range(n)]


def test_fraction_refused_names_root_and_excess() -> None:
    root = snapshot([group(None, _data(6))], total_bytes=100 * GiB)
    plan = make_plan([root], policy(EXPIRE))
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal == (
        "root s3://ml-artifacts/: would delete 60 GiB, 60% of 100 GiB scanned, "
        "over max_delete_fraction 0.5 by 10 GiB"
    )
    assert len(plan.actions) == 6  # not trimmed


def test_fraction_within_limit_is_fine() -> None:
    root = snapshot([group(None, _data(4))], total_bytes=100 * GiB)
    plan = make_plan([root], policy(EXPIRE))
    assert plan.status is PlanStatus.PENDING_APPROVAL
    assert plan.refusal is None


def test_fraction_is_per_root() -> None:
    big = snapshot([group(None, _data(4))], total_bytes=100 * GiB)
    small = snapshot([group(None, _data(1))], url="s3://other/", total_bytes=15 * GiB)
    plan = make_plan([big, small], policy(EXPIRE + "safety: {max_delete_fraction: 0.5}\n"))
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal is not None
    assert plan.refusal.startswith("root s3://other/: would delete 10 GiB, 67% of 15 GiB")
    assert "ml-artifacts" not in plan.refusal


def test_max_delete_bytes() -> None:
    root = snapshot([group(None, _data(3))], total_bytes=1000 * GiB)
    plan = make_plan([root], policy(EXPIRE + "safety: {max_delete_bytes: 25GiB}\n"))
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal == (
        "would delete 30 GiB (root s3://ml-artifacts/: 30 GiB), "
        "over max_delete_bytes 25 GiB by 5 GiB"
    )


def test_strip_and_archive_by_url_count_as_deleted() -> None:
    pol = policy(
        """
protect: {min_age: 1d}
safety: {max_delete_bytes: 1MiB, max_delete_fraction: 1}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: old, keep_last: 5, keep_components: [weights], archive: {url: "s3://cold/"}}
    otherwise: keep
"""
    )
    ckpts = [checkpoint("runs/a/", s, 10) for s in (1, 2)]
    plan = make_plan([group("a", ckpts)], pol)
    assert [a.action.value for a in plan.actions] == ["strip", "archive"]
    assert plan.status is PlanStatus.REFUSED
    total = sum(a.bytes for a in plan.actions)
    assert total == ckpts[0].bytes
    assert plan.refusal is not None
    assert "over max_delete_bytes 1 MiB" in plan.refusal


def test_transitions_do_not_count() -> None:
    pol = policy(
        """
protect: {min_age: 1d}
safety: {max_delete_bytes: 1MiB}
rules:
  - name: data
    select: {kind: dataset}
    transition: [{after: 2d, storage_class: GLACIER}]
"""
    )
    plan = make_plan([group(None, _data(3))], pol)
    assert plan.status is PlanStatus.APPROVED
