"""The acting identity: `--as`, else GOVERN_USER, else the OS user, always stripped."""

from __future__ import annotations

import pytest

from governance.errors import EXIT_BAD_INPUT, ArgumentError
from governance.settings import resolve_identity


def test_names_are_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERN_USER", "  carol\t")
    assert resolve_identity("alice ") == "alice"
    assert resolve_identity(" alice\n") == "alice"
    assert resolve_identity(None) == "carol"


@pytest.mark.parametrize("given", ["", " ", "\t\n"])
def test_an_explicit_empty_as_is_a_bad_argument(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("GOVERN_USER", "carol")
    with pytest.raises(ArgumentError, match="--as") as err:
        resolve_identity(given)  # never a silent fall-back to carol or the OS user
    assert err.value.exit_code == EXIT_BAD_INPUT


def test_an_empty_govern_user_is_as_if_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERN_USER", "   ")
    monkeypatch.setattr("getpass.getuser", lambda: "osuser")
    assert resolve_identity(None) == "osuser"


@pytest.mark.parametrize(
    ("raw", "expected"), [("", 16), ("  ", 16), ("4", 4), (" 8 ", 8), ("512", 512)]
)
def test_an_empty_concurrency_is_the_default(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: int
) -> None:
    from governance.settings import build_settings

    monkeypatch.setenv("GOVERN_CONCURRENCY", raw)
    assert build_settings(None, "alice").concurrency == expected


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "2.5", "513", "99999999"])
def test_a_bad_concurrency_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    from governance.settings import build_settings

    monkeypatch.setenv("GOVERN_CONCURRENCY", raw)
    with pytest.raises(ArgumentError, match=f"GOVERN_CONCURRENCY={raw!r}") as err:
        build_settings(None, "alice")
    assert err.value.exit_code == EXIT_BAD_INPUT


def test_the_cli_says_which_variable_is_wrong_and_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from governance.cli.main import cli

    monkeypatch.setenv("GOVERN_CONCURRENCY", "abc")
    result = CliRunner().invoke(cli, ["plans"])
    assert result.exit_code == 2
    assert "GOVERN_CONCURRENCY='abc'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("raw", ["inf", "nan", "0", "-1", "x"])
def test_a_switch_interval_must_be_a_finite_positive_number(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    from governance.settings import env_float

    monkeypatch.setenv("GOVERN_SWITCH_INTERVAL", raw)
    with pytest.raises(ArgumentError, match="GOVERN_SWITCH_INTERVAL"):
        env_float("GOVERN_SWITCH_INTERVAL", 0.0005)


def test_an_empty_catalog_url_is_refused_not_taken_for_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--catalog ""` (an unset shell variable) would otherwise fall back to another
    catalog in silence, as an empty `--as` is refused for the same reason."""
    from governance.settings import build_settings

    monkeypatch.setenv("GOVERN_CATALOG_URL", "sqlite:////tmp/other.db")
    with pytest.raises(ArgumentError, match="--catalog '': the catalog URL cannot be empty"):
        build_settings("  ", "alice")
    assert build_settings(None, "alice").catalog_url == "sqlite:////tmp/other.db"


def test_a_postgres_url_in_libpqs_spelling_is_taken() -> None:
    pytest.importorskip("psycopg")
    from governance.catalog.engine import make_engine

    engine = make_engine("postgres://ana@db.example/govern")
    assert engine.url.drivername == "postgresql+psycopg"
    assert engine.url.database == "govern"


def test_an_interrupt_while_the_catalog_closes_is_exit_130_without_a_traceback(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner
    from sqlalchemy.engine import Engine

    from governance.cli.main import cli

    def interrupted(self: Engine, close: bool = True) -> None:
        raise KeyboardInterrupt

    catalog = f"sqlite:///{tmp_path}/c.db"
    assert (
        CliRunner()
        .invoke(cli, ["--catalog", catalog, "-q", "scan", "--root", str(tmp_path)])
        .exit_code
        == 0
    )
    monkeypatch.setattr(Engine, "dispose", interrupted)
    result = CliRunner().invoke(cli, ["--catalog", catalog, "plans"])
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in result.output
