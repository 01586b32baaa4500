"""Output helpers: JSON to stdout alone, everything for people (tables, progress) via rich."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import click
from rich.console import Console

FORMATS_BASIC = ("table", "json")


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


def emit_json(doc: Any) -> None:
    click.echo(dumps(doc))


def emit_json_array(rows: Iterable[dict[str, Any]]) -> None:
    """Stream a JSON array one element at a time, so memory stays flat for huge listings."""
    out = sys.stdout
    out.write("[")
    first = True
    for row in rows:
        out.write("\n  " if first else ",\n  ")
        out.write(json.dumps(row, default=_default, ensure_ascii=False))
        first = False
    out.write("\n]\n" if not first else "]\n")
    out.flush()


def stdout_console() -> Console:
    return Console(soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True)
