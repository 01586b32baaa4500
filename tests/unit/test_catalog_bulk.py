"""`insert_rows` and `execute_rows` store exactly what Core's executemany stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from governance.catalog.approval_tables import AuditEventRow
from governance.catalog.bulk import bind_processors, execute_rows, insert_many, insert_rows
from governance.catalog.engine import open_engine
from tests.catalogs import catalog_url  # noqa: F401

_E = AuditEventRow.__table__  # type: ignore[attr-defined]
COLUMNS = ("id", "at", "event", "actor", "plan_id", "payload", "prev_hash", "hash")
AT = datetime(2026, 11, 30, 12, 34, 56, 789012, tzinfo=UTC)


def _rows(first_id: int) -> list[tuple[Any, ...]]:
    payloads: list[dict[str, Any]] = [
        {},
        {"n": 1, "nested": {"list": [1, "two", None]}, "unicode": "grüße ✓"},
        {"none": None, "float": 0.1, "big": 2**53},
    ]
    return [
        (first_id + i, AT + timedelta(microseconds=i), "action", "ana", pid, payload, "p", "h")
        for i, (pid, payload) in enumerate(zip(["p-1", None, "p-2"], payloads, strict=True))
    ]


def _read(conn: Any, ids: range) -> list[tuple[Any, ...]]:
    query = select(*(_E.c[c] for c in COLUMNS)).where(_E.c.id.in_(list(ids))).order_by(_E.c.id)
    return [tuple(r) for r in conn.execute(query)]


def test_insert_rows_stores_what_core_stores(catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    with engine.begin() as conn:
        core = insert_many(conn, _E, (dict(zip(COLUMNS, r, strict=True)) for r in _rows(1)))
        fast = insert_rows(conn, _E, COLUMNS, _rows(101))
    assert core == fast == 3
    with engine.connect() as conn:
        by_core = _read(conn, range(1, 4))
        by_fast = _read(conn, range(101, 104))
        raw_core = conn.exec_driver_sql("SELECT at, payload FROM audit_events WHERE id < 100")
        raw_fast = conn.exec_driver_sql("SELECT at, payload FROM audit_events WHERE id > 100")
        assert [tuple(r) for r in raw_core] == [tuple(r) for r in raw_fast]  # same stored form
    assert [r[1:] for r in by_core] == [r[1:] for r in by_fast]
    assert by_fast[0][1] == AT  # a timezone-aware UTC time back, to the microsecond
    engine.dispose()


def test_execute_rows_updates_each_row_with_bound_values(catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    later = AT + timedelta(days=1)
    with engine.begin() as conn:
        insert_rows(conn, _E, COLUMNS, _rows(1))
        (bound_at,) = bind_processors(conn, _E, ("at",))((later,))
        execute_rows(
            conn,
            "UPDATE audit_events SET at = {p}, actor = {p} WHERE id = {p}",
            [(bound_at, "bo", 1), (bound_at, "cy", 3)],
        )
    with engine.connect() as conn:
        rows = {r[0]: (r[1], r[3]) for r in _read(conn, range(1, 4))}
    assert rows == {1: (later, "bo"), 2: (AT + timedelta(microseconds=1), "ana"), 3: (later, "cy")}
    engine.dispose()
