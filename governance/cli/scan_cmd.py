"""`govern scan`: list roots into the catalog."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from governance.cli.context import AppContext, pass_app
from governance.cli.output import (
    GivenPath,
    emit_json,
    format_option,
    say,
    stderr_console,
    stdout_console,
)
from governance.errors import ArgumentError, GovernanceError
from governance.scan.listing import start_root
from governance.scan.targets import resolve_roots
from governance.settings import MAX_CONCURRENCY
from governance.wording import counted

if TYPE_CHECKING:
    from rich.table import Table

    from governance.scan.runner import Progress as ProgressFn
    from governance.scan.runner import ScanSummary


@contextmanager
def progress_for(app: AppContext, label: str) -> Iterator[ProgressFn | None]:
    """A rich progress line on stderr when it is a terminal; nothing otherwise."""
    console = stderr_console()
    if app.settings.quiet or not console.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=None),
        TextColumn("{task.fields[listed]}"),
        TextColumn("{task.fields[size]}"),
        TextColumn("{task.fields[rate]:,.0f} obj/s"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None, **progress_fields(0, 0, 1.0))

        def update(objects: int, size: int) -> None:
            bar.update(task, **progress_fields(objects, size, bar.tasks[task].elapsed or 1e-9))

        yield update


def progress_fields(objects: int, size: int, elapsed: float) -> dict[str, Any]:
    """The progress line's fields: "1 object", not "1 objects", when one is listed."""
    from governance.policy.units import format_bytes

    return {
        "listed": counted(objects, "object"),
        "size": format_bytes(size),
        "rate": objects / elapsed,
    }


@click.command()
@click.option(
    "--policy",
    "policy_path",
    type=GivenPath(path_type=Path),
    help="Policy whose storage roots to scan.",
)
@click.option(
    "--root", "roots", multiple=True, metavar="URL", help="A root URL to scan (repeatable)."
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=None,
    help="Parallel listing requests (S3).",
)
@format_option("table", "json")
@pass_app
def scan(
    app: AppContext,
    policy_path: Path | None,
    roots: tuple[str, ...],
    concurrency: int | None,
    fmt: str,
) -> None:
    """List the policy's roots (or the given ones) into the catalog; incremental."""
    policy = None
    if policy_path is not None:
        from governance.policy import load_policy

        policy = load_policy(policy_path)
    # The first root's listing starts before the catalog layer is even imported: on S3
    # its first pages arrive while SQLAlchemy loads and the catalog opens.
    specs = resolve_roots(policy, roots)
    if roots:
        _refuse_overlaps([spec.url for spec in specs])
    first = start_root(
        specs[0],
        policy,
        specs[0].workers(concurrency, app.settings.concurrency),
        app.settings.catalog_url,
    )
    from governance.scan.service import scan_roots

    summaries: list[ScanSummary] = []
    errors: list[GovernanceError] = []
    for summary_or_error in scan_roots(
        app,
        policy,
        roots,
        concurrency=concurrency,
        progress_for=progress_for,
        first=first,
        warn=None if app.settings.quiet else warn_of,
    ):
        if isinstance(summary_or_error, GovernanceError):
            say("error", summary_or_error)
            errors.append(summary_or_error)
        else:
            summaries.append(summary_or_error)
    if fmt == "json":
        emit_json({"scans": [s.as_dict() for s in summaries], "errors": [str(e) for e in errors]})
    elif not app.settings.quiet and summaries:  # (no empty table above an error)
        _print_table(summaries)
    for s in summaries:
        if s.status == "superseded" and not app.settings.quiet:
            say("note", f"scan {s.scan_id} of {s.root}: {s.error}")
        if s.links and not app.settings.quiet:
            say("note", links_note(s))
        if s.unreadable_names and not app.settings.quiet:
            say("note", unreadable_names_note(s))
    if summaries and not app.settings.quiet:
        for note in nested_roots_notes(app, [s.root for s in summaries]):
            say("note", note)
    if errors:
        raise click.exceptions.Exit(max(e.exit_code for e in errors))


def nested_roots_notes(app: AppContext, scanned: list[str]) -> list[str]:
    """A root just scanned that lies inside another root of the catalog, or holds one (a
    policy whose storage moved to a subfolder): both hold its objects, and `ls` lists
    them under each. Plans are not misled (they read the policy's roots alone), so this
    is a note, not a refusal."""
    from governance.catalog.roots import list_roots
    from governance.storage import real_place

    known = {root.url: real_place(root.url) for root in list_roots(app.engine)}
    notes = []
    for url in scanned:
        here = real_place(url)
        for other, there in sorted(known.items()):
            if other == url:
                continue
            if here.startswith(there) or there.startswith(here):
                inside = "lies inside" if here.startswith(there) else "holds"
                notes.append(
                    f"root {url} {inside} root {other}, which the catalog holds from an "
                    "earlier scan: `govern ls` lists their shared objects under both (plans "
                    "read only the policy's roots)"
                )
    return notes


