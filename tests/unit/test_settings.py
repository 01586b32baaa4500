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
