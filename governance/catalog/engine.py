"""Opening a catalog: engine creation (no module-level engine) and migrations on open."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError as SAArgumentError
from sqlalchemy.exc import DatabaseError, NoSuchModuleError, OperationalError, SAWarning

from governance.errors import CatalogError, CatalogLostError
from governance.settings import env_float

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
CACHE_KIB = 32768  # SQLite page cache per connection, for scans' and plans' random access
READ_ONCE_CACHE_KIB = 2048  # for walks that read each page about once (see `page_cache`)
SCHEMA_REVISION = "0018"
"""The newest migration. Opening a catalog already at it never imports Alembic (a fifth
of every command's start-up); a test keeps this equal to Alembic's own head."""


BUSY_TIMEOUT_ENV = "GOVERN_SQLITE_BUSY_TIMEOUT"
DEFAULT_BUSY_TIMEOUT_S = 30.0


def busy_timeout_s() -> float:
    """How long a SQLite catalog command waits for another process's write lock before it
    fails with "database is locked": `GOVERN_SQLITE_BUSY_TIMEOUT` seconds, else 30 (a
    bad value is an ArgumentError naming the variable, exit 2)."""
    return env_float(BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_S)


def _millis(seconds: float) -> int:
    """SQLite's busy_timeout, in whole milliseconds (at least one)."""
    return max(1, round(seconds * 1000))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any, *, busy_ms: int) -> None:
    cur = dbapi_conn.cursor()
    # Larger pages: fewer B-tree splits for millions of object rows (only takes effect
    # when the file is created; a no-op on an existing catalog).
    cur.execute("PRAGMA page_size=16384")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={busy_ms}")
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


SUPPORTED_URLS = "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
"""The catalog URL schemes govern is built and tested for, named in error hints."""


def make_engine(url: str) -> Engine:
    """An engine for any SQLAlchemy URL; SQLite files get WAL mode and their folder created."""
    for plain in ("postgresql://", "postgres://"):  # (`postgres://`: libpq's spelling too)
        if url.startswith(plain):
            url = "postgresql+psycopg://" + url.removeprefix(plain)
    try:
        backend = make_url(url).get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise CatalogError(
                f"catalog URL {safe_url(url)}: {backend} is not a catalog database govern "
                f"supports; a catalog URL is {SUPPORTED_URLS}"
            )
        if url.startswith("sqlite"):
            timeout = busy_timeout_s()  # (a bad setting is refused before anything is made)
            db_path = sqlite_path(url)
            if db_path is not None:
                _refuse_folder(db_path, url)
                _make_folder(db_path, url)
            with warnings.catch_warnings():
                # e.g. `?mode=ro` without `uri=true`, which the driver would ignore: a
                # catalog meant to be read-only must not be opened writable in silence
                warnings.simplefilter("error", SAWarning)
                engine = create_engine(url, connect_args={"timeout": timeout})
            event.listen(engine, "connect", partial(_sqlite_pragmas, busy_ms=_millis(timeout)))
        else:
            engine = create_engine(url, pool_pre_ping=True, connect_args=_connect_args(url))
    except SAWarning as exc:
        raise CatalogError(f"catalog URL {safe_url(url)} is not usable: {_one_line(exc)}") from exc
    except (SAArgumentError, NoSuchModuleError, ValueError) as exc:
        raise CatalogError(
            f"catalog URL '{safe_url(url)}' is not usable: {_one_line(exc)}; "
            f"a catalog URL is {SUPPORTED_URLS}{_path_hint(url)}"
        ) from exc
    except ModuleNotFoundError as exc:
        hint = (
            "install govern[postgres] for PostgreSQL"
            if url.startswith("postgresql")
            else f"a catalog URL is {SUPPORTED_URLS}"
        )
        raise CatalogError(
            f"catalog URL {safe_url(url)} needs the driver {exc.name!r}, which is not "
            f"installed; {hint}"
        ) from exc
    return engine


CONNECT_TIMEOUT_S = 10
"""How long connecting to a PostgreSQL catalog may take, unless the URL's `connect_timeout`
or `PGCONNECT_TIMEOUT` says: libpq waits for ever on a host that accepts the connection
and never answers, and a nightly job hung there blocks every later one."""


