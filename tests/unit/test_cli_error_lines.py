"""A failure is one line: an apply's recorded error keeps the first line of what stopped
it, and psycopg's "error ignored terminating" after a lost connection is not printed
beside the command's own error (unless -v)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.apply.executor import _error_line
from governance.cli.main import cli


def test_an_executions_error_is_its_first_line_at_most_500_characters() -> None:
    long = RuntimeError(
        "(psycopg.OperationalError) the connection is lost\n[SQL: INSERT ...]\n" * 50
    )
    assert _error_line(long) == "RuntimeError: (psycopg.OperationalError) the connection is lost"
    assert len(_error_line(ValueError("x" * 2000))) == 500
    assert _error_line(KeyboardInterrupt()) == "KeyboardInterrupt"


def test_psycopgs_second_line_after_a_lost_connection_is_not_printed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nstorage: [{name: a, url: /data/}]\nrules: []\n")
    assert CliRunner().invoke(cli, ["policy", "validate", str(policy)]).exit_code == 0
    psycopg = logging.getLogger("psycopg")
    with caplog.at_level(logging.WARNING):
        psycopg.warning("error ignored terminating %r: %s", "<Pipeline>", "lost")
        psycopg.warning("something else")
    assert [r.getMessage() for r in caplog.records] == ["something else"]
