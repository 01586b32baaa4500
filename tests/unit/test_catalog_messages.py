"""What the catalog's driver says, made into what a reader can act on."""

from __future__ import annotations

import sqlite3

from governance.catalog.engine import catalog_failure


def test_a_read_only_catalog_says_its_folder_must_be_writable() -> None:
    """SQLite in WAL mode writes `-wal` and `-shm` files beside the catalog: "attempt to
    write a readonly database" on `govern approve` names no cause by itself."""
    err = catalog_failure(
        sqlite3.OperationalError("attempt to write a readonly database"), "sqlite:////ro/c.db"
    )
    assert err is not None
    assert str(err) == (
        "catalog sqlite:////ro/c.db failed: attempt to write a readonly database (the catalog "
        "file and its folder must be writable to change it: SQLite keeps its -wal and -shm "
        "files beside it; commands that only read work without)"
    )


def test_a_locked_sqlite_catalog_says_who_holds_it_and_what_to_do() -> None:
    err = catalog_failure(sqlite3.OperationalError("database is locked"), "sqlite:////x/c.db")
    assert str(err) == (
        "catalog sqlite:////x/c.db failed: database is locked (another process held its "
        "write lock for over 30 s; a SQLite catalog has one writer at a time: run such jobs "
        "one after another, wait longer with GOVERN_SQLITE_BUSY_TIMEOUT=SECONDS, or share a "
        "PostgreSQL catalog)"
    )


def test_other_driver_messages_are_passed_on_as_they_are() -> None:
    err = catalog_failure(sqlite3.OperationalError("disk I/O error"), "sqlite:////x/c.db")
    assert str(err) == "catalog sqlite:////x/c.db failed: disk I/O error"
