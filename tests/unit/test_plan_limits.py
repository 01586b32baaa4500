"""Invariant 4: safety limits refuse the plan with a clear message; actions are not trimmed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model.types import Artifact, Group, Kind
from governance.plan.build import RootSnapshot
from governance.plan.types import ActionType, Plan, PlanStatus
from governance.policy.models import Safety
from governance.policy.units import format_bytes
from tests.unit.plan_factories import (
    ROOT,
    GiB,
    MiB,
    checkpoint,
    example_policy,
    group,
    make_plan,
    policy,
    root_groups,
    single,
    snapshot,
    upload,
)

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
    # the summary counts the archive's source as archived, not deleted: the refusal
    # says how much of what leaves the root is deleted and how much is moved
    strip, archive = plan.actions
    assert plan.summary.bytes_deleted == strip.bytes
    assert plan.summary.bytes_archived == archive.bytes
    assert plan.refusal.startswith(
        f"would remove {format_bytes(total)} ({format_bytes(strip.bytes)} deleted, "
        f"{format_bytes(archive.bytes)} archived to another location) "
    )


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


# ----------------------------------------------------------------------------- the property

OTHER = "s3://other-bucket/"
REMOVES = {ActionType.DELETE, ActionType.STRIP, ActionType.DEDUPE, ActionType.ABORT_UPLOAD}


def _removed_by_root(plan: Plan) -> dict[str, int]:
    """The oracle: bytes each root loses (an archive by copy removes its source too)."""
    out: dict[str, int] = {}
    for a in plan.actions:
        if a.action in REMOVES or (a.action is ActionType.ARCHIVE and a.dest_url is not None):
            root = a.artifact.root_url
            out[root] = out.get(root, 0) + sum(o.size for o in a.objects)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    root_groups(),
    root_groups(),
    st.none() | st.integers(0, 2 * 10**11),
    st.floats(0.01, 1.0),
    st.floats(1.0, 4.0),
)
def test_invariant_4_a_plan_over_a_limit_is_refused_whole(
    first: list[Group], second: list[Group], max_bytes: int | None, fraction: float, spread: float
) -> None:
    """Over either limit, on any root, the plan is refused and names each limit it is
    over; its actions are those of the same plan without limits, never trimmed."""
    base = example_policy()
    limited = base.model_copy(
        update={"safety": Safety(max_delete_bytes=max_bytes, max_delete_fraction=fraction)}
    )
    unlimited = base.model_copy(update={"safety": Safety(max_delete_fraction=1.0)})
    streamed = sum(a.bytes for g in second for a in g.artifacts)
    totals = {ROOT: sum(a.bytes for g in first for a in g.artifacts), OTHER: int(streamed * spread)}

    def roots() -> list[RootSnapshot]:
        return [snapshot(first), snapshot(second, OTHER, total_bytes=totals[OTHER])]

    free, plan = make_plan(roots(), unlimited), make_plan(roots(), limited)
    assert free.status is not PlanStatus.REFUSED
    assert plan.fingerprint == free.fingerprint  # the same actions and kept list
    assert len(plan.actions) == len(free.actions)
    removed = _removed_by_root(free)
    over_fraction = [r for r, n in sorted(removed.items()) if n and n > fraction * totals[r]]
    over_bytes = max_bytes is not None and sum(removed.values()) > max_bytes
    assert (plan.status is PlanStatus.REFUSED) == bool(over_fraction or over_bytes)
    if plan.status is not PlanStatus.REFUSED:
        assert plan.refusal is None
        return
    assert plan.refusal is not None
    for root in over_fraction:
        assert f"root {root}: would delete" in plan.refusal
    assert ("over max_delete_fraction" in plan.refusal) == bool(over_fraction)
    assert ("over max_delete_bytes" in plan.refusal) == over_bytes


# ----------------------------------------------------------------------------- boundaries


def _sized(*sizes: int) -> list[Artifact]:
    """Datasets of exactly these sizes (10 days old: `EXPIRE` deletes every one)."""
    return [single(f"data/{i}.bin", Kind.DATASET, size, 10) for i, size in enumerate(sizes)]


@pytest.mark.parametrize("extra", [0, 1], ids=["exactly the fraction", "one byte more"])
def test_max_delete_fraction_boundary(extra: int) -> None:
    """0.5 of 100 GiB scanned allows 50 GiB: deleting exactly that is within the limit
    (the spec refuses a plan *above* it), one byte more is refused, by 1 B."""
    root = snapshot([group(None, _sized(*[10 * GiB] * 4, 10 * GiB + extra))], total_bytes=100 * GiB)
    plan = make_plan([root], policy(EXPIRE + "safety: {max_delete_fraction: 0.5}\n"))
    assert sum(a.bytes for a in plan.actions) == 50 * GiB + extra
    assert len(plan.actions) == 5  # never trimmed
    if not extra:
        assert plan.status is PlanStatus.PENDING_APPROVAL
        assert plan.refusal is None
        return
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal == (
        "root s3://ml-artifacts/: would delete 50 GiB, 50% of 100 GiB scanned, "
        "over max_delete_fraction 0.5 by 1 B"
    )


@pytest.mark.parametrize("percent", [29, 57, 58])
def test_max_delete_fraction_exactly_a_decimal_fraction_is_within(percent: int) -> None:
    """Deleting exactly the fraction written in the policy (29% with 0.29) is not above it.
    (0.5 above is exact in binary; most decimal fractions are not.)"""
    root = snapshot([group(None, _sized(percent * GiB))], total_bytes=100 * GiB)
    plan = make_plan([root], policy(EXPIRE + f"safety: {{max_delete_fraction: 0.{percent}}}\n"))
    assert plan.refusal is None
    assert plan.status is PlanStatus.PENDING_APPROVAL


@pytest.mark.parametrize("percent", [29, 57, 58])
def test_max_delete_fraction_one_byte_over_a_decimal_fraction_is_refused(percent: int) -> None:
    root = snapshot([group(None, _sized(percent * GiB + 1))], total_bytes=100 * GiB)
    plan = make_plan([root], policy(EXPIRE + f"safety: {{max_delete_fraction: 0.{percent}}}\n"))
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal is not None
    assert f"over max_delete_fraction 0.{percent} by 1 B" in plan.refusal


@pytest.mark.parametrize("extra", [0, 1], ids=["exactly the limit", "one byte more"])
def test_max_delete_bytes_boundary(extra: int) -> None:
    """max_delete_bytes 25GiB: deleting exactly 25 GiB is within the limit, one byte more
    is refused, by 1 B (the fraction is 1: only the byte limit can refuse)."""
    root = snapshot([group(None, _sized(10 * GiB, 10 * GiB, 5 * GiB + extra))])
    safety = "safety: {max_delete_bytes: 25GiB, max_delete_fraction: 1}\n"
    plan = make_plan([root], policy(EXPIRE + safety))
    assert sum(a.bytes for a in plan.actions) == 25 * GiB + extra
    assert len(plan.actions) == 3
    if not extra:
        assert plan.status is PlanStatus.PENDING_APPROVAL
        assert plan.refusal is None
        return
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal == (
        "would delete 25 GiB (root s3://ml-artifacts/: 25 GiB), over max_delete_bytes 25 GiB by 1 B"
    )


STALE_UPLOADS = """
protect: {min_age: 1d}
rules:
  - name: residue
    select: {kind: residue}
    expire: {after: 2d}
