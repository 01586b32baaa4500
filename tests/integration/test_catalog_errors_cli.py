"""A catalog that is missing, damaged, too new or unreachable is bad input through the CLI.

Each case must end in one `error: catalog ...` line naming the catalog (password hidden)
and what is wrong, exit 2, no traceback and no change; a genuine bug keeps its traceback.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy.exc
from click.testing import CliRunner, Result

from governance.catalog.engine import SCHEMA_REVISION, catalog_failure, open_engine
from governance.cli.main import cli

READ_ONLY = [
    ("plans",),
    ("show", "p-1"),
    ("ls", "objects"),
    ("ls", "runs"),
    ("ls", "artifacts"),
    ("audit",),
    ("audit", "--verify"),
    ("approve", "p-1"),
    ("reject", "p-1", "--comment", "no"),
    ("apply", "p-1"),
    ("restore", "p-1"),
]


def _run(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


def _bad_input(result: Result, *fragments: str) -> None:
    """Exit 2 with one error line holding every fragment, and no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: catalog"), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in result.output


@pytest.fixture
def catalog(tmp_path: Path) -> tuple[str, Path]:
    """(URL, path) of a govern catalog holding one scanned root."""
    storage = tmp_path / "storage"
    (storage / "runs" / "r1").mkdir(parents=True)
    (storage / "runs" / "r1" / "log.txt").write_text("x")
    path = tmp_path / "catalog.db"
    url = f"sqlite:///{path}"
    assert _run(url, "scan", "--root", str(storage)).exit_code == 0
    return url, path


