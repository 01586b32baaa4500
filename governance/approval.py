"""The plan state machine: who may approve or veto a plan, and when it may be applied.

The rules are the policy's `approval` block frozen into the plan (`plan.controls`), so
editing the policy after review changes nothing. The effective state is derived from the
`approvals` rows, never trusted from the plan's status column alone: an approval counts
only for the fingerprint it was given for, so a plan whose actions changed is unapproved.

    pending_approval --approve (N distinct identities)--> approved --expires_after--> expired
          |  \\__ notice mode: applicable once notice_period has passed, unless vetoed
          +--reject (anyone, any time before apply)--> rejected

A plan none of whose actions is in `require_for` is approved on creation. A plan counts as
approved at the moment its last needed approval came (or its creation, or the end of the
notice period) and expires `expires_after` later. Time is always passed in as `now`. A
plan made as of a future time (a what-if plan, `--as-of`) is never approved or applied,
whatever its state (`refuse_what_if`).

Writes lock the plan row first (a no-op UPDATE: a row lock on PostgreSQL, the write lock
on SQLite), then read, decide and write in that one transaction, so two approvers at once
both count and a veto cannot be overwritten by a late approval.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select, text, update
from sqlalchemy.engine import Connection, Engine

from governance import audit
from governance.catalog.approval_tables import ApprovalRow
from governance.catalog.tables import PlanActionRow, PlanRow
from governance.errors import (
    ApprovalError,
    ArgumentError,
    CatalogError,
    PlanExpiredError,
    RefusedError,
    UnknownPlanError,
)
from governance.plan.types import WHAT_IF_MARGIN, Plan, PlanStatus
from governance.policy.models import Approval
from governance.wording import counted

_P = PlanRow.__table__  # type: ignore[attr-defined]
_A = PlanActionRow.__table__  # type: ignore[attr-defined]
_R = ApprovalRow.__table__  # type: ignore[attr-defined]

APPROVE, REJECT = "approve", "reject"
SYSTEM_ACTOR = "govern"  # who expires a plan
_FINAL = (
    PlanStatus.REFUSED, PlanStatus.REJECTED, PlanStatus.EXPIRED, PlanStatus.APPLIED,
    PlanStatus.WHAT_IF,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Decision:
    """One row of `approvals`."""

    decision: str  # approve | reject
    actor: str
    fingerprint: str
    comment: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class PlanFacts:
    """What the state machine needs of a plan (read in the deciding transaction)."""

    plan_id: str
    fingerprint: str
    status: PlanStatus
    created_at: datetime
    created_by: str
    refusal: str | None
    rules: Approval
    kinds: frozenset[tuple[str, bool]]  # (action type, destructive) present in the plan
    as_of: datetime | None = None  # the time the plan was made as of (`--as-of`)


@dataclass(frozen=True, slots=True)
class ApprovalState:
    """A plan's effective approval state at `now`.

    `status` is effective: `approved` once enough matching approvals exist (or the notice
    period is over), `expired` once past `expires_at`, even before the catalog says so.
    `needed` is 0 when nothing needs approval or in notice mode.
    """

    plan_id: str
    status: PlanStatus
    stored_status: PlanStatus
    fingerprint: str
    mode: str  # approve | notice
    created_by: str
    approvers: tuple[str, ...]  # distinct identities whose approval matches the fingerprint
    needed: int
    approved_at: datetime | None  # when it became approved (last approval, creation, notice end)
    expires_at: datetime | None
    applicable_after: datetime | None  # notice mode: end of the notice period
    applicable: bool  # the whole plan may be applied now
    non_destructive_needs_approval: bool  # False: --only-non-destructive may run while pending
    rejected_by: str | None = None
    reasons: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for people: `approved by alice (1 of 1); applicable until 2026-12-03 02:15Z`."""
        who = ", ".join(self.approvers) or "nobody yet"
        until = f"; applicable until {when(self.expires_at)}" if self.expires_at else ""
        if self.status in (PlanStatus.REFUSED, PlanStatus.REJECTED, PlanStatus.EXPIRED):
            return f"{self.status}: {self.reasons[0]}" if self.reasons else str(self.status)
        if self.status is PlanStatus.APPLIED:
            return "applied"
        if self.status is PlanStatus.WHAT_IF:
            return WHAT_IF_WORDS
        if self.mode == "notice" and self.applicable_after is not None:
            if self.applicable:
                return f"notice period over since {when(self.applicable_after)}{until}"
            return (
                f"in its notice period: applicable from {when(self.applicable_after)} "
                "unless vetoed (govern reject)"
            )
        if self.needed == 0:
            return f"approved on creation: no action in it needs approval{until}"
        count = f"({len(self.approvers)} of {self.needed})"
        if self.applicable:
            # a plan partly applied is still approved: the approvers approved, not applied
            state = "" if self.status is PlanStatus.APPROVED else f"{_words(self.status)}; "
            return f"{state}approved by {who} {count}{until}"
        more = self.needed - len(self.approvers)
        return f"approved by {who} {count}; needs {more} more approver{'s' * (more != 1)}"


