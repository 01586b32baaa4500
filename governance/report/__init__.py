"""Reports: one renderer per format, each a pure function of a Plan.

>>> render(plan, "md")  # doctest: +SKIP
'# Plan `p-20261130-021500-3f9a`...'
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from governance.errors import ArgumentError

if TYPE_CHECKING:
    from governance.plan.types import Plan

PLAN_FORMATS = ("table", "json", "md", "csv", "html")
SUFFIX_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".json": "json", ".csv": "csv"}


def render(plan: Plan, fmt: str) -> str:
    """The plan in `fmt` (one of PLAN_FORMATS) as text. Renderers import lazily."""
    return _renderer(fmt)(plan)


def _renderer(fmt: str) -> Callable[[Plan], str]:
    if fmt == "json":
        from governance.report.json_report import render_json

        return render_json
    if fmt == "md":
        from governance.report.markdown import render_markdown

        return render_markdown
    if fmt == "csv":
        from governance.report.csv_report import render_csv

        return render_csv
    if fmt == "html":
        from governance.report.html import render_html

        return render_html
    if fmt == "table":
        from governance.report.table import render_table

        return render_table
    raise ArgumentError(f"report format {fmt!r}: expected one of {', '.join(PLAN_FORMATS)}")


def format_for_path(path: Path) -> str:
    """The report format a file name asks for, by suffix; ArgumentError naming the file."""
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(SUFFIX_FORMATS))
        raise ArgumentError(f"--out {path}: cannot tell the report format; use a suffix {known}")
    return fmt


__all__ = ["PLAN_FORMATS", "format_for_path", "render"]
