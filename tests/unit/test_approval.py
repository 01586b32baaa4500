"""The approval state machine on a real catalog, with the clock passed in (no sleeping).

The sample plan (made by alice at T) has destructive actions, which the default rules
send to one approver who is not alice, and one non-destructive transition.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from governance import audit
from governance.approval import approval_state, approve, check_applicable, reject
from governance.catalog.engine import open_engine
from governance.catalog.plans import load_plan, load_plan_header, save_plan
from governance.errors import (
    EXIT_BAD_INPUT,
    EXIT_REFUSED,
    ApprovalError,
    ArgumentError,
    PlanExpiredError,
    RefusedError,
    UnknownPlanError,
)
from governance.plan.types import Plan, PlanStatus
from tests.catalogs import catalog_url  # noqa: F401
from tests.unit.plan_samples import sample_plan

PID = "p-20261130-021500-3f9a"


@pytest.fixture
def engine(catalog_url: str) -> Engine:  # noqa: F811
    return open_engine(catalog_url)


def _save(engine: Engine, approval: dict[str, Any] | None = None, **changes: Any) -> Plan:
    plan = sample_plan(PID)
    if approval is not None:
        plan.controls = {"approval": approval}
    plan = replace(plan, **changes)
    save_plan(engine, plan)
    return plan


def _t(plan: Plan, hours: float) -> datetime:
    return plan.created_at + timedelta(hours=hours)


def test_one_approver_approves_and_the_plan_becomes_applicable(engine: Engine) -> None:
    plan = _save(engine)
    with pytest.raises(ApprovalError, match=r"needs 1 more approver.*govern approve") as err:
        check_applicable(engine, PID, now=_t(plan, 1), destructive=True)
    assert err.value.exit_code == EXIT_REFUSED

    state = approve(engine, PID, actor="bob", comment="looks right", now=_t(plan, 2))
    assert state.status is PlanStatus.APPROVED
    assert state.applicable
    assert state.approvers == ("bob",)
    assert state.approved_at == _t(plan, 2)
    assert state.expires_at == _t(plan, 2 + 72)
    assert state.summary() == (
        f"approved by bob (1 of 1); applicable until {state.expires_at:%Y-%m-%d %H:%M}Z"
    )
    assert load_plan_header(engine, PID).status is PlanStatus.APPROVED
    assert check_applicable(engine, PID, now=_t(plan, 3), destructive=True).applicable
    [ev] = audit.events(engine, PID)
    assert (ev.event, ev.actor, ev.payload["comment"]) == ("approve", "bob", "looks right")
    assert ev.payload["fingerprint"] == plan.fingerprint


def test_approval_expires_and_marks_the_plan_expired(engine: Engine) -> None:
    plan = _save(engine, {"expires_after": "10h"})
    approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    assert check_applicable(engine, PID, now=_t(plan, 10.9), destructive=True).applicable
    assert approval_state(engine, PID, _t(plan, 11)).status is PlanStatus.EXPIRED
    assert load_plan_header(engine, PID).status is PlanStatus.APPROVED  # reading writes nothing

    with pytest.raises(PlanExpiredError, match="expired at"):
        check_applicable(engine, PID, now=_t(plan, 11), destructive=True)
    assert load_plan_header(engine, PID).status is PlanStatus.EXPIRED
    assert [e.event for e in audit.events(engine, PID)] == ["approve", "expire"]
    with pytest.raises(PlanExpiredError):
        check_applicable(engine, PID, now=_t(plan, 12), destructive=False)
    with pytest.raises(ApprovalError, match=r"expired.*cannot be approved"):
        approve(engine, PID, actor="carol", comment=None, now=_t(plan, 12))
    assert audit.verify(engine).ok


@pytest.mark.parametrize("me", ["alice", "ALICE", " Alice"])
def test_self_approval_is_refused_unless_allowed(engine: Engine, me: str) -> None:
    """Also when the maker's name is typed in another case (`--as ROOT` for `root`); the
    message names the maker as recorded, not as the approver typed it."""
    plan = _save(engine)
    with pytest.raises(ApprovalError, match=rf"^alice made plan {PID}\b.* self-approval") as err:
        approve(engine, PID, actor=me, comment=None, now=_t(plan, 1))
    assert (f"({me} is alice: " in str(err.value)) == (me != "alice")
    assert approval_state(engine, PID, _t(plan, 1)).approvers == ()
    assert audit.events(engine, PID) == []


def test_self_approval_when_the_policy_allows_it(engine: Engine) -> None:
    plan = _save(engine, {"allow_self_approval": True})
    assert approve(engine, PID, actor="alice", comment=None, now=_t(plan, 1)).applicable


def test_two_approvers_and_the_same_person_twice_counts_once(engine: Engine) -> None:
    plan = _save(engine, {"approvers": 2})
    first = approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    assert first.status is PlanStatus.PENDING_APPROVAL
    assert first.summary() == "approved by bob (1 of 2); needs 1 more approver"

    again = approve(engine, PID, actor="bob", comment="me again", now=_t(plan, 2))
    assert again.approvers == ("bob",)
    assert any("counts once" in r for r in again.reasons)
    with pytest.raises(ApprovalError, match=r"needs 1 more approver \(approved by bob, 1 of 2"):
        check_applicable(engine, PID, now=_t(plan, 3), destructive=True)

    shouted = approve(engine, PID, actor="BOB", comment="in caps", now=_t(plan, 2.5))
    assert shouted.approvers == ("bob",)  # one person, whatever the case
    assert any("counts once" in r for r in shouted.reasons)

    done = approve(engine, PID, actor="carol", comment=None, now=_t(plan, 4))
    assert done.applicable
    assert done.approvers == ("bob", "carol")
    assert done.expires_at == _t(plan, 4 + 72)  # from the approval that completed it
    assert [e.actor for e in audit.events(engine, PID)] == ["bob", "carol"]


def test_concurrent_approvals_both_count(catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    plan = _save(engine, {"approvers": 3})
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def one(actor: str) -> None:
        barrier.wait()
        try:
            approve(engine, PID, actor=actor, comment=None, now=_t(plan, 1))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in ("bob", "carol", "dave")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    state = approval_state(engine, PID, _t(plan, 2))
    assert sorted(state.approvers) == ["bob", "carol", "dave"]
    assert load_plan_header(engine, PID).status is PlanStatus.APPROVED
    assert audit.verify(engine).checked == 3


def test_approval_is_bound_to_the_fingerprint(engine: Engine) -> None:
    plan = _save(engine)
    approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    with engine.begin() as conn:  # the plan's actions changed after review
        conn.execute(
            text("UPDATE plans SET fingerprint = 'sha256:other' WHERE plan_id = :p"), {"p": PID}
        )
    state = approval_state(engine, PID, _t(plan, 2))
    assert state.status is PlanStatus.PENDING_APPROVAL
    assert state.approvers == ()
    assert any("another fingerprint" in r for r in state.reasons)
    assert any("catalog says approved" in r for r in state.reasons)
    with pytest.raises(ApprovalError, match="not approved"):
        check_applicable(engine, PID, now=_t(plan, 2), destructive=True)
    # nor approved again: the fingerprint no longer hashes its actions (nor is it the
    # one the plan's audit event recorded), so no one reviewed what it stands for
    with pytest.raises(ApprovalError, match="the catalog was changed after review"):
        approve(engine, PID, actor="bob", comment=None, now=_t(plan, 3))


def test_rejected_plan_cannot_be_approved_or_applied(engine: Engine) -> None:
    plan = _save(engine)
    approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    with pytest.raises(ArgumentError):
        reject(engine, PID, actor="carol", comment="  ", now=_t(plan, 2))
    state = reject(engine, PID, actor="carol", comment="keeps step 4000", now=_t(plan, 2))
    assert state.status is PlanStatus.REJECTED
    assert state.rejected_by == "carol"
    assert "carol" in state.summary()
    assert "keeps step 4000" in state.summary()
    with pytest.raises(ApprovalError, match="rejected"):
        check_applicable(engine, PID, now=_t(plan, 3), destructive=True)
    with pytest.raises(ApprovalError, match="rejected"):
        check_applicable(engine, PID, now=_t(plan, 3), destructive=False)
    with pytest.raises(ApprovalError, match="cannot be approved"):
        approve(engine, PID, actor="dave", comment=None, now=_t(plan, 3))
    with pytest.raises(ApprovalError, match="already rejected"):
        reject(engine, PID, actor="dave", comment="again", now=_t(plan, 3))
    assert [e.event for e in audit.events(engine, PID)] == ["approve", "reject"]


@pytest.mark.parametrize("status", [PlanStatus.APPLIED, PlanStatus.REFUSED])
def test_applied_and_refused_plans_cannot_be_approved(engine: Engine, status: PlanStatus) -> None:
    plan = _save(
        engine,
        status=status,
        refusal="over max_delete_bytes" if status is PlanStatus.REFUSED else None,
    )
    with pytest.raises(ApprovalError, match=f"is {status}"):
        approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    with pytest.raises(RefusedError) as err:
        check_applicable(engine, PID, now=_t(plan, 1), destructive=True)
    assert err.value.exit_code == EXIT_REFUSED
    if status is PlanStatus.REFUSED:
        assert type(err.value) is RefusedError
        assert "over max_delete_bytes" in str(err.value)


def test_plan_needing_no_approval_is_approved_on_creation(engine: Engine) -> None:
    plan = _save(engine, {"require_for": []}, status=PlanStatus.APPROVED)
    state = check_applicable(engine, PID, now=_t(plan, 1), destructive=True)
    assert state.needed == 0
    assert state.expires_at == _t(plan, 72)  # counted from creation
    assert state.summary().startswith("approved on creation")
    noted = approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    assert any("nothing recorded" in r for r in noted.reasons)
    assert audit.events(engine, PID) == []


def test_notice_mode_before_and_after_the_period(engine: Engine) -> None:
    plan = _save(engine, {"mode": "notice", "notice_period": "2d", "expires_after": "1d"})
    state = approval_state(engine, PID, _t(plan, 1))
    assert state.applicable_after == _t(plan, 48)
    assert not state.applicable
    with pytest.raises(ApprovalError, match=r"notice period until .*unless vetoed"):
        check_applicable(engine, PID, now=_t(plan, 47.9), destructive=True)
    with pytest.raises(ApprovalError, match="notice mode"):
        approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    after = check_applicable(engine, PID, now=_t(plan, 48), destructive=True)
    assert after.applicable
    assert after.expires_at == _t(plan, 48 + 24)
    with pytest.raises(PlanExpiredError):
        check_applicable(engine, PID, now=_t(plan, 72), destructive=True)


def test_notice_mode_vetoed(engine: Engine) -> None:
    plan = _save(engine, {"mode": "notice", "notice_period": "2d"})
    reject(engine, PID, actor="bob", comment="not yet", now=_t(plan, 1))
    with pytest.raises(ApprovalError, match="rejected"):
        check_applicable(engine, PID, now=_t(plan, 100), destructive=True)


def test_only_non_destructive_may_proceed_while_pending(engine: Engine) -> None:
    plan = _save(engine)
    state = check_applicable(engine, PID, now=_t(plan, 1), destructive=False)
    assert state.status is PlanStatus.PENDING_APPROVAL
    assert not state.non_destructive_needs_approval
    with pytest.raises(PlanExpiredError, match="non-destructive"):
        check_applicable(engine, PID, now=_t(plan, 73), destructive=False)
    assert load_plan_header(engine, PID).status is PlanStatus.PENDING_APPROVAL


def test_non_destructive_actions_that_need_approval_wait_too(engine: Engine) -> None:
    plan = _save(engine, {"require_for": ["delete", "transition"]})
    with pytest.raises(ApprovalError, match="not approved"):
        check_applicable(engine, PID, now=_t(plan, 1), destructive=False)


def test_partially_applied_plan_keeps_its_approval(engine: Engine) -> None:
    plan = _save(engine, {"approvers": 2})
    approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    with engine.begin() as conn:  # apply --only-non-destructive ran meanwhile
        conn.execute(text("UPDATE plans SET status = 'partially_applied'"))
    state = approve(engine, PID, actor="carol", comment=None, now=_t(plan, 2))
    assert state.applicable
    assert state.status is PlanStatus.PARTIALLY_APPLIED
    assert check_applicable(engine, PID, now=_t(plan, 3), destructive=True).applicable
    # the approvers approved it; whoever applied part of it is in the history, not here
    assert state.summary() == (
        "partially applied; approved by bob, carol (2 of 2); "
        f"applicable until {state.expires_at:%Y-%m-%d %H:%M}Z"
    )


def test_unknown_plan_and_naive_clock(engine: Engine) -> None:
    with pytest.raises(UnknownPlanError) as err:
        approve(engine, "p-nope", actor="bob", comment=None, now=datetime.now().astimezone())
    assert err.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(UnknownPlanError):
        check_applicable(engine, "p-nope", now=datetime.now().astimezone(), destructive=True)
    with pytest.raises(ValueError, match="timezone-aware"):
        approval_state(engine, PID, datetime(2026, 1, 1))


def test_verify_fingerprint_catches_edited_actions(engine: Engine) -> None:
    from governance.approval import verify_fingerprint
    from governance.plan.fingerprint import fingerprint

    plan = sample_plan(PID)
    plan.fingerprint = fingerprint(plan.actions, plan.kept)
    save_plan(engine, plan)
    verify_fingerprint(load_plan(engine, PID))
    with engine.begin() as conn:
        conn.execute(text("UPDATE plan_actions SET bytes = bytes + 1, reason = 'x'"))
        conn.execute(
            text("UPDATE plan_actions SET artifact_uri = 's3://b/other/' WHERE action_id = 1")
        )
    with pytest.raises(ApprovalError, match="do not match its fingerprint"):
        verify_fingerprint(load_plan(engine, PID))


def test_a_plan_made_as_of_the_future_is_neither_approved_nor_applied(engine: Engine) -> None:
    """A what-if plan (as_of later than now) sees everything older than it is."""
    plan = _save(engine)
    future = replace(plan, plan_id="p-what-if", as_of=_t(plan, 24))
    save_plan(engine, future)
    with pytest.raises(RefusedError, match=r"p-what-if was made as of .*Z, in the future") as err:
        approve(engine, "p-what-if", actor="bob", comment=None, now=_t(plan, 1))
    assert err.value.exit_code == EXIT_REFUSED
    assert "plan again without --as-of" in str(err.value)
    assert audit.events(engine, "p-what-if") == []
    # approved on creation (nothing needs approval): still never applied, in any form
    free = replace(
        plan,
        plan_id="p-what-if-free",
        as_of=_t(plan, 24),
        status=PlanStatus.APPROVED,
        controls={"approval": {"require_for": []}},
    )
    save_plan(engine, free)
    for destructive in (True, False):
        with pytest.raises(RefusedError, match="what-if plan cannot be approved or applied"):
            check_applicable(engine, "p-what-if-free", now=_t(plan, 1), destructive=destructive)
    # saved so before the what_if status existed: once the clock has passed its as_of, it
    # is an ordinary plan
    assert check_applicable(engine, "p-what-if-free", now=_t(plan, 25), destructive=True).applicable
    # a plan built as a what-if says so for good: refused after its as_of has passed too
    kept = replace(free, plan_id="p-what-if-kept", status=PlanStatus.WHAT_IF)
    save_plan(engine, kept)
    for at, made in ((_t(plan, 1), "in the future"), (_t(plan, 25), "later than it was made")):
        with pytest.raises(RefusedError, match=f"{made}: a what-if plan cannot be approved"):
            check_applicable(engine, "p-what-if-kept", now=at, destructive=True)
    for at in (_t(plan, 1), _t(plan, 25), _t(plan, 24 * 30)):
        with pytest.raises(RefusedError, match="what-if plan cannot be approved or applied"):
            check_applicable(engine, "p-what-if-kept", now=at, destructive=True)
        with pytest.raises(RefusedError, match="what-if plan cannot be approved or applied"):
            approve(engine, "p-what-if-kept", actor="bob", comment=None, now=at)


@pytest.mark.parametrize(("ahead_minutes", "refused"), [(4, False), (6, True)])
def test_a_few_minutes_of_clock_skew_are_not_the_future(
    engine: Engine, ahead_minutes: int, refused: bool
) -> None:
    plan = _save(engine)
    now = plan.created_at
    save_plan(engine, replace(plan, plan_id="p-skew", as_of=now + timedelta(minutes=ahead_minutes)))
    if refused:
        with pytest.raises(RefusedError, match="in the future"):
            approve(engine, "p-skew", actor="bob", comment=None, now=now)
    else:
        assert approve(engine, "p-skew", actor="bob", comment=None, now=now).applicable


def test_plans_are_read_with_their_effective_status(engine: Engine) -> None:
    """`govern plans` / `govern show` print the status approve and apply decide by:
    expired once the approval has, although nothing has written so yet."""
    from governance.approval import effective_statuses
    from governance.catalog.plans import list_plans

    plan = _save(engine, {"expires_after": "10h"})
    approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))

    def seen(at: datetime | None) -> list[PlanStatus]:
        headers = list_plans(engine)
        effective_statuses(engine, headers, at)
        loaded = load_plan(engine, PID)
        effective_statuses(engine, [loaded], at)
        return [h.status for h in headers] + [loaded.status]

    assert seen(_t(plan, 10.9)) == [PlanStatus.APPROVED, PlanStatus.APPROVED]
    assert seen(_t(plan, 11)) == [PlanStatus.EXPIRED, PlanStatus.EXPIRED]
    assert seen(None) == [PlanStatus.EXPIRED, PlanStatus.EXPIRED]  # by the clock: long past
    # reading wrote nothing
    assert load_plan_header(engine, PID).status is PlanStatus.APPROVED
    assert [e.event for e in audit.events(engine, PID)] == ["approve"]


def test_recorded_approvals_differing_only_in_case_count_once() -> None:
    """Decisions already in the catalog (say, recorded by an older govern) by `bob` and
    `BOB`, and one by the maker in capitals, make one approver of two, not two."""
    from governance.approval import Decision, PlanFacts, derive
    from governance.policy.models import Approval

    t = datetime(2026, 11, 30, 2, 0)
    facts = PlanFacts(
        plan_id=PID, fingerprint="sha256:f", status=PlanStatus.PENDING_APPROVAL, created_at=t,
        created_by="alice", refusal=None, rules=Approval(approvers=2),
        kinds=frozenset({("delete", True)}),
    )  # fmt: skip
    decisions = [
        Decision("approve", who, "sha256:f", None, t + timedelta(hours=i))
        for i, who in enumerate(["bob", "BOB", "Alice", " bob "], start=1)
    ]
    state = derive(facts, decisions, t + timedelta(hours=5))
    assert state.approvers == ("bob",)
    assert not state.applicable
    carol = Decision("approve", "carol", "sha256:f", None, t + timedelta(hours=6))
    assert derive(facts, [*decisions, carol], t + timedelta(hours=7)).applicable


def test_a_status_column_edited_back_does_not_undo_a_veto_or_a_refusal(engine: Engine) -> None:
    """The veto is a row of its own (a REJECT decision), the refusal the plan's own
    `refusal`: one UPDATE of `plans.status` (a role allowed to set statuses could make it)
    brings neither plan back to life."""
    plan = _save(engine)
    approve(engine, PID, actor="bob", comment="ok", now=_t(plan, 1))
    reject(engine, PID, actor="carol", comment="veto", now=_t(plan, 2))
    with engine.begin() as conn:
        conn.execute(text("UPDATE plans SET status = 'approved' WHERE plan_id = :p"), {"p": PID})
    state = approval_state(engine, PID, now=_t(plan, 3))
    assert state.status is PlanStatus.REJECTED
    assert not state.applicable
    with pytest.raises(RefusedError, match="vetoed by carol"):
        check_applicable(engine, PID, now=_t(plan, 3), destructive=True)

    refused = sample_plan("p-20261130-021500-aaaa", refusal="over max_delete_fraction")
    refused = replace(refused, status=PlanStatus.REFUSED)
    save_plan(engine, refused)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE plans SET status = 'pending_approval' WHERE plan_id = :p"),
            {"p": refused.plan_id},
        )
    with pytest.raises(RefusedError):
        approve(engine, refused.plan_id, actor="bob", comment="", now=_t(plan, 4))
    assert approval_state(engine, refused.plan_id, now=_t(plan, 4)).status is PlanStatus.REFUSED


@pytest.mark.parametrize("twin", ["ａｌｉｃｅ", "ali\u200bce", "\u200ealice", "ALICE\u2060"])  # noqa: RUF001
def test_a_name_that_reads_as_the_planners_is_the_planner(engine: Engine, twin: str) -> None:
    """Fullwidth letters and invisible format characters do not make another person:
    self-approval and "an identity counts once" cannot be had by retyping a name."""
    plan = _save(engine, approval={"approvers": 2})
    with pytest.raises(ApprovalError):
        approve(engine, PID, actor=twin, comment="", now=_t(plan, 1))
    approve(engine, PID, actor="bob", comment="", now=_t(plan, 1))
    state = approve(engine, PID, actor="bo\u200bb", comment="", now=_t(plan, 2))
    assert state.approvers == ("bob",)
    assert state.status is PlanStatus.PENDING_APPROVAL


def test_an_approval_a_little_ahead_of_this_clock_counts(engine: Engine) -> None:
    """The approver's machine runs 25 s ahead of the one that applies: the approval's
    time is in this clock's future, and the plan read "approved by bob (1 of 1); needs 0
    more approvers" and was refused. Clock skew up to the what-if margin is allowed, as
    for a plan's as_of; an approval stamped further ahead still is not taken."""
    plan = _save(engine)
    approve(engine, PID, actor="bob", comment=None, now=_t(plan, 1))
    behind = _t(plan, 1) - timedelta(seconds=25)
    assert check_applicable(engine, PID, now=behind, destructive=True).applicable
    with pytest.raises(ApprovalError):
        check_applicable(engine, PID, now=_t(plan, 1) - timedelta(hours=1), destructive=True)
