"""A plan as of a past time says of what was written after it that it was, not that it
was written "0 minutes ago" (invariant 5: a reason a person can read is a true one)."""

from __future__ import annotations

from datetime import timedelta

from governance.plan.selectors import aged, written_ago
from governance.plan.types import KeptHow
from tests.fixtures import builders as b
from tests.unit.plan_factories import checkpoint, group, kept_for, make_plan, policy
from tests.unit.test_model_runs import runs

R = "runs/a/"


def test_ages_before_and_after_as_of_are_said_as_they_are() -> None:
    assert written_ago(timedelta(days=3)) == "last written 3 days ago"
    assert written_ago(timedelta(hours=-5)) == "written 5 hours after as_of"
    assert aged(timedelta(days=40)) == "40 days old"
    assert aged(timedelta(days=-2)) == "written 2 days after as_of"
    assert written_ago(timedelta(0)) == "last written 0 minutes ago"


def test_a_checkpoint_written_after_as_of_is_protected_and_says_why() -> None:
    pol = policy(
        """
protect: {min_age: 3d}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""
    )
    later = checkpoint(R, 200, age_days=-2)
    newest = checkpoint(R, 300, age_days=-3)
    plan = make_plan([group("a", [later, newest])], pol)
    kept = kept_for(plan, later.key)
    assert kept is not None
    assert kept.how is KeptHow.PROTECTED
    assert kept.reason.startswith("protected: written 2 days after as_of, inside protect.min_age")
    assert "ago" not in kept.reason


def test_a_run_written_after_as_of_is_running_and_says_why() -> None:
    t = b.MemoryTree()
    b.hf_run(t, "runs/r1", steps=(100,), start=b.T0 + timedelta(days=2))
    [found] = runs(t, days=0, run_templates=("runs/{run}/",)).values()
    assert found.run is not None
    assert found.run.status_reason == "last write 2.0d after as_of, within abandoned_after"
