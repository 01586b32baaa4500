"""Classification results in the catalog: runs and artifacts, rebuilt per root after a scan,
and the metadata cache that lets small files be read once per ETag.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.engine import Connection, Engine

from governance.catalog.tables import ArtifactRow, MetaCache, RunRow
from governance.model.types import CatalogObject, ClassifyOptions, Group, Kind, MetaReader
from governance.storage.base import ObjectLock, Store, epoch_micros
from governance.wording import counted

_A = ArtifactRow.__table__  # type: ignore[attr-defined]
_R = RunRow.__table__  # type: ignore[attr-defined]
_M = MetaCache.__table__  # type: ignore[attr-defined]


class CachedMetaReader:
    """Reads small metadata objects through the catalog's cache, keyed by (key, ETag).

    With no store (planning, lazy classification) only cached content is returned; the
    scan fills the cache. Answers, misses included, are memoised for the reader's life, so
    a file that many artifacts consult (DeepSpeed `latest`) costs one lookup; and which
    (key, ETag) pairs the cache holds is read once, on the first lookup, with the content
    of the small entries (tracker files, a line of text each: one per run), so an object
    the cache lacks and a small one it holds cost no query at all. Given a
    Connection, cache reads and writes happen inside that connection's transaction, so
    classification can refresh the cache while it rewrites a root's artifacts.
    """

    MEMO_SIZE = 4096
    SMALL = 1024
    """Cached contents up to this many bytes are read with the cache's index."""

    def __init__(
        self,
        db: Engine | Connection,
        root_id: int,
        store: Store | None,
        max_bytes: int,
        *,
        keep: bool = True,
    ) -> None:
        self.db = db
        self.root_id = root_id
        self.store = store
        self.max_bytes = max_bytes
        self.keep = keep  # False: what is read from storage is not written to the cache
        self._memo: OrderedDict[tuple[str, str], bytes | None] = OrderedDict()
        self._reader: Connection | None = None  # one connection for every cache read
        # (key, etag) the cache holds -> its content, or _UNREAD for a large one
        self._cached: dict[tuple[str, str], object] | None = None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __del__(self) -> None:
        self.close()

    def _read_conn(self) -> Connection:
        """The connection cache reads go through: the caller's, else one of our own."""
        if isinstance(self.db, Connection):
            return self.db
        if self._reader is None:
            self._reader = self.db.connect()
        return self._reader

    def _conn(self) -> AbstractContextManager[Connection]:
        if isinstance(self.db, Connection):
            return nullcontext(self.db)
        return self.db.begin()

    def __call__(self, obj: CatalogObject) -> bytes | None:
        memo_key = (obj.key, obj.etag)
        if memo_key in self._memo:
            self._memo.move_to_end(memo_key)
            return self._memo[memo_key]
        content = self._lookup(obj)
        self._memo[memo_key] = content
        if len(self._memo) > self.MEMO_SIZE:
            self._memo.popitem(last=False)
        return content

    def _lookup(self, obj: CatalogObject) -> bytes | None:
        if self._cached is None:
            self._cached = self._index()
        # An object the cache lacks, with no store to read it from, costs no query: the
        # statement below is built only when it runs.
        hit = self._cached.get((obj.key, obj.etag), _ABSENT)
        if hit is not _UNREAD and hit is not _ABSENT:
            return cast(bytes | None, hit)
        if hit is _UNREAD:
            row = (
                self._read_conn()
                .execute(
                    select(_M.c.content).where(
                        _M.c.root_id == self.root_id, _M.c.key == obj.key, _M.c.etag == obj.etag
                    )
                )
                .first()
            )
            if row is not None:
                content: bytes | None = row[0]
                return content
        if self.store is None or obj.size > self.max_bytes:
            return None
        try:
            content = self.store.read_bytes(obj.key, self.max_bytes)
        except Exception:  # unreadable metadata degrades classification; it never stops it
            return None  # not cached: a passing failure must not stick to this ETag
        if not self.keep:
            return content
        with self._conn() as conn:
            conn.execute(delete(_M).where(_M.c.root_id == self.root_id, _M.c.key == obj.key))
            conn.execute(
                _M.insert().values(
                    root_id=self.root_id, key=obj.key, etag=obj.etag, content=content
                )
            )
        self._cached[(obj.key, obj.etag)] = content
        return content

    def _index(self) -> dict[tuple[str, str], object]:
        """(key, etag) -> content of every entry of the root's cache (_UNREAD when large)."""
        size = func.length(_M.c.content)
        small = case((size <= self.SMALL, _M.c.content), else_=None)
        rows = self._read_conn().execute(
            select(_M.c.key, _M.c.etag, small, size > self.SMALL).where(
                _M.c.root_id == self.root_id
            )
        )
        return {(key, etag): _UNREAD if large else content for key, etag, content, large in rows}


