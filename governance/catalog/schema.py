"""Every table module, imported in one place so SQLModel's metadata holds the whole schema
(Alembic's environment and the migration test import this)."""

from sqlalchemy import Table
from sqlmodel import SQLModel

from governance.catalog import (
    approval_tables,
    bests,
    completions,
    execution_tables,
    links,
    quiet_runs,
    tables,
)

MODULES = (approval_tables, bests, completions, execution_tables, links, quiet_runs, tables)
"""The modules that define govern's tables."""


def _own_tables() -> tuple[Table, ...]:
    """govern's tables, in dependency order: those its table modules define, never all
    of SQLModel's metadata, which is the process's (an application embedding govern may
    define tables of its own there: each catalog was made with them, and every open
    refused a catalog without them as damaged)."""
    found: set[str] = set()
    for module in MODULES:
        for value in vars(module).values():
            table = getattr(value, "__table__", value)
            if isinstance(table, Table) and table.metadata is SQLModel.metadata:
                found.add(table.name)
    return tuple(t for t in SQLModel.metadata.sorted_tables if t.name in found)


TABLES = _own_tables()
"""Every table of a catalog (but `alembic_version`)."""

__all__ = [
    "TABLES",
    "approval_tables",
    "bests",
    "completions",
    "execution_tables",
    "links",
    "quiet_runs",
    "tables",
]
