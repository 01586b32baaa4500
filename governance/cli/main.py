"""The `govern` command group. Subcommands load lazily so `govern --help` stays fast.

Errors are mapped to exit codes here, in one place: a GovernanceError prints one clear
message on stderr and exits with its code from spec/cli.md. A database error that says
the catalog is unusable (damaged, locked, a table gone) is a CatalogError too, wherever
a command hits it; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from typing import Any

import click

from governance import __version__
from governance.cli.context import AppContext
from governance.cli.output import guard_std_streams, output_failure, say
from governance.errors import CatalogError, GovernanceError, PolicyError
from governance.settings import build_settings
from governance.wording import shown

COMMANDS: dict[str, str] = {
    "scan": "governance.cli.scan_cmd:scan",
    "ls": "governance.cli.ls_cmd:ls",
    "policy": "governance.cli.policy_cmd:policy",
    "demo": "governance.cli.demo_cmd:demo",
    "plan": "governance.cli.plan_cmd:plan",
    "plans": "governance.cli.plan_cmd:plans",
    "show": "governance.cli.plan_cmd:show",
    "explain": "governance.cli.plan_cmd:explain",
    "approve": "governance.cli.approval_cmd:approve",
    "reject": "governance.cli.approval_cmd:reject",
    "audit": "governance.cli.approval_cmd:audit",
    "apply": "governance.cli.apply_cmd:apply",
    "restore": "governance.cli.apply_cmd:restore",
}
CREATES_CATALOG = frozenset({"scan", "plan", "demo"})
"""Commands that fill a catalog, so may create a missing one; the rest refuse it (exit 2)."""


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when invoked or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; our errors become one message and their exit code."""
        try:
            return super().invoke(ctx)
        except GovernanceError as exc:
            if exc.__cause__ is not None and _verbose(ctx):  # what it was made from
                traceback.print_exception(exc, file=sys.stderr)
            report_error(exc)
            raise click.exceptions.Exit(exc.exit_code) from exc
        except Exception as exc:
            mapped = _catalog_error(ctx, exc)
            if mapped is None:
                raise
            if _verbose(ctx):
                traceback.print_exception(exc, file=sys.stderr)
            report_error(mapped)
            raise click.exceptions.Exit(mapped.exit_code) from exc
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(130) from None


def _verbose(ctx: click.Context) -> bool:
    return isinstance(ctx.obj, AppContext) and bool(ctx.obj.settings.verbose)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--catalog",
    metavar="URL",
    help="Catalog URL (else GOVERN_CATALOG_URL, else .govern/catalog.db).",
)
@click.option(
    "--as", "identity", metavar="NAME", help="Acting identity (else GOVERN_USER, else the OS user)."
)
@click.option("-v", "--verbose", count=True, help="More logging on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or informational output.")
@click.version_option(__version__, prog_name="govern")
@click.pass_context
def cli(
    ctx: click.Context, catalog: str | None, identity: str | None, verbose: int, quiet: bool
) -> None:
    """Storage lifecycle governance for ML training artifacts: scan, plan, approve, apply."""
    settings = build_settings(catalog, identity, verbose=verbose, quiet=quiet)
    level = logging.WARNING - 10 * min(verbose, 2) if not quiet else logging.ERROR
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    if not verbose:
        logging.getLogger("psycopg").addFilter(_after_the_error)
    app = AppContext(settings=settings, create_catalog=ctx.invoked_subcommand in CREATES_CATALOG)
    ctx.obj = app
    ctx.call_on_close(app.close)


def _after_the_error(record: logging.LogRecord) -> bool:
    """psycopg's "error ignored terminating <Pipeline>" (or `<Copy>`): a second line
    after a lost connection's own error, which the command reports in one (shown with
    `-v`)."""
    return not str(record.msg).startswith("error ignored terminating")


def _catalog_error(ctx: click.Context, exc: Exception) -> CatalogError | None:
    """The CatalogError for a database error about the catalog, else None (a bug).

    Checked lazily: without the catalog module loaded no catalog was opened, and a
    `--help` or usage error must not pay for importing SQLAlchemy.
    """
    if "governance.catalog.engine" not in sys.modules or not isinstance(ctx.obj, AppContext):
        return None
    from governance.catalog.engine import catalog_failure

    return catalog_failure(exc, ctx.obj.settings.catalog_url)


def report_error(exc: GovernanceError) -> None:
    """The error's message (and a policy's problems, one a line) as typed: what it quotes
    of an argument (a path holding an escape sequence) is shown escaped, never run by
    the terminal nor stripped from the name."""
    click.echo(f"error: {shown(str(exc), newlines=True)}", err=True)
    if isinstance(exc, PolicyError) and exc.problems != [str(exc)]:
        for problem in exc.problems:
            # at the line start: FILE:LINE:COL, as editors read it
            click.echo(shown(problem, newlines=True), err=True)


def main(argv: list[str] | None = None) -> Any:
    """Console entry point. A reader that goes early (`govern ... | head -1`) silences
    stdout (or stderr) for the rest of the command: no traceback, no message, and the
    command's own exit code (0 unless it failed or refused), as `ls` always had."""
    guard_std_streams()
    undecodable = _undecodable(sys.argv[1:] if argv is None else argv)
    if undecodable is not None:
        click.echo(f"error: {undecodable}", err=True)
        sys.exit(2)
    try:
        return cli.main(args=argv, prog_name="govern")
    except SystemExit as done:
        failure = output_failure()
        if failure is not None and not done.code:  # (a failed write that was swallowed)
            say("error", failure)
            sys.exit(1)
        raise


_TEXT_SETTINGS = ("GOVERN_CATALOG_URL", "GOVERN_USER")
"""Environment settings read as text, as arguments are."""


def _undecodable(args: list[str]) -> str | None:
    """What is wrong with the first argument (or text setting) that is not UTF-8 (the OS
    hands Python its bytes as lone surrogates, which no catalog, JSON or terminal can
    hold), else None."""
    given = [("argument", arg) for arg in args]
    given += [(name, os.environ[name]) for name in _TEXT_SETTINGS if name in os.environ]
    for what, text in given:
        if any("\udc80" <= c <= "\udcff" for c in text):
            typed = shown(os.fsencode(text).decode("utf-8", "backslashreplace"))
            return f"{what} '{typed}' is not valid UTF-8: it is read as text"
    return None


if __name__ == "__main__":
    main()
