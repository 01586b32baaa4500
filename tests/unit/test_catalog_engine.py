"""The catalog opens, migrates in place, matches its models, and refuses corrupt files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel

from governance.catalog import schema, tables  # noqa: F401  (schema: every table)
from governance.catalog.engine import (
    SCHEMA_REVISION,
    current_revision,
    head_revision,
    make_engine,
    open_engine,
    upgrade,
)
from governance.errors import CatalogError
from governance.storage.base import epoch_micros
from tests.catalogs import catalog_url  # noqa: F401


def test_new_sqlite_catalog_is_created_at_head_in_wal_mode(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'catalog.db'}"
    engine = open_engine(url)
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    assert {"roots", "scans", "objects", "runs", "artifacts"} <= set(
        inspect(engine).get_table_names()
    )


def test_schema_revision_constant_is_alembics_head() -> None:
    # open_engine skips Alembic when a catalog is at SCHEMA_REVISION: a new migration
    # must move the constant, or catalogs would silently stay on the old schema.
    assert head_revision() == SCHEMA_REVISION


def test_migrations_replayed_produce_exactly_the_models(catalog_url: str) -> None:  # noqa: F811
    # A new catalog is built by create_all; an old one reaches the same schema only
    # through the migrations: they must agree table for table, index for index.
    engine = make_engine(catalog_url)
    upgrade(engine)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), SQLModel.metadata) == []


def test_new_catalog_is_stamped_so_alembic_sees_it_at_head(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == head_revision()
        assert compare_metadata(MigrationContext.configure(conn), SQLModel.metadata) == []
    upgrade(engine)  # a no-op, not a replay over existing tables


def test_older_catalog_upgrades_in_place_keeping_its_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    upgrade(engine, "0001")
    assert "artifacts" not in inspect(engine).get_table_names()
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO roots (url, created_at) VALUES (:u, :t)"),
            {"u": "file:///data/", "t": datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)},
        )
    engine.dispose()
    engine = open_engine(url)
    assert current_revision(engine) == head_revision()
    assert "artifacts" in inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT url FROM roots")).scalar() == "file:///data/"


def test_corrupt_file_is_refused_with_a_clear_message_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with pytest.raises(CatalogError, match=r"catalog .*catalog\.db.* cannot be opened"):
        open_engine(f"sqlite:///{path}")
    assert path.read_bytes() == garbage


def test_foreign_database_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE customers (id INTEGER)"))
    with pytest.raises(CatalogError, match="no govern schema version"):
        open_engine(url)


def test_unknown_driver_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="nosuchdb is not a catalog database govern supports"):
        make_engine("nosuchdb://x/y")
    with pytest.raises(CatalogError, match="not usable"):
        make_engine("not a url")


def test_utc_datetime_rejects_naive_values() -> None:
    col = tables.UTCDateTime()
    with pytest.raises(ValueError, match="naive"):
        col.process_bind_param(datetime(2026, 1, 1), None)  # type: ignore[arg-type]


def test_microsecond_times_round_trip() -> None:
    moment = datetime(2026, 11, 30, 2, 15, 0, 123456, tzinfo=UTC)
    assert tables.datetime_from_us(epoch_micros(moment)) == moment


def test_upgrade_gives_an_existing_audit_log_its_head(tmp_path: Path) -> None:
    from governance import audit

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    upgrade(engine, "0006")
    with engine.begin() as conn:  # two events written by a version without audit_head
        prev = audit.GENESIS
        for i in (1, 2):
            at = datetime(2026, 1, i, tzinfo=UTC)
            digest = audit.event_hash(i, at, "plan", "ana", "p-1", {}, prev)
            conn.execute(
                text(
                    "INSERT INTO audit_events (id, at, event, actor, plan_id, payload, "
                    "prev_hash, hash) VALUES (:i, :at, 'plan', 'ana', 'p-1', '{}', :p, :h)"
                ),
                {"i": i, "at": at.replace(tzinfo=None), "p": prev, "h": digest},
            )
            prev = digest
    engine.dispose()
    engine = open_engine(url)
    assert audit.verify(engine).ok
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE id = 2"))
    assert not audit.verify(engine).ok  # the head the upgrade wrote catches the truncation


def test_a_postgresql_host_that_never_answers_is_an_error_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host that accepts the connection and never answers: libpq would wait for ever (a
    nightly job hung there blocks every later one); the catalog is refused in words."""
    import socket

    pytest.importorskip("psycopg")
    import governance.catalog.engine as engine_module

    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT_S", 1)
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        with pytest.raises(CatalogError, match="timeout"):  # (without one: a hang)
            open_engine(f"postgresql+psycopg://govern@127.0.0.1:{port}/catalog")


def _open_at_once(url: str, start: Any, out: Any) -> None:
    """One process of `test_commands_opening_a_new_catalog_at_once_all_succeed`."""
    start.wait()
    try:
        open_engine(url).dispose()
        out.put("ok")
    except CatalogError as exc:
        out.put(str(exc))


def test_commands_opening_a_new_catalog_at_once_all_succeed(catalog_url: str) -> None:  # noqa: F811
    """A nightly job and a person opening a new catalog together: both created it, and
    one failed ("table roots already exists", "duplicate key value violates unique
    constraint"); the schema is made once, under a lock, by whichever comes first."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for _ in range(3):
        url = catalog_url
        if url.startswith("sqlite"):
            url = url.replace("catalog.db", f"catalog-{_}.db")
        start, out = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(url, start, out)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert sorted(out.get(timeout=5) for _ in procs) == ["ok"] * 4
        engine = open_engine(url)
        try:
            assert current_revision(engine) == SCHEMA_REVISION
        finally:
            engine.dispose()
        if not url.startswith("sqlite"):
            break  # (one schema: made once, the later rounds would find it made)


def test_an_application_s_own_sqlmodel_tables_stay_out_of_the_catalog(tmp_path: Path) -> None:
    """SQLModel's metadata is the process's: an application embedding govern may define
    tables there. A catalog held them, and every open refused a catalog without them as
    damaged. In a process of its own (the table would stay in this one's metadata)."""
    import subprocess
    import sys

    script = f"""
from sqlmodel import Field, SQLModel
from sqlalchemy import inspect

class Thing(SQLModel, table=True):
    __tablename__ = "my_app_thing"
    id: int | None = Field(default=None, primary_key=True)

from governance.catalog.engine import open_engine
for name in ("a.db", "b.db"):
    engine = open_engine("sqlite:///{tmp_path}/" + name)
    assert "my_app_thing" not in inspect(engine).get_table_names()
    engine.dispose()
engine = open_engine("sqlite:///{tmp_path}/a.db", create=False)  # (opened again: not damaged)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
