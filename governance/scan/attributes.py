"""Reading objects' tags and Object Lock state before planning, once per object version.

A listing (ListObjectsV2) gives neither: tags come from GetObjectTagging, the lock state
(ObjectLockMode, ObjectLockRetainUntilDate, ObjectLockLegalHoldStatus) from a HEAD. Who
plans a root first reads, in parallel, what the catalog has not read yet for the objects
as they are now, and writes it back in bulk: `tags` when the policy uses tags anywhere
(`protect.tags`, a rule's `select.tags`), the lock state when the bucket has Object Lock
enabled. A scan that rewrites a row (a changed or revived object) resets both to not read
(`catalog.bulk.upsert_objects`), so a changed object is read again.

An object whose read fails (AccessDenied on GetObjectTagging, say) stays not read: the
planner protects its artifact (what is not known cannot be proven unprotected), and the
next plan tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any

from sqlalchemy import and_, bindparam, false, func, or_, select, true, update
from sqlalchemy.engine import Engine

from governance.catalog.tables import Root, Scan, StoredObject
from governance.errors import BadCredentialsError, NoSuchRootError, UnreachableError
from governance.storage.base import Store, epoch_micros

_T = StoredObject.__table__  # type: ignore[attr-defined]
_O = _T.c
_RT = Root.__table__  # type: ignore[attr-defined]
_R = _RT.c
_S = Scan.__table__.c  # type: ignore[attr-defined]
CHUNK = 1000
"""Rows per bulk UPDATE (Core executemany)."""

log = logging.getLogger(__name__)
_FATAL = (BadCredentialsError, UnreachableError, NoSuchRootError)
"""Failures of the whole root, not of one object: the remaining reads are not tried."""


@dataclass(frozen=True, slots=True)
class AttributeReads:
    """What `refresh_attributes` did: objects whose tags / lock state it read, and the
    reads that failed (with the first failure, for the warning)."""

    tags: int = 0
    locks: int = 0
    failed: int = 0
    first_error: str | None = None


def _unread(engine: Engine, root_id: int, tags: bool, lock: bool) -> list[tuple[Any, ...]]:
    """(id, key, changed_scan_id, tags wanted, lock wanted) of the root's live objects that
    lack what is asked (incomplete multipart uploads have neither tags nor locks)."""
    wants_tags = _O.tags.is_(None) if tags else false()
    wants_lock = _O.lock_read == false() if lock else false()
    stmt = select(_O.id, _O.key, _O.changed_scan_id, wants_tags, wants_lock).where(
        _O.root_id == root_id,
        _O.gone_scan_id.is_(None),
        _O.upload_id == "",
        or_(wants_tags, wants_lock),
    )
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(stmt)]


def _mark_read(engine: Engine, root_id: int, scan_id: int | None, tags: bool, lock: bool) -> None:
    """Remember that every live object's tags (`tags`) / lock state (`lock`) were read as
    of complete scan `scan_id` (read before the objects were: a scan completed since
    leaves the mark behind, and the next refresh looks again)."""
    values = {}
    if tags:
        values["tags_read_scan_id"] = scan_id
    if lock:
        values["locks_read_scan_id"] = scan_id
    if scan_id is not None and values:
        with engine.begin() as conn:
            conn.execute(update(_RT).where(_R.id == root_id).values(**values))


_UNCHANGED = and_(_O.id == bindparam("oid"), _O.changed_scan_id == bindparam("changed"))
"""The row as it was when read: no scan rewrote it since (what was read is its object's)."""
_SET_TAGS = update(_T).where(_UNCHANGED).values(tags=bindparam("new_tags"))
_SET_LOCK = (
    update(_T)
    .where(_UNCHANGED)
    .values(
        lock_read=true(),
        lock_mode=bindparam("mode"),
        lock_retain_until_us=bindparam("until"),
        legal_hold=bindparam("hold"),
    )
)


def _write_back(engine: Engine, *writes: tuple[Any, list[dict[str, Any]]]) -> None:
    """Each (statement, rows) in one transaction, CHUNK rows to an executemany."""
    with engine.begin() as conn:
        for stmt, rows in writes:
            for start in range(0, len(rows), CHUNK):
                conn.execute(stmt, rows[start : start + CHUNK])


def refresh_attributes(
    engine: Engine,
    root_id: int,
    store: Store,
    *,
    tags: bool,
    lock: bool,
    concurrency: int = 16,
) -> AttributeReads:
    """Read the tags (when `tags`) and lock state (when `lock`) the catalog lacks for the
    root's live objects, in a thread pool, and write them back in bulk.

    Each row is written only if no scan rewrote it meanwhile (same `changed_scan_id`):
    what was read belongs to the object as it was listed. A failed read leaves its
    object not read. When every read succeeded the root is marked read as of its last
    complete scan, so until the next scan a plan does not even look (one query). Errors
    of the store's own opening (a root out of reach) propagate
    from the first read that meets them (`catalog.derived` turns them into a warning).
    """
    if not (tags or lock):
        return AttributeReads()
    with engine.connect() as conn:
        scan_id = conn.execute(
            select(func.max(_S.id)).where(_S.root_id == root_id, _S.status == "complete")
        ).scalar()
        marks = conn.execute(
            select(_R.tags_read_scan_id, _R.locks_read_scan_id).where(_R.id == root_id)
        ).one()
    # all read since the last complete scan (the only writer of objects): nothing to look for
    tags = tags and (scan_id is None or marks[0] != scan_id)
    lock = lock and (scan_id is None or marks[1] != scan_id)
    if not (tags or lock):
        return AttributeReads()
    wanted = _unread(engine, root_id, tags, lock)
    if not wanted:
        _mark_read(engine, root_id, scan_id, tags, lock)
        return AttributeReads()

    fatal: list[str] = []  # set by the first failure of the whole root: stop reading
    first: list[BaseException] = []  # the first failure

    def read(item: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any, Any, str | None]:
        _oid, key, _changed, want_tags, want_lock = item
        found_tags: Any = None
        found_lock: Any = None
        if fatal:
            return item, None, None, fatal[0]
        try:
            if want_tags:
                found_tags = store.object_tags(key)
            if want_lock:
                found_lock = store.object_lock(key)
        except Exception as exc:  # this object stays not read; the next plan tries again
            error = str(exc) or type(exc).__name__
            # the first failure raised again: a store that could not be opened (on demand)
            if isinstance(exc, _FATAL) or (first and first[0] is exc):
                fatal.append(error)
            if not first:
                first.append(exc)
            return item, found_tags, found_lock, error
        return item, found_tags, found_lock, None

    tag_rows: list[dict[str, Any]] = []
    lock_rows: list[dict[str, Any]] = []
    failed = 0
    first_error: str | None = None
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(wanted)))) as pool:
        results = chain.from_iterable(
            pool.map(read, wanted[start : start + CHUNK])
            for start in range(0, len(wanted), CHUNK)
            if not fatal  # a chunk at a time: after a root-wide failure the rest is not sent
        )
        answered = 0
        for (oid, _key, changed, _wt, _wl), found_tags, found_lock, error in results:
            answered += 1
            if error is not None:
                failed += 1
                first_error = first_error or error
            if found_tags is not None:
                tag_rows.append({"oid": oid, "changed": changed, "new_tags": found_tags})
            if found_lock is not None:
                until = found_lock.retain_until
                lock_rows.append(
                    {
                        "oid": oid,
                        "changed": changed,
                        "mode": found_lock.mode,
                        "until": epoch_micros(until) if until is not None else None,
                        "hold": found_lock.legal_hold,
                    }
                )
    _write_back(engine, (_SET_TAGS, tag_rows), (_SET_LOCK, lock_rows))
    if failed:
        log.debug("root %s: %d attribute reads failed (first: %s)", root_id, failed, first_error)
    failed += len(wanted) - answered  # not tried after a failure of the whole root
    if not failed:
        _mark_read(engine, root_id, scan_id, tags, lock)
    return AttributeReads(len(tag_rows), len(lock_rows), failed, first_error)


