"""`govern scan`'s output for people: the table fits the terminal without cutting a root
URL or a header (two roots that share a long prefix stay two), and the progress line
counts in words that agree with the number."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from governance.cli import scan_cmd
from governance.cli.main import cli

HEADERS = ("root", "objects", "bytes", "new", "changed", "gone", "seconds")


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    """Two roots whose URLs differ only past the first 40 characters or so."""
    found = []
    for team in ("nlp", "vision"):
        root = tmp_path / "x" / "storage" / "shared-training-area" / team
        (root / "run" / "model.bin").parent.mkdir(parents=True)
        (root / "run" / "model.bin").write_bytes(b"w" * 5000)
        found.append(root)
    return found


def _root_column(lines: list[str]) -> str:
    """The first column's text run together: a URL folded over lines reads whole again
    (paths here have no spaces, so a cell's text is the line's first word)."""
    words = [line.strip("│┃ ").split() for line in lines]
    return "".join(w[0] for w in words if w and not w[0].startswith(("┏", "┡", "└")))


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_scan_table_folds_root_urls_and_never_cuts_a_header(
    tmp_path: Path, roots: list[Path], columns: int
) -> None:
    args = ["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "scan"]
    for root in roots:
        args += ["--root", str(root) + "/"]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert "…" not in result.stdout
    assert max(map(len, lines)) <= columns
    header = next(line for line in lines if "objects" in line)
    assert header.replace("┃", " ").split() == list(HEADERS)
    column = _root_column(lines)
    for root in roots:
        assert root.resolve().as_uri() + "/" in column
    assert result.stdout.count("4.9 KiB") == 2  # whole, on each root's row


def test_scan_progress_says_1_object_not_1_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal the progress line counts what is listed; one file is "1 object"."""
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=160, color_system=None)
    monkeypatch.setattr(scan_cmd, "stderr_console", lambda: terminal)
    root = tmp_path / "data"
    root.mkdir()
    (root / "only.bin").write_bytes(b"x")
    result = CliRunner().invoke(
        cli, ["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "scan", "--root", str(root)]
    )
    assert result.exit_code == 0, result.output
    shown = screen.getvalue()
    assert "1 object " in shown
    assert "1 objects" not in shown
