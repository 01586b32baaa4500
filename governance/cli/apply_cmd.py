"""`govern apply` and `govern restore`: thin adapters over `governance.apply`.

Exit codes (spec/cli.md): 0 all done; 1 some action (or object) failed, or could not
be checked (a read that failed); 2 unknown plan
or bad arguments; 3 refused (not approved, expired, a what-if plan made as of a future
time, lock held, permanent without --yes) or, after the others were carried out, some
action skipped as stale. When actions both failed and were stale, 1 wins.
Reports go to stdout; progress goes to stderr.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from governance.cli.context import AppContext, pass_app
from governance.cli.output import (
    FORMATS_BASIC,
    GivenPath,
    dumps,
    emit_json,
    format_option,
    say,
    stdout_console,
)
from governance.errors import EXIT_FAILED, EXIT_REFUSED, ArgumentError
from governance.wording import counted

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from rich.table import Table

    from governance.apply import (
        ExecutionReport,
        ExecutionSummary,
        RestoreReport,
        StoreOpener,
        StoreSettings,
    )

policy_option = click.option(
    "--policy",
    "policy_path",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The policy whose storage roots give endpoints and credentials (else defaults).",
)


def _opener(app: AppContext, policy_path: Path | None, plan_id: str) -> StoreOpener:
    """The stores for the plan's roots, with the endpoints and credentials of `--policy`,
    else those each root was last scanned with (the catalog keeps the endpoint, profile
    and region, never a secret): on MinIO or Ceph, a plan applied without `--policy`
    went to the default (AWS) endpoint.

    A policy with no storage root over a root of the plan, nor in its bucket, is the
    wrong policy (its endpoints would be silently replaced by defaults): refused before
    any change."""
    from governance.apply import StoreOpener, StoreSettings
    from governance.catalog.plans import load_plan_header

    roots: list[StoreSettings] = []
    if policy_path is None:
        return StoreOpener(
            _scanned_with(app, load_plan_header(app.engine, plan_id).scans),
            concurrency=app.settings.concurrency,
        )
    from governance.policy import load_policy

    policy = load_policy(policy_path)
    roots = [StoreSettings(r.url, r.endpoint_url, r.profile, r.region) for r in policy.storage]
    opener = StoreOpener(roots, concurrency=app.settings.concurrency)
    uncovered = [
        url for url in load_plan_header(app.engine, plan_id).scans if not opener.covers(url)
    ]
    if uncovered:
        raise ArgumentError(
            f"--policy {policy_path}: no storage root of it is in plan {plan_id}'s "
            f"{'root' if len(uncovered) == 1 else 'roots'} {', '.join(sorted(uncovered))} or their bucket; give the policy the "
            "plan was made with, or none for default endpoints and credentials"
        )
    return opener


def _scanned_with(app: AppContext, urls: Iterable[str]) -> list[StoreSettings]:
    """Each root's connection settings as its last scan recorded them in the catalog."""
    from governance.apply import StoreSettings
    from governance.catalog.roots import find_root

    settings = []
    for url in urls:
        root = find_root(app.engine, url)
        known = ((root.classify_options or {}).get("connection") if root else None) or {}
        settings.append(
            StoreSettings(
                url,
                endpoint_url=known.get("endpoint_url"),
                profile=known.get("profile"),
                region=known.get("region"),
            )
        )
    return settings


@click.command()
@click.argument("plan_id")
@policy_option
@click.option(
    "--yes", is_flag=True, help="Confirm permanent deletes (apply.delete_mode: permanent)."
)
@click.option(
    "--only-non-destructive",
    is_flag=True,
    help="Carry out only transitions and other non-destructive actions.",
)
@click.option("--dry-run", is_flag=True, help="Re-check every action and report; change nothing.")
@format_option(*FORMATS_BASIC)
@pass_app
def apply(
    app: AppContext,
    plan_id: str,
    policy_path: Path | None,
    yes: bool,
    only_non_destructive: bool,
    dry_run: bool,
    fmt: str,
) -> None:
    """Carry out an approved plan: re-check each artifact, act, record each outcome.

    Deletes go to quarantine by default (see `govern restore`). Running it again after an
    interruption finishes what is left and repeats nothing that was done. Exit 1 when an
    action failed (or could not be checked); 3 when refused, or when an action was skipped
    as stale (the others are carried out): plan again.
    """
    from governance.apply import apply_plan

    def progress(report: ExecutionReport, total: int) -> None:
        if not app.settings.quiet:
            click.echo(_progress_line(report, total), err=True)

    report = apply_plan(
        app.engine,
        plan_id,
        actor=app.settings.identity,
        now=datetime.now(UTC),
        stores=_opener(app, policy_path, plan_id),
        only_non_destructive=only_non_destructive,
        dry_run=dry_run,
        yes=yes,
        progress=progress,
        default_concurrency=app.settings.concurrency,
    )
    if fmt == "json":
        _emit_execution_json(app, report)
    else:
        _print_execution(report)
    for note in report.notes:
        say("note", note)
    code = _exit_code(report)
    if report.failed:
        click.echo(
            f"{counted(report.failed, 'action')} failed; plan {plan_id} is {report.plan_status}",
            err=True,
        )
    if report.stale_count:
        click.echo(_stale_line(report), err=True)
    if report.vetoed is not None:
        click.echo(
            f"apply of {plan_id} stopped: the plan was {report.vetoed}; what was done "
            "before stays done (`govern restore` brings back its deletes)",
            err=True,
        )
        code = code or EXIT_REFUSED
    if code:
        raise click.exceptions.Exit(code)