def _connect_args(url: str) -> dict[str, Any]:
    if not url.startswith("postgresql") or "connect_timeout=" in url:
        return {}
    if os.environ.get("PGCONNECT_TIMEOUT"):
        return {}
    return {"connect_timeout": CONNECT_TIMEOUT_S}


def _names_no_file(url: str) -> bool:
    try:
        return sqlite_path(url) is None
    except (SAArgumentError, ValueError):
        return False  # (malformed: `make_engine` says what is wrong with it)


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names (`sqlite:///PATH`, or the URI form
    `sqlite:///file:PATH?...&uri=true`), or None for an in-memory or non-SQLite URL."""
    from urllib.parse import unquote, urlsplit

    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() == "sqlite" and parsed.host:
        # `sqlite://tmp/x.db`: a SQLite URL has no host part; SQLAlchemy drops it and
        # opens the rest (`x.db`) relative to the working folder
        raise CatalogError(
            f"catalog URL {safe_url(url)} names a host ({parsed.host!r}), but a SQLite URL "
            f"has no host: a file is sqlite:///relative/path or sqlite:////absolute/path "
            f"(sqlite:////{parsed.host}/{database or ''} for /{parsed.host}/{database or ''})"
        )
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if parsed.query.get("uri") == "true":
        if not database.startswith("file:") or parsed.query.get("mode") == "memory":
            return None
        path = unquote(urlsplit(database).path)
        return Path(path) if path and path != ":memory:" else None
    return Path(database)


def _make_folder(db_path: Path, url: str) -> None:
    """Create the catalog file's folder; an OS refusal is bad input naming the path, not a
    traceback (a parent that is a file, no permission, a read-only disk)."""
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if isinstance(exc, FileExistsError):
            reason = f"{exc.filename or db_path.parent} is a file, not a folder"
        elif isinstance(exc, NotADirectoryError):
            reason = "part of that path is a file, not a folder"
        else:
            reason = exc.strerror or str(exc)
        raise CatalogError(
            f"catalog {safe_url(url)}: cannot create its folder {db_path.parent}: {reason}"
        ) from exc


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


_BYTE_ORDER = ("C", "POSIX", "C.UTF-8", "C.utf8", "ucs_basic", "pg_c_utf8")
"""PostgreSQL collations that order text as its UTF-8 bytes (code point order)."""

BYTE_ORDER_INDEX = "ix_objects_root_key_bytes"


def sorts_as_bytes(conn: Connection) -> bool:
    """Whether the database orders text as its bytes, as govern needs keys ordered (folder
    ranges, listings): SQLite does; PostgreSQL does under a C collation only, and many
    databases are made with a language's (`en_US.UTF-8`, ICU)."""
    if conn.dialect.name != "postgresql":
        return True
    # (as JSON: `datlocprovider` and `datlocale` exist on newer servers only)
    found = conn.exec_driver_sql(
        "SELECT to_jsonb(d) FROM pg_database d WHERE datname = current_database()"
    ).scalar()
    db = found if isinstance(found, dict) else {}
    provider = db.get("datlocprovider", "c")  # c: libc, b: builtin, i: ICU
    name = db.get("datlocale") if provider == "b" else db.get("datcollate")
    return provider in ("c", "b") and name in _BYTE_ORDER


def byte_order_index(conn: Connection) -> None:
    """On a PostgreSQL database that does not sort text as bytes, an index of objects by
    root and key in byte order (`COLLATE "C"`): the queries that need byte order (the
    objects under a folder, at apply; a root's objects in key order, at plan) read every
    row of the table without it (86 ms a folder on 200,000 objects, so an apply of a
    thousand strips took minutes). Elsewhere the plain `(root_id, key)` index serves."""
    if not sorts_as_bytes(conn):
        conn.exec_driver_sql(
            f'CREATE INDEX IF NOT EXISTS {BYTE_ORDER_INDEX} ON objects (root_id, key COLLATE "C")'
        )


