"""What every command receives: the Settings and a lazily opened catalog engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from governance.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


@dataclass
class AppContext:
    settings: Settings
    create_catalog: bool = True
    """Whether opening a SQLite catalog that does not exist creates it. Only commands that
    fill a catalog (scan, plan, demo) do; the CLI sets False for every other command."""
    _engine: Engine | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """Open the catalog on first use, migrating it to the newest schema."""
        if self._engine is None:
            from governance.catalog.engine import open_engine

            self._engine = open_engine(self.settings.catalog_url, create=self.create_catalog)
        return self._engine

    def close(self) -> None:
        """Close the catalog's connections once the command is done. Ctrl-C landing here
        (the command's output is complete) ends as any interrupt does: "interrupted",
        exit 130, not a traceback from the connection pool."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        try:
            engine.dispose()
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise SystemExit(130) from None


pass_app = click.make_pass_decorator(AppContext)
