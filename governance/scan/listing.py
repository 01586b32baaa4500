"""A root's listing, checked and started, before the catalog is touched.

Kept free of SQLAlchemy so that `govern scan` can send a root's first listing requests
before it imports the catalog layer and opens the catalog: on S3 the first pages then
arrive while that start-up work runs (see `ListingStart`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from governance.errors import GovernanceError
from governance.scan.targets import RootSpec, excluded_prefixes
from governance.storage.base import AnyRow, Store, list_compact_rows, list_rows

if TYPE_CHECKING:
    from governance.policy import Policy


@dataclass(slots=True)
class ListingStart:
    """A started listing of `store`: `rows` to consume, then `close()` (always)."""

    store: Store
    rows: Iterator[AnyRow]
    size_at: int  # index of the size in a row: compact local rows hold 4 values, not 8
    began: float  # `time.perf_counter()` when the scan began (for its seconds)
    excluded: tuple[str, ...] = ()  # the key prefixes the listing passes over
    # when the listing began, by the clock: scans of a root are ordered by it (the scan's
    # row, and its id, come later, once the catalog is open: see `bulk.newer_complete_scan`)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def close(self) -> None:
        """Stop the listing's workers, consumed or not (safe more than once)."""
        close = getattr(self.rows, "close", None)
        if close is not None:
            close()


def start_listing(store: Store, exclude_prefixes: Sequence[str] = ()) -> ListingStart:
    """Check the root (a StorageError if it cannot be read), then start its listing.

    An S3 listing sends its first requests here, and its first answer is the check;
    other stores are checked, then list as they are consumed.
    """
    began, started_at = time.perf_counter(), datetime.now(UTC)
    excluded = tuple(exclude_prefixes)
    checked = getattr(store, "list_checked_rows", None)
    if checked is not None:  # its first listing answer is the check (S3: no extra request)
        return ListingStart(store, checked(excluded), 2, began, excluded, started_at)
    store.check()  # bad URL or credentials: fail before the catalog records anything
    compact = list_compact_rows(store, excluded)
    if compact is not None:
        return ListingStart(store, compact, 1, began, excluded, started_at)
    return ListingStart(store, list_rows(store, excluded), 2, began, excluded, started_at)


StartedRoot = ListingStart | GovernanceError
"""A root whose listing is under way, or the error that stopped it (the root cannot be
opened or read)."""


def start_root(
    spec: RootSpec, policy: Policy | None, concurrency: int, catalog_url: str | None = None
) -> StartedRoot:
    """Open the root, check it and start its listing; an unreadable root is an error value.
    `catalog_url`: the catalog, never listed when it is a file inside the root."""
    try:
        store = spec.open(concurrency)
        return start_listing(store, excluded_prefixes(store.url, policy, (), catalog_url))
    except GovernanceError as exc:
        return exc
