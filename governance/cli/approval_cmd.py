"""`govern approve`, `govern reject`, `govern audit`: the approval workflow and its log.

Thin adapters: the acting identity is `--as` / GOVERN_USER / the OS user (a claim, not an
authentication: see docs/operations.md), the clock is read here and passed down.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from governance.cli.context import AppContext, pass_app
from governance.cli.output import emit_json, emit_json_array, format_option, stdout_console
from governance.errors import EXIT_FAILED
from governance.wording import counted, shown

if TYPE_CHECKING:
    from governance.approval import ApprovalState
    from governance.audit import AuditEvent


def _now() -> datetime:
    return datetime.now(UTC)


def state_document(state: ApprovalState) -> dict[str, Any]:
    """An approval state as JSON data (`govern approve/reject --format json`)."""
    return {
        "plan_id": state.plan_id,
        "status": state.status.value,
        "stored_status": state.stored_status.value,
        "fingerprint": state.fingerprint,
        "mode": state.mode,
        "created_by": state.created_by,
        "approvers": list(state.approvers),
        "needed": state.needed,
        "approved_at": state.approved_at,
        "expires_at": state.expires_at,
        "applicable_after": state.applicable_after,
        "applicable": state.applicable,
        "rejected_by": state.rejected_by,
        "reasons": list(state.reasons),
        "summary": state.summary(),
    }


def _print_state(state: ApprovalState, fmt: str) -> None:
    if fmt == "json":
        emit_json(state_document(state))
        return
    click.echo(f"plan {state.plan_id}: {shown(state.summary())}")
    for reason in state.reasons:
        if reason not in state.summary():
            click.echo(f"  {shown(reason)}")


@click.command()
@click.argument("plan_id")
@click.option("--comment", metavar="TEXT", help="Why; kept with the approval and in the audit log.")
@format_option("table", "json")
@pass_app
def approve(app: AppContext, plan_id: str, comment: str | None, fmt: str) -> None:
    """Approve a saved plan as the acting identity (--as NAME).

    The approval binds to the plan's fingerprint. Exit 3 when refused (self-approval,
    rejected, expired, refused or applied plan), 2 for an unknown plan.
    """
    from governance.approval import approve as do_approve

    state = do_approve(
        app.engine, plan_id, actor=app.settings.identity, comment=comment, now=_now()
    )
    _print_state(state, fmt)


@click.command()
@click.argument("plan_id")
@click.option("--comment", metavar="TEXT", required=True, help="Why the plan is vetoed.")
@format_option("table", "json")
@pass_app
def reject(app: AppContext, plan_id: str, comment: str, fmt: str) -> None:
    """Veto a saved plan: it can then never be approved or applied."""
    from governance.approval import reject as do_reject

    state = do_reject(app.engine, plan_id, actor=app.settings.identity, comment=comment, now=_now())
    _print_state(state, fmt)


@click.command()
@click.option("--plan", "plan_id", metavar="ID", help="Only this plan's events.")
@click.option("--verify", is_flag=True, help="Check the whole hash chain; exit 1 when broken.")
@format_option("table", "json")
@pass_app
def audit(app: AppContext, plan_id: str | None, verify: bool, fmt: str) -> None:
    """The audit log, oldest first; --verify checks its hash chain (always the whole log).

    Exit 2 for an unknown --plan id (as every command that takes a plan id).
    """
    from governance import audit as log

    if plan_id is not None:
        from governance.catalog.plans import load_plan_header

        load_plan_header(app.engine, plan_id)  # UnknownPlanError (exit 2) for a wrong id
    if verify:
        result = log.verify(app.engine)
        if fmt == "json":
            emit_json({"ok": result.ok, "checked": result.checked, "problems": result.problems})
        elif result.ok:
            click.echo(f"audit chain OK: {counted(result.checked, 'event')}")
        else:
            click.echo(f"audit chain BROKEN ({result.checked:,} events checked):")
            for problem in result.problems:
                click.echo(f"  {shown(problem)}")
        if not result.ok:
            raise click.exceptions.Exit(EXIT_FAILED)
        return
    found = log.iter_events(app.engine, plan_id)
    if fmt == "json":
        emit_json_array(_event_document(ev) for ev in found)
        return
    _print_events(list(found))


def _event_document(ev: AuditEvent) -> dict[str, Any]:
    return {
        "id": ev.id,
        "at": ev.at,
        "event": ev.event,
        "actor": ev.actor,
        "plan_id": ev.plan_id,
        "payload": ev.payload,
        "prev_hash": ev.prev_hash,
        "hash": ev.hash,
    }


NARROW = 140
"""Below this many columns each event's details go on the lines under it: beside five
other columns in 80 they got nine characters a line (a 39-event log took 300 lines)."""


def _print_events(found: list[AuditEvent]) -> None:
    from rich.table import Table

    from governance.report.layout import print_fitted, shown_text

    console = stdout_console()
    if not found:
        console.print("no audit events")
        return
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    table.add_column("id", justify="right", no_wrap=True)
    if console.width < NARROW:
        # one column: the event's line (actor last, so that a long one runs on without
        # moving the others), then its details under it
        event_width = max(len(ev.event) for ev in found)
        plan_width = max(len(ev.plan_id or "-") for ev in found)
        head = f"{'at (UTC)':<16}  {'event':<{event_width}}  {'plan':<{plan_width}}  actor"
        table.add_column(shown_text(head, style="bold"), overflow="fold")
        for ev in found:
            line = (
                f"{ev.at.strftime('%Y-%m-%d %H:%M')}  {ev.event:<{event_width}}  "
                f"{ev.plan_id or '-':<{plan_width}}  {ev.actor}"
            )
            cell = shown_text(line)
            details = _details(ev.payload)
            if details:
                cell.append("\n" + shown(details), style="dim")
            table.add_row(str(ev.id), cell)
        print_fitted(console, table)
        return
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("actor", overflow="fold")
    table.add_column("plan", no_wrap=True)
    table.add_column("details", overflow="fold", min_width=40)
    for ev in found:
        table.add_row(
            str(ev.id),
            ev.at.strftime("%Y-%m-%d %H:%M"),
            ev.event,
            shown_text(ev.actor),
            ev.plan_id or "-",
            shown_text(_details(ev.payload)),
        )
    print_fitted(console, table)


_QUIET_KEYS = frozenset({"fingerprint", "as_of", "policy_path", "policy_sha256", "expires_at"})
NOTABLE_SHOWN = 20
"""Results of one apply batch that did not go through listed in its details; the rest
are counted (every one is in --format json)."""


def _details(payload: dict[str, Any]) -> str:
    """`key=value` for what a person scans for; hashes and paths stay in --format json.
    Never cut: the table folds a long value onto more lines."""
    if isinstance(payload.get("results"), list):
        return _batch_details(payload)
    return " ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
        for k, v in payload.items()
        if k not in _QUIET_KEYS and (v is False or v not in (None, "", [], {}, 0))
    )


def _batch_details(payload: dict[str, Any]) -> str:
    """One apply batch (`action_results`): its counts, then the first NOTABLE_SHOWN actions
    that did not go through with their whole reasons, then how many more; the full list
    of results stays in --format json."""
    results: list[list[Any]] = payload["results"]
    counts = payload.get("counts") or {}
    head = f"execution {payload.get('execution_id', '?')}: {len(results):,} actions"
    if counts:
        head += " (" + ", ".join(f"{n:,} {outcome}" for outcome, n in counts.items()) + ")"
    notable = [
        f"#{action_id} {outcome}: {reason}" if reason else f"#{action_id} {outcome}"
        for action_id, outcome, reason, *_ in results
        if outcome != "ok"
    ]
    more = len(notable) - NOTABLE_SHOWN
    tail = [f"and {more:,} more not ok (--format json lists them)"] if more > 0 else []
    return "; ".join([head, *notable[:NOTABLE_SHOWN], *tail])
