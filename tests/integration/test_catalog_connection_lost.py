"""A catalog whose server goes away mid-command (a restart, a terminated session) is an
operation that failed, exit 1, not bad input (exit 2: what `catalog_failure` gave every
catalog error). The error is a real one: a PostgreSQL session terminated by another."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError

from governance.catalog.engine import catalog_failure
from governance.errors import EXIT_BAD_INPUT, EXIT_FAILED, CatalogError
from tests.catalogs import _drop_schema, _pg_schema_url, _with_schema

PG = os.environ.get("GOVERN_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(not PG, reason="GOVERN_TEST_POSTGRES_URL is not set")


def test_a_terminated_session_is_a_failed_operation_and_a_missing_table_bad_input() -> None:
    assert PG is not None
    engine = create_engine(PG)
    killer = create_engine(PG)
    try:
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with killer.begin() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            with pytest.raises(OperationalError) as lost:
                conn.execute(text("SELECT 1"))
        found = catalog_failure(lost.value, PG)
        assert isinstance(found, CatalogError)
        assert found.exit_code == EXIT_FAILED
        assert "the connection to the catalog was lost; run the command again" in str(found)
        with engine.connect() as conn, pytest.raises(ProgrammingError) as missing:
            conn.execute(text("SELECT * FROM no_such_table_here"))
        bad = catalog_failure(missing.value, PG)
        assert bad is not None
        assert bad.exit_code == EXIT_BAD_INPUT
    finally:
        engine.dispose()
        killer.dispose()


def test_a_catalog_server_that_stays_down_is_a_lost_connection_too() -> None:
    """After the catalog opened, a connection that cannot be made again ("connection
    refused": the server down, not restarted yet) is the same lost catalog, exit 1."""
    assert PG is not None
    down = make_url(PG).set(host="127.0.0.1", port=_closed_port())
    engine = create_engine(down)
    try:
        with pytest.raises(OperationalError) as refused:
            engine.connect()
    finally:
        engine.dispose()
    found = catalog_failure(refused.value, PG)
    assert isinstance(found, CatalogError)
    assert found.exit_code == EXIT_FAILED


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_apply_whose_catalog_goes_down_and_stays_down_exits_1(tmp_path: Path) -> None:
    """The apply's own error (the catalog lost) is what it reports: writing its end
    failed too, and that second error (connection refused) took its place, exit 2. The
    catalog is reached through a proxy the test closes halfway through the apply."""
    import subprocess
    import sys
    import time

    from tests.integration.test_apply_resume import build

    assert PG is not None
    schema = f"t_{uuid.uuid4().hex[:12]}"
    _with_schema(schema, "CREATE SCHEMA {schema}")
    proxy = _Proxy(make_url(PG).host or "127.0.0.1", make_url(PG).port or 5432)
    try:
        direct = _pg_schema_url(PG, schema)
        setup, _, _ = build(tmp_path)  # (its SQLite catalog only made the tree and policy)
        through = make_url(PG).set(host="127.0.0.1", port=proxy.port)
        url = _pg_schema_url(through.render_as_string(hide_password=False), schema)
        policy = str(setup.policy)
        run = [str(Path(sys.executable).parent / "govern"), "--catalog", url, "-q"]
        env = os.environ | {
            "GOVERN_APPLY_CHUNK_OBJECTS": "3",
            "GOVERN_TEST_APPLY_DELAY": "0.2",
            "GOVERN_USER": "alice",
        }
        made = subprocess.run(
            [*run, "plan", "--policy", policy, "--format", "json"], env=env,
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        plan = json.loads(made.stdout)["plan_id"]
        apply = subprocess.Popen(
            [*run, "apply", plan, "--policy", policy], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        engine = create_engine(direct)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if conn.execute(text("SELECT count(*) FROM action_results")).scalar_one() >= 6:
                    break
            time.sleep(0.05)
        engine.dispose()
        proxy.close()  # the server is gone, and stays gone
        _, err = apply.communicate(timeout=60)
        assert apply.returncode == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].endswith("the connection to the catalog was lost; run the command again)")
    finally:
        proxy.close()
        _drop_schema(schema)


class _Proxy:
    """A TCP proxy to the PostgreSQL server, in threads; `close` drops every connection
    and stops listening (what a server going down looks like to a client)."""

    def __init__(self, host: str, port: int) -> None:
        import socket
        import threading

        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        import socket

        if self._closed:
            return
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()
