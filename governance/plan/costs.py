"""The cost model: monthly storage cost, early-deletion charges, transition request costs.

Prices are USD per GB-month from `policy.price` (the policy's `pricing` over the built-in
us-east-1 list prices of reference.md). AWS bills a "GB" as 2^30 bytes (GiB), so a
GB-month here is 2^30 bytes stored for one month; a month is taken as 30 days.
Request prices are list prices too (re-check against the AWS price page).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from governance.plan.selectors import storage_class_of
from governance.plan.types import ActionType, ObjectRef, PlannedAction
from governance.policy.fields import StorageClass
from governance.policy.models import Policy

GB = 2**30
"""AWS's billing GB is a GiB."""
DAYS_PER_MONTH = 30.0

MIN_DAYS: dict[str, int] = {
    "STANDARD_IA": 30,
    "ONEZONE_IA": 30,
    "GLACIER_IR": 90,
    "GLACIER": 90,
    "DEEP_ARCHIVE": 180,
}
"""Minimum storage duration by class: leaving a class earlier bills the rest of it."""

MIN_TRANSITION_BYTES: dict[str, int] = {
    "INTELLIGENT_TIERING": 128 * 1024,  # not auto-tiered below this: no saving, a monitoring fee
    "STANDARD_IA": 128 * 1024,
    "ONEZONE_IA": 128 * 1024,
    "GLACIER_IR": 128 * 1024,
    "GLACIER": 40 * 1024,
    "DEEP_ARCHIVE": 40 * 1024,
}
"""Minimum billable object size by class: smaller objects cost more there than they save."""

TRANSITION_USD_PER_1000: dict[str, float] = {
    "INTELLIGENT_TIERING": 0.01,
    "STANDARD_IA": 0.01,
    "ONEZONE_IA": 0.01,
    "GLACIER_IR": 0.02,
    "GLACIER": 0.03,
    "DEEP_ARCHIVE": 0.05,
}
"""Lifecycle transition requests, USD per 1,000 (us-east-1 list prices; re-check)."""

COPY_USD_PER_1000 = 0.005
"""PUT/COPY requests into STANDARD, for archive by copy to another location."""


def coldness(storage_class: str | None) -> int | None:
    """Position in the waterfall (STANDARD = 0); None for a class outside it."""
    try:
        return _COLDNESS[storage_class]
    except KeyError:
        pass
    try:
        value: int | None = StorageClass(storage_class_of(storage_class)).coldness
    except ValueError:
        value = None
    if len(_COLDNESS) < 256:  # class names are few; never grow without bound
        _COLDNESS[storage_class] = value
    return value


_COLDNESS: dict[str | None, int | None] = {}


def monthly_usd(objects: Iterable[ObjectRef], policy: Policy, target: str | None = None) -> float:
    """Monthly storage cost of `objects` in their classes, or all in `target` when given."""
    price = policy.price
    if target:
        each = price(target)
        return sum(o.size / GB * each for o in objects)
    return sum(o.size / GB * price(o.storage_class) for o in objects)


def early_charge_usd(obj: ObjectRef, policy: Policy, as_of: datetime) -> float:
    """What leaving the object's class now costs: the remaining minimum days at its price.

    The object's time in its class is approximated by its age since `last_modified`
    (a lifecycle transition does not reset that date, so this can under-count).
    """
    cls = storage_class_of(obj.storage_class)
    minimum = MIN_DAYS.get(cls)
    if minimum is None:
        return 0.0
    days_in = (as_of - obj.last_modified).total_seconds() / 86_400
    remaining = max(minimum - days_in, 0.0)
    return obj.size / GB * policy.price(cls) * remaining / DAYS_PER_MONTH


def apply_costs(action: PlannedAction, policy: Policy, as_of: datetime) -> None:
    """Fill the cost fields of one action (before/after are for its objects only).

    Every action takes its objects out of their current class (deleted, moved colder or
    copied away), so each one carries the early charge of the objects it touches.
    """
    objs = action.objects
    action.monthly_cost_before_usd = monthly_usd(objs, policy)
    if action.action in (ActionType.TRANSITION, ActionType.ARCHIVE) and action.dest_url is None:
        target = action.storage_class
        action.monthly_cost_after_usd = monthly_usd(objs, policy, target)
        action.request_cost_usd = len(objs) / 1000 * TRANSITION_USD_PER_1000.get(target or "", 0.0)
    elif action.action is ActionType.ARCHIVE:
        # the copy lands in the destination's default class; the source side is removed
        action.monthly_cost_after_usd = monthly_usd(objs, policy, "STANDARD")
        action.request_cost_usd = len(objs) / 1000 * COPY_USD_PER_1000
    else:
        action.monthly_cost_after_usd = 0.0
    action.early_deletion_usd = sum(early_charge_usd(o, policy, as_of) for o in objs)
