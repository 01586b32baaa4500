"""A catalog whose server goes away mid-command (a restart, a terminated session) is an
operation that failed, exit 1, not bad input (exit 2: what `catalog_failure` gave every
catalog error). The error is a real one: a PostgreSQL session terminated by another."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from governance.catalog.engine import catalog_failure
from governance.errors import EXIT_BAD_INPUT, EXIT_FAILED, CatalogError

PG = os.environ.get("GOVERN_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(not PG, reason="GOVERN_TEST_POSTGRES_URL is not set")


def test_a_terminated_session_is_a_failed_operation_and_a_missing_table_bad_input() -> None:
    assert PG is not None
    engine = create_engine(PG)
    killer = create_engine(PG)
    try:
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with killer.begin() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            with pytest.raises(OperationalError) as lost:
                conn.execute(text("SELECT 1"))
        found = catalog_failure(lost.value, PG)
        assert isinstance(found, CatalogError)
        assert found.exit_code == EXIT_FAILED
        assert "the connection to the catalog was lost; run the command again" in str(found)
        with engine.connect() as conn, pytest.raises(ProgrammingError) as missing:
            conn.execute(text("SELECT * FROM no_such_table_here"))
        bad = catalog_failure(missing.value, PG)
        assert bad is not None
        assert bad.exit_code == EXIT_BAD_INPUT
    finally:
        engine.dispose()
        killer.dispose()