WHAT_IF_WORDS = (
    "what_if: made as of a time after it was made: it is reported on, never approved or "
    "applied (plan again without --as-of)"
)
"""A what-if plan's approval state: no approval counts (`approve` refuses it), whatever
its actions need."""


def _words(status: PlanStatus) -> str:
    """`partially applied` for `partially_applied`."""
    return str(status).replace("_", " ")


def _skew(approved_at: datetime | None) -> timedelta:
    """How far ahead of this clock an approval's time may be and still count: clock skew
    between the approver's machine and this one (a notice period gets none)."""
    return WHAT_IF_MARGIN if approved_at is not None else timedelta(0)


def when(moment: datetime | None) -> str:
    """`2026-12-03 02:15Z`: minutes are enough for people."""
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%MZ")


# ----------------------------------------------------------------------------- deriving


def rules_of(controls: dict[str, Any] | None, plan_id: str = "") -> Approval:
    """The plan's frozen approval rules; an empty controls dict means the policy defaults."""
    try:
        return Approval.model_validate((controls or {}).get("approval") or {})
    except ValidationError as exc:
        raise CatalogError(f"plan {plan_id}: its frozen approval rules are invalid: {exc}") from exc


def same_identity(a: str, b: str) -> bool:
    """Whether two identities are one person: `root` and `ROOT` (or ` alice`) are, or
    separation of duties and "an identity counts once" could be had by changing case;
    so are `alice` in fullwidth letters and `alice` with a zero-width space in it, which
    read alike (see `identity_key`)."""
    return identity_key(a) == identity_key(b)


def identity_key(name: str) -> str:
    """An identity as compared: NFKC-normalised (fullwidth and compatibility forms fold
    to their plain letters), invisible format characters (zero-width spaces and joiners,
    direction marks) dropped, whitespace trimmed, case folded."""
    folded = unicodedata.normalize("NFKC", name)
    visible = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return visible.strip().casefold()


def _among(actor: str, identities: Sequence[str]) -> bool:
    return any(same_identity(actor, other) for other in identities)


