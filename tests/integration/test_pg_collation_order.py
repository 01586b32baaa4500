"""On a PostgreSQL catalog whose database sorts text as a language does (an ICU or
`en_US` collation, common on managed PostgreSQL), `govern ls runs` and `ls artifacts`
list in byte order, as on SQLite and as `ls objects` does: the database's own order put
`run_a` before `Run-B`, and a catalog moved between backends listed otherwise."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli
from tests.catalogs import PG_URL
from tests.fixtures import builders as b

pytestmark = pytest.mark.postgres


@pytest.fixture
def icu_catalog() -> Iterator[str]:
    """A catalog URL on a new database with ICU's en-US collation, dropped afterwards."""
    if not PG_URL:
        pytest.skip("GOVERN_TEST_POSTGRES_URL is not set")
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    base = make_url(PG_URL.replace("postgresql://", "postgresql+psycopg://", 1))
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    name = f"govern_icu_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu "
                "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
            )
    except DBAPIError as exc:  # a server without ICU: nothing to test
        admin.dispose()
        pytest.skip(f"cannot create an ICU database here: {exc}")
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


def _json(catalog: str, *args: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, ["--catalog", catalog, *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert isinstance(doc, list)
    return doc


def test_ls_runs_and_artifacts_list_in_byte_order(icu_catalog: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    tree = b.local_writer(root)
    for name in ("run_a", "Run-B", "rzz"):
        b.hf_run(tree, f"exp/runs/{name}", steps=(100,))
    scanned = CliRunner().invoke(cli, ["--catalog", icu_catalog, "-q", "scan", "--root", str(root)])
    assert scanned.exit_code == 0, scanned.output

    runs = [str(r["uri"]) for r in _json(icu_catalog, "ls", "runs")]
    assert len(runs) == 3
    assert runs == sorted(runs, key=lambda u: u.encode())
    assert [u.rstrip("/").rsplit("/", 1)[1] for u in runs] == ["Run-B", "run_a", "rzz"]
    artifacts = [str(a["uri"]) for a in _json(icu_catalog, "ls", "artifacts")]
    assert artifacts == sorted(artifacts, key=lambda u: u.encode())


def _indexes(url: str) -> set[str]:
    from sqlalchemy import inspect

    from governance.catalog.engine import make_engine

    engine = make_engine(url)
    try:
        return {str(i["name"]) for i in inspect(engine).get_indexes("objects")}
    finally:
        engine.dispose()


@pytest.mark.parametrize("how", ["new", "upgraded from 0013"])
def test_folder_ranges_in_byte_order_are_answered_by_an_index(icu_catalog: str, how: str) -> None:
    """Apply reads the objects under each folder it strips, in byte order (`COLLATE
    "C"`): on such a database no index had that order, and every folder read the whole
    table (a thousand strips of a 300,000-object root took 135 s, 3 s elsewhere)."""
    from sqlalchemy import text

    from governance.apply.kept import _byte_ordered_key
    from governance.catalog.engine import BYTE_ORDER_INDEX, open_engine, upgrade

    if how != "new":
        from governance.catalog.engine import make_engine

        old = make_engine(icu_catalog)
        upgrade(old, "0013")
        old.dispose()
        assert BYTE_ORDER_INDEX not in _indexes(icu_catalog)
    engine = open_engine(icu_catalog)
    try:
        assert BYTE_ORDER_INDEX in _indexes(icu_catalog)
        with engine.begin() as conn:
            assert str(_byte_ordered_key(conn).compile(conn)).endswith('COLLATE "C"')
            conn.exec_driver_sql("SET enable_seqscan = off")  # (a small table: ask the index)
            plan = conn.execute(
                text(
                    "EXPLAIN SELECT id FROM objects WHERE root_id = 1 "
                    "AND key COLLATE \"C\" >= 'runs/a/' AND key COLLATE \"C\" < 'runs/a0'"
                )
            ).scalars()
            assert BYTE_ORDER_INDEX in "\n".join(plan)
    finally:
        engine.dispose()


def test_no_second_index_where_text_sorts_as_bytes(tmp_path: Path) -> None:
    """SQLite (and PostgreSQL under a C collation) sort keys as bytes: the plain
    `(root_id, key)` index serves, and scans maintain no other."""
    from governance.catalog.engine import BYTE_ORDER_INDEX, open_engine

    url = f"sqlite:///{tmp_path / 'c.db'}"
    open_engine(url).dispose()
    assert BYTE_ORDER_INDEX not in _indexes(url)
