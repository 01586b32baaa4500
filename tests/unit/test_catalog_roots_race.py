"""Two commands making the same new root at once: the one whose insert loses reads the
other's row instead of failing with a UNIQUE violation (two first scans of one new root
in parallel crashed with a traceback). The other command's insert is made to land
between this one's look-up and its commit, on a real catalog (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select
from sqlmodel import Session

from governance.catalog import roots
from governance.catalog.engine import open_engine
from governance.catalog.tables import Root
from tests.catalogs import catalog_url  # noqa: F401

URL = "file:///data/new/"


def test_a_root_made_meanwhile_by_another_command_is_read_not_refused(
    catalog_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = open_engine(catalog_url)
    other: list[int] = []

    class Racing(Session):
        def commit(self) -> None:
            if not other:  # the other command commits its root first
                with engine.begin() as conn:
                    table = Root.__table__  # type: ignore[attr-defined]
                    other.append(
                        conn.execute(
                            insert(table).values(url=URL, created_at=datetime.now(UTC))
                        ).inserted_primary_key[0]
                    )
            super().commit()

    monkeypatch.setattr(roots, "Session", Racing)
    got = roots.get_or_create_root(engine, URL, "data")
    assert got == other[0]
    with engine.connect() as conn:
        names = conn.execute(select(Root.name).where(Root.url == URL)).all()  # type: ignore[arg-type]
    assert names == [("data",)]  # one row, named by the command that lost the race
    engine.dispose()
