"""`govern plan`, `govern plans`, `govern show`, `govern explain`: making and reading plans.

Thin adapters: parse, call `plan.service` or `catalog.plans`, render with `report`.
Reports go to stdout alone; what happened (scans, the saved plan id) goes to stderr.
"""

from __future__ import annotations

import re
from dataclasses import asdict, is_dataclass
from datetime import UTC, date, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from governance.cli.context import AppContext, pass_app
from governance.cli.output import (
    GivenPath,
    emit_json,
    emit_json_array,
    format_option,
    stdout_console,
)
from governance.errors import EXIT_REFUSED, GovernanceError
from governance.report import PLAN_FORMATS, format_for_path
from governance.wording import counted

if TYPE_CHECKING:
    from governance.catalog.plans import PlanHeader
    from governance.plan.types import Plan
    from governance.policy import Policy
    from governance.storage.base import Store

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_as_of(value: str) -> datetime:
    """ISO 8601 as UTC: `2026-12-01T00:00:00Z`, `2026-12-01T02:15`, `2026-12-01`, or `now`.

    A time without an offset is UTC (never the local zone: plans must not depend on the
    machine they were made on).

        >>> parse_as_of("2026-12-01")
        datetime.datetime(2026, 12, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    text = value.strip()
    if text.lower() == "now":
        return datetime.now(UTC).replace(microsecond=0)
    if _DATE.fullmatch(text):
        day = date.fromisoformat(text)
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _as_of_callback(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC).replace(microsecond=0)
    try:
        moment = parse_as_of(value)
    except (ValueError, OverflowError) as exc:  # OverflowError: out of range once in UTC
        raise click.BadParameter(
            f"{value!r} is not a time; use ISO 8601 such as 2026-12-01T00:00:00Z or 2026-12-01 "
            f"({exc})"
        ) from exc
    if not AS_OF_RANGE[0] <= moment < AS_OF_RANGE[1]:
        raise click.BadParameter(
            f"{value!r} is out of range: a plan is made as of a time from "
            f"{AS_OF_RANGE[0]:%Y-%m-%d} to before {AS_OF_RANGE[1]:%Y-%m-%d}"
        )
    return moment


AS_OF_RANGE = (datetime(1970, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))
"""The times a plan can be made as of: storage keeps none older than 1970, and ages,
windows and expiries are counted back and forth from `as_of` in years at most (the
calendar ends at 9999)."""


as_of_option = click.option(
    "--as-of",
    "as_of",
    metavar="TIME",
    callback=_as_of_callback,
    help="Plan as if it were this time (ISO 8601, UTC; default: now).",
)
policy_option = click.option(
    "--policy",
    "policy_path",
    required=True,
    type=GivenPath(path_type=Path, dir_okay=False),
    help="The retention policy (YAML).",
)


# ----------------------------------------------------------------------------- plan


@click.command()
@policy_option
@as_of_option
@click.option("--no-scan", is_flag=True, help="Plan on the catalog as it is; do not list roots.")
@click.option(
    "--out",
    "out_path",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Also write the report to FILE (.html, .md, .json or .csv: format by suffix); "
    "stdout then gets the --format report only when it is another format.",
)
@format_option(*PLAN_FORMATS)
@pass_app
def plan(
    app: AppContext,
    policy_path: Path,
    as_of: datetime,
    no_scan: bool,
    out_path: Path | None,
    fmt: str,
) -> None:
    """Scan (unless --no-scan), plan, save the plan, and print the dry-run report.

    Exit 3 when the plan is refused by a safety limit (it is still saved and printed).
    """
    from governance.plan.service import make_plan
    from governance.plan.types import PlanStatus
    from governance.policy import load_policy

    out_fmt = format_for_path(out_path) if out_path is not None else None
    policy = load_policy(policy_path)
    if out_path is not None:
        _check_writable(out_path)  # before anything is scanned or saved
    if no_scan:
        app.create_catalog = False  # nothing to plan in a catalog that does not exist yet
    stores = None if no_scan else _scan(app, policy)
    made = make_plan(app.engine, policy, as_of, actor=app.settings.identity, stores=stores)
    _info(
        app, f"saved plan {made.plan_id} ({made.status}): {counted(made.summary.actions, 'action')}"
    )
    if out_fmt != fmt or fmt == "json":
        # the same report twice (`--format html --out plan.html`): the file alone; but
        # JSON always goes to stdout too, so `--format json | jq` works whatever `--out`
        _print_plan(made, fmt)
    if out_path is not None and out_fmt is not None:
        _write_report(made, out_fmt, out_path)
        _info(app, f"wrote {out_fmt} report to {out_path}")
    if made.status is PlanStatus.REFUSED or made.refusal:
        click.echo(
            f"plan {made.plan_id} refused: {made.refusal or 'over a safety limit'}", err=True
        )
        raise click.exceptions.Exit(EXIT_REFUSED)


def _scan(app: AppContext, policy: Policy) -> dict[str, Store]:
    """Scan every root of the policy; the first root that fails stops the plan."""
    from governance.cli.scan_cmd import warn_of
    from governance.scan.service import scan_roots
    from governance.scan.targets import resolve_roots

    warn = None if app.settings.quiet else warn_of
    for result in scan_roots(app, policy, (), progress_for=None, warn=warn):
        if isinstance(result, GovernanceError):
            raise result
        _info(app, f"scanned {result.root}: {counted(result.objects, 'object')}")
    # Open stores so that classification can read (and cache) small metadata files.
    return {
        spec.url: spec.open(spec.workers(None, app.settings.concurrency))
        for spec in resolve_roots(policy, ())
    }


def _info(app: AppContext, message: str) -> None:
    if not app.settings.quiet:
        click.echo(message, err=True)


def _print_plan(made: Plan, fmt: str) -> None:
    if fmt == "table":
        from governance.report.table import print_table

        print_table(made, stdout_console())
        return
    import sys

    from governance.report import write_report

    write_report(made, fmt, sys.stdout)


def _check_writable(path: Path) -> None:
    """`--out` can be written, else a bad argument before any scan or plan: a plan saved
    and then reported as failed would wait for approval unseen.

    Tried for real, as the report is written (a temporary file made and removed in its
    folder): `os.access` says yes to root whatever the file system will do (`/proc`,
    `/sys`). A missing folder is made, and removed again if it cannot take the file after
    all. A pipe or a device is left alone: opening one would be seen by its reader.
    """
    import tempfile

    from governance.errors import ArgumentError

    if path.is_dir():
        raise ArgumentError(f"--out {path}: is a folder, not a file")
    folder = path.parent
    chain = (folder, *folder.parents)
    made = [p for p in chain if not p.exists() and not p.is_symlink()]  # deepest first
    above = next((p for p in chain if p not in made), None)  # the nearest that exists
    if above is not None and above.exists() and not above.is_dir():
        raise ArgumentError(f"--out {path}: {above} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            return
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".govern-out-"):
            pass
    except OSError as exc:
        for created in made:  # leave no trace of a refused --out
            try:
                created.rmdir()
            except FileNotFoundError:
                continue  # mkdir stopped above it
            except OSError:
                break
        raise ArgumentError(f"--out {path}: cannot write: {exc.strerror or exc}") from exc


def _write_report(made: Plan, fmt: str, path: Path) -> None:
    """The report written as it renders (a large plan's JSON or CSV is hundreds of
    megabytes: never held whole). A regular file is written beside itself and renamed
    over, so a failed or interrupted write leaves what was there; anything else (a pipe,
    a device) is written to directly. The plan is saved by then: a write that fails
    now (a full disk; `--out` was checked before planning) is a failed operation, exit
    1, naming the plan and how to write its report again."""
    from governance.errors import OutputError
    from governance.report import write_report

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            with path.open("w", encoding="utf-8") as out:
                write_report(made, fmt, out)
            return
        _replace_with_report(made, fmt, path)
    except OSError as exc:
        raise OutputError(
            f"--out {path}: cannot write: {exc.strerror or exc}; plan {made.plan_id} is "
            f"saved: `govern show {made.plan_id} --format {fmt} > FILE` writes its report"
        ) from exc


def _replace_with_report(made: Plan, fmt: str, path: Path) -> None:
    """Write to a temporary file in `path`'s folder, then rename it onto `path`, with
    the mode a file created there would get (or the one it had)."""
    import os
    import shutil
    import tempfile

    from governance.report import write_report

    fd, name = tempfile.mkstemp(dir=path.parent, prefix=".govern-out-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            write_report(made, fmt, out)
        if path.exists():
            shutil.copymode(path, name)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(name, 0o666 & ~umask)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------- plans, show


@click.command()
@format_option("table", "json")
@pass_app
def plans(app: AppContext, fmt: str) -> None:
    """Saved plans, oldest first."""
    from governance.approval import effective_statuses
    from governance.catalog.plans import list_plans

    headers = list_plans(app.engine)
    effective_statuses(app.engine, headers)  # an approval past its expiry reads `expired`
    if fmt == "json":
        emit_json_array(_header_document(h) for h in headers)
        return
    _print_headers(headers)


def _header_document(h: PlanHeader) -> dict[str, Any]:
    from governance.report.common import iso
    from governance.report.json_report import policy_document, summary_document

    return {
        "plan_id": h.plan_id,
        "status": str(h.status),
        "created_at": iso(h.created_at),
        "created_by": h.created_by,
        "as_of": iso(h.as_of),
        "policy": policy_document(h.policy_path, h.policy_sha256),
        "fingerprint": h.fingerprint,
        "refusal": h.refusal,
        "summary": summary_document(h.summary),
    }


def _print_headers(headers: list[PlanHeader]) -> None:
    """The plans as a table that fits the terminal: numbers, ids and statuses are never
    cut (the `as of` and `by` columns fold first, then the gaps narrow; past that the
    line runs long)."""
    from governance.report.layout import fit_table, print_fitted

    console = stdout_console()
    if not headers:
        console.print("no plans yet: govern plan --policy P")
        return
    wide = console.width >= 96  # below that, `by` goes: the id and status must not wrap
    table = _headers_table(headers, wide, gap=2)
    if fit_table(table, console.width, console) > console.width:
        table = _headers_table(headers, wide, gap=1)
    print_fitted(console, table)


def _headers_table(headers: list[PlanHeader], wide: bool, gap: int) -> Any:
    from rich.table import Table

    from governance.policy.units import format_bytes
    from governance.report.common import saving_amount
    from governance.report.layout import shown_text

    table = Table(box=None, pad_edge=False, padding=(0, gap, 0, 0), header_style="bold")
    table.add_column("plan", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("as of (UTC)", min_width=10)  # the time goes under the date
    if wide:
        table.add_column("by", overflow="fold")
    for col in ("actions", "deleted", "saves/mo"):
        table.add_column(col, justify="right", no_wrap=True)
    for h in headers:
        s = h.summary
        by = [shown_text(h.created_by)] if wide else []
        table.add_row(
            h.plan_id,
            str(h.status),
            h.as_of.strftime("%Y-%m-%d %H:%M"),
            *by,
            f"{s.actions:,}",
            format_bytes(s.bytes_deleted),
            saving_amount(s.monthly_cost_before_usd, s.monthly_cost_after_usd),
        )
    return table


@click.command()
@click.argument("plan_id")
@format_option(*PLAN_FORMATS)
@pass_app
def show(app: AppContext, plan_id: str, fmt: str) -> None:
    """One saved plan, in full, with its history: approvals, rejections, apply runs and
    restores."""
    from governance.approval import effective_statuses
    from governance.catalog.plans import load_plan
    from governance.history import plan_history

    plan = load_plan(app.engine, plan_id)
    now = datetime.now(UTC)
    effective_statuses(app.engine, [plan], now)  # an approval past its expiry reads `expired`
    plan.history = plan_history(app.engine, plan_id, plan.fingerprint, now)
    _print_plan(plan, fmt)


# ----------------------------------------------------------------------------- explain


@click.command()
@click.argument("url")
@policy_option
@as_of_option
@format_option("table", "json")
@pass_app
def explain(app: AppContext, url: str, policy_path: Path, as_of: datetime, fmt: str) -> None:
    """Why the artifact at URL is kept or acted on (from the catalog; no scan)."""
    from governance.plan.service import explain_uri
    from governance.policy import load_policy

    policy = load_policy(policy_path)
    found = explain_uri(app.engine, policy, as_of, url)
    doc = _jsonable(found)
    if fmt == "json":
        emit_json(doc)
        return
    _print_explanation(doc)


def _jsonable(value: Any) -> Any:
    """Dataclasses, enums, tuples and datetimes as plain JSON data."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        from governance.report.common import iso

        return iso(value)
    return value


def _print_explanation(doc: dict[str, Any]) -> None:
    from rich.table import Table

    from governance.report.layout import shown_text

    console = stdout_console()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in doc.items():
        if isinstance(value, list):
            continue
        shown = "yes" if value is True else "no" if value is False else value
        table.add_row(key.replace("_", " "), shown_text("-" if shown in (None, "") else str(shown)))
    console.print(table)
    for key, value in doc.items():
        if isinstance(value, list) and value:
            console.print(shown_text(key.replace("_", " ") + ":", style="bold"))
            items = Table(show_header=False, box=None, padding=(0, 0, 0, 2))
            items.add_column(overflow="fold")  # a long line folds under itself, indented
            for item in value:
                line = ": ".join(str(v) for v in item) if isinstance(item, list) else str(item)
                items.add_row(shown_text(line))
            console.print(items)
