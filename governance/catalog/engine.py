"""Opening a catalog: engine creation (no module-level engine) and migrations on open."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError as SAArgumentError
from sqlalchemy.exc import DatabaseError, NoSuchModuleError, OperationalError

from governance.errors import CatalogError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
CACHE_KIB = 32768  # SQLite page cache per connection, for scans' and plans' random access
READ_ONCE_CACHE_KIB = 2048  # for walks that read each page about once (see `page_cache`)
SCHEMA_REVISION = "0009"
"""The newest migration. Opening a catalog already at it never imports Alembic (a fifth
of every command's start-up); a test keeps this equal to Alembic's own head."""


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # Larger pages: fewer B-tree splits for millions of object rows (only takes effect
    # when the file is created; a no-op on an existing catalog).
    cur.execute("PRAGMA page_size=16384")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA temp_store=FILE")  # staging tables must not grow memory with N
    cur.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    cur.close()


@contextlib.contextmanager
def page_cache(engine: Engine, kib: int = READ_ONCE_CACHE_KIB) -> Iterator[None]:
    """SQLite connections checked out meanwhile keep at most `kib` KiB of pages each (back
    to CACHE_KIB when checked in). For walks that read each page once, such as apply's:
    a cache as large as scans want only fills with pages read once, on every pooled
    connection. A PRAGMA per checkout; other databases are left as they are."""
    if engine.dialect.name != "sqlite":
        yield
        return

    def sized(size: int) -> Callable[..., None]:
        def set_size(dbapi_conn: Any, *_: Any) -> None:
            if dbapi_conn is not None:
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA cache_size=-{int(size)}")
                cur.close()

        return set_size

    small, default = sized(kib), sized(CACHE_KIB)
    event.listen(engine, "checkout", small)
    event.listen(engine, "checkin", default)
    try:
        yield
    finally:
        event.remove(engine, "checkout", small)
        event.remove(engine, "checkin", default)


def make_engine(url: str) -> Engine:
    """An engine for any SQLAlchemy URL; SQLite files get WAL mode and their folder created."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    try:
        if url.startswith("sqlite"):
            db_path = url.split("///", 1)[1] if "///" in url else ""
            if db_path and db_path != ":memory:":
                Path(db_path).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(url, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(url, pool_pre_ping=True)
    except (SAArgumentError, NoSuchModuleError, ValueError) as exc:
        raise CatalogError(f"catalog URL {url!r} is not usable: {exc}") from exc
    except ModuleNotFoundError as exc:
        raise CatalogError(
            f"catalog URL {url!r} needs the driver {exc.name!r}; "
            "install govern[postgres] for PostgreSQL"
        ) from exc
    return engine


def _alembic_config(engine: Engine) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    cfg = _alembic_config(make_engine("sqlite://"))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The catalog's schema revision from Alembic's version table, or None if it has none."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(rows) > 1:
        raise CatalogError(f"catalog has {len(rows)} schema versions ({', '.join(rows)})")
    return rows[0] if rows else None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run Alembic migrations up to `revision` (the catalog upgrades itself in place)."""
    from alembic import command

    command.upgrade(_alembic_config(engine), revision)


def create_schema(engine: Engine) -> None:
    """Create every table of an empty catalog at once and record it as SCHEMA_REVISION.

    Alembic's advice for a database built from scratch ("create_all, then stamp head"):
    replaying every migration costs a new catalog about half a second. A test checks
    that the migrations, replayed, build exactly this schema.
    """
    from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table
    from sqlmodel import SQLModel

    from governance.catalog import schema  # noqa: F401  (registers every table)

    version = Table(
        "alembic_version",
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    with engine.begin() as conn:
        SQLModel.metadata.create_all(conn)
        version.create(conn)
        conn.execute(version.insert().values(version_num=SCHEMA_REVISION))


def open_engine(url: str, migrate: bool = True) -> Engine:
    """Create the engine and bring the schema to the newest version.

    A corrupt or foreign file is reported as a CatalogError naming the URL, with no change.
    """
    engine = make_engine(url)
    try:
        current = current_revision(engine)
        if current is None and inspect(engine).get_table_names():
            raise CatalogError(
                f"catalog {_safe(url)} holds tables but no govern schema version; "
                "point --catalog at a govern catalog or an empty database"
            )
        if migrate and current is None:
            create_schema(engine)
        elif migrate and current != SCHEMA_REVISION:
            upgrade(engine)
    except CatalogError:
        engine.dispose()
        raise
    except (DatabaseError, OperationalError, sqlite3.DatabaseError) as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise CatalogError(f"catalog {_safe(url)} cannot be opened: {reason}") from exc
    return engine


def _safe(url: str) -> str:
    """The URL with any password hidden."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url
