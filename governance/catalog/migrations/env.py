"""Alembic environment: runs against the engine the catalog opened (no alembic.ini needed)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from governance.catalog import schema  # noqa: F401  (registers every table)

config = context.config
engine = config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
