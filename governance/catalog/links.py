"""Symbolic links of a root that point inside it, as its last complete scan met them.

A scan lists no link (`storage.local_walk`), but what a link points at must outlive the
plans that would delete it: `runs/x/best -> checkpoint-500`, Lightning's `last.ckpt`,
`models/prod -> ../runs/x/checkpoint-500`. Each complete scan of a root replaces the
root's rows here in the transaction that folds its listing in (a superseded scan writes
nothing), and planning reads them with the root's snapshot (`plan.service`).

    replace_links(conn, root_id, scan_id, [("runs/x/best", "runs/x/checkpoint-500/")])
    root_links(engine, root_id)  # [("runs/x/best", "runs/x/checkpoint-500/")]
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel


class SymlinkRow(SQLModel, table=True):
    """One link under a root whose target lies inside it: keys relative to the root, a
    folder target ending in '/', the root itself ''."""

    __tablename__ = "symlinks"

    root_id: int = Field(foreign_key="roots.id", primary_key=True)
    link_key: str = Field(primary_key=True)
    target_key: str
    scan_id: int  # the complete scan that met it


_L = SymlinkRow.__table__  # type: ignore[attr-defined]
_INSERT_ROWS = 5000  # rows per executemany: bounded statements for a tree of many links


def replace_links(
    conn: Connection, root_id: int, scan_id: int, links: Sequence[tuple[str, str]]
) -> None:
    """Make `links` ((link key, target key) pairs) the root's, in the caller's transaction."""
    conn.execute(delete(_L).where(_L.c.root_id == root_id))
    rows = [
        {"root_id": root_id, "link_key": link, "target_key": target, "scan_id": scan_id}
        for link, target in dict(links).items()  # (a key met twice: one row)
    ]
    for start in range(0, len(rows), _INSERT_ROWS):
        conn.execute(_L.insert(), rows[start : start + _INSERT_ROWS])  # executemany


def root_links(engine: Engine | Connection, root_id: int) -> list[tuple[str, str]]:
    """The root's links as (link key, target key), sorted by link key (byte order on every
    backend: sorted here, not by the database's collation)."""
    query = select(_L.c.link_key, _L.c.target_key).where(_L.c.root_id == root_id)
    if isinstance(engine, Engine):
        with engine.connect() as conn:
            rows = conn.execute(query).all()
    else:
        rows = engine.execute(query).all()
    return sorted((str(link), str(target)) for link, target in rows)