def create_schema(engine: Engine) -> None:
    """Create every table of an empty catalog at once and record it as SCHEMA_REVISION.

    Alembic's advice for a database built from scratch ("create_all, then stamp head"):
    replaying every migration costs a new catalog about half a second. A test checks
    that the migrations, replayed, build exactly this schema.
    """
    from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table
    from sqlmodel import SQLModel

    from governance.catalog.schema import TABLES

    version = Table(
        "alembic_version",
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    with engine.begin() as conn:
        SQLModel.metadata.create_all(conn, tables=list(TABLES))
        byte_order_index(conn)
        version.create(conn)
        conn.execute(version.insert().values(version_num=SCHEMA_REVISION))


def _path_hint(url: str) -> str:
    """For a catalog given as a plain path (`/data/catalog.db`, `catalog.db`), the URL
    that was probably meant."""
    if "://" in url or not url.strip() or url.strip() == ":memory:":
        return ""
    return f" (for this file: sqlite:///{os.path.abspath(os.path.expanduser(url.strip()))})"


def open_engine(
    url: str, migrate: bool = True, create: bool = True, read_only: bool = False
) -> Engine:
    """Create the engine and bring the schema to the newest version.

    With `create=False` a SQLite file that does not exist is refused rather than created:
    commands that only read the catalog must not turn a mistyped `--catalog` into a new,
    empty catalog that then answers "nothing there" (or "audit chain OK").
    A corrupt or foreign file is reported as a CatalogError naming the URL, with no change.
    A SQLite URL that names no file (`sqlite:///`, `sqlite:///$UNSET`, `:memory:`) is
    refused: an in-memory catalog would lose every plan and audit event at exit.

    `read_only=True` is for commands that only read (and implies `create=False`): a SQLite
    catalog this user cannot write (the file or its folder belongs to another user, a
    read-only mount) is then opened read-only instead of refused (`open_read_only`),
    never migrated. One this user can write opens, and upgrades, as for any command.
    Other databases are opened as they always are.
    """
    if url.startswith("sqlite") and _names_no_file(url):
        raise CatalogError(
            f"catalog URL {safe_url(url)} names no file (an in-memory catalog would keep "
            f"nothing past this command): give sqlite:///PATH"
        )
    if read_only:
        create = False
    if not create:
        _require_existing(url)
    engine = make_engine(url)
    try:
        _check_schema(engine, url, create=create, migrate=migrate)
    except CatalogError:
        engine.dispose()
        raise
    except (DatabaseError, OperationalError, sqlite3.DatabaseError) as exc:
        engine.dispose()
        if read_only and _cannot_write(exc) and _names_a_file(url):
            return open_read_only(url)
        raise CatalogError(f"catalog {safe_url(url)} cannot be opened: {_one_line(exc)}") from exc
    return engine


def _check_schema(
    engine: Engine, url: str, *, create: bool, migrate: bool, writable: bool = True
) -> None:
    """Refuse what is no govern catalog; bring the schema to SCHEMA_REVISION where it may be
    written (`migrate`, `writable`), else refuse one at another revision, unchanged.

    Creating or upgrading happens under `_schema_lock`, and what the catalog holds is read
    again under it: two commands opening a new catalog (or one a release behind) at once,
    a nightly job and a person, would otherwise both create or migrate it, and one fail
    ("table roots already exists", a column that exists already)."""
    if migrate and writable and _new_sqlite_file(url):
        # The first connection to a new file makes it WAL, which takes a write lock that a
        # creator holds: the revision is read under the lock too.
        with _schema_lock(engine, url):
            current = current_revision(engine)
            _settle_schema(engine, url, current, create=create, migrate=migrate, writable=True)
        return
    current = current_revision(engine)
    if current == SCHEMA_REVISION or not (migrate and writable):
        _settle_schema(engine, url, current, create=create, migrate=migrate, writable=writable)
        return
    with _schema_lock(engine, url):
        current = current_revision(engine)
        _settle_schema(engine, url, current, create=create, migrate=migrate, writable=writable)


def _settle_schema(
    engine: Engine, url: str, current: str | None, *, create: bool, migrate: bool, writable: bool
) -> None:
    """`_check_schema` once the catalog's revision is read (`current`)."""
    if current is None and inspect(engine).get_table_names():
        raise CatalogError(
            f"catalog {safe_url(url)} holds tables but no govern schema version; "
            "point --catalog at a govern catalog or an empty database"
        )
    if current is None and not create:
        raise _empty_catalog(url)
    if current == SCHEMA_REVISION:
        _require_every_table(engine, url)
        return
    if not migrate:
        return
    if writable and current is None:
        create_schema(engine)
        return
    _require_known_revision(engine, url, current)
    if writable:
        upgrade(engine)
        return
    raise CatalogError(
        f"catalog {safe_url(url)} is at schema {current}, older than this govern's "
        f"{SCHEMA_REVISION}, and this user can only read it: run govern once as a user who "
        "can write the catalog file and its folder (any command upgrades it in place); "
        "nothing was changed"
    )


def _require_every_table(engine: Engine, url: str) -> None:
    """Refuse a catalog at this schema that lacks one of its tables (dropped by hand, a
    restore of part of a dump): commands that never touch that table went on writing to
    it (a scan), and `audit --verify` said OK. One look at the table names."""
    from governance.catalog.schema import TABLES

    missing = sorted({t.name for t in TABLES} - set(inspect(engine).get_table_names()))
    if missing:
        raise CatalogError(
            f"catalog {safe_url(url)} is at schema {SCHEMA_REVISION} but lacks the table"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}: it is damaged; restore "
            "it from a backup"
        )


