"""What apply and restore return, and how they open stores.

Results are typed rows (an Outcome enum plus a reason a person can read), one per action,
in the Cloud Custodian habit: ok, skipped or failed, never a silent half.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from governance.storage import normalize_url, open_store
from governance.storage.base import Store

StoreFactory = Callable[[str], Store]
"""Opens a Store for any URL apply touches: a root, an artifact prefix, a quarantine or
archive location (with the endpoint and credentials of the policy root it lies under)."""


class Outcome(StrEnum):
    OK = "ok"
    SKIPPED = "skipped"
    FAILED = "failed"
    WOULD_APPLY = "would_apply"  # dry runs only; never stored


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """One action's result. `final` means done for this plan (ok, or skipped on purpose)."""

    action_id: int
    action: str
    artifact_uri: str
    outcome: Outcome
    reason: str
    objects: int
    bytes: int
    final: bool
    execution_id: int | None = None

    @property
    def stale(self) -> bool:
        return self.outcome is Outcome.SKIPPED and self.reason.startswith("stale")


@dataclass(slots=True)
class ExecutionSummary:
    """One `executions` row, as the report shows it."""

    id: int
    plan_id: str
    actor: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    actions_ok: int
    actions_skipped: int
    actions_failed: int
    actions_done_before: int
    objects_purged: int
    error: str | None = None


RESULTS_KEPT = 1000  # results an ExecutionReport holds; the journal has every one


