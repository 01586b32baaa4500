"""What apply and restore return, and how they open stores.

Results are typed rows (an Outcome enum plus a reason a person can read), one per action,
in the Cloud Custodian habit: ok, skipped or failed, never a silent half.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from governance.storage import normalize_url, open_store
from governance.storage.base import Store

log = logging.getLogger(__name__)

StoreFactory = Callable[[str], Store]
"""Opens a Store for any URL apply touches: a root, an artifact prefix, a quarantine or
archive location (with the endpoint and credentials of the policy root it lies under, or
of the root it serves: see `StoreOpener` and `open_destination`)."""


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
    vetoed: str | None = None  # rejected while it ran: it stopped there (`approval.veto_of`)

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
            "vetoed": self.vetoed,
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

    @property
    def connection(self) -> tuple[str | None, str | None, str | None]:
        """What opening a store takes from these settings: endpoint, profile, region."""
        return (self.endpoint_url, self.profile, self.region)


_DEFAULTS = StoreSettings("")


class StoreOpener:
    """A StoreFactory that reuses stores and picks settings by the longest matching root.

    A URL under no configured root, but in the same bucket as one, borrows that root's
    endpoint and profile (a quarantine at the top of the bucket). A quarantine or archive
    location elsewhere (another bucket) serves a root: opened with `destination(url,
    root)`, it gets the settings of that root, and keeps them for later plain calls of
    the same URL (deleting stray copies, restoring). A URL known neither way (purging a
    quarantine at the start of an apply) gets the settings that every configured root of
    its scheme shares, when they share one endpoint, profile and region; otherwise
    defaults (logged: roots on several endpoints leave it open which one is meant).
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
        self._root_urls = frozenset(r.url for r in self._roots)
        self._concurrency = concurrency
        self._stores: dict[tuple[str, tuple[str | None, ...]], Store] = {}
        self._serving: dict[str, StoreSettings] = {}  # destination URL -> its root's settings
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def settings_for(self, url: str) -> StoreSettings | None:
        """The settings of the configured root over `url`, or of one in its bucket."""
        for root in self._roots:
            if url.startswith(root.url):
                return root
        bucket = _bucket(url)
        return next((r for r in self._roots if bucket and _bucket(r.url) == bucket), None)

    def covers(self, root_url: str) -> bool:
        """Whether `root_url` gets a configured root's settings (see `settings_for`: a
        root above it, or one in the same bucket)."""
        return self.settings_for(normalize_url(root_url)) is not None

    def destination(self, url: str, serves: str) -> Store:
        """The store of `url`, a quarantine or archive location that holds copies of root
        `serves`'s objects: with the settings of its own configured root if it has one
        (see `settings_for`), else with those root `serves` is opened with. Later plain
        calls of `url` (or of a URL under it) get the same settings; should two roots on
        different endpoints share one such location, each root's copies go to its own
        endpoint, and plain calls get the first one's."""
        normalized = normalize_url(url)
        found = self.settings_for(normalized)
        if found is None:
            found = self._resolve(normalize_url(serves))
            if found is not None:
                with self._lock:
                    self._serving.setdefault(normalized, found)
        return self._open(normalized, found)

    def __call__(self, url: str) -> Store:
        normalized = normalize_url(url)
        return self._open(normalized, self._resolve(normalized))

    def _resolve(self, url: str) -> StoreSettings | None:
        found = self.settings_for(url)
        if found is not None:
            return found
        with self._lock:
            served = sorted(self._serving.items(), key=lambda kv: len(kv[0]), reverse=True)
        for destination, settings in served:
            if url.startswith(destination):
                return settings
        return self._shared(url)

    def _shared(self, url: str) -> StoreSettings | None:
        """The settings all configured roots of `url`'s scheme share; None when there are
        none, or when they differ (then defaults, with a warning once per URL)."""
        scheme = url.split("://", 1)[0]
        if scheme == "file":
            return None  # nothing to choose: local paths take no settings
        same = [r for r in self._roots if r.url.split("://", 1)[0] == scheme]
        connections = {r.connection for r in same}
        if len(connections) == 1:
            return same[0]
        if len(connections) > 1 and url not in self._warned:
            self._warned.add(url)
            log.warning(
                "%s is under no storage root, and the storage roots use different "
                "endpoints or credentials: opened with the default ones",
                url,
            )
        return None

    def _open(self, url: str, found: StoreSettings | None) -> Store:
        settings = found or _DEFAULTS
        key = (url, settings.connection)
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = open_store(
                    url,
                    endpoint_url=settings.endpoint_url,
                    profile=settings.profile,
                    region=settings.region,
                    concurrency=self._concurrency,
                )
                if url not in self._root_urls and hasattr(store, "follows_links"):
                    # a quarantine or archive location: govern's own copies, whose
                    # folders an admin may move elsewhere and link back
                    store.follows_links = True
                self._stores[key] = store
            return store


def open_destination(stores: StoreFactory, url: str, serves: str) -> Store:
    """The store of a quarantine or archive location `url` holding copies of root
    `serves`'s objects: with that root's endpoint and credentials when no configured root
    covers `url` (a StoreOpener; any other factory is simply called)."""
    if isinstance(stores, StoreOpener):
        return stores.destination(url, serves)
    return stores(url)


def _bucket(url: str) -> str | None:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if scheme != "file" else None