_UNREAD = object()
"""A cache entry whose (large) content is read when asked for."""
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class ModelSummary:
    runs: int
    artifacts: int
    checkpoints: int
    residue: int


def _rows(
    groups: Iterable[Group], root_url: str, root_id: int, scan_id: int, counts: dict[str, int]
) -> Iterator[tuple[dict[str, Any] | None, list[dict[str, Any]]]]:
    for group in groups:
        run_row = None
        checkpoints = 0
        for art in group.artifacts:
            counts["artifacts"] += 1
            if art.kind is Kind.CHECKPOINT:
                checkpoints += 1
                counts["checkpoints"] += 1
            elif art.kind is Kind.RESIDUE:
                counts["residue"] += 1
        if group.run is not None:
            run = group.run
            counts["runs"] += 1
            run_row = {
                "root_id": root_id,
                "scan_id": scan_id,
                "key": run.key,
                "uri": root_url + run.key,
                "name": run.name,
                "status": run.status.value,
                "status_reason": run.status_reason,
                "attributes": run.attributes,
                "last_write": epoch_micros(run.last_write),
                "bytes": sum(a.bytes for a in group.artifacts),
                "objects": sum(a.object_count for a in group.artifacts),
                "checkpoints": checkpoints,
                "best_checkpoint": run.best_checkpoint,
            }
        arts = [
            {
                "root_id": root_id,
                "scan_id": scan_id,
                "run_key": group.run.key if group.run else None,
                "key": a.key,
                "uri": root_url + a.key,
                "kind": a.kind.value,
                "layout": a.layout,
                "step": a.step,
                "complete": a.complete,
                "completeness_reason": a.completeness_reason,
                "strippable": a.strippable,
                "bytes": a.bytes,
                "objects": a.object_count,
                "last_modified": epoch_micros(a.last_modified),
                "components": a.components(),
                "metrics": a.metrics or None,
                "note": a.note,
            }
            for a in group.artifacts
        ]
        yield run_row, arts


def replace_model(
    conn: Connection, groups: Iterable[Group], root_url: str, root_id: int, scan_id: int
) -> ModelSummary:
    """Replace a root's runs and artifacts with a fresh classification, in bulk."""
    conn.execute(delete(_A).where(_A.c.root_id == root_id))
    conn.execute(delete(_R).where(_R.c.root_id == root_id))
    counts = {"runs": 0, "artifacts": 0, "checkpoints": 0, "residue": 0}
    runs: list[dict[str, Any]] = []
    arts: list[dict[str, Any]] = []
    for run_row, art_rows in _rows(groups, root_url, root_id, scan_id, counts):
        if run_row is not None:
            runs.append(run_row)
        arts.extend(art_rows)
        if len(arts) >= 5000 or len(runs) >= 2000:
            _flush(conn, runs, arts)
            runs, arts = [], []
    _flush(conn, runs, arts)
    return ModelSummary(**counts)


def _flush(conn: Connection, runs: list[dict[str, Any]], arts: list[dict[str, Any]]) -> None:
    if runs:
        conn.execute(_R.insert(), runs)
    if arts:
        conn.execute(_A.insert(), arts)