@dataclass(slots=True)
class ExecutionReport:
    """What one `apply_plan` call did (or, with `dry_run`, would do).

    `results` holds the first `keep_results` outcomes (all of them when None, as in a dry
    run); counts cover all. A real apply's full results are in the journal
    (`journal.iter_results`), so memory does not grow with the plan.
    """

    plan_id: str
    execution_id: int | None
    dry_run: bool
    delete_mode: str
    plan_status: str
    results: list[ActionOutcome] = field(default_factory=list)
    done_before: list[int] = field(default_factory=list)  # action ids done by earlier runs
    not_run: list[int] = field(default_factory=list)  # destructive, with only_non_destructive
    executions: list[ExecutionSummary] = field(default_factory=list)
    purged: int = 0
    notes: list[str] = field(default_factory=list)
    keep_results: int | None = None
    results_omitted: int = 0
    outcome_counts: Counter[str] = field(default_factory=Counter)
    stale_count: int = 0
    final_count: int = 0

    def add(self, outcomes: Sequence[ActionOutcome]) -> None:
        """Count a batch of outcomes; keep them while under `keep_results`."""
        for r in outcomes:
            self.outcome_counts[r.outcome.value] += 1
            self.stale_count += r.stale
            self.final_count += r.final
        room = len(outcomes) if self.keep_results is None else self.keep_results - len(self.results)
        room = max(0, room)
        self.results += outcomes[:room]
        self.results_omitted += len(outcomes) - min(room, len(outcomes))

    @property
    def processed(self) -> int:
        return sum(self.outcome_counts.values())

    def count(self, outcome: Outcome) -> int:
        return self.outcome_counts[outcome.value]

    @property
    def failed(self) -> int:
        return self.count(Outcome.FAILED)

    def tally(self) -> str:
        """This run's results in one line, each outcome on its own: `31 ok, 2 skipped (1
        stale), 0 failed` (a dry run leads with what it would apply; its `ok` are
        actions an earlier apply already carried out)."""
        ok = self.count(Outcome.OK)
        skipped = self.count(Outcome.SKIPPED)
        stale = f" ({self.stale_count:,} stale)" if self.stale_count else ""
        parts = [f"{ok:,} ok", f"{skipped:,} skipped{stale}", f"{self.failed:,} failed"]
        if self.dry_run:
            parts[0] = f"{ok:,} done already"
            parts.insert(0, f"{self.count(Outcome.WOULD_APPLY):,} would apply")
        return ", ".join(parts)

    def counts(self) -> dict[str, int]:
        """Results by outcome (only those that occur), plus done_before and not_run."""
        by_outcome = self.outcome_counts
        return {o.value: by_outcome[o.value] for o in Outcome if by_outcome[o.value]} | {
            "done_before": len(self.done_before),
            "not_run": len(self.not_run),
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `govern apply --format json` prints (with `results` as held;
        the CLI streams every result from the journal instead)."""
        return {
            "plan_id": self.plan_id,
            "execution_id": self.execution_id,
            "dry_run": self.dry_run,
            "delete_mode": self.delete_mode,
            "plan_status": self.plan_status,
            "counts": self.counts(),
            "results": [outcome_dict(r) for r in self.results],
            "done_before": self.done_before,
            "not_run": self.not_run,
            "executions": [asdict(e) for e in self.executions],
            "purged": self.purged,
            "notes": self.notes,
        }


def outcome_dict(r: ActionOutcome) -> dict[str, Any]:
    """One result as JSON data (the fields of ActionOutcome, in order)."""
    return {
        "action_id": r.action_id,
        "action": r.action,
        "artifact_uri": r.artifact_uri,
        "outcome": r.outcome.value,
        "reason": r.reason,
        "objects": r.objects,
        "bytes": r.bytes,
        "final": r.final,
        "execution_id": r.execution_id,
    }


@dataclass(frozen=True, slots=True)
class RestoredObject:
    uri: str
    artifact_uri: str
    ok: bool
    how: str  # quarantine | versioned | permanent
    error: str | None = None


@dataclass(slots=True)
class RestoreReport:
    """What one `restore_plan` call did or, with `dry_run`, would do: a dry run restores
    nothing, so its `restored` is 0 and its objects are `would_restore`."""

    plan_id: str
    dry_run: bool
    objects: list[RestoredObject] = field(default_factory=list)

    @property
    def restored(self) -> int:
        return 0 if self.dry_run else sum(1 for o in self.objects if o.ok)

    @property
    def would_restore(self) -> int:
        return sum(1 for o in self.objects if o.ok) if self.dry_run else 0

    @property
    def failed(self) -> int:
        return sum(1 for o in self.objects if not o.ok)

    def status_of(self, o: RestoredObject) -> str:
        """`restored`, `would_restore` (dry run) or `failed`."""
        if not o.ok:
            return "failed"
        return "would_restore" if self.dry_run else "restored"

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "dry_run": self.dry_run,
            "restored": self.restored,
            "would_restore": self.would_restore,
            "failed": self.failed,
            "objects": [asdict(o) | {"status": self.status_of(o)} for o in self.objects],
        }


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Endpoint and credentials of one storage root (from the policy's `storage` block)."""

    url: str
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None


class StoreOpener:
    """A StoreFactory that reuses stores and picks settings by the longest matching root.

    A URL under no configured root, but in the same bucket as one, borrows that root's
    endpoint and profile (a quarantine at the top of the bucket); otherwise defaults.
    """

    def __init__(self, roots: Sequence[StoreSettings] = (), concurrency: int = 16) -> None:
        self._roots = sorted(
            (
                StoreSettings(normalize_url(r.url), r.endpoint_url, r.profile, r.region)
                for r in roots
            ),
            key=lambda r: len(r.url),
            reverse=True,
        )
        self._concurrency = concurrency
        self._stores: dict[str, Store] = {}
        self._lock = threading.Lock()

    def settings_for(self, url: str) -> StoreSettings | None:
        for root in self._roots:
            if url.startswith(root.url):
                return root
        bucket = _bucket(url)
        return next((r for r in self._roots if bucket and _bucket(r.url) == bucket), None)

    def covers(self, root_url: str) -> bool:
        """Whether `root_url` gets a configured root's settings (see `settings_for`: a
        root above it, or one in the same bucket)."""
        return self.settings_for(normalize_url(root_url)) is not None

    def __call__(self, url: str) -> Store:
        normalized = normalize_url(url)
        with self._lock:
            store = self._stores.get(normalized)
            if store is None:
                found = self.settings_for(normalized)
                store = open_store(
                    normalized,
                    endpoint_url=found.endpoint_url if found else None,
                    profile=found.profile if found else None,
                    region=found.region if found else None,
                    concurrency=self._concurrency,
                )
                self._stores[normalized] = store
            return store


def _bucket(url: str) -> str | None:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if scheme != "file" else None
