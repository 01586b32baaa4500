"""Output helpers: JSON to stdout alone, everything for people (tables, progress) via rich."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

import click

from governance.errors import OutputError

if TYPE_CHECKING:  # rich loads with the first table: `govern --help` stays fast
    from rich.console import Console

FORMATS_BASIC = ("table", "json")


class GivenPath(click.Path):
    """click's Path that refuses an empty value: `Path("")` is the current folder, and a
    message then named `.`, not what was typed (`--out ""`: "cannot tell the report
    format of ."; `--policy ""`: "cannot read policy file .: Is a directory")."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:  # (" " is a name a file may have)
            self.fail(f"{value!r} is empty: give a path", param, ctx)
        return super().convert(value, param, ctx)


def format_option(*choices: str, default: str = "table") -> Any:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(doc: Any) -> str:
    return json.dumps(doc, default=_default, indent=2, ensure_ascii=False)


def say(kind: str, text: object) -> None:
    """One line on stderr, `error: ...`, `note: ...`, `warning: ...`, with what it quotes
    (a path, a bucket's answer) shown escaped (`wording.shown`): a terminal neither runs an
    escape sequence in a folder's name nor, piped, loses it (click strips what it takes
    for colour codes from a stream that is not a terminal: another path was named)."""
    from governance.wording import shown

    click.echo(f"{kind}: {shown(str(text), newlines=True)}", err=True)


def emit_json(doc: Any) -> None:
    click.echo(dumps(doc))


def emit_json_array(rows: Iterable[dict[str, Any]]) -> None:
    """Stream a JSON array one element at a time, so memory stays flat for huge listings;
    it stops reading rows once nobody reads stdout (`| head`)."""
    out = sys.stdout
    out.write("[")
    first = True
    for row in rows:
        if reader_gone(out):
            return
        out.write("\n  " if first else ",\n  ")
        out.write(json.dumps(row, default=_default, ensure_ascii=False))
        first = False
    out.write("\n]\n" if not first else "]\n")
    out.flush()


def stdout_console() -> Console:
    from rich.console import Console

    return Console(soft_wrap=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


class ReaderSafeStream:
    """A text stream (stdout, stderr) that falls silent once its reader is gone.

    `govern ... | head -1` closes the pipe early. Without this the next write raises
    BrokenPipeError part-way through the command: click turns it into exit 1, the rest of
    the command (a report for `--out`, the exit 3 of a refused plan) never happens, and
    Python may print "Exception ignored ... BrokenPipeError" as it flushes at exit. Here
    the first broken write points the file descriptor at /dev/null (so no later flush
    can fail, the Python docs' "Note on SIGPIPE") and every later write is dropped: the
    command writes nothing more, says nothing about it, and exits with its own code.
    Anything else (`isatty`, `encoding`, `fileno`) is the wrapped stream's.
    """

    def __init__(self, stream: TextIO, name: str = "output") -> None:
        self._stream = stream
        self._name = name
        self.reader_gone = False
        self.failure: OutputError | None = None  # a write that failed (see `_failed`)

    def write(self, text: str) -> int:
        if isinstance(text, str) and not text:  # click probes a stream with an empty write
            return 0  # and swallows its error (its `b""` probe must reach the stream)
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._silence()
            except OSError as exc:
                raise self._failed(exc) from exc
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._silence()
            except OSError as exc:
                raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> OutputError:
        """Any other failed write (a full disk: `> /dev/full`): silent from now on, so no
        later write or the flush at exit raises again, and one error for the command to
        end with (exit 1), not a traceback."""
        self._silence()
        self.failure = OutputError(f"cannot write to {self._name}: {exc.strerror or exc}")
        return self.failure

    def _silence(self) -> None:
        self.reader_gone = True
        with contextlib.suppress(OSError, ValueError):  # no descriptor: nothing to flush
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_std_streams() -> None:
    """Make stdout and stderr fall silent when their reader goes (see ReaderSafeStream)."""
    for name, words in (("stdout", "standard output"), ("stderr", "standard error")):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ReaderSafeStream):
            setattr(sys, name, ReaderSafeStream(stream, words))


def output_failure() -> OutputError | None:
    """The first failed write to stdout or stderr, if any: a command that caught it on the
    way (a library that swallows a write's error) must not end with exit 0."""
    for stream in (sys.stdout, sys.stderr):
        failure = getattr(stream, "failure", None)
        if isinstance(failure, OutputError):
            return failure
    return None


def reader_gone(stream: object) -> bool:
    """Whether nobody reads `stream` any more: a writer of a long stream may stop early."""
    return bool(getattr(stream, "reader_gone", False))
