"""Tables for people at 80 columns (a pipe) and wide: numbers are never cut, identifiers
fold instead of ending in `…`, and free text gets lines of its own."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from rich.console import Console
from rich.table import Table

from governance.audit import AuditEvent
from governance.catalog.plans import PlanHeader
from governance.cli.approval_cmd import _print_events
from governance.cli.plan_cmd import _print_headers
from governance.plan.types import PlanStatus, PlanSummary
from governance.report.layout import fit_table, print_fitted

T = datetime(2026, 12, 2, 0, 2, tzinfo=UTC)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def _unfolded(text: str) -> str:
    """The text with every line's cells run together: a value folded over two lines of
    one column reads whole again when the lines are joined without their padding."""
    return "".join(text.split())


# ----------------------------------------------------------------------------- layout


def test_numbers_keep_their_width_and_identifiers_fold_without_an_ellipsis() -> None:
    console = Console(record=True, width=50, file=io.StringIO(), color_system=None)
    table = Table()
    table.add_column("run")  # rich's default overflow would be `…`
    table.add_column("why")
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("saves/mo", justify="right", no_wrap=True)
    for run in ("llama-1b-a", "llama-1b-b"):
        table.add_row(run, "no write for 24.0d (abandoned_after exceeded)", "199.2 GiB", "$0.20")
    print_fitted(console, table)
    text = console.export_text()
    assert "…" not in text
    assert all(len(line) <= 50 for line in _lines(text))
    assert "199.2 GiB" in text
    assert "$0.20" in text
    assert "saves/mo" in text
    assert "llama-1b-a" in text
    assert "llama-1b-b" in text
    # a word longer than its column is folded onto the next line, not cut
    assert "abandoned_after" in _unfolded(text.replace("│", ""))


def test_a_table_whose_numbers_cannot_fit_runs_long_instead_of_cutting_them() -> None:
    console = Console(record=True, width=30, file=io.StringIO(), color_system=None)
    table = Table()
    for col in ("actions", "deleted", "saves/mo"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_row("468,187", "999.9 GiB", "$12,345.67")
    assert fit_table(table, 30, console) > 30
    print_fitted(console, table)
    text = console.export_text()
    for value in ("468,187", "999.9 GiB", "$12,345.67", "saves/mo"):
        assert value in text


# ----------------------------------------------------------------------------- plans


def _headers() -> list[PlanHeader]:
    summary = PlanSummary(
        actions=468_187,
        bytes_deleted=999 * 1024**3,
        monthly_cost_before_usd=12_345.2,
        monthly_cost_after_usd=0.0,
    )
    small = PlanSummary(actions=3, bytes_deleted=10, monthly_cost_before_usd=0.2)
    return [
        PlanHeader(
            f"p-20261202-000235-0c4{i}",
            "sha256:x",
            status,
            T,
            T,
            "a-long-user-name@example.com",
            None,
            None,
            {},
            s,
        )
        for i, (status, s) in enumerate(
            [
                (PlanStatus.PARTIALLY_APPLIED, summary),
                (PlanStatus.PENDING_APPROVAL, small),
            ]
        )
    ]


@pytest.mark.parametrize("columns", ["80", "60", "200"])
def test_plans_never_cut_a_number_or_a_plan_id(
    columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    _print_headers(_headers())
    out = capsys.readouterr().out
    assert "…" not in out
    for value in (
        "p-20261202-000235-0c40",
        "partially_applied",
        "468,187",
        "999 GiB",
        "$12,345.20",
        "$0.20",
        "saves/mo",
    ):
        assert value in out, value
    if columns == "80":  # they fit: as of folds first, then the gaps narrow
        assert max(map(len, _lines(out))) <= 80
    if columns == "200":
        assert "a-long-user-name@example.com" in out


# ----------------------------------------------------------------------------- audit


def _events(n: int) -> list[AuditEvent]:
    payloads = [
        {
            "status": "pending_approval",
            "actions": 34,
            "objects": 150,
            "bytes_deleted": 248072438995,
        },
        {"comment": "looks right", "approvers": ["reviewer"], "needed": 1, "status": "approved"},
    ]
    return [
        AuditEvent(
            i + 1,
            T,
            "plan" if i % 2 == 0 else "approve",
            "root" if i % 2 == 0 else "reviewer-with-a-long-name",
            "p-20261202-000235-0c44",
            payloads[i % 2],
            "",
            "",
        )
        for i in range(n)
    ]


def test_audit_at_80_columns_puts_details_under_each_event(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _print_events(_events(39))
    lines = _lines(capsys.readouterr().out)
    assert max(map(len, lines)) <= 80
    assert len(lines) <= 1 + 39 * 3  # was 300+: details nine characters a line
    assert "…" not in "\n".join(lines)
    first = lines.index(next(line for line in lines if line.lstrip().startswith("1 ")))
    assert "2026-12-02 00:02  plan" in lines[first]
    assert "p-20261202-000235-0c44" in lines[first]
    assert "root" in lines[first]
    assert "status=pending_approval actions=34 objects=150" in lines[first + 1]
    assert "reviewer-with-a-long-name" in "\n".join(lines)


def test_audit_on_a_wide_terminal_keeps_a_details_column(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    _print_events(_events(2))
    lines = _lines(capsys.readouterr().out)
    assert lines[0].split() == ["id", "at", "(UTC)", "event", "actor", "plan", "details"]
    assert "reviewer-with-a-long-name" in lines[2]
    assert lines[2].endswith('comment=looks right approvers=["reviewer"] needed=1 status=approved')
    assert len(lines) == 3