def derive(facts: PlanFacts, decisions: Sequence[Decision], now: datetime) -> ApprovalState:
    """The effective state from the plan, its decisions (oldest first) and the time. Pure."""
    rules = facts.rules
    requiring = sorted({a for a, _ in facts.kinds if a in rules.require_for})
    nd_requiring = any(a in rules.require_for for a, d in facts.kinds if not d)
    notice = rules.mode == "notice" and bool(requiring)
    needed = rules.approvers if requiring and not notice else 0
    reasons: list[str] = []

    approvers: list[str] = []
    approved_at: datetime | None = None
    stale = 0
    for d in decisions:
        if d.decision != APPROVE or _among(d.actor, approvers):
            continue
        if d.fingerprint != facts.fingerprint:
            stale += 1
            continue
        if same_identity(d.actor, facts.created_by) and not rules.allow_self_approval:
            continue
        approvers.append(d.actor)
        if len(approvers) == needed:
            approved_at = d.at
    if stale:
        reasons.append(f"{counted(stale, 'approval')} given for another fingerprint ignored")

    applicable_after = facts.created_at + rules.notice_period if notice else None
    completed = facts.created_at if not requiring else applicable_after if notice else approved_at
    expires_at = completed + rules.expires_after if completed is not None else None
    rejection = next((d for d in reversed(decisions) if d.decision == REJECT), None)

    stored = facts.status
    applicable = False
    # The veto and the refusal are rows of their own (a REJECT decision, the plan's
    # `refusal`): a status column edited back to `approved` does not undo either.
    final = stored
    if facts.refusal and stored is not PlanStatus.WHAT_IF:
        final = PlanStatus.REFUSED
    elif rejection is not None and stored is not PlanStatus.APPLIED:
        final = PlanStatus.REJECTED
    if final in _FINAL:
        status = stored = final
        if stored is PlanStatus.REFUSED:
            reasons.insert(0, facts.refusal or "over a safety limit")
        elif stored is PlanStatus.REJECTED and rejection is not None:
            reasons.insert(0, _veto_words(rejection.actor, rejection.at, rejection.comment))
        elif stored is PlanStatus.EXPIRED:
            reasons.insert(0, f"its approval expired at {when(expires_at)}")
        elif stored is PlanStatus.WHAT_IF:
            reasons.insert(0, _WHAT_IF_REASON)
    elif expires_at is not None and now >= expires_at:
        status = PlanStatus.EXPIRED
        reasons.insert(0, f"its approval expired at {when(expires_at)}")
    elif completed is not None and now + _skew(approved_at) >= completed:
        # (an approval stamped by an approver's clock up to WHAT_IF_MARGIN ahead of this
        # one counts now: it read "approved (1 of 1); needs 0 more approvers", refused)
        status = stored if stored is PlanStatus.PARTIALLY_APPLIED else PlanStatus.APPROVED
        applicable = True
    else:
        status = stored if stored is PlanStatus.PARTIALLY_APPLIED else PlanStatus.PENDING_APPROVAL
        if stored is PlanStatus.APPROVED:
            reasons.append(
                f"the catalog says approved, but only {len(approvers)} of {needed} approvals "
                "match the plan's fingerprint"
            )
    return ApprovalState(
        plan_id=facts.plan_id,
        status=status,
        stored_status=stored,
        fingerprint=facts.fingerprint,
        mode=rules.mode,
        created_by=facts.created_by,
        approvers=tuple(approvers),
        needed=needed,
        approved_at=completed,
        expires_at=expires_at,
        applicable_after=applicable_after,
        applicable=applicable,
        non_destructive_needs_approval=nd_requiring,
        rejected_by=rejection.actor if rejection is not None else None,
        reasons=tuple(reasons),
    )


# ----------------------------------------------------------------------------- catalog


def _unknown(plan_id: str) -> UnknownPlanError:
    return UnknownPlanError(f"no plan {plan_id!r} in the catalog; `govern plans` lists them")


def _lock_plan(conn: Connection, plan_id: str) -> None:
    """Serialize deciders on this plan before anything is read (see the module docstring)."""
    changed = conn.execute(
        text("UPDATE plans SET status = status WHERE plan_id = :p"), {"p": plan_id}
    ).rowcount
    if not changed:
        raise _unknown(plan_id)


def _read(conn: Connection, plan_id: str) -> tuple[PlanFacts, list[Decision]]:
    row = conn.execute(select(_P).where(_P.c.plan_id == plan_id)).mappings().first()
    if row is None:
        raise _unknown(plan_id)
    kinds = frozenset(
        (str(a), bool(d))
        for a, d in conn.execute(
            select(_A.c.action, _A.c.destructive).where(_A.c.plan_id == plan_id).distinct()
        )
    )
    facts = PlanFacts(
        plan_id=plan_id,
        fingerprint=row["fingerprint"],
        status=PlanStatus(row["status"]),
        created_at=row["created_at"],
        created_by=row["created_by"],
        refusal=row["refusal"],
        rules=rules_of(row["controls"], plan_id),
        kinds=kinds,
        as_of=row["as_of"],
    )
    decisions = [
        Decision(r["decision"], r["actor"], r["fingerprint"], r["comment"], r["at"])
        for r in conn.execute(
            select(_R).where(_R.c.plan_id == plan_id).order_by(_R.c.at, _R.c.id)
        ).mappings()
    ]
    return facts, decisions


def veto_of(engine: Engine, plan_id: str) -> str | None:
    """Who vetoed the plan, when and why (None: nobody): an apply under way asks between
    batches, and stops at the veto (`govern reject` during an apply)."""
    with engine.connect() as conn:
        row = conn.execute(
            select(_R.c.actor, _R.c.at, _R.c.comment)
            .where(_R.c.plan_id == plan_id, _R.c.decision == REJECT)
            .order_by(_R.c.at.desc(), _R.c.id.desc())  # the latest, as `derive` reads it
            .limit(1)
        ).first()
    return None if row is None else _veto_words(*row)


