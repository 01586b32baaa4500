"""Streaming reads of the catalog: live objects in key order, without per-row ORM objects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from governance.catalog.tables import Root, StoredObject, datetime_from_us
from governance.model.types import CatalogObject

_O = StoredObject.__table__.c  # type: ignore[attr-defined]
_R = Root.__table__.c  # type: ignore[attr-defined]


def _key_order(engine: Engine) -> Any:
    """Byte order of keys on every backend (PostgreSQL's default collation is not)."""
    return _O.key.collate("C") if engine.dialect.name == "postgresql" else _O.key


def iter_live_objects(engine: Engine, root_id: int, chunk: int = 10_000) -> Iterator[CatalogObject]:
    """Every live object of a root, sorted by key, streamed in chunks."""
    stmt = (
        select(
            _O.id,
            _O.key,
            _O.size,
            _O.last_modified,
            _O.etag,
            _O.storage_class,
            _O.version_id,
            _O.upload_id,
            _O.tags,
        )
        .where(_O.root_id == root_id, _O.gone_scan_id.is_(None))
        .order_by(_key_order(engine), _O.upload_id)
    )
    with engine.connect() as conn:
        result = conn.execution_options(yield_per=chunk).execute(stmt)
        for oid, key, size, lm, etag, sc, vid, upload, tags in result:
            yield CatalogObject(
                key=key,
                size=size,
                last_modified=datetime_from_us(lm),
                etag=etag,
                storage_class=sc,
                version_id=vid,
                upload_id=upload,
                tags=tags,
                object_id=oid,
            )


def iter_object_rows(
    engine: Engine, root_url: str | None = None, include_gone: bool = False
) -> Iterator[dict[str, Any]]:
    """Rows for `govern ls objects`, in root then key order, as plain dicts."""
    stmt = select(
        _R.url,
        _O.key,
        _O.size,
        _O.etag,
        _O.last_modified,
        _O.storage_class,
        _O.version_id,
        _O.upload_id,
        _O.gone_scan_id,
    ).join_from(StoredObject, Root, _O.root_id == _R.id)
    if root_url is not None:
        stmt = stmt.where(_R.url == root_url)
    if not include_gone:
        stmt = stmt.where(_O.gone_scan_id.is_(None))
    stmt = stmt.order_by(_R.url, _key_order(engine), _O.upload_id)
    with engine.connect() as conn:
        for url, key, size, etag, lm, sc, vid, upload, gone in conn.execution_options(
            yield_per=10_000
        ).execute(stmt):
            row: dict[str, Any] = {
                "uri": url + key,
                "size": size,
                "etag": etag,
                "last_modified": datetime_from_us(lm),
                "storage_class": sc,
                "version_id": vid,
            }
            if upload:
                row["upload_id"] = upload
            if include_gone:
                row["gone"] = gone is not None
            yield row
