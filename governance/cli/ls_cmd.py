"""`govern ls runs|artifacts|objects`: what the catalog holds."""

from __future__ import annotations

import click

from governance.cli.context import AppContext, pass_app
from governance.cli.output import emit_json_array, format_option, stdout_console
from governance.storage import normalize_url

TABLE_LIMIT = 2000


@click.group()
def ls() -> None:
    """What the catalog holds: runs, artifacts, objects."""


@ls.command("objects")
@click.option("--root", "root_url", metavar="URL", help="Only this root.")
@click.option("--include-gone", is_flag=True, help="Also objects no longer listed.")
@format_option("table", "json")
@pass_app
def ls_objects(app: AppContext, root_url: str | None, include_gone: bool, fmt: str) -> None:
    """Objects in the catalog."""
    from governance.catalog.queries import iter_object_rows

    url = normalize_url(root_url) if root_url else None
    rows = iter_object_rows(app.engine, url, include_gone=include_gone)
    if fmt == "json":
        emit_json_array(rows)
        return
    from rich.table import Table

    from governance.policy.units import format_bytes

    table = Table()
    for col in ("uri", "size", "last modified", "class", "etag"):
        table.add_column(col, justify="right" if col == "size" else "left", overflow="fold")
    shown = 0
    more = 0
    for row in rows:
        if shown >= TABLE_LIMIT:
            more += 1
            continue
        table.add_row(
            row["uri"],
            format_bytes(row["size"]),
            row["last_modified"].strftime("%Y-%m-%d %H:%M"),
            row["storage_class"] or "-",
            row["etag"],
        )
        shown += 1
    console = stdout_console()
    console.print(table)
    if more:
        console.print(f"... and {more:,} more (use --format json for all)")
