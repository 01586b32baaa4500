"""Streaming reads of the catalog: live objects in key order, without per-row ORM objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from json import loads
from types import MappingProxyType
from typing import Any

from sqlalchemy import and_, case, false, func, null, or_, select, true
from sqlalchemy.engine import Connection, Engine

from governance.catalog.execution_tables import RemovedObjectRow
from governance.catalog.tables import Root, StoredObject, datetime_from_us
from governance.model.types import CatalogObject

_O = StoredObject.__table__.c  # type: ignore[attr-defined]
_R = Root.__table__.c  # type: ignore[attr-defined]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def quarantines(conn: Engine | Connection) -> list[str]:
    """Every quarantine location that holds copies an apply moved there (or journaled a
    move of), sorted: never a root's data. A policy that changes `quarantine_url` leaves the old
    copies where they were, and the next scan would list them as the root's (planned on,
    counted in its bytes): each scan and plan leaves out all of these, not only the
    policy's own (`scan.targets.excluded_prefixes`)."""
    table = RemovedObjectRow.__table__  # type: ignore[attr-defined]
    column = table.c.quarantine_root
    # only while it holds a copy (removed, or being moved there): once every copy is
    # restored or purged the location holds nothing of govern's, and data written there
    # later is a root's again (scanned and costed)
    query = (
        select(column)
        .where(column.is_not(None), table.c.state.in_(("removed", "pending")))
        .distinct()
    )
    if isinstance(conn, Engine):
        with conn.connect() as c:
            return sorted(c.execute(query).scalars())
    return sorted(conn.execute(query).scalars())


def _key_order(engine: Engine) -> Any:
    """Byte order of keys on every backend (PostgreSQL's default collation is not)."""
    return _byte_order(engine, _O.key)


def _byte_order(engine: Engine, column: Any) -> Any:
    """`column` to sort by in byte order, as SQLite does: on PostgreSQL the database's
    collation may be a language's (`en_US`, ICU), which puts `run_a` before `Run-B`."""
    return column.collate("C") if engine.dialect.name == "postgresql" else column


_OBJECT_COLUMNS = (
    _O.id,
    _O.key,
    _O.size,
    # when the content was written (policy ages count from it): past govern's own copy
    func.coalesce(_O.content_modified_us, _O.last_modified).label("written"),
    _O.etag,
    _O.storage_class,
    _O.version_id,
    _O.upload_id,
    _O.tags,
    # the copy's own time, when govern copied the object into its class; else NULL
    case((_O.content_modified_us.is_not(None), _O.last_modified), else_=null()).label(
        "class_since"
    ),
)
"""A `CatalogObject`'s columns, in its fields' order up to `tags`, then `class_since`
(its lock state comes apart)."""


def _live(root_id: int, exclude: Sequence[str] = ()) -> Any:
    """A root's live objects, outside the key prefixes in `exclude` (the quarantine
    inside a root: a catalog filled by `scan --root` holds its copies, which are not the
    root's data). `substr` compares bytes alike on SQLite and PostgreSQL, where LIKE does
    not (SQLite folds case, and a prefix may hold `%` or `_`)."""
    outside = [func.substr(_O.key, 1, len(p)) != p for p in exclude if p]
    return and_(_O.root_id == root_id, _O.gone_scan_id.is_(None), *outside)


def _objects_select(engine: Engine, root_id: int, exclude: Sequence[str] = ()) -> Any:
    return (
        select(
            *_OBJECT_COLUMNS,
            _O.lock_read,
            _O.lock_mode,
            _O.lock_retain_until_us,
            _O.legal_hold,
        )
        .where(_live(root_id, exclude))
        .order_by(_key_order(engine), _O.upload_id)
    )


_NO_TAGS: Mapping[str, str] = MappingProxyType({})
"""The tags of every object read with none (most, once read): one shared, read-only {}."""

UNREAD_TAGS = "tags"
UNREAD_LOCK = "lock"
UNREAD_BOTH = "tags lock"
"""`CatalogObject.unread`: what protection needs of the object that was not read."""


def _unread(tags: bool, lock: bool) -> str | None:
    if tags:
        return UNREAD_BOTH if lock else UNREAD_TAGS
    return UNREAD_LOCK if lock else None


