"""`reject` of a plan in a final status says why in plain words, never a raw status as
in "plan P is already what_if: nothing to reject"."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from governance.approval import reject
from governance.catalog.engine import open_engine
from governance.catalog.plans import save_plan
from governance.errors import ApprovalError
from governance.plan.types import PlanStatus
from tests.catalogs import catalog_url  # noqa: F401
from tests.unit.plan_samples import sample_plan

PID = "p-20261130-021500-3f9a"


@pytest.fixture
def engine(catalog_url: str) -> Engine:  # noqa: F811
    return open_engine(catalog_url)


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (
            PlanStatus.WHAT_IF,
            "is a what-if plan (made as of a time after it was made): it is never approved "
            "or applied, so there is nothing to reject",
        ),
        (
            PlanStatus.REFUSED,
            "was refused when it was made (over a safety limit): it is never approved or "
            "applied, so there is nothing to reject",
        ),
        (PlanStatus.APPLIED, "has already been applied: too late to reject it"),
        (PlanStatus.EXPIRED, "has expired (its approval ran out): it can never be applied"),
    ],
)
def test_reject_of_a_final_plan_says_why_in_plain_words(
    engine: Engine, status: PlanStatus, words: str
) -> None:
    plan = replace(sample_plan(PID), status=status)
    save_plan(engine, plan)
    with pytest.raises(ApprovalError) as err:
        reject(engine, PID, actor="bob", comment="no", now=plan.created_at + timedelta(hours=1))
    assert str(err.value).startswith(f"plan {PID} {words}")
    assert f"already {status}" not in str(err.value)
