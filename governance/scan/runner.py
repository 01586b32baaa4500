"""The scanner: stream a Store's listing into the catalog in bulk, incrementally.

The listing goes into a staging table in batches; only when it is complete is it folded
into `objects` in one transaction. A scan that fails or is interrupted therefore marks
nothing gone and leaves the last complete state as it was. The same transaction replaces
the root's symbolic links that point inside it (`catalog.links`; local disk: the listing
lists no link, but plans keep what one points at). A local listing also counts the files
and folders it passed over because their names are not valid UTF-8 (`unreadable_names`).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import cast

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from governance.catalog import bulk, rescan
from governance.catalog.links import replace_links
from governance.catalog.queries import quarantines
from governance.catalog.roots import finish_scan, get_or_create_root, start_scan
from governance.catalog.tables import Scan
from governance.scan.listing import ListingStart, start_listing
from governance.scan.targets import prefixes_under
from governance.storage.base import Store, listing_symlinks

BATCH = 5000

Progress = Callable[[int, int], None]
"""Called with (objects listed so far, bytes listed so far)."""


@dataclass(frozen=True, slots=True)
class ScanSummary:
    root: str
    root_id: int
    scan_id: int
    status: str
    objects: int
    bytes: int
    new: int
    changed: int
    gone: int
    seconds: float
    error: str | None = None
    # symbolic links met and not listed, and of them those whose target lies inside the
    # root (kept in the catalog: plans leave their targets alone); None: the store has no
    # links to meet (S3, other fsspec filesystems), and the JSON leaves both out
    links: int | None = None
    links_inside: int | None = None
    # files and folders not listed (folders not entered) as their names are not valid
    # UTF-8; None, and left out of the JSON, where `links` is
    unreadable_names: int | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "root": self.root,
            "scan_id": self.scan_id,
            "status": self.status,
            "objects": self.objects,
            "bytes": self.bytes,
            "new": self.new,
            "changed": self.changed,
            "gone": self.gone,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }
        if self.links is not None:  # a store with links to meet (local disk)
            out["links"] = self.links
            out["links_inside"] = self.links_inside
            out["unreadable_names"] = self.unreadable_names
        return out


def scan_store(
    engine: Engine,
    store: Store,
    *,
    actor: str,
    name: str | None = None,
    exclude_prefixes: Sequence[str] = (),
    progress: Progress | None = None,
) -> ScanSummary:
    """List `store` into the catalog. Raises StorageError (root untouched) if it cannot be read."""
    listing = start_listing(store, exclude_prefixes)
    return scan_listing(engine, listing, actor=actor, name=name, progress=progress)


def scan_listing(
    engine: Engine,
    listing: ListingStart,
    *,
    actor: str,
    name: str | None = None,
    progress: Progress | None = None,
) -> ScanSummary:
    """Fold a started listing into the catalog (see the module docstring), then close it."""
    try:
        return _scan_rows(engine, listing, actor, name, progress)
    finally:
        listing.close()


def _scan_rows(
    engine: Engine,
    listing: ListingStart,
    actor: str,
    name: str | None,
    progress: Progress | None,
) -> ScanSummary:
    store, rows, size_at = listing.store, listing.rows, listing.size_at
    # Quarantines earlier applies used under this root, beyond those the listing passes
    # over (it began before the catalog was open): their copies are not the root's data.
    late = tuple(
        p for p in prefixes_under(store.url, quarantines(engine)) if p not in listing.excluded
    )
    if late:
        rows = (row for row in rows if not row[0].startswith(late))
    root_id = get_or_create_root(engine, store.url, name)
    scan_id = start_scan(engine, root_id, actor, started_at=listing.started_at)
    listed = 0
    listed_bytes = 0
    committed = False  # the listing and the scan's status are written
    try:
        with engine.connect() as conn:
            direct = bulk.root_is_empty(conn, root_id)
            diff = (
                None if direct or not rescan.applies_to(conn) else rescan.RescanDiff(conn, root_id)
            )
            if diff is not None:
                diff.start()
            elif not direct:
                bulk.create_stage(conn)
                conn.commit()
            newer: int | None = None
            try:
                while batch := list(islice(rows, BATCH)):
                    if direct:
                        bulk.write_objects_direct(conn, root_id, scan_id, batch)
                    elif diff is not None:
                        diff.add(batch)
                    else:
                        bulk.write_stage(conn, batch)
                    listed += len(batch)
                    listed_bytes += sum(cast(int, row[size_at]) for row in batch)
                    if progress:
                        progress(listed, listed_bytes)
            except Exception as exc:
                if not (direct and isinstance(exc, _integrity_errors())):
                    raise
                # Another first scan of this new root ran at the same time and wrote its
                # listing first (this one's inserts waited for it, then met its rows).
                conn.rollback()
                newer = _other_complete_scan(conn, root_id, scan_id)
                if newer is None:
                    raise
            if newer is not None:
                new, changed, gone = 0, 0, 0
            elif direct:
                # First scan: everything listed is new; one transaction from first row to here.
                new, changed, gone = listed, 0, 0
            elif diff is not None:
                conn.commit()
                # One transaction: either the whole listing is folded in, or nothing is.
                newer = bulk.newer_complete_scan(conn, root_id, scan_id)
                new, changed, gone = (0, 0, 0) if newer else diff.finish(scan_id)
            else:
                conn.commit()
                bulk.index_stage(conn)
                conn.commit()
                # One transaction: either the whole listing is folded in, or nothing is.
                newer = bulk.newer_complete_scan(conn, root_id, scan_id)
                new, changed, gone = (
                    (0, 0, 0) if newer else bulk.merge_stage(conn, root_id, scan_id)
                )
            found = listing_symlinks(listing.rows)  # (whole: the rows are consumed)
            inside = found.inside if found is not None else []
            if late:
                inside = [link for link in inside if not link[0].startswith(late)]
            if newer is None:  # the root's links are now the ones this listing met
                replace_links(conn, root_id, scan_id, inside)
            status = "complete" if newer is None else "superseded"
            note = (
                None
                if newer is None
                else f"superseded by scan {newer}, a first scan of this root at the same "
                "time that wrote its listing first: this listing was not written"
                if direct
                else f"superseded by scan {newer}, which began later and completed first: "
                "this older listing was not written"
            )
            conn.execute(
                update(Scan)
                .where(Scan.id == scan_id)  # type: ignore[arg-type]
                .values(
                    status=status,
                    error=note,
                    finished_at=datetime.now(UTC),
                    objects_listed=listed,
                    bytes_listed=listed_bytes,
                    objects_new=new,
                    objects_changed=changed,
                    objects_gone=gone,
                )
            )
            conn.commit()
            committed = True  # (what follows only tidies: an interrupt there fails nothing)
            if diff is not None:
                diff.drop()
                conn.commit()
            elif not direct:
                bulk.drop_stage(conn)
                conn.commit()
    except BaseException as exc:
        if committed:  # the scan is complete (or superseded) as written: so it stays
            raise
        reason = _failure_words(exc)
        try:
            finish_scan(
                engine,
                scan_id,
                status="failed",
                error=reason,
                objects_listed=listed,
                bytes_listed=listed_bytes,
            )
        except Exception:  # (a catalog that failed mid-scan: its error is the one to say)
            logging.getLogger(__name__).debug("the scan's failure was not recorded", exc_info=True)
        raise
    _record_object_lock(engine, root_id, store)
    return ScanSummary(
        root=store.url,
        root_id=root_id,
        scan_id=scan_id,
        status=status,
        objects=listed,
        bytes=listed_bytes,
        new=new,
        changed=changed,
        gone=gone,
        seconds=time.perf_counter() - listing.began,
        error=note,
        links=found.count if found is not None else None,
        links_inside=len(inside) if found is not None else None,
        unreadable_names=found.unreadable_names if found is not None else None,
    )


def _integrity_errors() -> tuple[type[Exception], ...]:
    """A UNIQUE violation as a first scan's direct writes meet it: through SQLAlchemy, or
    from the DBAPI cursor they write with (sqlite3, psycopg's COPY). Asked only on an
    error: a scan of a SQLite catalog never imports psycopg."""
    found: list[type[Exception]] = [IntegrityError, sqlite3.IntegrityError]
    try:
        import psycopg
    except ImportError:  # (PostgreSQL catalogs need it; SQLite ones do not)
        pass
    else:
        found.append(psycopg.IntegrityError)
    return tuple(found)


def _other_complete_scan(conn: Connection, root_id: int, scan_id: int) -> int | None:
    """The newest complete scan of the root other than this one, if any."""
    s = Scan.__table__.c  # type: ignore[attr-defined]
    found = conn.execute(
        select(func.max(s.id)).where(s.root_id == root_id, s.status == "complete", s.id != scan_id)
    ).scalar()
    return int(found) if found is not None else None


def _failure_words(exc: BaseException) -> str:
    """What a failed scan's row says of its failure: the database's own words for a
    catalog error, without the SQL statement and the link SQLAlchemy adds to them."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return f"catalog failed: {exc.orig}"
    return str(exc) or type(exc).__name__


def _record_object_lock(engine: Engine, root_id: int, store: Store) -> None:
    """Ask an S3 root's bucket whether it has Object Lock enabled (one request) and
    remember it, so a plan without the root at hand knows whether objects' lock state
    must be read (`catalog.derived.refresh_object_attributes`). A failure to ask is not
    the scan's: the last answer is kept."""
    ask = getattr(store, "object_lock_enabled", None)
    if ask is None or not store.url.startswith("s3://"):
        return
    try:
        enabled = bool(ask())
    except Exception as exc:
        logging.getLogger(__name__).debug("%s: Object Lock not read (%s)", store.url, exc)
        return
    from governance.catalog.derived import record_object_lock

    record_object_lock(engine, root_id, enabled)