def _new_sqlite_file(url: str) -> bool:
    """Whether `url` names a SQLite file that is not there yet, or empty."""
    path = sqlite_path(url) if url.startswith("sqlite") else None
    try:
        return path is not None and path.stat().st_size == 0
    except FileNotFoundError:
        return True


_SCHEMA_LOCK_KEY = 0x676F7665726E  # "govern": the advisory lock of schema changes


@contextlib.contextmanager
def _schema_lock(engine: Engine, url: str) -> Iterator[None]:
    """Held while a catalog's schema is created or upgraded, across processes: on
    PostgreSQL a session advisory lock; on a SQLite file an exclusive `flock` of the file
    itself (SQLite's own locks are POSIX record locks, which `flock` does not touch)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _SCHEMA_LOCK_KEY})
                conn.commit()
        return
    path = sqlite_path(url) if url.startswith("sqlite") else None
    try:
        import fcntl
    except ImportError:  # (not on Windows)
        fcntl = None  # type: ignore[assignment]
    if path is None or fcntl is None:
        yield
        return

    # A URI opened `mode=ro` must not be created by its lock either (SQLite would not).
    creating = 0 if make_url(url).query.get("mode") == "ro" else os.O_CREAT
    try:
        fd = os.open(path, os.O_RDWR | creating, 0o644)
    except FileNotFoundError:
        yield  # (nothing to lock: opening it fails, with SQLite's own words)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


# ----------------------------------------------------------------------------- read-only


_SQLITE_READONLY = 8
_SQLITE_CANTOPEN = 14


def _sqlite_code(exc: BaseException) -> int | None:
    """SQLite's extended result code behind a driver error (None for other databases)."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def _cannot_write(exc: BaseException) -> bool:
    """Whether SQLite failed for want of write access: to the file, or to its folder for
    the -wal and -shm files (a read-only mount, or a chattr +i, says "cannot open")."""
    code = _sqlite_code(exc)
    return code is not None and code & 0xFF in (_SQLITE_READONLY, _SQLITE_CANTOPEN)


def _names_a_file(url: str) -> bool:
    try:
        return url.startswith("sqlite") and sqlite_path(url) is not None
    except (SAArgumentError, ValueError):
        return False