def classify_stream(
    engine: Engine,
    root_id: int,
    options: ClassifyOptions,
    reader: MetaReader | None,
    *,
    tags: bool = False,
    lock: bool = False,
    exclude: Sequence[str] = (),
) -> Iterator[Group]:
    """A root's classification streamed from the catalog: pass one reads keys alone (and
    fetches the few tracker files it found), pass two streams full objects in key order.

    `tags` / `lock`: whether the objects' tags / lock state matter for this root (see
    `queries.stream_live_objects`): objects lacking them are marked `unread`. `exclude`:
    key prefixes that are not the root's data (its quarantine), left out of both passes.
    """
    from functools import partial

    from governance.catalog.queries import iter_live_keys, live_objects_by_key, stream_live_objects
    from governance.model.classify import classify, find_runs_by_keys

    first_pass = partial(
        find_runs_by_keys,
        iter_live_keys(engine, root_id, exclude=exclude),
        options,
        partial(live_objects_by_key, engine, root_id, tags=tags, lock=lock),
    )
    return classify(
        partial(stream_live_objects, engine, root_id, tags=tags, lock=lock, exclude=exclude),
        options,
        reader,
        first_pass=first_pass,
    )


def classify_root(
    engine: Engine,
    store: Store | None,
    root_id: int,
    root_url: str,
    scan_id: int,
    options: ClassifyOptions,
) -> ModelSummary:
    """Classify a root's live objects and replace its runs and artifacts in one transaction."""
    with engine.begin() as conn:
        reader = CachedMetaReader(conn, root_id, store, options.metadata_max_bytes)
        return replace_model(
            conn, classify_stream(engine, root_id, options, reader), root_url, root_id, scan_id
        )


def options_to_json(options: ClassifyOptions) -> dict[str, Any]:
    """The layout part of ClassifyOptions (everything but the clock), for the roots table."""
    return {
        "run_templates": list(options.run_templates),
        "completed_markers": list(options.completed_markers),
        "failed_markers": list(options.failed_markers),
        "abandoned_after_s": options.abandoned_after.total_seconds(),
        "grace_s": options.grace.total_seconds(),
    }


def options_from_json(doc: dict[str, Any] | None, as_of: datetime) -> ClassifyOptions:
    if not doc:
        return ClassifyOptions(as_of=as_of)
    return ClassifyOptions(
        as_of=as_of,
        run_templates=tuple(doc["run_templates"]),
        completed_markers=tuple(doc["completed_markers"]),
        failed_markers=tuple(doc["failed_markers"]),
        abandoned_after=timedelta(seconds=doc["abandoned_after_s"]),
        grace=timedelta(seconds=doc["grace_s"]),
    )


def ensure_classified(
    engine: Engine, now: datetime, root_url: str | None = None, read_storage: bool = True
) -> int:
    """Classify every root (or one) whose stored runs and artifacts predate its last scan.

    Classification is derived data: `scan` only lists, and the first reader after a scan
    (`ls runs`, `ls artifacts`) reads the metadata files the cache lacks (reaching the root
    the way the scan recorded: endpoint, profile name, region) and rebuilds the runs and
    artifacts from the catalog with the layout the scan recorded. A root that cannot be
    reached now is classified from the cache alone. Returns how many roots were classified.
    """
    from governance.catalog.tables import Root

    done = 0
    for root, scan_id in _stale_roots(engine, root_url):
        if read_storage:
            refresh_metadata(
                engine, root.id, root.url, (root.classify_options or {}).get("connection")
            )
        classify_root(engine, None, root.id, root.url, scan_id, _root_options(engine, root, now))
        roots = Root.__table__  # type: ignore[attr-defined]
        with engine.begin() as conn:
            conn.execute(
                update(roots).where(roots.c.id == root.id).values(classified_scan_id=scan_id)
            )
        done += 1
    return done