def _veto_words(actor: str, at: datetime, comment: str | None) -> str:
    """`vetoed by carol at 2026-12-02 09:26Z: STOP`: a rejection, as every message says it."""
    return f"vetoed by {actor} at {when(at)}: {comment or 'no comment'}"


def _set_status(conn: Connection, plan_id: str, status: PlanStatus) -> None:
    """`catalog.plans.set_plan_status`, but inside the deciding transaction."""
    conn.execute(update(_P).where(_P.c.plan_id == plan_id).values(status=status.value))


def _insert(conn: Connection, plan_id: str, decision: Decision) -> None:
    conn.execute(_R.insert(), [{"plan_id": plan_id, **asdict(decision)}])


def _aware(now: datetime) -> None:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")


def refuse_what_if(facts: PlanFacts, now: datetime) -> None:
    """A what-if plan, made as of a time after it was made (its status says so since it
    was built), or as of a time later than `now` (a plan saved before that status
    existed): everything in it looked older than it is, so `protect.min_age` and a
    running run's grace did not hold. It may be shown and reported on, never approved or
    applied, not even once its `as_of` has passed."""
    as_of = facts.as_of
    future = as_of is not None and as_of > now + WHAT_IF_MARGIN  # beyond clock skew
    if as_of is None or not (future or facts.status is PlanStatus.WHAT_IF):
        return
    shown = as_of.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    when_made = "in the future" if future else "later than it was made"
    raise RefusedError(
        f"plan {facts.plan_id} was made as of {shown}, {when_made}: a what-if plan cannot "
        "be approved or applied; plan again without --as-of"
    )


_WHAT_IF_REASON = "made as of a time after it was made: a what-if plan, never approved or applied"


def effective_status(
    conn: Connection, plan_id: str, stored: PlanStatus, now: datetime
) -> PlanStatus:
    """The status a reader should see at `now` (`govern plans`, `govern show`): `derive`'s,
    the rule approve and apply decide by, so an approved plan past its expiry reads
    `expired` before approve or apply next meet it and write so. Reads only. A final
    status (`stored`) is returned as it is, without reading."""
    _aware(now)
    if stored in _FINAL:
        return stored
    facts, decisions = _read(conn, plan_id)
    return derive(facts, decisions, now).status


def effective_statuses(engine: Engine, plans: Sequence[Any], now: datetime | None = None) -> None:
    """Set each plan's (or plan header's) `status` to what it is at `now` (default: the
    clock), by `effective_status`: what `govern plans` and `govern show` print. Reads
    only; plans in a final status are not read again."""
    at = now or datetime.now(UTC)
    with engine.connect() as conn:
        for plan in plans:
            plan.status = effective_status(conn, plan.plan_id, plan.status, at)


# ----------------------------------------------------------------------------- public API


def approval_state(engine: Engine, plan_id: str, now: datetime) -> ApprovalState:
    """The plan's effective state at `now` (reads only)."""
    _aware(now)
    with engine.connect() as conn:
        facts, decisions = _read(conn, plan_id)
    return derive(facts, decisions, now)