def _attributed(
    obj: CatalogObject,
    lock_read: bool | None,
    mode: str | None,
    until_us: int | None,
    hold: bool | None,
    tags: bool,
    lock: bool,
) -> CatalogObject:
    """`obj` with its lock state and what is not read of what matters (`tags`, `lock`:
    whether its tags, its lock state matter for this root); `obj` itself when none."""
    unread = None
    if not obj.upload_id:  # an incomplete upload has neither tags nor a lock
        unread = _unread(tags and obj.tags is None, lock and not lock_read)
    locked = lock and bool(lock_read) and (bool(hold) or until_us is not None)
    if unread is None and not locked:
        return obj
    if locked:
        obj.lock_mode = mode
        obj.retain_until = datetime_from_us(until_us) if until_us is not None else None
        obj.legal_hold = bool(hold)
    obj.unread = unread
    return obj


def _objects(
    rows: Iterable[Any], tags: bool = False, lock: bool = False
) -> Iterator[CatalogObject]:
    for oid, key, size, lm, etag, sc, vid, upload, tagged, since, lread, mode, until, hold in rows:
        obj = CatalogObject(
            key=key,
            size=size,
            last_modified=datetime_from_us(lm),
            etag=etag,
            storage_class=sc,
            version_id=vid,
            upload_id=upload,
            tags=tagged,
            object_id=oid,
        )
        if since is not None:
            obj.class_since = datetime_from_us(since)
        if tags or lock:
            obj = _attributed(obj, lread, mode, until, hold, tags, lock)
        yield obj


def iter_live_objects(
    engine: Engine,
    root_id: int,
    chunk: int = 10_000,
    *,
    tags: bool = False,
    lock: bool = False,
    exclude: Sequence[str] = (),
) -> Iterator[CatalogObject]:
    """Every live object of a root, sorted by key, streamed in chunks.

    `tags` / `lock`: whether the objects' tags / lock state matter for this root (the
    policy uses tags / the bucket has Object Lock): an object lacking them is marked
    `unread` (its artifact is then protected), and with `lock` an object's lock state
    comes with it (lock states are only ever read on a bucket with Object Lock, which
    cannot be turned off). `exclude`: key prefixes left out (see `_live`).
    """
    with engine.connect() as conn:
        stmt = _objects_select(engine, root_id, exclude)
        result = conn.execution_options(yield_per=chunk).execute(stmt)
        yield from _objects(result, tags, lock)


def _sqlite_select(root_id: int, tags: bool, lock: bool, exclude: Sequence[str] = ()) -> Any:
    """The rows of `stream_live_objects` on SQLite: `iter_live_objects`' columns up to
    `tags`, then, when tags or locks matter, one that is NULL for a plain object,
    otherwise a JSON array [lock_mode, retain_until_us, legal_hold, tags unread, lock
    unread]."""
    listed = _O.upload_id == ""
    unread_tags = and_(listed, _O.tags.is_(None)) if tags else false()
    unread_lock = and_(listed, _O.lock_read == false()) if lock else false()
    locked = and_(
        _O.lock_read == true(),
        or_(_O.legal_hold == true(), _O.lock_retain_until_us.is_not(None)),
    )
    columns = list(_OBJECT_COLUMNS)
    if tags or lock:
        columns.append(_attributes_column(locked if lock else false(), unread_tags, unread_lock))
    return select(*columns).where(_live(root_id, exclude)).order_by(_O.key, _O.upload_id)


def _attributes_column(locked: Any, unread_tags: Any, unread_lock: Any) -> Any:
    return case(
        (
            or_(locked, unread_tags, unread_lock),
            func.json_array(
                _O.lock_mode,
                _O.lock_retain_until_us,
                _O.legal_hold,
                case((unread_tags, 1), else_=0),
                case((unread_lock, 1), else_=0),
            ),
        ),
        else_=null(),
    )