def _sql(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_a_missing_catalog_is_refused_and_not_created(tmp_path: Path, args: tuple[str]) -> None:
    path = tmp_path / "typo" / "catalog.db"
    _bad_input(_run(f"sqlite:///{path}", *args), str(path), "does not exist")
    assert not path.exists()
    assert not path.parent.exists()


def test_explain_refuses_a_missing_catalog(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        f"version: 1\nstorage:\n  - name: s\n    url: {tmp_path}\n"
        "rules:\n  - name: r\n    select: {kind: log}\n    expire: {after: 2d}\n"
    )
    path = tmp_path / "catalog.db"
    result = _run(f"sqlite:///{path}", "explain", f"{tmp_path}/x", "--policy", str(policy))
    _bad_input(result, "does not exist")
    assert not path.exists()


def test_commands_that_fill_a_catalog_still_create_it(tmp_path: Path) -> None:
    path = tmp_path / "new" / "catalog.db"
    (tmp_path / "storage").mkdir()
    assert _run(f"sqlite:///{path}", "scan", "--root", str(tmp_path / "storage")).exit_code == 0
    assert path.is_file()
    assert _run(f"sqlite:///{path}", "audit", "--verify").exit_code == 0


def test_a_dropped_table_is_a_catalog_error_not_a_traceback(catalog: tuple[str, Path]) -> None:
    url, path = catalog
    _sql(path, "DROP TABLE plans")
    _bad_input(_run(url, "plans"), url, "lacks the table plans: it is damaged")


def test_a_catalog_damaged_in_the_middle_is_a_catalog_error(catalog: tuple[str, Path]) -> None:
    # The schema and version pages stay whole, so the catalog opens; the pages of the
    # objects table and its indexes are garbage, so the command fails part-way.
    url, path = catalog
    data = _garble_objects(path)
    result = _run(url, "ls", "objects")
    _bad_input(result, url, "failed: database disk image is malformed")
    assert path.read_bytes() == data


def test_a_scan_failed_by_a_damaged_catalog_records_the_databases_words(
    catalog: tuple[str, Path],
) -> None:
    """The scan's row (made when it began) is finished as failed, saying what the
    database said: not SQLAlchemy's text with the statement and a web link in it."""
    url, path = catalog
    _garble_objects(path)
    storage = path.with_name("storage")
    _bad_input(_run(url, "scan", "--root", str(storage)), url, "database disk image is malformed")
    with sqlite3.connect(path) as db:
        status, error = db.execute("SELECT status, error FROM scans ORDER BY id DESC").fetchone()
    assert (status, error) == ("failed", "catalog failed: database disk image is malformed")


def _garble_objects(path: Path) -> bytes:
    """The catalog with the pages of its objects table and their indexes garbage (the
    schema and version pages whole: it opens); what the file now holds."""
    conn = sqlite3.connect(path)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        n for (n,) in conn.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = 'objects'")
    ]
    conn.close()
    data = bytearray(path.read_bytes())
    for number in roots:  # pages count from 1
        data[(number - 1) * page : number * page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    return bytes(data)


def test_verbose_shows_the_traceback_of_a_catalog_error(catalog: tuple[str, Path]) -> None:
    url, path = catalog
    _garble_objects(path)
    result = CliRunner().invoke(cli, ["--catalog", url, "-v", "ls", "objects"])
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: catalog")


def test_verbose_shows_the_traceback_of_a_catalog_that_cannot_be_opened(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"not a database, " * 64)
    result = CliRunner().invoke(cli, ["--catalog", f"sqlite:///{path}", "-v", "plans"])
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert "file is not a database" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: catalog")
    quiet = CliRunner().invoke(cli, ["--catalog", f"sqlite:///{path}", "plans"])
    assert "Traceback" not in quiet.stderr


def test_a_catalog_from_a_newer_govern_says_upgrade(catalog: tuple[str, Path]) -> None:
    url, path = catalog
    _sql(path, "UPDATE alembic_version SET version_num = '9999'")
    before = path.read_bytes()
    _bad_input(
        _run(url, "plans"),
        url,
        "is at schema 9999",
        f"(newest {SCHEMA_REVISION})",
        "upgrade govern",
    )
    assert path.read_bytes() == before


def test_a_parent_that_is_a_file_is_a_catalog_error(tmp_path: Path) -> None:
    blocker = tmp_path / "somefile"
    blocker.write_text("not a folder")
    (tmp_path / "storage").mkdir()
    for where in (blocker / "x.db", blocker / "sub" / "x.db"):
        result = _run(f"sqlite:///{where}", "scan", "--root", str(tmp_path / "storage"))
        _bad_input(result, str(where.parent), "is a file, not a folder")
    assert blocker.read_text() == "not a folder"


def test_an_unsupported_scheme_names_the_supported_ones_and_hides_the_password() -> None:
    result = _run("mysql://ana:hunter2@db.example/govern", "plans")
    _bad_input(result, "mysql://ana:***@db.example/govern", "sqlite:///", "postgresql+psycopg://")
    assert "hunter2" not in result.output
    assert "govern[postgres]" not in result.stderr


def test_a_malformed_url_does_not_show_its_password() -> None:
    result = _run("postgresql://ana:hun@ter2@db.example:port/govern", "plans")
    _bad_input(result, "not usable")
    assert "hun" not in result.stderr
    assert "ter2" not in result.stderr


def test_a_bug_that_raises_a_constraint_error_keeps_its_traceback(
    catalog: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not every database error is a bad catalog: a constraint violation is govern's bug.
    url, _ = catalog
    bug = sqlalchemy.exc.IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE failed"))

    def broken(*_: object) -> None:
        raise bug

    monkeypatch.setattr("governance.catalog.plans.list_plans", broken)
    result = _run(url, "plans")
    assert result.exit_code == 1
    assert result.exception is bug


def test_a_catalog_another_process_holds_locked_is_a_catalog_error(
    catalog: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the SQLite catalog's write lock (a scan writing its rows):
    a command that must write waits `GOVERN_SQLITE_BUSY_TIMEOUT` seconds, then says whose
    lock stopped it and what to do, exit 2, having changed nothing."""
    url, path = catalog
    monkeypatch.setenv("GOVERN_SQLITE_BUSY_TIMEOUT", "0.2")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held
    try:
        result = _run(url, "scan", "--root", str(tmp_path / "storage"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    _bad_input(
        result,
        f"catalog {url} failed: database is locked",
        "another process held its write lock for over 0.2 s",
        "GOVERN_SQLITE_BUSY_TIMEOUT=SECONDS",
        "PostgreSQL",
    )
    assert _run(url, "scan", "--root", str(tmp_path / "storage")).exit_code == 0  # usable


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_busy_timeout_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("GOVERN_SQLITE_BUSY_TIMEOUT", value)
    path = tmp_path / "new" / "catalog.db"
    (tmp_path / "storage").mkdir()
    result = _run(f"sqlite:///{path}", "scan", "--root", str(tmp_path / "storage"))
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert result.stderr.strip() == (
        f"error: GOVERN_SQLITE_BUSY_TIMEOUT={value!r}: not a positive number of seconds up "
        "to 604,800 (a week); give one, or unset it for the default (30.0)"
    )
    assert not path.parent.exists()


def test_only_errors_about_the_catalog_itself_are_mapped() -> None:
    url = "postgresql+psycopg://ana:hunter2@db/govern"
    wrapped = sqlalchemy.exc.OperationalError("SELECT", {}, sqlite3.OperationalError("locked"))
    mapped = catalog_failure(wrapped, url)
    assert mapped is not None
    assert mapped.exit_code == 2
    assert str(mapped) == "catalog postgresql+psycopg://ana:***@db/govern failed: locked"
    raw = catalog_failure(sqlite3.DatabaseError("database disk image is malformed"), url)
    assert raw is not None  # from code that uses the DB-API cursor directly
    assert "malformed" in str(raw)
    assert catalog_failure(sqlite3.IntegrityError("UNIQUE failed"), url) is None
    assert catalog_failure(sqlite3.ProgrammingError("bindings"), url) is None
    assert catalog_failure(sqlalchemy.exc.ResourceClosedError("closed"), url) is None
    assert catalog_failure(RuntimeError("bug"), url) is None


def test_open_engine_without_create_leaves_an_existing_catalog_usable(
    catalog: tuple[str, Path],
) -> None:
    url, _ = catalog
    engine = open_engine(url, create=False)
    with engine.connect() as conn:  # the scanned root and its object are there, readable
        assert conn.execute(sqlalchemy.text("SELECT count(*) FROM roots")).scalar() == 1
        assert conn.execute(sqlalchemy.text("SELECT count(*) FROM objects")).scalar() == 1
    engine.dispose()
    listed = _run(url, "ls", "objects", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    assert [o["uri"].rsplit("/storage/", 1)[1] for o in json.loads(listed.stdout)] == [
        "runs/r1/log.txt"
    ]


def test_sqlite_uri_arguments_without_uri_true_are_refused(catalog: tuple[str, Path]) -> None:
    """`?mode=ro` without `uri=true` would be ignored by the driver: a catalog meant to be
    opened read-only would be opened writable. Refused, naming what is missing; with
    `uri=true` the same catalog reads."""
    url, path = catalog
    _bad_input(_run(url + "?mode=ro", "plans"), "'mode'", "uri=true")
    read_only = _run(f"sqlite:///file:{path}?mode=ro&uri=true", "plans", "--format", "json")
    assert read_only.exit_code == 0, read_only.stderr
    assert read_only.stdout.strip() == "[]"


@pytest.mark.parametrize("args", [("plans",), ("audit", "--verify")])
def test_an_empty_file_is_not_a_catalog_to_read(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A 0-byte file (a `touch`, a mistyped path that exists) is not a catalog with no
    plans, nor an audit chain that verifies: read-only commands refuse it, unchanged."""
    empty = tmp_path / "empty.db"
    empty.touch()
    _bad_input(_run(f"sqlite:///{empty}", *args), "is empty, not a govern catalog yet")
    assert empty.stat().st_size == 0


def test_a_relative_sqlite_path_that_is_missing_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sqlite:///tmp/x.db` is relative to the current folder (SQLAlchemy's rule), which
    a user meaning /tmp/x.db cannot guess from "does not exist" alone."""
    monkeypatch.chdir(tmp_path)
    result = _run("sqlite:///tmp/cat.db", "plans")
    _bad_input(result, "does not exist", f"{tmp_path}/tmp/cat.db", "four slashes")
    assert not (tmp_path / "tmp").exists()


def test_a_password_with_an_unescaped_at_sign_is_hidden_whole() -> None:
    from governance.catalog.engine import safe_url

    shown = safe_url("postgresql://postgres:s3cr@t@db.example/govtest")
    assert "s3cr" not in shown
    assert "t@db" not in shown
    assert shown.startswith("postgresql://postgres:***@")


def test_a_missing_catalog_named_in_sqlite_uri_form_is_refused_too(tmp_path: Path) -> None:
    """`sqlite:///file:PATH?uri=true` opens read-write-create by default: a read-only
    command must refuse a missing file in that form as in the plain one."""
    missing = tmp_path / "nope.db"
    _bad_input(_run(f"sqlite:///file:{missing}?uri=true", "plans"), "does not exist")
    assert not missing.exists()


@pytest.mark.parametrize("args", [*READ_ONLY[:3], ("scan", "--root", ".")])
def test_a_catalog_url_naming_a_folder_says_so(tmp_path: Path, args: tuple[str, ...]) -> None:
    folder = tmp_path / "catalogs"
    folder.mkdir()
    result = _run(f"sqlite:///{folder}", *args)
    _bad_input(result, f"catalog sqlite:///{folder} is a folder", f"{folder}/catalog.db")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite://", "sqlite:///:memory:"])
def test_a_sqlite_url_naming_no_file_is_refused(tmp_path: Path, url: str) -> None:
    """`--catalog "sqlite:///$UNSET_VAR"` would plan into memory and lose the plan and its
    audit events at exit, while saying it saved them."""
    (tmp_path / "storage").mkdir()
    result = _run(url, "scan", "--root", str(tmp_path / "storage"))
    _bad_input(result, "names no file", "give sqlite:///PATH")


@pytest.mark.parametrize("args", [("plans",), ("scan", "--root", "ROOT")])
def test_a_sqlite_url_with_two_slashes_names_its_host_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """`sqlite://tmp/x/cat.db` (two slashes): SQLAlchemy drops the host and opened
    `x/cat.db` under the current folder, a read said so with the `tmp` gone and a scan
    created that folder before failing. Both now name the host, the same way, and
    nothing is created."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "root").mkdir()
    argv = [str(tmp_path / "root") if a == "ROOT" else a for a in args]
    result = _run("sqlite://tmp/x/cat.db", *argv)
    _bad_input(result, "names a host ('tmp')", "sqlite:////tmp/x/cat.db for /tmp/x/cat.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


@pytest.mark.parametrize("url", ["mysql://u@db/govern", "oracle+oracledb://u@db/govern"])
def test_a_database_govern_does_not_support_is_named_as_such(url: str) -> None:
    """Not "needs the driver 'MySQLdb', which is not installed": installing it would
    not help."""
    result = _run(url, "plans")
    _bad_input(result, "is not a catalog database govern supports", "postgresql+psycopg://")
    assert "driver" not in result.stderr
