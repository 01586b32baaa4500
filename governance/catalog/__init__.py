"""The catalog: tables, engine and migrations, bulk reads and writes."""

from governance.catalog.engine import make_engine, open_engine

__all__ = ["make_engine", "open_engine"]
