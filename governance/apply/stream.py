"""Walking a saved plan in bounded memory: fingerprint check, facts, and a guard.

`scan_plan` reads the plan's actions page by page once, recomputing the fingerprint with
the streaming hash (`fingerprint_streaming`, the same digest as `verify_fingerprint`) and
keeping only what apply needs of the whole plan: the count, the destructive ids left out
by `only_non_destructive`, the roots that removals touch, and a 16-byte digest of each
action's canonical text. Apply then reads the actions again a batch at a time;
`PlanScan.verify` refuses any action whose text no longer has the digest that was
fingerprinted (a row edited between the check and the act), so only approved content is
ever acted on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from governance.apply.actions import removes_objects
from governance.catalog.plans import PlanHeader, iter_actions, load_kept
from governance.errors import ApprovalError
from governance.plan.fingerprint import action_text, fingerprint_streaming
from governance.plan.types import PlannedAction


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@dataclass(slots=True)
class PlanScan:
    """What apply keeps of a whole plan (no actions)."""

    plan_id: str
    total: int = 0
    not_run: list[int] = field(default_factory=list)
    removing_roots: set[str] = field(default_factory=set)
    digests: dict[int, bytes] = field(default_factory=dict)

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
    scan = PlanScan(header.plan_id)

    def seen(action: PlannedAction, text: str) -> None:
        scan.total += 1
        scan.digests[action.id] = _digest(text)
        if only_non_destructive and action.destructive:
            scan.not_run.append(action.id)
        elif removes_objects(action):
            scan.removing_roots.add(action.artifact.root_url)

    kept = load_kept(engine, header.plan_id)
    actual = fingerprint_streaming(iter_actions(engine, header.plan_id), kept, seen)
    if actual != header.fingerprint:
        raise ApprovalError(
            f"plan {header.plan_id}: its saved actions do not match its fingerprint "
            f"({actual} != {header.fingerprint}); the catalog was changed after review"
        )
    return scan