"""


def _uploads_only(total: int | None = None) -> RootSnapshot:
    """Three stale multipart uploads of 5 MiB (15 MiB in all) and nothing else."""
    uploads = [upload(f"scratch/shard-{i}.tar", 5 * MiB, 10) for i in range(3)]
    return snapshot([group(None, uploads)], total_bytes=total)


def _only_aborts(plan: Plan) -> None:
    assert len(plan.actions) == 3
    assert {a.action for a in plan.actions} == {ActionType.ABORT_UPLOAD}
    assert all(a.destructive for a in plan.actions)
    assert plan.summary.bytes_deleted == 15 * MiB


@pytest.mark.parametrize(
    ("limit", "refusal"),
    [
        ("15MiB", None),
        ("10MiB", "would delete 15 MiB (root s3://ml-artifacts/: 15 MiB), "
                  "over max_delete_bytes 10 MiB by 5 MiB"),
    ],
    ids=["at the limit", "over"],
)  # fmt: skip
def test_abort_upload_bytes_count_toward_max_delete_bytes(limit: str, refusal: str | None) -> None:
    safety = f"safety: {{max_delete_bytes: {limit}, max_delete_fraction: 1}}\n"
    plan = make_plan([_uploads_only()], policy(STALE_UPLOADS + safety))
    _only_aborts(plan)
    assert plan.refusal == refusal
    assert plan.status is (PlanStatus.PENDING_APPROVAL if refusal is None else PlanStatus.REFUSED)


@pytest.mark.parametrize(
    ("scanned", "refusal"),
    [
        (30 * MiB, None),
        (20 * MiB, "root s3://ml-artifacts/: would delete 15 MiB, 75% of 20 MiB scanned, "
                   "over max_delete_fraction 0.5 by 5 MiB"),
    ],
    ids=["at the limit", "over"],
)  # fmt: skip
def test_abort_upload_bytes_count_toward_max_delete_fraction(
    scanned: int, refusal: str | None
) -> None:
    plan = make_plan(
        [_uploads_only(scanned)], policy(STALE_UPLOADS + "safety: {max_delete_fraction: 0.5}\n")
    )
    _only_aborts(plan)
    assert plan.refusal == refusal
    assert plan.status is (PlanStatus.PENDING_APPROVAL if refusal is None else PlanStatus.REFUSED)