def stream_live_objects(
    engine: Engine,
    root_id: int,
    chunk: int = 10_000,
    *,
    tags: bool = False,
    lock: bool = False,
    exclude: Sequence[str] = (),
) -> Iterator[CatalogObject]:
    """`iter_live_objects`, the same objects in the same order, for bulk consumers.

    On SQLite the rows come straight from the DBAPI cursor, as `iter_live_keys` reads
    them: a Result builds a Row per object and processes each column, which costs more
    than SQLite takes to read it. `tags` (JSON text) is decoded as the JSON type would
    (the commonest, `{}`, is one shared read-only mapping);
    objects written at the same microsecond as the row before share its datetime. When
    tags or locks matter, an object's lock state and what it lacks come in one more
    column, NULL for most objects; otherwise the row is what it always was.
    """
    if engine.dialect.name != "sqlite":
        yield from iter_live_objects(engine, root_id, chunk, tags=tags, lock=lock, exclude=exclude)
        return
    if not (tags or lock):
        yield from _stream_plain(engine, root_id, chunk, exclude)
        return
    epoch, micros = _EPOCH, timedelta
    last_us: int | None = None
    last = epoch
    for rows in sqlite_chunks(engine, _sqlite_select(root_id, tags, lock, exclude), chunk):
        for oid, key, size, lm, etag, sc, vid, upload, tagged, since, attributes in rows:
            if lm != last_us:  # the files of one save often share their time
                last_us, last = lm, epoch + micros(0, 0, lm)  # = datetime_from_us(lm)
            obj = CatalogObject(
                key,
                size,
                last,
                etag,
                sc,
                vid,
                upload,
                None if tagged is None else _NO_TAGS if tagged == "{}" else loads(tagged),
                oid,
            )
            if since is not None:
                obj.class_since = epoch + micros(0, 0, since)
            if attributes is not None:
                mode, until, hold, no_tags, no_lock = loads(attributes)
                if lock and (hold or until is not None):
                    obj.lock_mode = mode
                    obj.retain_until = None if until is None else epoch + micros(0, 0, until)
                    obj.legal_hold = bool(hold)
                obj.unread = _unread(bool(no_tags), bool(no_lock))
            yield obj


def _stream_plain(
    engine: Engine, root_id: int, chunk: int, exclude: Sequence[str]
) -> Iterator[CatalogObject]:
    """`stream_live_objects` when neither tags nor locks matter (the common case, and
    the planner's hot read): the plain objects' columns alone, one object a row."""
    epoch, micros = _EPOCH, timedelta
    last_us: int | None = None
    last = epoch
    for rows in sqlite_chunks(engine, _sqlite_select(root_id, False, False, exclude), chunk):
        for oid, key, size, lm, etag, sc, vid, upload, tagged, since in rows:
            if lm != last_us:  # the files of one save often share their time
                last_us, last = lm, epoch + micros(0, 0, lm)  # = datetime_from_us(lm)
            obj = CatalogObject(
                key,
                size,
                last,
                etag,
                sc,
                vid,
                upload,
                None if tagged is None else _NO_TAGS if tagged == "{}" else loads(tagged),
                oid,
            )
            if since is not None:
                obj.class_since = epoch + micros(0, 0, since)
            yield obj


def sqlite_chunks(engine: Engine, stmt: Any, chunk: int) -> Iterator[Sequence[Any]]:
    """Rows of a SELECT as plain tuples from the DBAPI cursor, `chunk` at a time.

    SQLite's cursor streams as it fetches; the statement's parameters go to it bound, in
    the order the compiled statement names them.
    """
    compiled = stmt.compile(dialect=engine.dialect)
    params = compiled.construct_params()
    bound = [params[name] for name in compiled.positiontup or ()]
    with engine.connect() as conn:
        cursor = conn.connection.cursor()
        try:
            cursor.execute(str(compiled), bound)
            while rows := cursor.fetchmany(chunk):
                yield rows
        finally:
            cursor.close()


def iter_live_keys(
    engine: Engine, root_id: int, chunk: int = 50_000, exclude: Sequence[str] = ()
) -> Iterator[str]:
    """The keys of `iter_live_objects(engine, root_id)`, in the same order (pass one of
    classification needs keys alone: no object is built per row)."""
    stmt = select(_O.key).where(_live(root_id, exclude)).order_by(_key_order(engine), _O.upload_id)
    if engine.dialect.name == "sqlite":
        # A Result builds a Row per key, which costs twice what SQLite takes to read it.
        for rows in sqlite_chunks(engine, stmt, chunk):
            for (key,) in rows:
                yield key
        return
    with engine.connect() as conn:
        result = conn.execution_options(yield_per=chunk).execute(stmt)
        for part in result.scalars().partitions():
            yield from part


def live_objects_by_key(
    engine: Engine,
    root_id: int,
    keys: Iterable[str],
    chunk: int = 500,
    *,
    tags: bool = False,
    lock: bool = False,
) -> list[CatalogObject]:
    """The live objects of a root with the given keys, as `iter_live_objects` builds them,
    sorted by key then upload id (a few tracker files, fetched after a keys-only pass)."""
    wanted = sorted(set(keys))
    out: list[CatalogObject] = []
    with engine.connect() as conn:
        for i in range(0, len(wanted), chunk):
            stmt = _objects_select(engine, root_id).where(_O.key.in_(wanted[i : i + chunk]))
            out.extend(_objects(conn.execute(stmt), tags, lock))
    out.sort(key=lambda o: (o.key, o.upload_id))
    return out


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
    stmt = stmt.order_by(_byte_order(engine, _R.url), _key_order(engine), _O.upload_id)
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


