"""The plan for a terminal (rich): a header, totals by rule and by run, the checkpoints of
each run as a strip of letters, then the actions.

`print_table` writes to a given console (colors on a terminal); `render_table` records
the same output to plain text, for `--out` files and tests. Artifacts are shown by their
path in their root, which the header names (numbered `[1]`, `[2]` when the plan has
several): full URLs would take most of an 80-column terminal.
"""

from __future__ import annotations

import io
from typing import TextIO

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from governance.plan.types import ActionType, Plan
from governance.policy.units import format_bytes
from governance.report.common import (
    STATE_LABELS,
    RunTotals,
    TimelineRow,
    action_dollars,
    by_run,
    charge,
    deletes,
    iso,
    reading_order,
    roots_of,
    saving_words,
    timeline,
    usd,
)
from governance.report.layout import Packed, print_fitted, shown_text
from governance.wording import counted, shown

ACTION_LIMIT = 2000
RUN_LIMIT = 200
_ACTION_STYLE = {
    ActionType.DELETE: "red",
    ActionType.DEDUPE: "red",
    ActionType.ABORT_UPLOAD: "red",
    ActionType.STRIP: "yellow",
    ActionType.ARCHIVE: "blue",
    ActionType.TRANSITION: "cyan",
}


class _Paths:
    """An artifact's URL as its path in its root, numbered when the plan has several."""

    def __init__(self, plan: Plan) -> None:
        self.roots = roots_of(plan)
        self.several = len(self.roots) > 1
        # longest first: a URL is placed in the innermost root that holds it
        self._by_length = sorted(enumerate(self.roots, 1), key=lambda r: -len(r[1]))

    def __call__(self, uri: str) -> str:
        for n, root in self._by_length:
            if uri.startswith(root) and len(uri) > len(root):
                path = uri[len(root) :]
                return f"[{n}] {path}" if self.several else path
        return uri

    def root_label(self, root_url: str) -> str:
        return f"[{self.roots.index(root_url) + 1}]" if root_url in self.roots else root_url

    def legend(self) -> list[str]:
        if self.several:
            return [f"root [{n}] {root}" for n, root in enumerate(self.roots, 1)]
        return [f"root {root}" for root in self.roots]


def print_table(plan: Plan, console: Console) -> None:
    s = plan.summary
    paths = _Paths(plan)
    _print_packed(
        console,
        [
            Text.assemble(("plan ", "bold"), (plan.plan_id, "bold")),
            Text.assemble("status ", (str(plan.status), "bold")),
        ],
    )
    _print_packed(
        console, [shown_text(f"as of {iso(plan.as_of)}"), shown_text(f"made by {plan.created_by}")]
    )
    fingerprint = f"fingerprint {plan.fingerprint}"
    if len(fingerprint) > console.width:  # (80 columns): the hash on a line of its own, whole
        fingerprint = f"fingerprint\n  {plan.fingerprint}"
    _print_packed(console, [shown_text(f"policy {plan.policy_path or '-'}"), Text(fingerprint)])
    for line in paths.legend():
        console.print(escape(shown(line)))
    if plan.refusal:
        console.print(f"[bold red]REFUSED:[/bold red] {escape(shown(plan.refusal))}")
    console.print(
        f"{counted(s.actions, 'action')} on {counted(s.objects, 'object')}: "
        f"[red]{format_bytes(s.bytes_deleted)} deleted[/red], "
        f"{format_bytes(s.bytes_transitioned)} transitioned, "
        f"{format_bytes(s.bytes_archived)} archived"
    )
    gone = deletes(plan)
    if gone is not None:
        style = "bold red" if gone.permanent else "bold"
        console.print(Text.assemble(("deletes: ", "bold"), (gone.how, style)))
    before, after = s.monthly_cost_before_usd, s.monthly_cost_after_usd
    colour = "green" if before > after else "yellow" if before < after else "default"
    console.print(
        f"monthly cost {usd(before)} -> {usd(after)} "
        f"([{colour}]{saving_words(before, after)}[/{colour}]); one-off: "
        f"{charge(s.early_deletion_usd)} early deletion, {charge(s.request_cost_usd)} requests"
    )
    for note in plan.notes:
        console.print(f"note: {escape(shown(note))}")
    if plan.history is not None:
        for line in plan.history.lines():
            console.print(escape(shown(line)))
    if s.by_rule:
        print_fitted(console, _rule_table(plan))
    if s.left:
        print_fitted(console, _left_table(plan, paths))
    runs = by_run(plan)
    if runs:
        print_fitted(console, _run_table(runs, paths))
    rows = timeline(plan)
    if rows:
        print_fitted(console, _timeline_table(rows, paths))
        console.print(_timeline_legend())
    if plan.actions:
        print_fitted(console, _action_table(plan, paths, console.width))
        if len(plan.actions) > ACTION_LIMIT:
            more = len(plan.actions) - ACTION_LIMIT
            console.print(f"... and {more:,} more actions (--format csv or json lists them all)")
    else:
        console.print("no actions: the policy keeps everything")


def write_table(plan: Plan, out: TextIO) -> None:
    """The table report as plain text, 160 columns wide (for a file or a pipe)."""
    out.write(render_table(plan))


def render_table(plan: Plan, width: int = 160) -> str:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    print_table(plan, console)
    return console.export_text()


def _rule_table(plan: Plan) -> Table:
    table = Table(title="by rule", title_justify="left")
    for col in ("rule", "actions", "objects", "deleted", "transitioned", "archived"):
        if col == "rule":
            table.add_column(col, overflow="fold")
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for name, r in plan.summary.by_rule.items():
        table.add_row(
            shown_text(name),
            f"{r.actions:,}",
            f"{r.objects:,}",
            format_bytes(r.bytes_deleted),
            format_bytes(r.bytes_transitioned),
            format_bytes(r.bytes_archived),
        )
    return table


