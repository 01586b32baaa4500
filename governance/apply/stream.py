"""Walking a saved plan in bounded memory: fingerprint check, facts, and a guard.

`scan_plan` reads the plan's actions page by page once and recomputes its fingerprint
(the same digest as `verify_fingerprint`) without holding the plan. The canonical text
lists the documents sorted, and a saved plan's documents are, action type by action type,
in action id order almost always (the planner numbers actions by root and artifact URI):
so the actions are read a type at a time in id order and hashed as they come, each one
checked to sort after the one before, and the kept list likewise. Only when one does not
(URIs with characters that sort before '"', nested roots) is the plan hashed the sorting
way (`fingerprint_streaming`, which holds every document's text).

It keeps what apply needs of the whole plan: the count, the destructive ids left out by
`only_non_destructive`, the roots that removals touch, and a 16-byte digest of each
action's canonical text, in one bytearray (`IdTable`). Apply then reads the actions again
a batch at a time; `PlanScan.verify` refuses any action whose text no longer has the
digest that was fingerprinted (a row edited between the check and the act), so only
approved content is ever acted on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii

from sqlalchemy.engine import Engine

from governance.catalog.plans import (
    PlanHeader,
    action_counts,
    iter_actions,
    iter_kept,
    load_kept,
)
from governance.errors import ApprovalError
from governance.plan.fingerprint import action_text, fingerprint_streaming, kept_text
from governance.plan.types import PlannedAction, removes_objects

DIGEST_SIZE = 16
HASHED_AT_ONCE = 1024  # documents joined into one update of the hash


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=DIGEST_SIZE).digest()


class IdTable:
    """Fixed-width values by action id, in one bytearray: a plan's action ids are dense
    (1..N), so a slot per id costs `width` bytes where a dict entry costs over a hundred.
    An all-zero slot is empty (a 16-byte digest is never all zeros); an id far past the
    expected count (never one the planner gives) goes to a dict instead."""

    __slots__ = ("_dense_below", "_slots", "_sparse", "_width")

    def __init__(self, expected: int, width: int = DIGEST_SIZE) -> None:
        self._width = width
        self._dense_below = 2 * max(expected, 0) + 1024
        self._slots = bytearray()
        self._sparse: dict[int, bytes] = {}

    def __setitem__(self, action_id: int, value: bytes) -> None:
        if not 0 <= action_id < self._dense_below:
            self._sparse[action_id] = value
            return
        start = action_id * self._width
        if len(self._slots) < start + self._width:
            self._slots.extend(bytes(start + self._width - len(self._slots)))
        self._slots[start : start + self._width] = value

    def get(self, action_id: int) -> bytes | None:
        start = action_id * self._width
        if not 0 <= action_id < self._dense_below or start >= len(self._slots):
            return self._sparse.get(action_id)
        value = bytes(self._slots[start : start + self._width])
        return value if value.strip(b"\0") else None

    def __contains__(self, action_id: object) -> bool:
        return isinstance(action_id, int) and self.get(action_id) is not None

    def clear(self) -> None:
        self._slots = bytearray()
        self._sparse.clear()

    def __iter__(self) -> Iterator[int]:
        """The ids held, in increasing order."""
        width = self._width
        dense = (
            i
            for i in range(len(self._slots) // width)
            if self._slots[i * width : (i + 1) * width].strip(b"\0")
        )
        return iter(sorted([*dense, *self._sparse]))


class IdSet(IdTable):
    """A set of action ids, a byte each (see IdTable)."""

    __slots__ = ()

    def __init__(self, expected: int) -> None:
        super().__init__(expected, width=1)

    def add(self, action_id: int) -> None:
        self[action_id] = b"\1"

    def update(self, ids: Iterable[int]) -> None:
        for action_id in ids:
            self.add(action_id)


@dataclass(slots=True)
class PlanScan:
    """What apply keeps of a whole plan (no actions)."""

    plan_id: str
    only_non_destructive: bool = False
    expected: int = 0  # the number of actions, if known (sizes `digests`)
    total: int = 0
    not_run: list[int] = field(default_factory=list)
    removing_roots: set[str] = field(default_factory=set)
    acting_roots: set[str] = field(default_factory=set)  # roots of the actions that run
    digests: IdTable = field(init=False)

    def __post_init__(self) -> None:
        self.digests = IdTable(self.expected)

    def seen(self, action: PlannedAction, text: str) -> None:
        """Note one action of the plan, with its canonical text (`action_text`)."""
        self.total += 1
        self.digests[action.id] = _digest(text)
        if self.only_non_destructive and action.destructive:
            self.not_run.append(action.id)
            return
        self.acting_roots.add(action.artifact.root_url)
        if removes_objects(action):
            self.removing_roots.add(action.artifact.root_url)

    def verify_all(self, actions: Iterable[PlannedAction]) -> None:
        for action in actions:
            self.verify(action)

    def verify(self, action: PlannedAction) -> None:
        if self.digests.get(action.id) != _digest(action_text(action)):
            raise ApprovalError(
                f"plan {self.plan_id}: action {action.id} changed in the catalog after its "
                "fingerprint was verified; the catalog was changed after review"
            )


def scan_plan(engine: Engine, header: PlanHeader, *, only_non_destructive: bool) -> PlanScan:
    """Verify the fingerprint (ApprovalError when it differs) and gather the plan's facts."""
    plan_id = header.plan_id
    counts = action_counts(engine, plan_id)
    scan = PlanScan(plan_id, only_non_destructive, sum(counts.values()))
    actual = _fingerprint_in_order(engine, scan, counts)
    if actual is None:  # not in canonical order after all: hash the sorting way
        scan = PlanScan(plan_id, only_non_destructive, sum(counts.values()))
        kept = load_kept(engine, plan_id)
        actual = fingerprint_streaming(iter_actions(engine, plan_id), kept, scan.seen)
    if actual != header.fingerprint:
        raise ApprovalError(
            f"plan {plan_id}: its saved actions do not match its fingerprint "
            f"({actual} != {header.fingerprint}); the catalog was changed after review"
        )
    scan.not_run.sort()
    return scan


