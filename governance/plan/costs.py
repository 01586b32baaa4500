"""The cost model: monthly storage cost, early-deletion charges, the request and retrieval
costs of transitions and archives.

Prices are USD per GB-month from `policy.price` (the policy's `pricing` over the built-in
us-east-1 list prices of reference.md). AWS bills a "GB" as 2^30 bytes (GiB), so a
GB-month here is 2^30 bytes stored for one month; a month is taken as 30 days.
Request prices are list prices too (re-check against the AWS price page).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

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

MIN_BILLABLE_BYTES: dict[str, int] = {
    "STANDARD_IA": 128 * 1024,
    "ONEZONE_IA": 128 * 1024,
    "GLACIER_IR": 128 * 1024,
    "GLACIER": 40 * 1024,
    "DEEP_ARCHIVE": 40 * 1024,
}
"""Minimum billable object size by class (reference.md): a smaller object is billed as
this many bytes, for storage and for an early deletion alike."""


def billable_bytes(size: int, storage_class: str | None) -> int:
    """The bytes S3 bills `size` bytes as in `storage_class` (an empty class: STANDARD)."""
    return max(size, MIN_BILLABLE_BYTES.get(storage_class_of(storage_class), 0))


MIN_TRANSITION_BYTES: dict[str, int] = {
    "INTELLIGENT_TIERING": 128 * 1024,  # not auto-tiered below this: no saving, a monitoring fee
    "STANDARD_IA": 128 * 1024,
    "ONEZONE_IA": 128 * 1024,
    "GLACIER_IR": 128 * 1024,
    "GLACIER": 128 * 1024,  # bills at least 40 KB, plus 40 KB of index and metadata
    "DEEP_ARCHIVE": 128 * 1024,
}
"""Objects under this size stay where they are: every class that bills a minimum size
(or a monitoring fee) is left alone below 128 KiB, as S3 lifecycle does by default;
smaller objects cost more there, with the transition request, than they save."""

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

RETRIEVAL_USD_PER_GB: dict[str, float] = {
    "STANDARD_IA": 0.01,
    "ONEZONE_IA": 0.01,
    "GLACIER_IR": 0.03,
}
"""Data retrieval, USD per GB read out of these classes (us-east-1 list prices; re-check):
a transition or archive is a copy, which reads its source."""

RESTORE_FIRST = frozenset({"GLACIER", "DEEP_ARCHIVE"})
"""Classes whose objects must be restored before they can be read or copied: a plan does
not move them (a copy would fail)."""


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
        return sum(billable_bytes(o.size, target) / GB * each for o in objects)
    return sum(
        billable_bytes(o.size, o.storage_class) / GB * price(o.storage_class) for o in objects
    )


def early_charge_usd(obj: ObjectRef, policy: Policy, as_of: datetime) -> float:
    """What leaving the object's class now costs: the remaining minimum days at its price.

    The object's time in its class counts from govern's own copy into it when there was
    one (`class_since`), else from `last_modified` (an S3 lifecycle transition keeps that
    date, so after one this can under-count).
    """
    cls = storage_class_of(obj.storage_class)
    minimum = MIN_DAYS.get(cls)
    if minimum is None:
        return 0.0
    days_in = (as_of - (obj.class_since or obj.last_modified)).total_seconds() / 86_400
    remaining = max(minimum - days_in, 0.0)
    return billable_bytes(obj.size, cls) / GB * policy.price(cls) * remaining / DAYS_PER_MONTH


class Rates:
    """A policy's figures per storage class name, looked up once per name for a whole plan:
    the planner prices every object it acts on, and names are few.

    `row` is what `apply_costs` needs of a class: `policy.price` of the name, the minimum
    days of the class (None outside `MIN_DAYS`), the price `early_charge_usd` uses, and
    the class's minimum billable object size (0: none).
    """

    __slots__ = ("_policy", "rows")

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self.rows: dict[str | None, tuple[float, int | None, float, int]] = {}

    def price(self, storage_class: str | None) -> float:
        return self.row(storage_class)[0]

    def row(self, storage_class: str | None) -> tuple[float, int | None, float, int]:
        found = self.rows.get(storage_class)
        if found is None:
            cls = storage_class_of(storage_class)
            minimum = MIN_DAYS.get(cls)
            early = self._policy.price(cls) if minimum is not None else 0.0
            smallest = MIN_BILLABLE_BYTES.get(cls, 0)
            found = (self._policy.price(storage_class), minimum, early, smallest)
            if len(self.rows) < 256:  # class names are few; never grow without bound
                self.rows[storage_class] = found
        return found


def apply_costs(
    action: PlannedAction, policy: Policy, as_of: datetime, rates: Rates | None = None
) -> None:
    """Fill the cost fields of one action (before/after are for its objects only).

    Every action takes its objects out of their current class (deleted, moved colder or
    copied away), so each one carries the early charge of the objects it touches. The
    figures are `monthly_usd` and `early_charge_usd`, summed in the same order (the same
    floats), with the prices of `rates` (one per plan).
    """
    r = rates if rates is not None else Rates(policy)
    (
        action.early_deletion_usd,
        action.request_cost_usd,
        action.monthly_cost_before_usd,
        action.monthly_cost_after_usd,
    ) = action_costs(action.objects, action.action, action.storage_class, action.dest_url, as_of, r)


def action_costs(
    objs: Sequence[Priced],
    kind: ActionType,
    storage_class: str | None,
    dest_url: str | None,
    as_of: datetime,
    rates: Rates,
) -> tuple[float, float, float, float]:
    """`apply_costs` of an action of `kind` on `objs` (in the action's order), before the
    action is made: (early deletion, request, monthly before, monthly after) in USD."""
    rows = rates.rows
    before: float = 0
    early: float = 0
    for o in objs:
        sc = o.storage_class
        row = rows.get(sc) or rates.row(sc)
        size = o.size
        if size < row[3]:  # billed as the class's minimum size
            size = row[3]
        before += size / GB * row[0]
        minimum = row[1]
        if minimum is None:
            early += 0.0
        else:
            days_in = (as_of - (o.class_since or o.last_modified)).total_seconds() / 86_400
            remaining = max(minimum - days_in, 0.0)
            early += size / GB * row[2] * remaining / DAYS_PER_MONTH
    if kind in _MOVING and dest_url is None:
        after = _in_class(objs, rates, storage_class)
        request = len(objs) / 1000 * TRANSITION_USD_PER_1000.get(storage_class or "", 0.0)
        request += _retrieval(objs)
    elif kind is _ARCHIVE:
        # the copy lands in the destination's default class; the source side is removed
        after = _in_class(objs, rates, "STANDARD")
        request = len(objs) / 1000 * COPY_USD_PER_1000 + _retrieval(objs)
    else:
        after = 0.0
        request = 0.0
    return early, request, before, after


class Priced(Protocol):
    """What pricing needs of an object (an `ObjectRef`: a catalog object)."""

    @property
    def size(self) -> int: ...
    @property
    def storage_class(self) -> str | None: ...
    @property
    def last_modified(self) -> datetime: ...
    @property
    def class_since(self) -> datetime | None: ...


_MOVING = (ActionType.TRANSITION, ActionType.ARCHIVE)
_ARCHIVE = ActionType.ARCHIVE  # (read once: an enum class's attributes are slow to read)


def _retrieval(objects: Sequence[Priced]) -> float:
    """What copying `objects` bills for reading them out of their classes."""
    fees = RETRIEVAL_USD_PER_GB
    return sum(o.size / GB * fees.get(storage_class_of(o.storage_class), 0.0) for o in objects)


def _in_class(objects: Sequence[Priced], rates: Rates, target: str | None) -> float:
    """`monthly_usd(objects, policy, target)` with the prices of `rates`."""
    if target:
        each, _, _, smallest = rates.row(target)
        return sum(max(o.size, smallest) / GB * each for o in objects)
    return sum(
        max(o.size, rates.row(o.storage_class)[3]) / GB * rates.price(o.storage_class)
        for o in objects
    )
