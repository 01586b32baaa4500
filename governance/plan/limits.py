"""Safety limits (invariant 4): a plan over a limit is refused with a clear message, not trimmed.

Bytes deleted count every action that removes data from its root: delete, strip, dedupe,
abort_upload, and the source side of an archive by copy to another location.
`max_delete_bytes` caps the whole plan; `max_delete_fraction` caps each root against the
bytes scanned in it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from governance.plan.types import ActionType, PlannedAction
from governance.policy.models import Safety
from governance.policy.units import format_bytes

REMOVING = frozenset(
    {ActionType.DELETE, ActionType.STRIP, ActionType.DEDUPE, ActionType.ABORT_UPLOAD}
)
"""Action types that remove their objects from the root (and archive by copy, see below)."""


def deleted_bytes(action: PlannedAction) -> int:
    """The bytes this action removes from its root (0 for transitions and in-place archive)."""
    if action.action in REMOVING:
        return action.bytes
    if action.action is ActionType.ARCHIVE and action.dest_url is not None:
        return action.bytes
    return 0


def refusal(
    deleted_by_root: Mapping[str, int],
    total_by_root: Mapping[str, int],
    safety: Safety,
    moved_by_root: Mapping[str, int] | None = None,
) -> str | None:
    """A message naming each exceeded limit, the root and by how much; None when within.

    `moved_by_root`: of the bytes removed, those archived to another location (counted,
    as they leave the root): the message then says how much is deleted and how much
    moved, since the plan's summary counts the moved bytes as archived, not deleted."""
    moved = moved_by_root or {}

    def removes(n: int, away: int) -> str:
        if not away:
            return f"delete {format_bytes(n)}"
        return (
            f"remove {format_bytes(n)} ({format_bytes(n - away)} deleted, "
            f"{format_bytes(away)} archived to another location)"
        )

    problems: list[str] = []
    for root in sorted(deleted_by_root):
        deleted = deleted_by_root[root]
        if deleted <= 0:
            continue
        total = total_by_root.get(root, 0)
        # Exact: the fraction as written in the policy (0.29 is not a binary float), so
        # deleting exactly 29% under 0.29 is within the limit, not "over by 0 B".
        allowed = Fraction(str(safety.max_delete_fraction)) * total
        if deleted > allowed:
            share = f"{deleted / total:.0%}" if total else "all"
            problems.append(
                f"root {root}: would {removes(deleted, moved.get(root, 0))}, {share} of "
                f"{format_bytes(total)} scanned, over max_delete_fraction "
                f"{safety.max_delete_fraction:g} by {format_bytes(math.ceil(deleted - allowed))}"
            )
    if safety.max_delete_bytes is not None:
        total_deleted = sum(deleted_by_root.values())
        if total_deleted > safety.max_delete_bytes:
            roots = ", ".join(
                f"root {r}: {format_bytes(b)}" for r, b in sorted(deleted_by_root.items()) if b
            )
            away = sum(moved.values())
            problems.append(
                f"would {removes(total_deleted, away)} ({roots}), over max_delete_bytes "
                f"{format_bytes(safety.max_delete_bytes)} by "
                f"{format_bytes(total_deleted - safety.max_delete_bytes)}"
            )
    return "; ".join(problems) if problems else None