def _root_options(engine: Engine, root: Any, now: datetime) -> ClassifyOptions:
    """The layout the root's scan recorded, with the runs earlier plans saw completed (as
    a plan reads them), to classify it at `now`."""
    from governance.catalog.completions import seen_completed

    return replace(
        options_from_json(root.classify_options, now),
        seen_completed=seen_completed(engine, root.id),
    )


@contextmanager
def classified(engine: Engine, now: datetime, root_url: str | None = None) -> Iterator[Engine]:
    """The engine to read runs and artifacts from (`ls runs`, `ls artifacts`).

    On a catalog this user can write, the catalog itself, classified first where its
    stored runs predate the last scan (`ensure_classified`). On a SQLite catalog opened
    read-only, or a PostgreSQL one this role may not write, whose stored runs are stale
    (a scan since, by the nightly job), a scratch catalog in memory holding the roots
    (one, or all) and a classification made now from the catalog's objects, its metadata
    cache and, for what the cache lacks, the metadata files read from storage (kept in
    memory only), gone when the block ends: the reader sees what a writer would, and the
    catalog is not touched.
    """
    from sqlalchemy.exc import DBAPIError

    from governance.catalog.engine import is_read_only, may_not_write

    if not is_read_only(engine):
        try:
            ensure_classified(engine, now, root_url)
        except DBAPIError as exc:
            # a PostgreSQL role that may read the catalog but not write its runs (an
            # approver's, an analyst's): classified in memory, as on a read-only file
            if not may_not_write(exc):
                raise
        else:
            yield engine
            return
    if not _stale_roots(engine, root_url):
        yield engine
        return
    scratch = _scratch_classification(engine, now, root_url)
    try:
        yield scratch
    finally:
        scratch.dispose()


def _stale_roots(engine: Engine, root_url: str | None) -> list[tuple[Any, int]]:
    """The roots (one, or all) whose stored runs and artifacts predate their last scan,
    each with that scan's id."""
    from governance.catalog.roots import last_complete_scan, list_roots

    stale = []
    for root in list_roots(engine):
        if root_url is not None and root.url != root_url:
            continue
        assert root.id is not None
        scan = last_complete_scan(engine, root.id)
        if scan is not None and scan.id is not None and root.classified_scan_id != scan.id:
            stale.append((root, scan.id))
    return stale


def _scratch_classification(engine: Engine, now: datetime, root_url: str | None) -> Engine:
    """An in-memory catalog of the roots asked for, each with its runs and artifacts as
    a classification now finds them (see `classified`)."""
    from sqlalchemy import create_engine, insert
    from sqlalchemy.pool import StaticPool

    from governance.catalog.roots import last_complete_scan, list_roots
    from governance.catalog.tables import Root

    roots_table = Root.__table__  # type: ignore[attr-defined]
    scratch = create_engine("sqlite://", poolclass=StaticPool)  # one in-memory database
    roots_table.metadata.create_all(scratch, tables=[roots_table, _R, _A])
    for root in list_roots(engine):
        if root_url is not None and root.url != root_url:
            continue
        assert root.id is not None
        with scratch.begin() as conn:
            conn.execute(insert(roots_table).values(root.model_dump()))
        scan = last_complete_scan(engine, root.id)
        if scan is None or scan.id is None:
            continue
        options = _root_options(engine, root, now)
        # what the cache lacks is read from storage (the root opened on first need, the
        # way the scan reached it) and not kept: this user cannot write the cache
        reach = (root.classify_options or {}).get("connection") or {}
        with engine.connect() as source, scratch.begin() as conn:
            reader = reader_without_cache_writes(
                source, root.id, root.url, reach, options.metadata_max_bytes
            )
            replace_model(
                conn, classify_stream(engine, root.id, options, reader), root.url, root.id, scan.id
            )
    return scratch