def open_read_only(url: str) -> Engine:
    """The SQLite catalog at `url` opened read-only, for a user who may read it but not
    write it (or its folder); never migrated, and any write is refused with a message.

    First `mode=ro`: SQLite still sees the changes a running writer has in the -wal file,
    and reads consistent snapshots, as with write access. That needs the -wal and -shm
    files to exist or to be creatable; when neither holds (no writer is connected: the
    last one folded the -wal file in and removed both) the file is opened `immutable=1`,
    SQLite's way for read-only media: no locks, no -wal file. Immutable is right only
    while nobody writes the file, so it is used only when no -wal file holds changes, and
    the file's size and modification time are checked again on any error and when the
    command ends (`check_unchanged`): a writer that started meanwhile makes the command
    fail, "run it again", rather than print what may be torn reads.
    """
    path = sqlite_path(url)
    assert path is not None
    engine = _read_only_engine(url, path, immutable=False)
    try:
        _check_schema(engine, url, create=False, migrate=True, writable=False)
        _log_read_only(url, "mode=ro")
        return engine
    except CatalogError:
        engine.dispose()
        raise
    except (DatabaseError, OperationalError, sqlite3.DatabaseError) as exc:
        engine.dispose()
        if not _cannot_write(exc):
            raise CatalogError(
                f"catalog {safe_url(url)} cannot be opened: {_one_line(exc)}"
            ) from exc
    if not os.access(path, os.R_OK):
        raise CatalogError(
            f"catalog {safe_url(url)} cannot be read: permission denied (the catalog file "
            "must be readable; commands that only read need no more)"
        )
    snapshot = _FileState.of(path)
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise CatalogError(
            f"catalog {safe_url(url)} cannot be read consistently: its -wal file ({wal}) "
            "holds changes not yet in the catalog file, which SQLite reads only with a -shm "
            "file that this user cannot create (the folder cannot be written); try again "
            "once the writer is done (it folds them in), or ask for write access to the folder"
        )
    engine = _read_only_engine(url, path, immutable=True)
    _IMMUTABLE[engine] = _Guard(url, path, snapshot)
    try:
        _check_schema(engine, url, create=False, migrate=True, writable=False)
    except CatalogError:
        engine.dispose()
        raise
    except (DatabaseError, OperationalError, sqlite3.DatabaseError) as exc:
        engine.dispose()
        raise CatalogError(f"catalog {safe_url(url)} cannot be opened: {_one_line(exc)}") from exc
    _log_read_only(url, "immutable=1")
    return engine


def is_read_only(engine: Engine) -> bool:
    """Whether `engine` is a SQLite catalog opened read-only (`open_read_only`): nothing
    derived can be stored in it."""
    return engine.dialect.name == "sqlite" and engine.url.query.get("mode") == "ro"


def may_not_write(exc: BaseException) -> bool:
    """Whether a database error refuses a write to a catalog this user may read: a
    PostgreSQL role's "insufficient privilege" (an approver's, an analyst's), or SQLite's
    read-only database (a catalog on a read-only mount that opened for writing, as one does
    while its writer holds the -wal and -shm files open, and refuses the first write)."""
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) == _INSUFFICIENT_PRIVILEGE:
        return True
    code = _sqlite_code(exc)
    return code is not None and code & 0xFF == _SQLITE_READONLY


def _read_only_engine(url: str, path: Path, *, immutable: bool) -> Engine:
    """An engine on the same file through SQLite's URI form, with `mode=ro` (and
    `immutable=1`); what else a URI-form URL asked for (`vfs`, `cache`) is kept."""
    from urllib.parse import quote

    from sqlalchemy.engine import URL, make_url

    given = make_url(url)
    if given.query.get("uri") == "true":
        database = given.database or ""
        query = {k: v for k, v in given.query.items() if isinstance(v, str)}
    else:
        database, query = "file:" + quote(str(path), safe="/"), {}
    query.update(uri="true", mode="ro")
    if immutable:
        query["immutable"] = "1"
    timeout = busy_timeout_s()
    engine = create_engine(
        URL.create("sqlite", database=database, query=query), connect_args={"timeout": timeout}
    )
    event.listen(engine, "connect", partial(_sqlite_read_pragmas, busy_ms=_millis(timeout)))
    event.listen(engine, "handle_error", _read_only_error(url))
    return engine


