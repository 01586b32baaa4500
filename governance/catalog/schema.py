"""Every table module, imported in one place so SQLModel's metadata holds the whole schema
(Alembic's environment and the migration test import this)."""

from governance.catalog import (
    approval_tables,
    bests,
    completions,
    execution_tables,
    links,
    tables,
)

__all__ = [
    "approval_tables",
    "bests",
    "completions",
    "execution_tables",
    "links",
    "tables",
]
