"""Reports: one writer per format, each a pure function of a Plan written to a stream.

A plan of half a million actions is hundreds of megabytes of JSON or CSV: reports are
written piece by piece (`write_report`), never held whole; `render` is the same as text.

>>> render(plan, "md")  # doctest: +SKIP
'# Plan `p-20261130-021500-3f9a`...'
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from governance.errors import ArgumentError
from governance.heap import settled_collections

if TYPE_CHECKING:
    from governance.plan.types import Plan

PLAN_FORMATS = ("table", "json", "md", "csv", "html")
SUFFIX_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".json": "json", ".csv": "csv"}


def render(plan: Plan, fmt: str) -> str:
    """The plan in `fmt` (one of PLAN_FORMATS) as text (`write_report` into a string)."""
    out = io.StringIO()
    write_report(plan, fmt, out)
    return out.getvalue()


def write_report(plan: Plan, fmt: str, out: TextIO) -> None:
    """Write the plan in `fmt` to `out` as it is rendered. The plan itself lives to the
    end and makes no cycles: it is kept out of the collector's way meanwhile (a large
    plan's reports otherwise spend half their time in collections)."""
    writer = _writer(fmt)
    with settled_collections() as settle:
        settle()
        writer(plan, out)


def _writer(fmt: str) -> Callable[[Plan, TextIO], None]:
    """The writer for `fmt`; writers import lazily."""
    if fmt == "json":
        from governance.report.json_report import write_json

        return write_json
    if fmt == "md":
        from governance.report.markdown import write_markdown

        return write_markdown
    if fmt == "csv":
        from governance.report.csv_report import write_csv

        return write_csv
    if fmt == "html":
        from governance.report.html import write_html

        return write_html
    if fmt == "table":
        from governance.report.table import write_table

        return write_table
    raise ArgumentError(f"report format {fmt!r}: expected one of {', '.join(PLAN_FORMATS)}")


def format_for_path(path: Path) -> str:
    """The report format a file name asks for, by suffix; ArgumentError naming the file."""
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(SUFFIX_FORMATS))
        raise ArgumentError(f"--out {path}: cannot tell the report format; use a suffix {known}")
    return fmt


__all__ = ["PLAN_FORMATS", "format_for_path", "render", "write_report"]
