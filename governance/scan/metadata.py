"""Reading small metadata files once per ETag, in parallel, before classification.

Classification needs a few small files (`trainer_state.json` for metrics and the best
checkpoint, `*.index.json` for shard completeness, DeepSpeed `latest` and the Megatron
tracker, and on an object store Orbax's `_CHECKPOINT_METADATA`, whose commit time says
whether a step committed). Whoever classifies a root with its store at hand (`govern plan`
after its scan or with `--no-scan`, `govern ls runs` after a scan) first reads every such
file the cache does not hold for its current ETag, in parallel, into the catalog's
`meta_cache`; classification itself then reads only the cache. A scan stays a pure
listing, and an unchanged tree reads nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import and_, case, delete, exists, false, or_, select
from sqlalchemy.engine import Engine

from governance.catalog.tables import MetaCache, StoredObject
from governance.model.detectors.base import FILESYSTEM_ETAG
from governance.storage.base import Store

METADATA_NAMES = frozenset(
    {
        "trainer_state.json",
        "latest",
        "latest_universal",
        "latest_checkpointed_iteration.txt",
        "_CHECKPOINT_METADATA",
    }
)
OBJECT_STORE_NAMES = frozenset({"_CHECKPOINT_METADATA"})
"""Names read only where classification reads them: on an object store. On a filesystem
an Orbax step under its final name was renamed from its staging folder once the save was
done, and its `_CHECKPOINT_METADATA` is not read (its ETag is an `mtime:` token)."""
METADATA_SUFFIXES = (".index.json",)
MAX_BYTES = 64 * 1024 * 1024

_O = StoredObject.__table__.c  # type: ignore[attr-defined]
_M = MetaCache.__table__  # type: ignore[attr-defined]


def is_metadata_key(key: str) -> bool:
    """Is this one of the small files classification reads?"""
    name = key.rsplit("/", 1)[-1]
    return name in METADATA_NAMES or name.endswith(METADATA_SUFFIXES)


def _candidates(engine: Engine, root_id: int) -> list[tuple[str, str, int]]:
    patterns = [_O.key.like(f"%{name}") for name in METADATA_NAMES]
    patterns += [_O.key.like(f"%{suffix}") for suffix in METADATA_SUFFIXES]
    cached = exists().where(and_(_M.c.root_id == root_id, _M.c.key == _O.key, _M.c.etag == _O.etag))
    stmt = select(_O.key, _O.etag, _O.size).where(
        _O.root_id == root_id,
        _O.gone_scan_id.is_(None),
        _O.upload_id == "",
        # The size first, then the names: most objects are too large to be metadata, and
        # SQLite otherwise matches every key against every pattern (twice the time).
        case((_O.size <= MAX_BYTES, or_(*patterns)), else_=false()),
        ~cached,
    )
    with engine.connect() as conn:
        return [(k, e, s) for k, e, s in conn.execute(stmt) if _wanted(k, e)]


def _wanted(key: str, etag: str) -> bool:
    """Is this object one classification reads (`is_metadata_key`, and not a name read
    only on object stores in a filesystem's listing)?"""
    if not is_metadata_key(key):
        return False
    return not (etag.startswith(FILESYSTEM_ETAG) and key.rsplit("/", 1)[-1] in OBJECT_STORE_NAMES)


def prefetch_metadata(engine: Engine, store: Store, root_id: int, concurrency: int = 16) -> int:
    """Read the root's metadata files the cache lacks (for their ETag); returns how many."""
    wanted = _candidates(engine, root_id)
    if not wanted:
        return 0

    def read(item: tuple[str, str, int]) -> dict[str, Any] | None:
        key, etag, _size = item
        try:
            content = store.read_bytes(key, MAX_BYTES)
        except Exception:  # unreadable now: not cached, so the next scan tries again
            return None
        return {"root_id": root_id, "key": key, "etag": etag, "content": content}

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        rows = [r for r in pool.map(read, wanted) if r is not None]
    with engine.begin() as conn:
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            conn.execute(
                delete(_M).where(
                    _M.c.root_id == root_id,
                    _M.c.key.in_([r["key"] for r in chunk]),
                )
            )
            conn.execute(_M.insert(), chunk)
    return len(rows)
