"""Catalog fixtures: a real SQLite file, and PostgreSQL when GOVERN_TEST_POSTGRES_URL is set.

Each PostgreSQL test gets its own schema (via search_path), dropped afterwards.
Import the fixture into a test module: `from tests.catalogs import catalog_url  # noqa: F401`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_URL = os.environ.get("GOVERN_TEST_POSTGRES_URL")


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def _with_schema(schema: str, sql: str) -> None:
    from sqlalchemy import create_engine

    assert PG_URL is not None
    url = PG_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(sql.format(schema=schema))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty catalog URL on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'catalog.db'}"
        return
    if not PG_URL:
        pytest.skip("GOVERN_TEST_POSTGRES_URL is not set")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    _with_schema(schema, "CREATE SCHEMA {schema}")
    try:
        yield _pg_schema_url(PG_URL, schema)
    finally:
        _drop_schema(schema)


def _drop_schema(schema: str) -> None:
    """Drop a test's schema, waiting at most a while for its locks: a test that failed
    with a connection still open (an engine not disposed) holds them, and an unbounded
    wait would hang the whole run instead of reporting that failure. A schema that could
    not be dropped is left behind (it has a name of its own), with a warning."""
    import warnings

    from sqlalchemy.exc import OperationalError

    try:
        _with_schema(schema, "SET lock_timeout = '20s'; DROP SCHEMA {schema} CASCADE")
    except OperationalError as exc:
        warnings.warn(f"test schema {schema} left behind: {exc}", stacklevel=2)
