"""One frozen Settings object built from flags and environment, passed down instead of many kwargs."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CATALOG_PATH = Path(".govern") / "catalog.db"
DEFAULT_CONCURRENCY = 16


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
    """`--as`, else GOVERN_USER, else the OS user. A claim, not an authentication."""
    if explicit:
        return explicit
    env = os.environ.get("GOVERN_USER")
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"


def build_settings(
    catalog: str | None,
    identity: str | None,
    verbose: int = 0,
    quiet: bool = False,
    concurrency: int | None = None,
) -> Settings:
    url = catalog or os.environ.get("GOVERN_CATALOG_URL") or default_catalog_url()
    conc = concurrency or int(os.environ.get("GOVERN_CONCURRENCY", DEFAULT_CONCURRENCY))
    return Settings(
        catalog_url=url,
        identity=resolve_identity(identity),
        verbose=verbose,
        quiet=quiet,
        concurrency=conc,
    )
