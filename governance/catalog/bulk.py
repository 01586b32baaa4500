"""Bulk writes: a per-scan staging table filled in batches (executemany; COPY on PostgreSQL)
and set-based merges, so no Python object is built per catalog row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from itertools import chain, islice
from typing import Any

from sqlalchemy import and_, func, or_, select, text
from sqlalchemy.engine import Connection

from governance.catalog.tables import Scan
from governance.storage.base import AnyRow, ListingRow

STAGE_COLUMNS = (
    "key",
    "upload_id",
    "size",
    "etag",
    "last_modified",
    "storage_class",
    "version_id",
    "checksum_algorithm",
)

StageRow = ListingRow


def create_stage(conn: Connection) -> None:
    """A temporary table private to this connection; dropped at the end of the scan."""
    conn.exec_driver_sql("DROP TABLE IF EXISTS scan_stage")
    conn.exec_driver_sql(
        "CREATE TEMPORARY TABLE scan_stage ("
        "key VARCHAR NOT NULL, upload_id VARCHAR NOT NULL, size BIGINT NOT NULL, "
        "etag VARCHAR NOT NULL, last_modified BIGINT NOT NULL, storage_class VARCHAR, "
        "version_id VARCHAR, checksum_algorithm VARCHAR)"
    )


def _full(rows: Sequence[AnyRow]) -> Sequence[StageRow]:
    """Compact rows (local disk) widened to the eight staging columns (PostgreSQL COPY)."""
    if rows and len(rows[0]) == 4:
        return [(k, "", s, e, m, None, None, None) for k, s, e, m in rows]  # type: ignore[misc]
    return rows  # type: ignore[return-value]


def sqlite_values(rows: Sequence[AnyRow]) -> tuple[str, str]:
    """(columns, placeholders) for SQLite executemany: four bound values per compact row."""
    if rows and len(rows[0]) == 4:
        return "key, upload_id, size, etag, last_modified", "?, '', ?, ?, ?"
    return ", ".join(STAGE_COLUMNS), ", ".join("?" * len(STAGE_COLUMNS))


def write_stage(conn: Connection, rows: Sequence[AnyRow]) -> None:
    """Append one batch of listed objects (full or compact rows) to the staging table."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        raw: Any = conn.connection.driver_connection
        with (
            raw.cursor() as cur,
            cur.copy(f"COPY scan_stage ({', '.join(STAGE_COLUMNS)}) FROM STDIN") as copy,
        ):
            for row in _full(rows):
                copy.write_row(row)
        return
    columns, values = sqlite_values(rows)
    cursor: Any = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(f"INSERT INTO scan_stage ({columns}) VALUES ({values})", rows)
    finally:
        cursor.close()


def root_is_empty(conn: Connection, root_id: int) -> bool:
    """No row at all for this root: a first scan can write `objects` directly."""
    row = conn.execute(
        text("SELECT 1 FROM objects WHERE root_id = :root LIMIT 1"), {"root": root_id}
    ).first()
    return row is None


def write_objects_direct(
    conn: Connection, root_id: int, scan_id: int, rows: Sequence[AnyRow]
) -> None:
    """First scan of a root: append listed rows straight to `objects` (no staging, no merge).

    The caller holds one transaction over the whole listing, so a failed first scan leaves
    no rows behind.
    """
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        columns = f"root_id, {', '.join(STAGE_COLUMNS)}, first_scan_id, changed_scan_id"
        raw: Any = conn.connection.driver_connection
        with raw.cursor() as cur, cur.copy(f"COPY objects ({columns}) FROM STDIN") as copy:
            for row in _full(rows):
                copy.write_row((root_id, *row, scan_id, scan_id))
        return
    listed, values = sqlite_values(rows)
    cursor: Any = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        # Both ids are integers from our own tables; inlining them keeps rows as listed.
        cursor.executemany(
            f"INSERT INTO objects (root_id, {listed}, first_scan_id, changed_scan_id) "
            f"VALUES ({int(root_id)}, {values}, {int(scan_id)}, {int(scan_id)})",
            rows,
        )
    finally:
        cursor.close()


def index_stage(conn: Connection) -> None:
    """Index after loading: one sort instead of a B-tree insert per row."""
    conn.exec_driver_sql("CREATE INDEX ix_scan_stage_key ON scan_stage (key, upload_id)")
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ANALYZE scan_stage")


def _distinct(conn: Connection, a: str, b: str) -> str:
    op = "IS DISTINCT FROM" if conn.dialect.name == "postgresql" else "IS NOT"
    return f"{a} {op} {b}"