def approve(
    engine: Engine, plan_id: str, *, actor: str, comment: str | None, now: datetime
) -> ApprovalState:
    """Record `actor`'s approval of the plan as it is now (its fingerprint); returns the state.

    Approving twice, or a plan already approved, records nothing and says so in `reasons`.
    ApprovalError: the plan is refused, rejected, expired or applied; it is in notice mode;
    or `actor` made it and self-approval is not allowed. RefusedError: the plan was made
    as of a future time (`refuse_what_if`).
    """
    _aware(now)
    _refuse_changed(engine, plan_id)
    with engine.begin() as conn:
        _lock_plan(conn, plan_id)
        facts, decisions = _read(conn, plan_id)
        state = derive(facts, decisions, now)
        refuse_what_if(facts, now)
        if state.status in _FINAL:
            detail = f" ({state.reasons[0]})" if state.reasons else ""
            raise ApprovalError(
                f"plan {plan_id} is {state.status}{detail}: it cannot be approved; make a new plan"
            )
        if state.mode == "notice" and state.applicable_after is not None:
            raise ApprovalError(
                f"plan {plan_id} is in notice mode: it needs no approval and becomes applicable "
                f"at {when(state.applicable_after)} unless vetoed with govern reject"
            )
        if state.needed == 0:
            return _note(state, "no action in this plan needs approval; nothing recorded")
        if same_identity(actor, facts.created_by) and not facts.rules.allow_self_approval:
            raise ApprovalError(
                f"{facts.created_by} made plan {plan_id}{_spelled(actor, facts.created_by)} "
                "and the policy does not allow self-approval "
                "(approval.allow_self_approval: false): another identity must approve it"
            )
        if _among(actor, state.approvers):
            recorded = next(a for a in state.approvers if same_identity(a, actor))
            return _note(
                state,
                f"{recorded} has already approved this plan{_spelled(actor, recorded)}; an "
                f"identity counts once ({len(state.approvers)} of {state.needed})",
            )
        if state.applicable:
            return _note(state, f"already approved; {actor}'s approval not recorded")
        mine = Decision(APPROVE, actor, facts.fingerprint, comment, now)
        _insert(conn, plan_id, mine)
        new = derive(facts, [*decisions, mine], now)
        if new.applicable and facts.status in (PlanStatus.PENDING_APPROVAL, PlanStatus.APPROVED):
            _set_status(conn, plan_id, PlanStatus.APPROVED)
            new = replace(new, stored_status=PlanStatus.APPROVED)
        audit.record(
            conn,
            "approve",
            actor=actor,
            plan_id=plan_id,
            at=now,
            payload={
                "fingerprint": facts.fingerprint,
                "comment": comment,
                "approvers": list(new.approvers),
                "needed": new.needed,
                "status": new.status.value,
                "expires_at": new.expires_at,
            },
        )
    return new


def reject(
    engine: Engine, plan_id: str, *, actor: str, comment: str, now: datetime
) -> ApprovalState:
    """Veto the plan (anyone may, the planner too, until it is applied); it stays rejected."""
    _aware(now)
    if not comment or not comment.strip():
        raise ArgumentError("a rejection needs a comment saying why (--comment)")
    with engine.begin() as conn:
        _lock_plan(conn, plan_id)
        facts, decisions = _read(conn, plan_id)
        if facts.status in _FINAL:
            why = _NOTHING_TO_REJECT.get(
                facts.status, f"is already {facts.status}: nothing to reject"
            )
            raise ApprovalError(f"plan {plan_id} {why}")
        mine = Decision(REJECT, actor, facts.fingerprint, comment.strip(), now)
        _insert(conn, plan_id, mine)
        _set_status(conn, plan_id, PlanStatus.REJECTED)
        audit.record(
            conn,
            "reject",
            actor=actor,
            plan_id=plan_id,
            at=now,
            payload={
                "fingerprint": facts.fingerprint,
                "comment": mine.comment,
                "previous_status": facts.status.value,
            },
        )
    return derive(replace(facts, status=PlanStatus.REJECTED), [*decisions, mine], now)


_NOTHING_TO_REJECT = {
    PlanStatus.WHAT_IF: (
        "is a what-if plan (made as of a time after it was made): it is never approved or "
        "applied, so there is nothing to reject"
    ),
    PlanStatus.REFUSED: (
        "was refused when it was made (over a safety limit): it is never approved or "
        "applied, so there is nothing to reject"
    ),
    PlanStatus.REJECTED: "is already rejected: nothing more to reject",
    PlanStatus.EXPIRED: (
        "has expired (its approval ran out): it can never be applied, so there is nothing to reject"
    ),
    PlanStatus.APPLIED: "has already been applied: too late to reject it",
}
"""Why `reject` refuses a plan of each final status, in plain words."""


