"""Scanning several roots for a command: open each store, scan it, record how to reach it.

A root that fails is reported and the others still run; the failed root's catalog state
is left exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from governance.catalog.derived import options_to_json
from governance.catalog.roots import record_layout
from governance.errors import CatalogError, GovernanceError
from governance.model.types import ClassifyOptions
from governance.scan.listing import ListingStart, StartedRoot, start_root
from governance.scan.runner import Progress, ScanSummary, scan_listing
from governance.scan.targets import RootSpec, resolve_roots

if TYPE_CHECKING:
    from governance.cli.context import AppContext
    from governance.policy import Policy

ProgressFactory = Callable[["AppContext", str], AbstractContextManager[Progress | None]]


def scan_roots(
    app: AppContext,
    policy: Policy | None,
    root_urls: Sequence[str],
    *,
    concurrency: int | None = None,
    progress_for: ProgressFactory | None = None,
    first: StartedRoot | None = None,
) -> Iterator[ScanSummary | GovernanceError]:
    """Scan each root in turn; yield its summary, or the error that stopped it.

    `first` is the first root already opened and its listing started (`start_root`),
    before the catalog was opened; it is closed here whatever happens.
    """
    specs = resolve_roots(policy, root_urls)
    now = datetime.now(UTC)
    workers = concurrency or app.settings.concurrency
    try:
        for index, spec in enumerate(specs):
            started = first if index == 0 and first is not None else None
            if started is None:
                started = start_root(spec, policy, workers)
            if isinstance(started, GovernanceError):
                yield started
                continue
            try:
                summary = _scan_started(app, policy, spec, started, now, progress_for)
            except CatalogError:
                raise  # not this root's problem: every root would meet it
            except GovernanceError as exc:
                yield exc
                continue
            finally:
                started.close()
            yield summary
    finally:
        if isinstance(first, ListingStart):
            first.close()  # if the catalog never opened, its workers stop here


def _scan_started(
    app: AppContext,
    policy: Policy | None,
    spec: RootSpec,
    listing: ListingStart,
    now: datetime,
    progress_for: ProgressFactory | None,
) -> ScanSummary:
    engine = app.engine
    store = listing.store
    bar = progress_for(app, f"scan {store.url}") if progress_for else nullcontext(None)
    with bar as progress:
        summary = scan_listing(
            engine,
            listing,
            actor=app.settings.identity,
            name=spec.name,
            progress=progress,
        )
    options = policy.classify_options(now) if policy else ClassifyOptions(as_of=now)
    record_layout(engine, summary.root_id, options_to_json(options), spec.connection())
    return summary