def refresh_metadata(
    engine: Engine,
    root_id: int,
    root_url: str,
    connection: dict[str, str] | None = None,
    store: Store | None = None,
) -> int:
    """Read the root's uncached metadata files; a root out of reach is logged and skipped.

    Without a `store` the root is opened only when some file is missing from the cache:
    an up-to-date cache costs one query and no connection to storage (opening an S3 root
    alone costs a quarter of a second).
    """
    import logging

    from governance.errors import GovernanceError
    from governance.scan.metadata import prefetch_metadata

    on_demand = _StoreOnDemand(root_url, connection or {}) if store is None else None
    try:
        read = prefetch_metadata(engine, store or cast(Store, on_demand), root_id)
        if on_demand is not None and on_demand.error is not None:
            raise on_demand.error
        return read
    except GovernanceError as exc:
        logging.getLogger(__name__).warning(
            "%s: metadata files not read (%s); classifying from the cache", root_url, exc
        )
        return 0


@dataclass(frozen=True, slots=True)
class RootAttributes:
    """What protection needs read for a root's objects: their tags (the policy uses tags
    and the root has them: S3) and their lock state (the bucket has Object Lock)."""

    tags: bool = False
    lock: bool = False


def refresh_object_attributes(
    engine: Engine,
    root_id: int,
    root_url: str,
    connection: dict[str, str] | None = None,
    store: Store | None = None,
    *,
    tags: bool,
) -> RootAttributes:
    """Read the tags and lock state the catalog lacks for a root's live objects (when
    they matter), and say which of them matter for planning it.

    Only S3 roots have tags and locks; a filesystem root needs nothing. `tags`: whether
    the policy uses tags anywhere. The bucket's Object Lock configuration is asked once
    per plan when the root's store is at hand (the plan scanned it), else taken from the
    catalog (recorded by the last scan, or plan, that asked); not known (never asked, or
    denied), every object's lock state is read as on a bucket with Object Lock. The
    store is opened only when something must be read. A root out of reach, or objects
    whose reads fail, are logged; what was not read stays not read, so the planner
    protects those objects' artifacts.
    """
    import logging

    from governance.errors import GovernanceError
    from governance.scan.attributes import refresh_attributes

    if not root_url.startswith("s3://"):
        return RootAttributes()
    logger = logging.getLogger(__name__)
    recorded = _recorded_lock(engine, root_id)
    lock: bool | None = recorded
    if store is not None:
        try:
            lock = store.object_lock_enabled()
        except GovernanceError as exc:
            logger.warning(
                "%s: Object Lock configuration not read (%s); using what the catalog says",
                root_url,
                exc,
            )
        else:
            if lock != recorded:
                record_object_lock(engine, root_id, lock)
    if lock is None:
        # Not known (never asked, or the question denied): as if it had Object Lock, so
        # each object's lock state is read and one that cannot be read protects its
        # artifact (what is not known cannot be proven unlocked).
        logger.warning(
            "%s: whether the bucket has Object Lock is not known: every object's lock "
            "state is read, and an object whose state cannot be read is protected",
            root_url,
        )
        lock = True
    wanted = RootAttributes(tags=tags, lock=lock)
    if not (tags or lock):
        return wanted
    on_demand = _StoreOnDemand(root_url, connection or {}) if store is None else None
    try:
        reads = refresh_attributes(
            engine, root_id, store or cast(Store, on_demand), tags=tags, lock=lock
        )
        if on_demand is not None and on_demand.error is not None:
            raise on_demand.error
    except GovernanceError as exc:
        logger.warning(
            "%s: object tags / lock state not read (%s); the artifacts of objects not read "
            "yet are protected",
            root_url,
            exc,
        )
        return wanted
    if reads.failed:
        logger.warning(
            "%s: %s whose tags / lock state could not be read (%s); their "
            "artifacts are protected, the next plan tries again",
            root_url,
            counted(reads.failed, "object"),
            reads.first_error,
        )
    return wanted


