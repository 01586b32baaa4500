"""Opening a catalog for a command that only reads (`open_engine(..., read_only=True)`).

A catalog this process can write opens as it always has; one it cannot write (here its
folder is made unwritable for real: `chattr +i` as root, who ignores permission bits, or
`chmod 0555` as anyone else) opens read-only, `immutable=1` when SQLite cannot create
the -wal and -shm files; then a write is refused in words, and a change made to the file
meanwhile is caught. The CLI side (other users, read-only mounts) is in
tests/integration/test_cli_readonly_catalog.py.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from governance.catalog.engine import (
    SCHEMA_REVISION,
    check_unchanged,
    current_revision,
    open_engine,
)
from governance.cli.context import READ_ONLY_COMMANDS, AppContext
from governance.cli.main import COMMANDS, CREATES_CATALOG
from governance.errors import CatalogError
from governance.settings import build_settings
from tests.catalogs import catalog_url  # noqa: F401


def _lock(folder: Path) -> None:
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return
    done = (
        subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True, check=False)
        if shutil.which("chattr")
        else None
    )
    if done is None or done.returncode != 0:
        pytest.skip(f"cannot make a folder unwritable for root here (chattr +i): {done}")


def _unlock(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True, check=False)
    folder.chmod(0o755)


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Path]:
    """A govern catalog (at the newest schema, one root) alone in a folder, which the
    test may lock (unlocked afterwards)."""
    folder = tmp_path / "shared"
    path = folder / "catalog.db"
    engine = open_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO roots (url, created_at) VALUES ('file:///data/', '2026-01-01')")
        )
    engine.dispose()
    assert sorted(p.name for p in folder.iterdir()) == ["catalog.db"]
    yield path
    _unlock(folder)


def test_a_catalog_this_user_can_write_opens_as_before(catalog: Path) -> None:
    engine = open_engine(f"sqlite:///{catalog}", read_only=True)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    with engine.begin() as conn:  # (ls runs and explain store what they derive)
        conn.execute(text("UPDATE roots SET object_lock = 1"))
    engine.dispose()


def test_an_unwritable_catalog_opens_read_only_and_refuses_a_write_in_words(
    catalog: Path,
) -> None:
    url = f"sqlite:///{catalog}"
    before = catalog.read_bytes()
    _lock(catalog.parent)
    engine = open_engine(url, read_only=True)
    assert current_revision(engine) == SCHEMA_REVISION
    with engine.connect() as conn:
        assert conn.execute(text("SELECT url FROM roots")).scalar() == "file:///data/"
    with pytest.raises(CatalogError) as caught, engine.begin() as conn:
        conn.execute(text("UPDATE roots SET object_lock = 1"))
    assert str(caught.value).startswith(f"catalog {url} is read-only for this user")
    assert "run it once as a user who can write the catalog" in str(caught.value)
    check_unchanged(engine)
    engine.dispose()
    with pytest.raises(CatalogError, match=r"cannot be opened: .*writable"):
        open_engine(url, create=False)  # a command that writes: refused as before
    assert sorted(p.name for p in catalog.parent.iterdir()) == ["catalog.db"]
    assert catalog.read_bytes() == before


def test_a_file_written_while_read_immutable_fails_the_command(catalog: Path) -> None:
    """Immutable means SQLite trusts that nobody writes the file: when the file changed
    since it was opened, the command fails ("run it again") rather than stand by reads
    that may be torn; the CLI checks when a command ends (AppContext.close)."""
    url = f"sqlite:///{catalog}"
    _lock(catalog.parent)  # (the file itself stays writable: as the owner's job)
    app = AppContext(build_settings(url, None), create_catalog=False, read_only=True)
    with app.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM roots")).scalar() == 1
    check_unchanged(app.engine)
    stat = catalog.stat()
    os.utime(catalog, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(CatalogError, match="was written while this command read it"):
        check_unchanged(app.engine)
    with pytest.raises(CatalogError, match="run the command again"), app.engine.connect() as c:
        c.execute(text("SELECT * FROM no_such_table"))  # any error is that change
    with pytest.raises(SystemExit) as ended:
        app.close()
    assert ended.value.code == 2


def test_changes_a_reader_cannot_see_are_refused_not_skipped(catalog: Path) -> None:
    """A commit still only in the -wal file (its writer died before folding it in), no
    -shm file, and a folder no one may create one in: read `immutable=1`, the catalog
    would look as it was before that commit."""
    folder = catalog.parent
    writer = sqlite3.connect(catalog)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE roots SET url = 'file:///moved/'")
    writer.commit()
    shutil.copyfile(catalog, folder / "main")  # (as they are while the writer is open)
    shutil.copyfile(f"{catalog}-wal", folder / "wal")
    writer.close()  # (folds the -wal file in and removes both)
    os.replace(folder / "main", catalog)
    os.replace(folder / "wal", f"{catalog}-wal")
    alone = sqlite3.connect(f"file:{catalog}?mode=ro&immutable=1", uri=True)
    assert alone.execute("SELECT url FROM roots").fetchone() == ("file:///data/",)
    alone.close()
    before = catalog.read_bytes()
    _lock(folder)
    with pytest.raises(CatalogError, match="cannot be read consistently: its -wal file"):
        open_engine(f"sqlite:///{catalog}", read_only=True)
    assert sorted(p.name for p in folder.iterdir()) == ["catalog.db", "catalog.db-wal"]
    assert catalog.read_bytes() == before


def test_an_older_catalog_is_not_migrated_when_it_cannot_be_written(catalog: Path) -> None:
    url = f"sqlite:///{catalog}"
    with sqlite3.connect(catalog) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0011'")
    conn.close()
    before = catalog.read_bytes()
    _lock(catalog.parent)
    with pytest.raises(CatalogError) as caught:
        open_engine(url, read_only=True)
    assert str(caught.value) == (
        f"catalog {url} is at schema 0011, older than this govern's {SCHEMA_REVISION}, and "
        "this user can only read it: run govern once as a user who can write the catalog "
        "file and its folder (any command upgrades it in place); nothing was changed"
    )
    assert catalog.read_bytes() == before


def test_read_only_changes_nothing_for_other_databases(catalog_url: str) -> None:  # noqa: F811
    """PostgreSQL (and a writable SQLite file) open exactly as for any command."""
    open_engine(catalog_url).dispose()
    engine = open_engine(catalog_url, read_only=True)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO roots (url, created_at) VALUES ('s3://b/', '2026-01-01')"))
    check_unchanged(engine)  # a no-op: not opened immutable
    engine.dispose()
    again = open_engine(catalog_url)  # the write went through, as for any command
    with again.connect() as conn:
        urls = conn.execute(text("SELECT url FROM roots")).scalars().all()
    again.dispose()
    assert "s3://b/" in urls


def test_which_commands_only_read_is_decided_in_one_place() -> None:
    assert set(COMMANDS) >= READ_ONLY_COMMANDS
    assert not READ_ONLY_COMMANDS & CREATES_CATALOG
    assert {"plans", "show", "ls", "audit", "explain"} == READ_ONLY_COMMANDS


def test_a_missing_catalog_named_mode_ro_is_refused_and_not_created(tmp_path: Path) -> None:
    """`sqlite:///file:x.db?mode=ro&uri=true` for a file that is not there: SQLite does
    not create it, and neither may the schema lock's own open of the file (an empty
    `x.db` was left behind by the failed command)."""
    from click.testing import CliRunner

    from governance.cli.main import cli

    missing = tmp_path / "x.db"
    (tmp_path / "data").mkdir()
    url = f"sqlite:///file:{missing}?mode=ro&uri=true"
    result = CliRunner().invoke(cli, ["--catalog", url, "scan", "--root", str(tmp_path / "data")])
    assert result.exit_code == 2, result.output
    assert "cannot be opened" in result.stderr
    assert not missing.exists()