def _left_table(plan: Plan, paths: _Paths) -> Table:
    table = Table(title="left as they are", title_justify="left")
    for col in ("rule", "kind", "artifacts", "bytes"):
        if col in ("artifacts", "bytes"):
            table.add_column(col, justify="right", no_wrap=True)
        else:
            table.add_column(col, overflow="fold")
    table.add_column("for example", overflow="fold")
    for x in plan.summary.left:
        table.add_row(
            shown_text(x.rule or "(no rule)"),
            x.kind,
            f"{x.artifacts:,}",
            format_bytes(x.bytes),
            shown_text(f"{paths(x.example_uri)}: {x.example_reason}"),
        )
    return table


def _run_table(runs: list[RunTotals], paths: _Paths) -> Table:
    table = Table(title="by run", title_justify="left")
    columns = ("run", "root", "actions", "objects", "deleted", "moved", "kept")
    for col in columns if paths.several else [c for c in columns if c != "root"]:
        if col in ("run", "root"):
            table.add_column(col, overflow="fold")
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for t in runs[:RUN_LIMIT]:
        table.add_row(
            shown_text(t.label),
            *([shown_text(paths.root_label(t.root_url))] if paths.several else []),
            f"{t.actions:,}",
            f"{t.objects:,}",
            format_bytes(t.bytes_deleted),
            format_bytes(t.bytes_transitioned + t.bytes_archived),
            f"{t.kept:,}",
        )
    if len(runs) > RUN_LIMIT:
        table.caption = f"{len(runs) - RUN_LIMIT:,} more runs not shown"
    return table


_LETTERS = {
    "kept": ("K", "green"),
    "stripped": ("S", "yellow"),
    "archived": ("A", "blue"),
    "deleted": ("D", "red"),
    "transitioned": ("T", "cyan"),
    "protected": ("P", "magenta"),
    "in_flight": ("I", "dim"),
}
"""The timeline's letter (and color) for each state a checkpoint ends in."""


def _timeline_table(rows: list[TimelineRow], paths: _Paths) -> Table:
    """Per run, its checkpoints as a strip of letters in step order between the first and
    last step (`1000 DDSDK 5000`), then how many end in each state (one both stripped and
    archived counts in each), as the html report's strip and the md's list show them."""
    table = Table(title="checkpoints per run", title_justify="left")
    table.add_column("run", overflow="fold")
    if paths.several:
        table.add_column("root", overflow="fold")
    table.add_column("checkpoints in step order, then counted", overflow="fold")
    for row in rows[:RUN_LIMIT]:
        strip = shown_text(f"{row.cells[0].label} ")
        for c in row.cells:
            letter, style = _LETTERS[c.state]
            strip.append(letter, style=style)
        if len(row.cells) > 1:
            strip.append(f" {shown(row.cells[-1].label)}")
        counts = row.counts()
        counts[0] = f"{row.total()}: {counts[0]}"
        cell = Group(strip, Packed([shown_text(c, style="dim") for c in counts], ", "))
        root = [shown_text(paths.root_label(row.root_url))] if paths.several else []
        table.add_row(shown_text(row.run), *root, cell)
    if len(rows) > RUN_LIMIT:
        table.caption = f"{len(rows) - RUN_LIMIT:,} more runs not shown"
        table.caption_justify = "left"
    return table


def _timeline_legend() -> Packed:
    """What the timeline's letters stand for, each letter beside its words."""
    pieces = [f"{letter} {STATE_LABELS[state]}" for state, (letter, _) in _LETTERS.items()]
    pieces[0] = f"one letter a checkpoint, in step order: {pieces[0]}"
    return Packed([shown_text(p, style="dim") for p in pieces], ", ")


NARROW = 140
"""Below this many columns the actions table puts each reason under its artifact: seven
columns side by side in 80 would fold every path and reason into a few letters a line."""


def _action_table(plan: Plan, paths: _Paths, width: int) -> Table:
    if width < NARROW:
        return _narrow_action_table(plan, paths)
    table = Table(title="actions", title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("rule", overflow="fold")
    table.add_column("tier", overflow="fold")
    table.add_column("action", no_wrap=True)
    table.add_column("artifact", overflow="fold")
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for a in reading_order(plan.actions, ACTION_LIMIT):
        table.add_row(
            str(a.id),
            shown_text(a.rule),
            shown_text(a.tier or "-"),
            _action(a.action),
            shown_text(paths(a.artifact.uri)),
            format_bytes(a.bytes),
            shown_text(a.reason).append(f"\n{action_dollars(a)}", style="bold"),
        )
    return table


def _narrow_action_table(plan: Plan, paths: _Paths) -> Table:
    table = Table(title="actions", title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("artifact, then its rule and reason", overflow="fold")
    for a in reading_order(plan.actions, ACTION_LIMIT):
        cell = shown_text(paths(a.artifact.uri))
        # most reasons name their rule already ("rule logs expires after 365d")
        named = a.rule in a.reason
        cell.append(
            "\n" + shown(a.reason if named else f"{a.rule}: {a.reason}"),
            style="dim",
        )
        cell.append(f"\n{action_dollars(a)}")
        table.add_row(str(a.id), _action(a.action), format_bytes(a.bytes), cell)
    return table


def _print_packed(console: Console, pieces: list[Text]) -> None:
    """`pieces` two spaces apart on as few lines as fit (`Packed`)."""
    console.print(Packed(pieces, "  "))


def _action(action: str) -> Text:
    return shown_text(str(action), style=_ACTION_STYLE.get(ActionType(action), ""))