def check_applicable(
    engine: Engine, plan_id: str, *, now: datetime, destructive: bool, actor: str = SYSTEM_ACTOR
) -> ApprovalState:
    """Refuse unless the plan may be applied now; returns its state when it may.

    `destructive=False` (apply --only-non-destructive): a pending plan whose non-destructive
    actions need no approval may proceed. A plan found past its expiry is marked `expired`
    (audited as `actor`) before PlanExpiredError is raised. A plan made as of a future
    time is refused whatever its approvals (`refuse_what_if`).
    """
    _aware(now)
    with engine.connect() as conn:
        facts, decisions = _read(conn, plan_id)
    state = derive(facts, decisions, now)
    reason = state.reasons[0] if state.reasons else ""
    if state.status is PlanStatus.REFUSED:
        raise RefusedError(f"plan {plan_id} was refused ({reason}): it cannot be applied")
    if state.status is PlanStatus.REJECTED:
        raise ApprovalError(f"plan {plan_id} was rejected ({reason}): it cannot be applied")
    if state.status is PlanStatus.APPLIED:
        raise ApprovalError(f"plan {plan_id} has already been applied")
    if state.status is PlanStatus.EXPIRED:
        if facts.status is not PlanStatus.EXPIRED:
            _mark_expired(engine, plan_id, state, actor=actor, now=now)
        raise PlanExpiredError(f"plan {plan_id} has expired: {reason}; make a new plan")
    refuse_what_if(facts, now)
    if state.applicable:
        return state
    if not destructive and not state.non_destructive_needs_approval:
        ends = facts.created_at + facts.rules.expires_after
        if now >= ends:
            raise PlanExpiredError(
                f"plan {plan_id}: its non-destructive actions needed no approval, but that "
                f"expired at {when(ends)}; make a new plan"
            )
        return state
    if state.applicable_after is not None:
        raise ApprovalError(
            f"plan {plan_id} is in its notice period until {when(state.applicable_after)}: "
            "it becomes applicable then unless vetoed with govern reject"
        )
    more = state.needed - len(state.approvers)
    has = f"approved by {', '.join(state.approvers)}" if state.approvers else "no approvals yet"
    extra = f"; {'; '.join(state.reasons)}" if state.reasons else ""
    raise ApprovalError(
        f"plan {plan_id} is not approved: needs {counted(more, 'more approver')} ({has}, "
        f"{len(state.approvers)} of {state.needed}){extra}; govern approve {plan_id}"
    )


def _refuse_changed(engine: Engine, plan_id: str) -> None:
    """ApprovalError when the plan was changed in the catalog since it was made: rows
    unlike their audit events (`integrity`), or actions unlike their fingerprint (an
    approval binds to the fingerprint: one given to edited actions approved what no one
    reviewed)."""
    from governance.apply.stream import scan_plan
    from governance.catalog.plans import load_plan_header
    from governance.integrity import refuse_tampered

    refuse_tampered(engine, plan_id)
    scan_plan(engine, load_plan_header(engine, plan_id), only_non_destructive=False)


def verify_fingerprint(plan: Plan) -> None:
    """Refuse a loaded plan whose actions no longer hash to its fingerprint (edited rows):
    approvals bind to the fingerprint, so apply must act only on what was approved."""
    from governance.plan.fingerprint import fingerprint

    actual = fingerprint(plan.actions, plan.kept)
    if actual != plan.fingerprint:
        raise ApprovalError(
            f"plan {plan.plan_id}: its saved actions do not match its fingerprint "
            f"({actual} != {plan.fingerprint}); the catalog was changed after review"
        )


def _spelled(actor: str, recorded: str) -> str:
    """Where the acting identity is spelled otherwise than the one recorded (`ALICE` for
    `alice`), a note that they are one: messages name identities as recorded."""
    if actor == recorded:
        return ""
    return f" ({actor} is {recorded}: identities are compared without regard to case)"


def _note(state: ApprovalState, reason: str) -> ApprovalState:
    return replace(state, reasons=(*state.reasons, reason))


def _mark_expired(
    engine: Engine, plan_id: str, seen: ApprovalState, *, actor: str, now: datetime
) -> None:
    """Write `expired` (and its audit event) unless the plan moved on meanwhile."""
    with engine.begin() as conn:
        _lock_plan(conn, plan_id)
        facts, decisions = _read(conn, plan_id)
        if derive(facts, decisions, now).status is not PlanStatus.EXPIRED:
            return
        if facts.status in _FINAL:
            return
        _set_status(conn, plan_id, PlanStatus.EXPIRED)
        audit.record(
            conn,
            "expire",
            actor=actor,
            plan_id=plan_id,
            at=now,
            payload={
                "fingerprint": facts.fingerprint,
                "expires_at": seen.expires_at,
                "previous_status": facts.status.value,
            },
        )
