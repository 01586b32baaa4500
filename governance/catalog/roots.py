"""Roots and scans: small row-level reads and writes (a handful of rows per command)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from governance.catalog.tables import Root, Scan


def get_or_create_root(engine: Engine, url: str, name: str | None = None) -> int:
    """The root's id, its row made if there is none (two first scans of one new root at
    once: the one whose insert loses to the other's reads the other's row)."""
    for attempt in (1, 2):
        with Session(engine) as session:
            root = session.exec(select(Root).where(Root.url == url)).first()
            if root is None:
                root = Root(url=url, name=name, created_at=datetime.now(UTC))
                session.add(root)
            elif name and root.name != name:
                root.name = name
                session.add(root)
            try:
                session.commit()
            except IntegrityError:
                if attempt == 2:
                    raise
                continue  # made meanwhile by another command: read it
            assert root.id is not None
            return root.id
    raise AssertionError("unreachable")


def find_root(engine: Engine, url: str) -> Root | None:
    with Session(engine) as session:
        return session.exec(select(Root).where(Root.url == url)).first()


def list_roots(engine: Engine) -> list[Root]:
    with Session(engine) as session:
        return list(session.exec(select(Root).order_by(col(Root.id))))


def start_scan(
    engine: Engine,
    root_id: int,
    actor: str,
    source: str = "listing",
    started_at: datetime | None = None,
) -> int:
    """A scan's row; `started_at`: when its listing began (default: now)."""
    with Session(engine) as session:
        began = started_at or datetime.now(UTC)
        scan = Scan(root_id=root_id, actor=actor, started_at=began, source=source)
        session.add(scan)
        session.commit()
        assert scan.id is not None
        return scan.id


def finish_scan(engine: Engine, scan_id: int, **fields: object) -> Scan:
    with Session(engine) as session:
        scan = session.get(Scan, scan_id)
        assert scan is not None
        for name, value in fields.items():
            setattr(scan, name, value)
        scan.finished_at = datetime.now(UTC)
        session.add(scan)
        session.commit()
        session.refresh(scan)
        return scan


def last_complete_scan(engine: Engine, root_id: int) -> Scan | None:
    with Session(engine) as session:
        stmt = (
            select(Scan)
            .where(Scan.root_id == root_id, Scan.status == "complete")
            .order_by(col(Scan.id).desc())
        )
        return session.exec(stmt).first()


def record_layout(
    engine: Engine, root_id: int, options: dict[str, Any], connection: dict[str, str] | None = None
) -> None:
    """Remember the layout a root was scanned with and how to reach it (endpoint, profile
    name, region: never credentials), so it can be classified later without the policy."""
    with Session(engine) as session:
        root = session.get(Root, root_id)
        assert root is not None
        root.classify_options = {**options, "connection": connection or {}}
        session.add(root)
        session.commit()


def root_ids(conn: Connection, urls: Iterable[str]) -> dict[str, int]:
    """Root URL -> its id, for those of `urls` the catalog knows (one query)."""
    roots = Root.__table__.c  # type: ignore[attr-defined]
    query = sa_select(roots.id, roots.url).where(roots.url.in_(set(urls)))
    return {str(url): int(i) for i, url in conn.execute(query)}
