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
from governance.errors import GovernanceError
from governance.model.types import ClassifyOptions
from governance.scan.runner import Progress, ScanSummary, scan_store
from governance.scan.targets import excluded_prefixes, resolve_roots

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
) -> Iterator[ScanSummary | GovernanceError]:
    """Scan each root in turn; yield its summary, or the error that stopped it."""
    specs = resolve_roots(policy, root_urls)
    now = datetime.now(UTC)
    engine = app.engine
    for spec in specs:
        try:
            store = spec.open(concurrency or app.settings.concurrency)
            exclude = excluded_prefixes(store.url, policy)
            bar = progress_for(app, f"scan {store.url}") if progress_for else nullcontext(None)
            with bar as progress:
                summary = scan_store(
                    engine,
                    store,
                    actor=app.settings.identity,
                    name=spec.name,
                    exclude_prefixes=exclude,
                    progress=progress,
                )
            options = policy.classify_options(now) if policy else ClassifyOptions(as_of=now)
            record_layout(engine, summary.root_id, options_to_json(options), spec.connection())
        except GovernanceError as exc:
            yield exc
            continue
        yield summary
