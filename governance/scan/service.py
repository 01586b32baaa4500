"""Scanning several roots for a command: open each store, scan it, record how to reach it.

A root that fails is reported and the others still run; the failed root's catalog state
is left exactly as it was. A root that lists no object is scanned as any other (a new
root before training starts is empty), and can be warned about (`warn`): a mistyped
prefix also lists nothing.
"""

from __future__ import annotations

import os
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
from governance.storage.base import Store
from governance.wording import counted

if TYPE_CHECKING:
    from governance.cli.context import AppContext
    from governance.policy import Policy

ProgressFactory = Callable[["AppContext", str], AbstractContextManager[Progress | None]]
Warn = Callable[[str], None]
"""Told one warning's text: the root's URL and what is odd about it."""
HINT_ENTRIES = 5  # how many of a bucket's folders a warning about a mistyped prefix names


def scan_roots(
    app: AppContext,
    policy: Policy | None,
    root_urls: Sequence[str],
    *,
    concurrency: int | None = None,
    progress_for: ProgressFactory | None = None,
    first: StartedRoot | None = None,
    warn: Warn | None = None,
) -> Iterator[ScanSummary | GovernanceError]:
    """Scan each root in turn; yield its summary, or the error that stopped it.

    `first` is the first root already opened and its listing started (`start_root`),
    before the catalog was opened; it is closed here whatever happens. `warn`, when
    given, is told about each root that listed no object (`empty_root_warning`; on S3 that
    costs a request or so, only then), before its summary is yielded.
    """
    specs = resolve_roots(policy, root_urls)
    now = datetime.now(UTC)
    try:
        for index, spec in enumerate(specs):
            started = first if index == 0 and first is not None else None
            if started is None:
                workers = spec.workers(concurrency, app.settings.concurrency)
                started = start_root(spec, policy, workers, app.settings.catalog_url)
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
            if warn is not None and summary.objects == 0:
                warn(empty_root_warning(started.store, summary))
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


def empty_root_warning(store: Store, summary: ScanSummary) -> str:
    """What to say of a root whose scan listed no object: that it is empty, and where the
    name may be mistyped, what is there instead.

        s3://ml-artifacts/nope/: no objects under this prefix (is it spelled right? the
        bucket holds: datasets/, runs/)

    A root whose last scan listed objects says they are gone (no request); a local folder
    says whether it is empty or holds no files; an S3 prefix names up to HINT_ENTRIES
    entries of the nearest folder above it that holds any (`S3Store.nearest_entries`).
    """
    url = store.url
    if summary.gone:
        gone = counted(summary.gone, "object")
        return f"{url}: no objects any more (the {gone} the last scan listed are gone)"
    scheme, _, rest = url.partition("://")
    if scheme == "file":
        return f"{url}: {_local_emptiness(rest)}"
    bucket, _, prefix = rest.partition("/")
    if scheme != "s3":
        return f"{url}: no objects under this root"
    if not prefix:
        return f"{url}: no objects to scan in this bucket"
    said = f"{url}: no objects under this prefix"
    nearest = getattr(store, "nearest_entries", None)
    found = nearest(HINT_ENTRIES) if nearest is not None else None
    if found is None:
        return said
    level, names, more = found
    if not names:
        return f"{said} (the bucket is empty)"
    where = "the bucket" if level == f"s3://{bucket}/" else level
    return f"{said} (is it spelled right? {where} holds: {', '.join(names)}{', …' if more else ''})"


def _local_emptiness(path: str) -> str:
    try:
        with os.scandir(path) as entries:
            empty = next(entries, None) is None
    except OSError:
        empty = False
    return "the folder is empty" if empty else "no files under this folder"
