"""Classification results in the catalog: runs and artifacts, rebuilt per root after a scan,
and the metadata cache that lets small files be read once per ETag.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine

from governance.catalog.tables import ArtifactRow, MetaCache, RunRow, us_from_datetime
from governance.model.types import CatalogObject, ClassifyOptions, Group, Kind, MetaReader
from governance.storage.base import Store

_A = ArtifactRow.__table__  # type: ignore[attr-defined]
_R = RunRow.__table__  # type: ignore[attr-defined]
_M = MetaCache.__table__  # type: ignore[attr-defined]


class CachedMetaReader:
    """Reads small metadata objects through the catalog's cache, keyed by (key, ETag).

    With no store (planning, lazy classification) only cached content is returned; the
    scan fills the cache. Answers, misses included, are memoised for the reader's life, so
    a file that many artifacts consult (DeepSpeed `latest`) costs one lookup; and which
    (key, ETag) pairs the cache holds is read once, on the first lookup (keys and ETags
    only), so an object the cache lacks costs no query at all. Given a
    Connection, cache reads and writes happen inside that connection's transaction, so
    classification can refresh the cache while it rewrites a root's artifacts.
    """

    MEMO_SIZE = 4096

    def __init__(
        self, db: Engine | Connection, root_id: int, store: Store | None, max_bytes: int
    ) -> None:
        self.db = db
        self.root_id = root_id
        self.store = store
        self.max_bytes = max_bytes
        self._memo: OrderedDict[tuple[str, str], bytes | None] = OrderedDict()
        self._reader: Connection | None = None  # one connection for every cache read
        self._cached: set[tuple[str, str]] | None = None  # (key, etag) the cache holds

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __del__(self) -> None:
        self.close()

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
        where = (_M.c.root_id == self.root_id, _M.c.key == obj.key)
        if isinstance(self.db, Connection):
            reader = self.db
        else:
            if self._reader is None:
                self._reader = self.db.connect()
            reader = self._reader
        if self._cached is None:
            self._cached = {
                (key, etag)
                for key, etag in reader.execute(
                    select(_M.c.key, _M.c.etag).where(_M.c.root_id == self.root_id)
                )
            }
        if (obj.key, obj.etag) in self._cached:
            row = reader.execute(select(_M.c.content).where(*where, _M.c.etag == obj.etag)).first()
            if row is not None:
                content: bytes | None = row[0]
                return content
        if self.store is None or obj.size > self.max_bytes:
            return None
        try:
            content = self.store.read_bytes(obj.key, self.max_bytes)
        except Exception:  # unreadable metadata degrades classification; it never stops it
            return None  # not cached: a passing failure must not stick to this ETag
        with self._conn() as conn:
            conn.execute(delete(_M).where(*where))
            conn.execute(
                _M.insert().values(
                    root_id=self.root_id, key=obj.key, etag=obj.etag, content=content
                )
            )
        self._cached.add((obj.key, obj.etag))
        return content


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
                "last_write": us_from_datetime(run.last_write),
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
                "last_modified": us_from_datetime(a.last_modified),
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
    engine: Engine, root_id: int, options: ClassifyOptions, reader: MetaReader | None
) -> Iterator[Group]:
    """A root's classification streamed from the catalog: pass one reads keys alone (and
    fetches the few tracker files it found), pass two streams full objects in key order."""
    from functools import partial

    from governance.catalog.queries import iter_live_keys, iter_live_objects, live_objects_by_key
    from governance.model.classify import classify, find_runs_by_keys

    first_pass = partial(
        find_runs_by_keys,
        iter_live_keys(engine, root_id),
        options,
        partial(live_objects_by_key, engine, root_id),
    )
    return classify(
        partial(iter_live_objects, engine, root_id), options, reader, first_pass=first_pass
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
    from governance.catalog.roots import last_complete_scan, list_roots
    from governance.catalog.tables import Root

    done = 0
    for root in list_roots(engine):
        if root_url is not None and root.url != root_url:
            continue
        assert root.id is not None
        scan = last_complete_scan(engine, root.id)
        if scan is None or scan.id is None or root.classified_scan_id == scan.id:
            continue
        if read_storage:
            refresh_metadata(
                engine, root.id, root.url, (root.classify_options or {}).get("connection")
            )
        options = options_from_json(root.classify_options, now)
        classify_root(engine, None, root.id, root.url, scan.id, options)
        roots = Root.__table__  # type: ignore[attr-defined]
        with engine.begin() as conn:
            conn.execute(
                update(roots).where(roots.c.id == root.id).values(classified_scan_id=scan.id)
            )
        done += 1
    return done


def refresh_metadata(
    engine: Engine,
    root_id: int,
    root_url: str,
    connection: dict[str, str] | None = None,
    store: Store | None = None,
) -> int:
    """Read the root's uncached metadata files; a root out of reach is logged and skipped."""
    import logging

    from governance.errors import GovernanceError
    from governance.scan.metadata import prefetch_metadata
    from governance.storage import open_store

    try:
        if store is None:
            conn = connection or {}
            store = open_store(
                root_url,
                endpoint_url=conn.get("endpoint_url"),
                profile=conn.get("profile"),
                region=conn.get("region"),
            )
        return prefetch_metadata(engine, store, root_id)
    except GovernanceError as exc:
        logging.getLogger(__name__).warning(
            "%s: metadata files not read (%s); classifying from the cache", root_url, exc
        )
        return 0
