"""`save_plan` writes rows in the driver's own form (SQLite: multi-row INSERTs with NaN
for NULL; PostgreSQL: COPY): they must store exactly what Core's binding stores."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection

from governance.catalog.engine import create_schema, open_engine
from governance.catalog.plans import (
    _ACTION_COLUMNS,
    _KEPT_COLUMNS,
    _P,
    _header_row,
    _insert_with_core,
    iter_actions,
    load_plan,
    save_plan,
)
from governance.errors import CatalogError
from tests.catalogs import catalog_url  # noqa: F401
from tests.unit.plan_samples import sample_plan


def _stored(conn: Connection, table: str, columns: tuple[str, ...], plan_id: str) -> list[Any]:
    """A plan's rows as stored: each value, its SQLite storage class, JSON as text."""
    sqlite = conn.dialect.name == "sqlite"
    shown = [c if c != "objects" or sqlite else "objects::text" for c in columns if c != "plan_id"]
    if sqlite:
        shown += [f"typeof({c})" for c in columns]
    order = "action_id" if table == "plan_actions" else "seq"
    query = f"SELECT {', '.join(shown)} FROM {table} WHERE plan_id = :p ORDER BY {order}"
    return [tuple(r) for r in conn.execute(text(query), {"p": plan_id})]


def test_bulk_rows_store_what_core_stores(catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    fast, core = sample_plan("p-fast"), sample_plan("p-core")
    save_plan(engine, fast)
    with engine.begin() as conn:
        conn.execute(_P.insert(), [_header_row(core)])
        _insert_with_core(conn, core)
    with engine.connect() as conn:
        for table, columns, rows in (
            ("plan_actions", _ACTION_COLUMNS, len(fast.actions)),
            ("plan_kept", _KEPT_COLUMNS, len(fast.kept)),
        ):
            by_fast = _stored(conn, table, columns, "p-fast")
            assert len(by_fast) == rows
            assert by_fast == _stored(conn, table, columns, "p-core")
        nulls = conn.execute(
            text("SELECT count(*) FROM plan_actions WHERE plan_id = 'p-fast' AND tier IS NULL")
        ).scalar_one()
    assert nulls == sum(a.tier is None for a in fast.actions) > 0
    assert load_plan(engine, "p-fast") == fast
    engine.dispose()


@pytest.mark.parametrize("count", [1, 31, 32, 33, 64, 97])
def test_any_number_of_actions_round_trips(catalog_url: str, count: int) -> None:  # noqa: F811
    """Rows go in INSERTs of several rows, the last one shorter: every count comes back."""
    engine = open_engine(catalog_url)
    plan = sample_plan()
    base = plan.actions
    plan.actions = [replace(base[i % len(base)], id=i + 1) for i in range(count)]
    plan.kept = plan.kept * (count // len(plan.kept) + 1)
    save_plan(engine, plan)
    assert load_plan(engine, plan.plan_id) == plan
    engine.dispose()


def test_an_engine_json_serializer_is_used(tmp_path: Path) -> None:
    """An engine with its own JSON serializer has the object lists go through it (Core)."""
    written: list[Any] = []

    def serializer(value: Any) -> str:
        written.append(value)
        return json.dumps(value, separators=(",", ":"))

    engine = create_engine(f"sqlite:///{tmp_path / 'c.db'}", json_serializer=serializer)
    create_schema(engine)
    plan = sample_plan()
    save_plan(engine, plan)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT objects FROM plan_actions")).scalars().all()
    assert stored
    assert all(t == serializer(json.loads(t)) for t in stored)
    assert len([v for v in written if isinstance(v, list)]) >= len(plan.actions)
    assert load_plan(engine, plan.plan_id) == plan
    engine.dispose()


def test_paged_reads_and_a_filter_give_what_the_whole_read_gives(
    catalog_url: str,  # noqa: F811
) -> None:
    """`iter_actions` pages (keyset, any page size) and filters by type; `load_plan`
    reads in one go: the same actions either way, on either backend."""
    engine = open_engine(catalog_url)
    plan = sample_plan()
    base = plan.actions
    plan.actions = [replace(base[i % len(base)], id=i + 1) for i in range(23)]
    save_plan(engine, plan)
    whole = load_plan(engine, plan.plan_id).actions
    assert whole == plan.actions
    for page in (1, 4, 23, 1000):
        assert list(iter_actions(engine, plan.plan_id, page)) == whole
    kind = whole[0].action
    assert list(iter_actions(engine, plan.plan_id, 3, action=kind.value)) == [
        a for a in whole if a.action is kind
    ]
    engine.dispose()


def test_an_object_stored_outside_its_actions_root_is_a_damaged_plan(
    catalog_url: str,  # noqa: F811
) -> None:
    """An object's stored URI (older plans kept one) must be its action's root + key: a
    plan edited to point an object elsewhere is refused on reading, not acted on."""
    engine = open_engine(catalog_url)
    plan = sample_plan()
    save_plan(engine, plan)
    first = plan.actions[0]
    rows = [
        [o.key, o.size, o.etag, 0, o.storage_class, o.version_id, o.upload_id, None]
        for o in first.objects
    ]
    rows[0][-1] = "s3://elsewhere/" + rows[0][0]
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE plan_actions SET objects = :o WHERE plan_id = :p AND action_id = :a"),
            {"o": json.dumps(rows), "p": plan.plan_id, "a": first.id},
        )
    for read in (load_plan, lambda e, p: list(iter_actions(e, p))):
        with pytest.raises(CatalogError, match=r"s3://elsewhere/.* is not under the action's root"):
            read(engine, plan.plan_id)
    engine.dispose()