def reread_tags(
    engine: Engine,
    root_id: int,
    artifact_keys: Iterable[str],
    store: Store,
    *,
    concurrency: int = 16,
) -> AttributeReads:
    """Read again the tags of every live object of the given artifacts (a folder's key
    covers the objects under it) and write back those that differ (`tags`: how many;
    `failed`: reads that failed, with the first error).

    S3 keeps an object's ETag, LastModified and version when its tags change, so the
    catalog's tags (read once per object version) can be stale: a plan re-reads those of
    the artifacts it acts on before it is saved (`plan.service.make_plan`). A read that
    fails leaves the tags as they were (apply reads them again before acting).
    """
    keys = set(artifact_keys)
    if not keys:
        return AttributeReads()
    with engine.connect() as conn:
        rows = conn.execute(
            select(_O.id, _O.key, _O.changed_scan_id, _O.tags).where(
                _O.root_id == root_id, _O.gone_scan_id.is_(None), _O.upload_id == ""
            )
        ).all()
    wanted = [r for r in rows if _covered(r[1], keys)]

    errors: list[str] = []

    def read(row: Any) -> dict[str, str] | None:
        try:
            return store.object_tags(row[1])
        except Exception as exc:  # left as it was; apply reads it again
            errors.append(str(exc) or type(exc).__name__)
            return None

    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(wanted) or 1))) as pool:
        found = list(pool.map(read, wanted))
    changed = [
        {"oid": oid, "changed": scan, "new_tags": now}
        for (oid, _key, scan, before), now in zip(wanted, found, strict=True)
        if now is not None and (before is None or now != before)
    ]
    _write_back(engine, (_SET_TAGS, changed))
    return AttributeReads(
        tags=len(changed), failed=len(errors), first_error=next(iter(errors), None)
    )


def _covered(key: str, artifact_keys: set[str]) -> bool:
    """Whether `key` is one of `artifact_keys`, or under one of them that is a folder."""
    if key in artifact_keys:
        return True
    i = key.find("/")
    while i != -1:
        if key[: i + 1] in artifact_keys:
            return True
        i = key.find("/", i + 1)
    return False
