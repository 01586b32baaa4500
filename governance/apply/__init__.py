"""Carrying out plans: preconditions, batching, delete modes, the journal, restore, purge.

Only this package calls mutating Store methods, and only for actions of a plan that
`approval.check_applicable` accepts. Public entry points:

- `apply_plan(engine, plan_id, *, actor, now, stores, ...) -> ExecutionReport`
- `restore_plan(engine, plan_id, *, actor, now, stores, uris=()) -> RestoreReport`
- `purge_quarantine(engine, *, now, stores, actor) -> PurgeReport`
- `StoreOpener(settings)`: the StoreFactory built from a policy's storage roots.
"""

from governance.apply.executor import apply_plan
from governance.apply.purge import PurgeReport, purge_quarantine
from governance.apply.restore import restore_plan
from governance.apply.types import (
    ActionOutcome,
    ExecutionReport,
    ExecutionSummary,
    Outcome,
    RestoredObject,
    RestoreReport,
    StoreFactory,
    StoreOpener,
    StoreSettings,
)

__all__ = [
    "ActionOutcome",
    "ExecutionReport",
    "ExecutionSummary",
    "Outcome",
    "PurgeReport",
    "RestoreReport",
    "RestoredObject",
    "StoreFactory",
    "StoreOpener",
    "StoreSettings",
    "apply_plan",
    "purge_quarantine",
    "restore_plan",
]