def warn_of(text: str) -> None:
    """A warning on stderr (never in the JSON on stdout); `-q` passes none, as it silences
    the logged warnings and the notes: "warning: s3://b/nope/: no objects under this
    prefix (is it spelled right? the bucket holds: datasets/, runs/)"."""
    say("warning", text)


def links_note(s: ScanSummary) -> str:
    """What a scan says of the symbolic links it skipped: "file:///data/: 3 symbolic links
    not listed; plans keep what the 2 inside the root point at"."""
    met = f"{s.root}: {counted(s.links or 0, 'symbolic link')} not listed"
    inside = s.links_inside or 0
    if not inside:
        return f"{met} (none points inside the root)"
    if inside == 1:
        what = "it points" if s.links == 1 else "the one inside the root points"
    else:
        what = "they point" if inside == s.links else f"the {inside:,} inside the root point"
    return f"{met}; plans keep what {what} at"


def unreadable_names_note(s: ScanSummary) -> str:
    """What a scan says of the files and folders it passed over because their names are not
    valid UTF-8: "file:///data/: 2 files or folders not listed: their names are not valid
    UTF-8 (such a folder is not entered; rename them to have them scanned)"."""
    n = s.unreadable_names or 0
    what = counted(n, "file or folder", "files or folders")
    names, them = ("its name is", "it") if n == 1 else ("their names are", "them")
    return (
        f"{s.root}: {what} not listed: {names} not valid UTF-8 "
        f"(such a folder is not entered; rename {them} to have {them} scanned)"
    )


def _refuse_overlaps(urls: list[str]) -> None:
    """`--root` URLs that overlap (one inside another, or one given twice) are refused as
    a policy's roots are (`policy.cross.root_clashes`): the outer one would list the
    inner one's objects again, its quarantined copies and even a catalog file kept there,
    and a plan would count and act on them twice. ArgumentError (exit 2) naming both."""
    from governance.policy.cross import root_clashes

    clashes = root_clashes([], [(("--root", i), url) for i, url in enumerate(urls)])
    if clashes:
        _, message = clashes[0]
        raise ArgumentError(f"--root: {message}")


def _print_table(summaries: list[ScanSummary]) -> None:
    """The scans as a table that fits the terminal: a root URL folds onto more lines, the
    numbers are never cut; when the boxed table cannot fit, the borders go, then the line
    runs long (`print_fitted`)."""
    from governance.report.layout import fit_table, print_fitted

    console = stdout_console()
    table = _scan_table(summaries, boxed=True)
    if fit_table(table, console.width, console) > console.width:
        table = _scan_table(summaries, boxed=False)
    print_fitted(console, table)


def _scan_table(summaries: list[ScanSummary], *, boxed: bool) -> Table:
    from rich.table import Table

    from governance.policy.units import format_bytes
    from governance.report.layout import shown_text

    if boxed:
        table = Table(title="scan")
    else:  # as `govern plans` does when narrow: a gap of one instead of rules and padding
        table = Table(title="scan", box=None, pad_edge=False, padding=(0, 1, 0, 0))
    links = any(s.links for s in summaries)  # a column only where a root had any
    unreadable = any(s.unreadable_names for s in summaries)  # (names not UTF-8)
    extra = (("links",) if links else ()) + (("non-UTF-8",) if unreadable else ())
    table.add_column("root", overflow="fold")
    for col in ("objects", "bytes", "new", "changed", "gone", *extra):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("seconds", justify="right", no_wrap=True)
    for s in summaries:
        table.add_row(
            shown_text(s.root),
            f"{s.objects:,}",
            format_bytes(s.bytes),
            f"{s.new:,}",
            f"{s.changed:,}",
            f"{s.gone:,}",
            *((f"{s.links:,}" if s.links is not None else "-",) if links else ()),
            *((_count_or_dash(s.unreadable_names),) if unreadable else ()),
            f"{s.seconds:.2f}",
        )
    return table


def _count_or_dash(n: int | None) -> str:
    """A count for the table; "-" for a root that cannot have one (S3)."""
    return f"{n:,}" if n is not None else "-"