def iter_run_rows(engine: Engine, root_url: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows for `govern ls runs`: `checkpoints` counts a run's complete checkpoints and
    `in_flight` its incomplete ones still inside the grace period (past it an incomplete
    checkpoint is classified residue). The runs table counts both as checkpoints, a mix
    that read as "7 checkpoints" for a run with 6 to resume from."""
    from governance.catalog.tables import RunRow

    r = RunRow.__table__.c  # type: ignore[attr-defined]
    stmt = select(r, _R.url.label("root_url")).join_from(RunRow, Root, r.root_id == _R.id)
    if root_url is not None:
        stmt = stmt.where(_R.url == root_url)
    stmt = stmt.order_by(_byte_order(engine, _R.url), _byte_order(engine, r.key))
    flying = _in_flight_by_run(engine, root_url)
    with engine.connect() as conn:
        for row in conn.execute(stmt).mappings():
            in_flight = flying.get((row["root_url"], row["key"]), 0)
            yield {
                "run": row["name"],
                "uri": row["uri"],
                "status": row["status"],
                "status_reason": row["status_reason"],
                "attributes": row["attributes"] or {},
                "last_write": datetime_from_us(row["last_write"]),
                "bytes": row["bytes"],
                "objects": row["objects"],
                "checkpoints": row["checkpoints"] - in_flight,
                "in_flight": in_flight,
                "best_checkpoint": row["best_checkpoint"],
                "root": row["root_url"],
            }


def _in_flight_by_run(engine: Engine, root_url: str | None) -> dict[tuple[str, str], int]:
    """(root URL, run key) -> the run's incomplete checkpoints, in one grouped query."""
    from sqlalchemy import func

    from governance.catalog.tables import ArtifactRow

    a = ArtifactRow.__table__.c  # type: ignore[attr-defined]
    stmt = (
        select(_R.url, a.run_key, func.count())
        .join_from(ArtifactRow, Root, a.root_id == _R.id)
        .where(a.kind == "checkpoint", a.complete.is_(False), a.run_key.is_not(None))
        .group_by(_R.url, a.run_key)
    )
    if root_url is not None:
        stmt = stmt.where(_R.url == root_url)
    with engine.connect() as conn:
        return {(str(url), str(key)): int(n) for url, key, n in conn.execute(stmt)}


def iter_artifact_rows(
    engine: Engine,
    root_url: str | None = None,
    run_key_glob: str | None = None,
    kind: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows for `govern ls artifacts`, with the run's name joined in."""
    from sqlalchemy import and_

    from governance.catalog.tables import ArtifactRow, RunRow

    a = ArtifactRow.__table__.c  # type: ignore[attr-defined]
    r = RunRow.__table__.c  # type: ignore[attr-defined]
    stmt = (
        select(a, _R.url.label("root_url"), r.name.label("run_name"))
        .join_from(ArtifactRow, Root, a.root_id == _R.id)
        .outerjoin(RunRow, and_(r.root_id == a.root_id, r.key == a.run_key))
    )
    if root_url is not None:
        stmt = stmt.where(_R.url == root_url)
    if kind is not None:
        stmt = stmt.where(a.kind == kind)
    stmt = stmt.order_by(_byte_order(engine, _R.url), _byte_order(engine, a.key))
    matcher = None
    if run_key_glob is not None:
        import fnmatch
        import re

        matcher = re.compile(fnmatch.translate(run_key_glob))
    with engine.connect() as conn:
        for row in conn.execution_options(yield_per=5000).execute(stmt).mappings():
            if matcher is not None and not (row["run_name"] and matcher.match(row["run_name"])):
                continue
            yield {
                "uri": row["uri"],
                "kind": row["kind"],
                "layout": row["layout"],
                "run": row["run_name"],
                "step": row["step"],
                "complete": row["complete"],
                "completeness_reason": row["completeness_reason"],
                "strippable": row["strippable"],
                "bytes": row["bytes"],
                "objects": row["objects"],
                "last_modified": datetime_from_us(row["last_modified"]),
                "components": row["components"] or {},
                "metrics": row["metrics"] or {},
                "note": row["note"],
            }