def newer_complete_scan(conn: Connection, root_id: int, scan_id: int) -> int | None:
    """The first scan of the root that began after this one and has already completed,
    if any: its listing is newer, and folding this one in after it would undo what it saw
    (objects written in between marked gone, deleted ones live again). Takes the root's
    write lock first (a no-op update: a row lock on PostgreSQL, the database's on SQLite),
    so no other scan of the root can complete between this check and the merge.

    "Began" is when the listing began (`started_at`), not the row's id: a scan's row is
    made once the catalog is open, after its listing started, so a scan delayed there
    (a slow open, a lock) gets a later id than one whose listing began after its own."""
    params = {"root": root_id, "scan": scan_id}
    # (a non-key column: on PostgreSQL the row lock then leaves inserts that reference the
    # root, which take a key-share lock, free to go on)
    conn.execute(text("UPDATE roots SET name = name WHERE id = :root"), params)
    s = Scan.__table__.c  # type: ignore[attr-defined]
    mine = select(s.started_at).where(s.id == scan_id).scalar_subquery()
    found = conn.execute(
        select(func.min(s.id)).where(
            s.root_id == root_id,
            s.status == "complete",
            s.id != scan_id,
            or_(s.started_at > mine, and_(s.started_at == mine, s.id > scan_id)),
        )
    ).scalar()
    return int(found) if found is not None else None


NOT_REMOVED_SINCE = (
    "(objects.gone_scan_id IS NULL OR objects.gone_scan_id NOT IN ("
    "SELECT a.id FROM scans AS a WHERE a.root_id = :root AND a.source = 'apply' "
    "AND a.started_at >= (SELECT s.started_at FROM scans AS s WHERE s.id = :scan)))"
)
"""A condition on an `objects` row (params `root`, `scan`): not removed by an apply
(`removals.APPLY_SOURCE` records) since the scan's listing began. A listing that began
before an apply removed an object saw it before it went: folded in, it brought every
object the apply removed back to life, and the next plan acted on them again. Such an
object stays gone until a scan that begins later lists it."""


def merge_stage(conn: Connection, root_id: int, scan_id: int) -> tuple[int, int, int]:
    """Fold the staged listing into `objects`; returns (new, changed, gone).

    One upsert pass writes new and changed rows (unchanged rows are not written; a row
    that comes back is revived in place, its key being unique per root), one anti-join
    marks the vanished ones gone in this scan.
    """
    params = {"root": root_id, "scan": scan_id}
    differs = " OR ".join(
        [
            "objects.size <> excluded.size",
            "objects.etag <> excluded.etag",
            "objects.last_modified <> excluded.last_modified",
            _distinct(conn, "objects.storage_class", "excluded.storage_class"),
            _distinct(conn, "objects.version_id", "excluded.version_id"),
            "objects.gone_scan_id IS NOT NULL",
        ]
    )
    count = text("SELECT count(*) FROM objects WHERE root_id = :root")
    rows_before = conn.execute(count, params).scalar_one()
    written = upsert_objects(
        conn, root_id, scan_id, "scan_stage", only_if=f"({differs}) AND {NOT_REMOVED_SINCE}"
    )
    new = conn.execute(count, params).scalar_one() - rows_before
    return new, written - new, mark_gone(conn, root_id, scan_id)


def upsert_objects(
    conn: Connection, root_id: int, scan_id: int, source: str, *, only_if: str = ""
) -> int:
    """Write the rows of table `source` (staging columns) into `objects` as seen by this
    scan: new keys inserted, existing ones rewritten (and revived) where `only_if` holds
    (always when empty), their tags and lock state reset to not read and their content
    time to their own (the object may be another one now). Returns the rows written."""
    columns = ", ".join(STAGE_COLUMNS)
    condition = f" WHERE {only_if}" if only_if else ""
    return int(
        conn.execute(
            text(
                f"INSERT INTO objects (root_id, {columns}, first_scan_id, changed_scan_id) "
                f"SELECT :root, {columns}, :scan, :scan FROM {source} WHERE true "
                # `WHERE true`: SQLite's upsert-after-SELECT rule
                "ON CONFLICT (root_id, key, upload_id) DO UPDATE SET size = excluded.size, "
                "etag = excluded.etag, last_modified = excluded.last_modified, "
                "storage_class = excluded.storage_class, version_id = excluded.version_id, "
                "checksum_algorithm = excluded.checksum_algorithm, changed_scan_id = :scan, "
                # a rewritten (changed, revived) object's tags and lock state are read again,
                # and its content was written when it says (not copied by govern)
                "gone_scan_id = NULL, tags = NULL, lock_read = false, lock_mode = NULL, "
                "lock_retain_until_us = NULL, legal_hold = NULL, content_modified_us = NULL"
                f"{condition}"
            ),
            {"root": root_id, "scan": scan_id},
        ).rowcount
    )


def mark_gone(conn: Connection, root_id: int, scan_id: int) -> int:
    """Mark gone in this scan the root's live objects the staged listing lacks (an
    anti-join on the staging table's index); returns how many."""
    return int(
        conn.execute(
            text(
                "UPDATE objects SET gone_scan_id = :scan "
                "WHERE root_id = :root AND gone_scan_id IS NULL AND NOT EXISTS ("
                "SELECT 1 FROM scan_stage AS s "
                "WHERE s.key = objects.key AND s.upload_id = objects.upload_id)"
            ),
            {"root": root_id, "scan": scan_id},
        ).rowcount
    )


def drop_stage(conn: Connection) -> None:
    conn.exec_driver_sql("DROP TABLE IF EXISTS scan_stage")