def _sqlite_read_pragmas(dbapi_conn: Any, _record: Any, *, busy_ms: int) -> None:
    """`_sqlite_pragmas` less what would write the file (the journal mode, the page size)."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={busy_ms}")
    cur.execute("PRAGMA temp_store=FILE")
    cur.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    cur.close()


def _read_only_error(url: str) -> Callable[[Any], None]:
    """A handler for errors on a read-only engine: a write attempt is said in words (no
    command that only reads writes: `ls` and `explain` keep what they derive in memory
    there; a bug would), and any error once the immutable file changed is that change."""

    def handle(context: Any) -> None:
        guard = _IMMUTABLE.get(context.engine) if context.engine is not None else None
        if guard is not None:
            guard.check()
        if _sqlite_code(context.original_exception) == _SQLITE_READONLY:
            raise CatalogError(
                f"catalog {safe_url(url)} is read-only for this user (its file or folder "
                "cannot be written), and this command must first store what it derives "
                "from the catalog's latest scan (runs, artifacts, metadata read from "
                "storage): run it once as a user who can write the catalog; until the next "
                "scan it then works here too"
            ) from context.original_exception

    return handle


def _log_read_only(url: str, how: str) -> None:
    logging.getLogger(__name__).info(
        "catalog %s cannot be written here (its file or folder): opened read-only (%s)",
        safe_url(url),
        how,
    )


@dataclass(frozen=True)
class _FileState:
    """What changes when a file is written or replaced."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> _FileState:
        st = path.stat()
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class _Guard:
    url: str
    path: Path
    opened: _FileState

    def check(self) -> None:
        try:
            now: _FileState | None = _FileState.of(self.path)
        except OSError:
            now = None
        if now != self.opened:
            raise CatalogError(
                f"catalog {safe_url(self.url)} was written while this command read it (it "
                "was opened immutable, as its folder cannot be written, so SQLite could not "
                "see the writer): what it read may be inconsistent; run the command again"
            )


_IMMUTABLE: weakref.WeakKeyDictionary[Engine, _Guard] = weakref.WeakKeyDictionary()
"""Engines opened `immutable=1`, and the state of their file when opened."""


def check_unchanged(engine: Engine) -> None:
    """For an engine opened `immutable=1`: CatalogError if its file changed since it was
    opened (the CLI calls this when a command ends); a no-op for any other engine."""
    guard = _IMMUTABLE.get(engine)
    if guard is not None:
        guard.check()


def _require_existing(url: str) -> None:
    """Refuse a SQLite catalog file that is not there (other databases cannot be told apart
    from an empty one before connecting, and are never created by opening them)."""
    try:
        path = sqlite_path(url)
    except (SAArgumentError, ValueError):
        return  # make_engine reports the malformed URL
    if path is not None:
        _refuse_folder(path, url)
    if path is not None and not path.is_file():
        where = (
            ""
            if path.is_absolute()
            else (
                f" (the path after sqlite:/// is relative: {path.resolve()}; an absolute path "
                "takes four slashes, sqlite:////abs/path)"
            )
        )
        raise CatalogError(
            f"catalog {safe_url(url)} does not exist{where}; check --catalog or "
            "GOVERN_CATALOG_URL, or run `govern scan` to create it"
        )
    if path is not None and path.stat().st_size == 0:  # refused before a connection writes
        raise _empty_catalog(url)


def _refuse_folder(path: Path, url: str) -> None:
    """A SQLite URL naming a folder: say so (SQLite says only "unable to open")."""
    if path.is_dir():
        raise CatalogError(
            f"catalog {safe_url(url)} is a folder, not a catalog file; name a file in it "
            f"(sqlite:///{path / 'catalog.db'}) with --catalog or GOVERN_CATALOG_URL"
        )


def _empty_catalog(url: str) -> CatalogError:
    """A read-only command's refusal of a catalog with nothing in it (a `touch`ed file, an
    empty database): it is no catalog with no plans, nor an audit chain that verifies."""
    return CatalogError(
        f"catalog {safe_url(url)} is empty, not a govern catalog yet; check --catalog or "
        "GOVERN_CATALOG_URL, or run `govern scan` to fill it"
    )


def _require_known_revision(engine: Engine, url: str, current: str | None) -> None:
    """A catalog written by a newer govern is at a revision this code has no migration
    for: say so, instead of Alembic's "Can't locate revision" traceback."""
    from alembic.script import ScriptDirectory

    known = {
        s.revision for s in ScriptDirectory.from_config(_alembic_config(engine)).walk_revisions()
    }
    if current not in known:
        raise CatalogError(
            f"catalog {safe_url(url)} is at schema {current}, which this govern "
            f"(newest {SCHEMA_REVISION}) does not know: upgrade govern"
        )


