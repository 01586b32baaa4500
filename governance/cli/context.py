"""What every command receives: the Settings and a lazily opened catalog engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from governance.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

READ_ONLY_COMMANDS = frozenset({"plans", "show", "explain", "ls", "audit"})
"""Commands that only read the catalog. On a SQLite catalog this user cannot write (a file
or folder of another user, a read-only mount) they open it read-only instead of failing,
and never migrate it; every other command needs write access (and `CREATES_CATALOG` in
`cli/main.py` names those that may create a missing catalog)."""


@dataclass
class AppContext:
    settings: Settings
    create_catalog: bool = True
    """Whether opening a SQLite catalog that does not exist creates it. Only commands that
    fill a catalog (scan, plan, demo) do; the CLI sets False for every other command."""
    read_only: bool | None = None
    """Whether the command only reads the catalog (see READ_ONLY_COMMANDS); None: decided
    by the name of the command being run, when the catalog is first opened."""
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """Open the catalog on first use, migrating it to the newest schema (read-only
        commands: where this user may write it)."""
        if self._engine is None:
            from governance.catalog.engine import open_engine

            if self.read_only is None:
                self.read_only = _running_command() in READ_ONLY_COMMANDS
            self._engine = open_engine(
                self.settings.catalog_url, create=self.create_catalog, read_only=self.read_only
            )
        return self._engine

    def close(self) -> None:
        """Close the catalog's connections once the command is done. Ctrl-C landing here
        (the command's output is complete) ends as any interrupt does: "interrupted",
        exit 130, not a traceback from the connection pool. A catalog read as immutable
        that was written meanwhile ends the command with that error, exit 2: what it
        printed may be inconsistent."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        from governance.catalog.engine import check_unchanged
        from governance.cli.output import say
        from governance.errors import CatalogError

        try:
            check_unchanged(engine)
        except CatalogError as exc:
            say("error", exc)
            raise SystemExit(exc.exit_code) from None
        finally:
            _dispose(engine)


def _dispose(engine: Engine) -> None:
    try:
        engine.dispose()
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        raise SystemExit(130) from None


def _running_command() -> str | None:
    """The name of the `govern` subcommand being run (`ls` for `govern ls runs`), or None
    outside a command line."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.find_root().invoked_subcommand


pass_app = click.make_pass_decorator(AppContext)