def _fingerprint_in_order(engine: Engine, scan: PlanScan, counts: dict[str, int]) -> str | None:
    """The fingerprint of the plan, its documents hashed in the order they are read (each
    action type's in id order, the kept list in saved order); None as soon as one sorts
    before the one hashed last (the hash would not be the canonical one)."""
    h = hashlib.sha256(b'{"actions":[')
    feed = _SortedFeed(h)
    for kind in sorted(counts, key=encode_basestring_ascii):  # as the documents start
        for action in iter_actions(engine, scan.plan_id, action=kind):
            text = action_text(action)
            if not feed.add(text):
                return None
            scan.seen(action, text)
    feed.flush()
    h.update(b'],"kept":[')
    feed = _SortedFeed(h)
    for kept in iter_kept(engine, scan.plan_id):
        if not feed.add(kept_text(kept)):
            return None
    feed.flush()
    h.update(b'],"version":1}')
    return "sha256:" + h.hexdigest()


class _SortedFeed:
    """Documents (ASCII-escaped canonical texts) into a hash as the canonical text has
    them: comma-separated, each unescaped when it holds a `\\u` escape, a few thousand per
    update; `add` refuses one that sorts before the one added last."""

    def __init__(self, h: hashlib._Hash) -> None:
        self._h = h
        self._last = ""
        self._chunk: list[str] = []
        self._first = True

    def add(self, text: str) -> bool:
        if text < self._last:
            return False
        self._last = text
        self._chunk.append(text if "\\u" not in text else _unescaped(text))
        if len(self._chunk) >= HASHED_AT_ONCE:
            self.flush()
        return True

    def flush(self) -> None:
        if not self._chunk:
            return
        joined = ",".join(self._chunk)
        self._h.update((joined if self._first else "," + joined).encode("utf-8"))
        self._first = False
        self._chunk = []


def _unescaped(text: str) -> str:
    """A document's canonical form (`ensure_ascii=False`) from its ASCII-escaped one: the
    same JSON (keys already in order), written again without escaping non-ASCII."""
    return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
