"""`govern ls runs|artifacts|objects`: what the catalog holds."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from governance.catalog.derived import classified
from governance.cli.context import AppContext, pass_app
from governance.cli.output import emit_json_array, format_option, stdout_console
from governance.errors import ArgumentError
from governance.report.layout import print_fitted
from governance.storage import normalize_url
from governance.wording import shown as as_shown

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text  # (annotations)
    from sqlalchemy.engine import Engine

TABLE_LIMIT = 2000


def _known_root(app: AppContext, root_url: str | None) -> str | None:
    """`--root` as the catalog spells it; a root the catalog does not hold is a mistyped
    argument (an empty listing would read as "nothing there")."""
    if not root_url:
        return None
    from governance.catalog.roots import find_root, list_roots

    url = normalize_url(root_url)
    if find_root(app.engine, url) is None:
        known = ", ".join(r.url for r in list_roots(app.engine)) or "none yet: run `govern scan`"
        raise ArgumentError(f"--root {root_url}: not a root in the catalog (roots: {known})")
    return url


def _nothing(what: str, root_url: str | None) -> Text:
    """The line an empty listing prints instead of a table with no rows, as `govern plans`
    and `govern audit` do: `no runs in the catalog`, `no artifacts of kind eval in root
    s3://b/`."""
    from governance.report.layout import shown_text

    where = f"in root {root_url}" if root_url else "in the catalog"
    return shown_text(f"no {what} {where}")


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

    url = _known_root(app, root_url)
    rows = iter_object_rows(app.engine, url, include_gone=include_gone)
    if fmt == "json":
        emit_json_array(rows)
        return
    console = stdout_console()
    table, more = _objects_table(rows, wide=console.width >= NARROW)
    if not table.row_count:
        console.print(_nothing("objects", url), soft_wrap=True)
        return
    print_fitted(console, table)
    if more:
        console.print(f"... and {more:,} more (use --format json for all)")


def _objects_table(rows: Iterable[dict[str, Any]], *, wide: bool) -> tuple[Table, int]:
    """The first TABLE_LIMIT objects, and how many more there are. Below NARROW columns
    each object's storage class and ETag go under its URL: five columns side by side in
    80 fold the URL and the ETag into a few letters a line each."""
    from rich.table import Table

    from governance.policy.units import format_bytes
    from governance.report.layout import shown_text

    table = Table()
    table.add_column(
        "uri" if wide else "uri, then its storage class and etag", overflow="fold", min_width=16
    )
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("last modified", min_width=10)  # the time goes under the date
    if wide:
        table.add_column("class", overflow="fold")
        table.add_column("etag", overflow="fold")
    shown = more = 0
    for row in rows:
        if shown >= TABLE_LIMIT:
            more += 1
            continue
        shown += 1
        numbers = (format_bytes(row["size"]), row["last_modified"].strftime("%Y-%m-%d %H:%M"))
        cls, etag = row["storage_class"], row["etag"]
        if wide:
            table.add_row(
                shown_text(row["uri"]), *numbers, shown_text(cls or "-"), shown_text(etag or "-")
            )
            continue
        cell = shown_text(row["uri"])
        under = [f"class {cls}"] if cls else []
        under += [f"etag {etag}"] if etag else []
        if under:
            cell.append("\n" + as_shown("; ".join(under)), style="dim")
        table.add_row(cell, *numbers)
    return table, more


def _classified(app: AppContext, url: str | None) -> Engine:
    """The engine to read runs and artifacts from, for as long as the command runs:
    the catalog, classified first if a scan came since; on a catalog this user can only
    read, a classification in memory (see `derived.classified`)."""
    found: Engine = click.get_current_context().with_resource(
        classified(app.engine, datetime.now(UTC), url)
    )
    return found


@ls.command("runs")
@click.option("--root", "root_url", metavar="URL", help="Only this root.")
@format_option("table", "json")
@pass_app
def ls_runs(app: AppContext, root_url: str | None, fmt: str) -> None:
    """Runs: status and the evidence for it, sizes, checkpoints (complete, in flight)."""
    url = _known_root(app, root_url)
    source = _classified(app, url)
    from governance.catalog.queries import iter_run_rows

    rows = iter_run_rows(source, url)
    if fmt == "json":
        emit_json_array(rows)
        return
    console = stdout_console()
    table, in_flight = _runs_table(rows, wide=console.width >= NARROW)
    if not table.row_count:
        console.print(_nothing("runs", url), soft_wrap=True)
        return
    print_fitted(console, table)
    if in_flight:
        console.print(IN_FLIGHT_NOTE, style="dim")


IN_FLIGHT_NOTE = (
    "checkpoints: complete ones; +N: incomplete ones still inside the grace period (in "
    "flight); older incomplete ones are residue (govern ls artifacts --kind residue)"
)


def _runs_table(rows: Iterable[dict[str, Any]], *, wide: bool) -> tuple[Table, bool]:
    """The runs, and whether any has a checkpoint in flight (shown as `+N` after the
    complete ones, which the note under the table explains)."""
    from rich.table import Table

    from governance.policy.units import format_bytes
    from governance.report.layout import shown_text

    table = Table()
    table.add_column("run" if wide else "run, then why and its attributes", overflow="fold")
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("why", overflow="fold")
    table.add_column("checkpoints" if wide else "ckpts", justify="right", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("last write", min_width=10)  # the time goes under the date
    if wide:
        table.add_column("attributes", overflow="fold")
    any_in_flight = False
    for row in rows:
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(row["attributes"].items()))
        checkpoints = str(row["checkpoints"])
        if row["in_flight"]:
            checkpoints += f" +{row['in_flight']}"
            any_in_flight = True
        numbers = (
            checkpoints,
            format_bytes(row["bytes"]),
            row["last_write"].strftime("%Y-%m-%d %H:%M"),
        )
        if wide:
            table.add_row(
                shown_text(row["run"]),
                row["status"],
                shown_text(row["status_reason"]),
                *numbers,
                shown_text(attrs),
            )
            continue
        cell = shown_text(row["run"])
        cell.append("\n" + as_shown(row["status_reason"]), style="dim")
        if attrs:
            cell.append("\n" + as_shown(attrs), style="dim")
        table.add_row(cell, row["status"], *numbers)
    return table, any_in_flight


NARROW = 120
"""Below this many columns `ls runs` puts each run's status reason and attributes under
its name: seven columns side by side in 80 would fold each into a few letters a line."""


@ls.command("artifacts")
@click.option("--root", "root_url", metavar="URL", help="Only this root.")
@click.option(
    "--run", "run_glob", metavar="GLOB", help="Only artifacts of runs whose name matches."
)
@click.option(
    "--kind",
    type=click.Choice(["checkpoint", "weights", "dataset", "log", "eval", "residue", "other"]),
    help="Only this kind.",
)
@format_option("table", "json")
@pass_app
def ls_artifacts(
    app: AppContext, root_url: str | None, run_glob: str | None, kind: str | None, fmt: str
) -> None:
    """Artifacts: kind, run, step, completeness, sizes and components."""
    from rich.table import Table

    from governance.catalog.queries import iter_artifact_rows
    from governance.policy.units import format_bytes
    from governance.report.layout import shown_text

    url = _known_root(app, root_url)
    rows = iter_artifact_rows(_classified(app, url), url, run_glob, kind)
    if fmt == "json":
        emit_json_array(rows)
        return
    console = stdout_console()
    wide = console.width >= NARROW
    table = Table()
    table.add_column(
        "artifact" if wide else "artifact, then its run, completeness and components",
        overflow="fold",
        min_width=16,
    )
    table.add_column("kind", no_wrap=True)
    if wide:
        table.add_column("run", overflow="fold")
    table.add_column("step", justify="right", no_wrap=True)
    if wide:
        table.add_column("complete", overflow="fold")
    table.add_column("bytes", justify="right", no_wrap=True)
    if wide:
        table.add_column("components", overflow="fold")
    shown = more = 0
    for row in rows:
        if shown >= TABLE_LIMIT:
            more += 1
            continue
        shown += 1
        comps = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted(row["components"].items()))
        complete = "yes" if row["complete"] else f"no: {row['completeness_reason']}"
        step = "-" if row["step"] is None else str(row["step"])
        size = format_bytes(row["bytes"])
        if wide:
            table.add_row(
                shown_text(row["uri"]),
                row["kind"],
                shown_text(row["run"] or "-"),
                step,
                shown_text(complete),
                size,
                shown_text(comps),
            )
            continue
        cell = shown_text(row["uri"])
        under = [f"run {row['run']}"] if row["run"] else []
        under += [f"complete: {complete}", comps]
        cell.append("\n" + as_shown("; ".join(x for x in under if x)), style="dim")
        table.add_row(cell, row["kind"], step, size)
    if not shown:
        kinds = f" of kind {kind}" if kind else ""
        runs = f" of runs matching {run_glob!r}" if run_glob else ""
        console.print(_nothing(f"artifacts{kinds}{runs}", url), soft_wrap=True)
        return
    print_fitted(console, table)
    if more:
        console.print(f"... and {more:,} more (use --format json for all)")