def recorded_attributes(
    engine: Engine, root_id: int, root_url: str, *, tags: bool
) -> RootAttributes:
    """`refresh_object_attributes` for a catalog this user cannot write: nothing is read
    or written, what matters is said from what the catalog holds (its Object Lock answer;
    not known: as with Object Lock), and what the catalog lacks stays not read, so the
    planner protects those objects' artifacts."""
    if not root_url.startswith("s3://"):
        return RootAttributes()
    lock = _recorded_lock(engine, root_id)
    return RootAttributes(tags=tags, lock=True if lock is None else lock)


def _recorded_lock(engine: Engine, root_id: int) -> bool | None:
    """Whether the root's bucket has Object Lock, as the catalog recorded (None: never
    asked, or the question denied)."""
    from governance.catalog.tables import Root

    roots = Root.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        found = conn.execute(
            select(roots.c.object_lock).where(roots.c.id == root_id)
        ).scalar_one_or_none()
    return None if found is None else bool(found)


def reader_without_cache_writes(
    db: Engine | Connection,
    root_id: int,
    root_url: str,
    connection: dict[str, str],
    max_bytes: int,
) -> CachedMetaReader:
    """A metadata reader for a catalog this user cannot write: the cache as it is, and
    what it lacks read from storage (the root opened on first need) and kept in memory."""
    store = cast(Store, _StoreOnDemand(root_url, connection))
    return CachedMetaReader(db, root_id, store, max_bytes, keep=False)


def record_object_lock(engine: Engine, root_id: int, enabled: bool | None) -> None:
    """Remember whether the root's bucket has Object Lock enabled."""
    from governance.catalog.tables import Root

    roots = Root.__table__  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.execute(update(roots).where(roots.c.id == root_id).values(object_lock=enabled))


def reread_acted_tags(
    engine: Engine,
    root_id: int,
    root_url: str,
    artifact_keys: Iterable[str],
    connection: dict[str, str] | None = None,
    store: Store | None = None,
) -> int:
    """Read again the tags of the objects of the artifacts a plan acts on, on an S3 root
    (`scan.attributes.reread_tags`), opening the store only if needed; returns how many
    changed. What cannot be read is a warning: apply reads tags again before acting."""
    import logging

    from governance.scan.attributes import reread_tags

    if not root_url.startswith("s3://"):
        return 0
    on_demand = _StoreOnDemand(root_url, connection or {}) if store is None else None
    reads = reread_tags(engine, root_id, artifact_keys, store or cast(Store, on_demand))
    if reads.failed:
        logging.getLogger(__name__).warning(
            "%s: the tags of %s the plan acts on could not be read again (%s); "
            "apply reads them before acting",
            root_url,
            counted(reads.failed, "object"),
            reads.first_error,
        )
    return reads.tags


class _StoreOnDemand:
    """The `Store` methods `prefetch_metadata` and `refresh_attributes` read with, opening
    the root on first use.

    Reads run in a thread pool: the first one opens the store under a lock; if opening
    fails, every read fails with that error, which `refresh_metadata` then raises, as if
    opening had failed up front (a GovernanceError: the root is out of reach).
    """

    def __init__(self, root_url: str, connection: dict[str, str]) -> None:
        self.root_url = root_url
        self.connection = connection
        self.error: Exception | None = None
        self._store: Store | None = None
        self._lock = threading.Lock()

    def _open(self) -> Store:
        from governance.storage import open_store

        with self._lock:
            if self._store is None and self.error is None:
                conn = self.connection
                try:
                    self._store = open_store(
                        self.root_url,
                        endpoint_url=conn.get("endpoint_url"),
                        profile=conn.get("profile"),
                        region=conn.get("region"),
                    )
                except Exception as exc:  # re-raised by refresh_metadata, as before
                    self.error = exc
            if self._store is None:
                assert self.error is not None
                raise self.error
            return self._store

    def read_bytes(self, key: str, max_bytes: int) -> bytes:
        return self._open().read_bytes(key, max_bytes)

    def object_tags(self, key: str) -> dict[str, str]:
        return self._open().object_tags(key)

    def object_lock(self, key: str) -> ObjectLock:
        return self._open().object_lock(key)