def _progress_line(report: ExecutionReport, total: int) -> str:
    """`apply P: 33 of 33 actions: 31 ok, 2 skipped (2 stale), 0 failed`: what came of
    the actions so far, never a skipped one counted as done."""
    return f"apply {report.plan_id}: {report.processed:,} of {total:,} actions: {report.tally()}"


def _exit_code(report: ExecutionReport) -> int:
    """0 all done; 1 some action failed (wins over stale: a failure needs a look, a retry
    may fix it); 3 some action was skipped as stale (the others were carried out: the plan
    no longer matches storage, re-plan). A dry run refuses nothing: stale is only noted."""
    if report.failed:
        return EXIT_FAILED
    if report.stale_count and not report.dry_run:
        return EXIT_REFUSED
    return 0


def _stale_line(report: ExecutionReport) -> str:
    n = report.stale_count
    their, them = ("its", "it") if n == 1 else ("their", "them")
    if report.dry_run:
        return (
            f"{counted(n, 'action')} would be skipped as stale: {their} objects changed since "
            f"plan {report.plan_id} was made; a real apply would exit 3; plan again (govern plan)"
        )
    return (
        f"{_stale_count(n, report.processed)} skipped as stale: {their} objects changed since "
        f"plan {report.plan_id} was made; {_applied_besides(report)} (plan status: "
        f"{report.plan_status}); plan again (govern plan) to act on {them}"
    )


def _stale_count(stale: int, processed: int) -> str:
    """`2 actions`, or `all 5 actions` / `the only action` when nothing else was run."""
    if stale < processed:
        return f"{counted(stale, 'action')} {'was' if stale == 1 else 'were'}"
    return "the only action was" if stale == 1 else f"all {counted(stale, 'action')} were"


def _applied_besides(report: ExecutionReport) -> str:
    """What this run applied besides the stale actions, as it happened: `the rest was
    applied` only when every other action of the run was; never when none was."""
    from governance.apply.types import Outcome

    ok = report.count(Outcome.OK)
    others = report.processed - report.stale_count
    if ok == 0:
        return "nothing was applied" + (" in this run" if report.done_before else "")
    if ok == others:
        return "the rest was applied"
    return f"{ok:,} of the other {counted(others, 'action')} applied"


@click.command()
@click.argument("plan_id")
@policy_option
@click.option(
    "--uri",
    "uris",
    multiple=True,
    metavar="URL",
    help="Restore only this artifact or object (repeatable); default: everything.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check each object as a restore would (reads only); list what would be restored "
    "and what would fail; change nothing.",
)
@format_option(*FORMATS_BASIC)
@pass_app
def restore(
    app: AppContext,
    plan_id: str,
    policy_path: Path | None,
    uris: tuple[str, ...],
    dry_run: bool,
    fmt: str,
) -> None:
    """Undo a plan's quarantined or versioned deletes, byte for byte.

    Exit 1 when an object cannot come back (deleted permanently, purged from quarantine,
    its quarantine copy missing, another object at its key): `--dry-run` makes the same
    checks and exits the same way. Objects restored already are not restored again."""
    from governance.apply import restore_plan

    notes: list[str] = []
    report = restore_plan(
        app.engine,
        plan_id,
        actor=app.settings.identity,
        now=datetime.now(UTC),
        stores=_opener(app, policy_path, plan_id),
        uris=uris,
        concurrency=app.settings.concurrency,
        dry_run=dry_run,
        note=notes.append,
    )
    if fmt == "json":
        emit_json(report.to_dict())
    else:
        _print_restore(report)
    for note in notes:
        say("note", note)
    if report.failed:
        raise click.exceptions.Exit(EXIT_FAILED)