def catalog_failure(exc: BaseException, url: str) -> CatalogError | None:
    """A CatalogError for a database error that says the catalog itself is unusable
    (damaged, locked, unreachable, a table missing), or None for anything else.

    The CLI calls this for errors raised after the catalog opened. Constraint violations,
    bad SQL parameters and the like are bugs in govern, not bad input: they stay
    tracebacks. SQLite reports its corruption as a bare DatabaseError and a missing table,
    a lock or a full disk as OperationalError; PostgreSQL a missing table or column, or a
    missing privilege, as a ProgrammingError with its SQLSTATE. (SQLite also reports bad
    SQL as OperationalError, so a bug of that kind reads as a catalog error: `-v` shows its
    traceback.)
    """
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    if isinstance(exc, DBAPIError):
        orig: BaseException | None = exc.orig
    else:  # a raw driver error, from code that uses the DB-API cursor directly
        orig = None if isinstance(exc, SQLAlchemyError) else exc
    if orig is None or not _catalog_state_error(orig):
        return None
    if _connection_lost(orig):
        return CatalogLostError(
            f"catalog {safe_url(url)} failed: {_one_line(orig)} (the connection to the "
            "catalog was lost; run the command again)"
        )
    if url.startswith("sqlite") and "database is locked" in str(orig):
        return CatalogError(
            f"catalog {safe_url(url)} failed: {_one_line(orig)} (another process held "
            f"its write lock for over {busy_timeout_s():g} s; a SQLite catalog has one "
            f"writer at a time: run such jobs one after another, wait longer with "
            f"{BUSY_TIMEOUT_ENV}=SECONDS, or share a PostgreSQL catalog)"
        )
    return CatalogError(f"catalog {safe_url(url)} failed: {_one_line(orig)}")


_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})
"""PostgreSQL: the server shut down or terminated the session (class 08, connection
exceptions, counts too)."""


def _connection_lost(orig: BaseException) -> bool:
    """Whether a driver error says the catalog's server went away mid-command (not that
    the catalog is bad): an admin shutdown or a terminated session, a connection
    exception, or psycopg's own "the connection is lost"."""
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and (state in _LOST_SQLSTATES or state.startswith("08")):
        return True
    message = str(orig)
    return any(
        words in message
        for words in (
            "the connection is lost",
            "server closed the connection unexpectedly",
            "terminating connection due to administrator command",
            "consuming input failed",
            # after the catalog opened, a connection that cannot be made again is lost
            "connection failed",
            "Connection refused",
        )
    )


_INSUFFICIENT_PRIVILEGE = "42501"
_CATALOG_SQLSTATES = frozenset({"42P01", "42703", _INSUFFICIENT_PRIVILEGE, "3F000"})
"""PostgreSQL: undefined table, undefined column, insufficient privilege, invalid schema."""


def _catalog_state_error(orig: BaseException) -> bool:
    """Whether a DB-API error describes the database rather than the statement sent."""
    driver = sys.modules.get(type(orig).__module__.split(".")[0])
    if driver is None:
        return False
    operational = getattr(driver, "OperationalError", None)
    database = getattr(driver, "DatabaseError", None)
    if operational is not None and isinstance(orig, operational):
        return True
    if database is not None and type(orig) is database:
        return True
    return getattr(orig, "sqlstate", None) in _CATALOG_SQLSTATES


def _one_line(exc: BaseException) -> str:
    """The driver's own message, first line only (SQLAlchemy appends the SQL and a link),
    with what to do where the driver's words do not say it."""
    reason = _BACKGROUND.sub("", str(getattr(exc, "orig", None) or exc)).strip()
    line = reason.splitlines()[0] if reason else type(exc).__name__
    hint = next((h for found, h in _HINTS if found in line), None)
    return f"{line} ({hint})" if hint else line


_HINTS = (
    (
        "readonly database",
        "the catalog file and its folder must be writable to change it: SQLite keeps its "
        "-wal and -shm files beside it; commands that only read work without",
    ),
    (
        "unable to open database file",
        "the catalog's folder must exist and be writable",
    ),
)
"""SQLite messages that name a symptom, and the cause a reader can act on."""


_BACKGROUND = re.compile(r"\s*\(Background on this (?:error|warning) at: [^)]*\)")


def safe_url(url: str) -> str:
    """The URL with any password hidden: every catalog URL a user sees goes through this."""

    netloc = url.partition("://")[2].partition("/")[0]
    if netloc.count("@") > 1:  # an unescaped `@` in the password: parsers split it wrongly
        return re.sub(r"(://[^:/@]*:)[^/]*@", r"\1***@", url)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not parseable: still hide whatever sits between `user:` and `@`
        return re.sub(r"(://[^:/@]*:).*@", r"\1***@", url)