SQLITE_NULL = float("nan")
"""What `sqlite_insert` rows hold for NULL in a nullable column. SQLite stores a bound NaN
as NULL, and a float goes straight through the sqlite3 module, where None is first looked
up as a value to adapt: two failed attribute lookups, each formatting its error message,
about 0.4 µs a value (CPython 3.11 to 3.13), a quarter of a plan action's insert."""

_SQLITE_VARIABLES = 999  # parameters a statement may have in any SQLite (32766 from 3.32)
_SQLITE_ROWS = 32  # rows per INSERT: 10 save most of the per-statement cost, 32 all of it


def sqlite_insert(
    conn: Connection, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Insert rows already in the driver's form (`SQLITE_NULL` for NULL) through the
    driver's cursor, several rows to an INSERT: with one INSERT per row, starting,
    ending and resetting the statement each time, SQLite does 40% more work. Rows are
    consumed as they come, with no Core binding in between."""
    width = len(columns)
    per = max(1, min(_SQLITE_ROWS, _SQLITE_VARIABLES // max(width, 1)))
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    one = f"({', '.join('?' * width)})"
    rest: list[Sequence[Any]] = []

    def batches() -> Iterator[tuple[Any, ...]]:
        it = iter(rows)
        while len(batch := list(islice(it, per))) == per:
            yield tuple(chain.from_iterable(batch))
        rest.extend(batch)

    cursor: Any = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(head + ", ".join([one] * per), batches())
        if rest:
            cursor.execute(head + ", ".join([one] * len(rest)), tuple(chain.from_iterable(rest)))
    finally:
        cursor.close()


def copy_rows(
    conn: Connection, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """PostgreSQL COPY of rows (None for NULL; JSON columns as their text) into `table`."""
    raw: Any = conn.connection.driver_connection
    with raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


_PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
_CHUNK = 5000


def insert_rows(
    conn: Connection, table: Any, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Insert tuples (values in `columns` order) through the driver's executemany.

    Each value is bound by its column's type exactly as Core binds it (datetimes, JSON),
    but without Core's per-row parameter dictionaries, which cost more than the write
    itself for the journal and audit rows of a large apply. Returns the rows written.
    """
    mark = _PLACEHOLDERS.get(conn.dialect.paramstyle)
    if mark is None:  # a driver of another paramstyle: let Core bind
        return insert_many(conn, table, (dict(zip(columns, row, strict=True)) for row in rows))
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))})"
    )
    bind = bind_processors(conn, table, columns)
    count = 0
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(bind(row))
        if len(chunk) >= _CHUNK:
            conn.exec_driver_sql(sql, chunk)
            count += len(chunk)
            chunk = []
    if chunk:
        conn.exec_driver_sql(sql, chunk)
        count += len(chunk)
    return count


def execute_rows(conn: Connection, sql: str, rows: Sequence[Sequence[Any]]) -> int:
    """One statement for many rows through the driver's executemany; `{p}` in `sql`
    marks each parameter (the driver's placeholder is put in). Values must already be in
    the driver's form (see `bind_processors`). Returns the rows it changed, as the driver
    sums them (sqlite3 and psycopg both do for executemany)."""
    mark = _PLACEHOLDERS.get(conn.dialect.paramstyle)
    if mark is None:
        raise NotImplementedError(f"driver paramstyle {conn.dialect.paramstyle!r}")
    statement = sql.format(p=mark)
    changed = 0
    for start in range(0, len(rows), _CHUNK):
        result = conn.exec_driver_sql(statement, [tuple(r) for r in rows[start : start + _CHUNK]])
        changed += max(result.rowcount, 0)
    return changed


def bind_processors(
    conn: Connection, table: Any, columns: Sequence[str]
) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A function turning a row of Python values into what the driver receives, column
    type by column type, as Core would (JSON's None included)."""
    dialect = conn.dialect
    processors = [
        (i, proc)
        for i, name in enumerate(columns)
        if (proc := table.c[name].type.dialect_impl(dialect).bind_processor(dialect)) is not None
    ]
    if not processors:
        return tuple
    # A batch repeats one `now` in every row: bind a column's last datetime only once.
    last: dict[int, tuple[Any, Any]] = {}

    def bind(row: Sequence[Any]) -> tuple[Any, ...]:
        values = list(row)
        for i, proc in processors:
            value = values[i]
            if type(value) is not datetime:
                values[i] = proc(value)
                continue
            seen = last.get(i)
            if seen is not None and seen[0] is value:  # immutable: safe to reuse by identity
                values[i] = seen[1]
                continue
            values[i] = bound = proc(value)
            last[i] = (value, bound)
        return tuple(values)

    return bind


def insert_many(conn: Connection, table: Any, rows: Iterable[dict[str, Any]]) -> int:
    """Core executemany in chunks; returns how many rows were written."""
    count = 0
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= 5000:
            conn.execute(table.insert(), chunk)
            count += len(chunk)
            chunk = []
    if chunk:
        conn.execute(table.insert(), chunk)
        count += len(chunk)
    return count
