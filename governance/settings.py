"""One frozen Settings object built from flags and environment, passed down instead of many kwargs."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from governance.errors import ArgumentError

DEFAULT_CATALOG_PATH = Path(".govern") / "catalog.db"
DEFAULT_CONCURRENCY = 16
N = TypeVar("N", int, float)


@dataclass(frozen=True, slots=True)
class Settings:
    """What every command needs: where the catalog is, who acts, how loud and how parallel."""

    catalog_url: str
    identity: str
    verbose: int = 0
    quiet: bool = False
    concurrency: int = DEFAULT_CONCURRENCY


def default_catalog_url(cwd: Path | None = None) -> str:
    """The SQLite file `.govern/catalog.db` under the current folder."""
    base = (cwd or Path.cwd()) / DEFAULT_CATALOG_PATH
    return f"sqlite:///{base}"


def resolve_identity(explicit: str | None) -> str:
    """`--as`, else GOVERN_USER, else the OS user. A claim, not an authentication.

    Surrounding whitespace is not part of a name (`alice ` is alice: she cannot approve
    her own plan as someone else). An explicit `--as` that is empty once stripped is a
    bad argument, never a silent fall-back to another identity; an empty GOVERN_USER is
    as if unset.
    """
    if explicit is not None:
        name = explicit.strip()
        if not name:
            raise ArgumentError(
                f"--as {explicit!r}: the acting identity cannot be empty; give a name, or "
                "leave --as out to use GOVERN_USER or the OS user"
            )
        return _printable_identity("--as", name)
    env = (os.environ.get("GOVERN_USER") or "").strip()
    if env:
        return _printable_identity("GOVERN_USER", env)
    try:
        return getpass.getuser().strip() or "unknown"
    except Exception:  # no passwd entry in some containers
        return "unknown"


def _printable_identity(source: str, name: str) -> str:
    """An identity with no control character: an ESC sequence in it would redraw the
    name on a reader's terminal (`mallory\x1b[7Dalice` read as `alice` in `govern show`
    and `govern audit`), so approvals could be signed under a name that shows as
    another's."""
    import unicodedata

    if any(unicodedata.category(c) == "Cs" for c in name):  # (bytes that are not UTF-8)
        typed = os.fsencode(name).decode("utf-8", "backslashreplace")
        raise ArgumentError(f"{source} '{typed}': the acting identity is not valid UTF-8")
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise ArgumentError(
            f"{source} {name!r}: the acting identity cannot hold control characters "
            "(escape sequences, tabs, newlines)"
        )
    folded = unicodedata.normalize("NFKC", name)
    if not "".join(c for c in folded if unicodedata.category(c) != "Cf").strip():
        # (compared as `approval.identity_key` compares: nothing is left of it)
        from governance.wording import shown

        raise ArgumentError(
            f"{source} '{shown(name)}': the acting identity is only invisible characters "
            "(zero-width spaces, joiners, direction marks): give a name"
        )
    return name


def build_settings(
    catalog: str | None,
    identity: str | None,
    verbose: int = 0,
    quiet: bool = False,
    concurrency: int | None = None,
) -> Settings:
    if catalog is not None and not catalog.strip():
        raise ArgumentError(
            "--catalog '': the catalog URL cannot be empty; give one, or leave --catalog "
            "out to use GOVERN_CATALOG_URL or .govern/catalog.db"
        )  # (as an empty --as is: never a silent fall-back to another catalog)
    url = catalog or os.environ.get("GOVERN_CATALOG_URL") or default_catalog_url()
    conc = concurrency or env_int(
        "GOVERN_CONCURRENCY", DEFAULT_CONCURRENCY, maximum=MAX_CONCURRENCY
    )
    return Settings(
        catalog_url=url,
        identity=resolve_identity(identity),
        verbose=verbose,
        quiet=quiet,
        concurrency=conc,
    )


MAX_CONCURRENCY = 512
"""The most parallel storage calls a setting may ask for (`--concurrency` takes 1-512):
each one is a pooled connection and a thread."""


def env_int(name: str, default: int, minimum: int = 1, maximum: int | None = None) -> int:
    """A whole-number setting from the environment: unset or empty (as CI templates leave
    variables) is `default`; anything else that is not a whole number of at least
    `minimum` (and at most `maximum`) is an ArgumentError naming the variable (exit 2),
    not a traceback."""
    if maximum is None:
        return _env_number(
            name, default, int, lambda v: v >= minimum, f"a whole number of at least {minimum}"
        )
    return _env_number(
        name,
        default,
        int,
        lambda v: minimum <= v <= maximum,
        f"a whole number from {minimum} to {maximum}",
    )


MAX_SECONDS = 7 * 24 * 3600.0
"""A week: the longest wait any setting in seconds may ask for. Beyond it a timeout
overflows where it is used (SQLite's busy timeout is a 32-bit count of milliseconds:
`1e20` waited not at all, then said the lock was "held for over 1e+20 s")."""


def env_float(name: str, default: float) -> float:
    """`env_int` for a positive number of seconds, at most `MAX_SECONDS`."""
    return _env_number(
        name,
        default,
        float,
        lambda v: 0 < v <= MAX_SECONDS,
        f"a positive number of seconds up to {MAX_SECONDS:,.0f} (a week)",
    )


def _env_number(
    name: str, default: N, parse: Callable[[str], N], fits: Callable[[N], bool], wanted: str
) -> N:
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = parse(raw)
    except ValueError:
        value = None
    if value is None or not fits(value):
        raise ArgumentError(
            f"{name}={raw!r}: not {wanted}; give one, or unset it for the default ({default})"
        )
    return value