def _emit_execution_json(app: AppContext, report: ExecutionReport) -> None:
    """The report's JSON; a real apply's `results` are streamed from the journal (every
    result of the execution, in action order) rather than held in memory."""
    if report.dry_run or report.execution_id is None or not report.results_omitted:
        emit_json(report.to_dict())
        return
    from governance.apply.journal import iter_result_pages
    from governance.report.json_report import write_json_items

    doc = report.to_dict()
    doc["results"] = []
    head, _, tail = dumps(doc).partition('"results": []')
    out = sys.stdout
    out.write(head + '"results": [')
    write_json_items(out, iter_result_pages(app.engine, report.execution_id))
    out.write(tail + "\n")
    out.flush()


def _print_execution(report: ExecutionReport) -> None:
    """The results, a line of counts, then the plan's executions: fitted to the terminal
    (`print_fitted`), ids, outcomes, times and statuses never cut."""
    from rich.table import Table

    from governance.report.layout import print_fitted

    console = stdout_console()
    title = f"Plan {report.plan_id}: {report.plan_status}"
    if report.dry_run:
        title += " (dry run: nothing changed)"
    table = Table(title=title)
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("artifact", overflow="fold")
    table.add_column("outcome", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for r in report.results:
        table.add_row(str(r.action_id), r.action, r.artifact_uri, r.outcome.value, r.reason)
    print_fitted(console, table)
    if report.results_omitted:
        console.print(
            f"{counted(report.results_omitted, 'more result')} in the journal "
            f"(execution {report.execution_id}); --format json lists them all"
        )
    console.print(f"{'this dry run' if report.dry_run else 'this run'}: {report.tally()}")
    if report.done_before:
        console.print(f"{counted(len(report.done_before), 'action')} done by earlier executions")
    if report.not_run:
        console.print(
            f"{counted(len(report.not_run), 'destructive action')} not run (--only-non-destructive)"
        )
    if report.purged:
        console.print(
            f"{counted(report.purged, 'quarantined object')} purged (past quarantine_for)"
        )
    if report.executions:
        print_fitted(console, _executions_table(report.executions))


def _executions_table(executions: Sequence[ExecutionSummary]) -> Table:
    """One line per apply run of the plan: when it started (UTC, to the minute) and how
    long it took, its status and counts, then who ran it (the one column that folds)."""
    from rich.table import Table

    runs = Table(title="Executions", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    runs.add_column("id", justify="right", no_wrap=True)
    runs.add_column("started (UTC)", no_wrap=True)
    runs.add_column("took", justify="right", no_wrap=True)
    runs.add_column("status", no_wrap=True)
    for column in ("ok", "skipped", "failed"):
        runs.add_column(column, justify="right", no_wrap=True)
    runs.add_column("actor", overflow="fold")
    for e in executions:
        runs.add_row(
            str(e.id),
            e.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M"),
            _took(e.started_at, e.finished_at),
            e.status,
            f"{e.actions_ok:,}",
            f"{e.actions_skipped:,}",
            f"{e.actions_failed:,}",
            e.actor,
        )
    return runs


def _took(started: datetime, finished: datetime | None) -> str:
    """`42s`, `3m05s`, `2h07m`; `-` while running (or killed before it could say)."""
    if finished is None:
        return "-"
    seconds = max(0, round((finished - started).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _print_restore(report: RestoreReport) -> None:
    from rich.table import Table

    console = stdout_console()
    if not report.objects:  # one line, not a table with no rows (a `note:` says why)
        console.print(f"restore of plan {report.plan_id}: nothing to restore")
        return
    table = Table(
        title=f"Restore of plan {report.plan_id}" + (" (dry run)" if report.dry_run else "")
    )
    for column in ("object", "how", "result"):
        table.add_column(column, overflow="fold")
    for o in report.objects:
        status = report.status_of(o)
        result = {"would_restore": "would restore", "failed": f"failed: {o.error}"}
        table.add_row(o.uri, o.how, result.get(status, status))
    console.print(table)
    if report.dry_run:
        console.print(
            f"{report.would_restore:,} would be restored, {report.failed:,} failed "
            "(dry run: nothing restored)"
        )
    else:
        console.print(f"{report.restored:,} restored, {report.failed:,} failed")
