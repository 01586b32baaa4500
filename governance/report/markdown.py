"""The plan as Markdown: for a pull request, a ticket or a chat message to the approvers.

Order follows what a reviewer asks: is it refused, how much does it free and save, which
rules and runs does it touch, then every action with its reason.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TextIO

from governance.plan.types import Plan
from governance.policy.units import format_bytes
from governance.report.common import (
    action_dollars,
    by_run,
    charge,
    deletes,
    iso,
    kept_words,
    reading_order,
    saving_words,
    timeline,
    usd,
)
from governance.wording import shown

ACTION_LIMIT = 5000
"""Markdown tables beyond this many rows help nobody; the CSV has every object."""


class Code(str):
    """Text shown as code in a cell (a URI, a path): one code span of its own, however
    many backticks it holds (`_code`)."""


class Raw(str):
    """A cell already written as Markdown (`_cell` leaves it as it is)."""


def _code(text: str) -> str:
    """`text` as a Markdown code span, as CommonMark reads one: fenced by one backtick
    more than its longest run of them, and padded with a space where it begins or ends
    with one (`` `` job `7`.log `` ``), so a key holding backticks shows as it is."""
    text = shown(text)  # (a line break in a key escaped: as a space it named another)
    longest = max(map(len, re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _code_cell(text: str) -> str:
    """`_code` for a table cell: a pipe escaped (GFM reads `\\|` as `|` in code too)."""
    return _code(text.replace("|", "\\|"))


def _cell(value: object) -> str:
    """Text for a table cell: `_text`, except a `Code` cell (one code span) and a `Raw`
    one (already Markdown: escaping it again would show its backslashes)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Code):
        return _code_cell(value)
    return _text(value)


_NEWLINE = re.compile(r"\r\n|\r|\n")
_MARKUP = re.compile(r"[\\`*\[\]~|<>&]|(?<![^\W_])_|_(?![^\W_])")
_AS_ENTITY = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_BLOCK_START = re.compile(r"[#+-]|\d{1,9}(?=[.)])")


def _text(value: object) -> str:
    """Plain text (a run's or rule's name, a reason, a note) as Markdown inline text that
    renders as typed, in a table cell, a list item or after a bold label: on one line,
    and every character Markdown or GFM would read as markup escaped.

    A backslash goes before the characters that make emphasis, strikethrough, links,
    code spans or table cells (`*`, `_`, `~`, `[`, `]`, a backtick, `|`, a backslash:
    CommonMark allows one before any ASCII punctuation); `_` only where it could open or
    close emphasis (not inside a word: `STANDARD_IA`, `protect.min_age` stay as they
    are). What HTML would take as markup (`<`, `>`, `&`: Markdown passes HTML through,
    so a viewer would run a run named `<img src=x onerror=...>`) becomes an entity. No
    backtick is left to open a code span, so the whole text is escaped alike. Ends are
    trimmed: Markdown would drop the spaces anyway, and a trailing one would keep a
    `**bold**` name from closing."""
    text = "" if value is None else str(value)
    text = shown(_NEWLINE.sub(" ", text).strip())  # (an ESC sequence, a bidi override)
    return _MARKUP.sub(lambda m: _AS_ENTITY.get(m[0]) or "\\" + m[0], text)


def _item(value: object) -> str:
    """`_text` for the start of a list item, where a leading `#`, `-`, `+` or `1.` would
    begin a heading or a nested list: that mark escaped too (`\\# 1`, `1\\. done`)."""
    text = _text(value)
    m = _BLOCK_START.match(text)
    if m is None:
        return text
    if m[0][:1].isdigit():  # the `.` or `)` after the number makes it a list
        return f"{m[0]}\\{text[m.end() :]}"
    return f"\\{text}"


def _table(header: list[str], rows: list[list[object]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    lines = ["| " + " | ".join(header) + " |"]
    lines.append(
        "| " + " | ".join("---:" if i in right else "---" for i in range(len(header))) + " |"
    )
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def write_markdown(plan: Plan, out: TextIO) -> None:
    """`render_markdown` (whose tables are capped: it is a few megabytes at most)."""
    out.write(render_markdown(plan))


def render_markdown(plan: Plan) -> str:
    s = plan.summary
    out = [f"# Plan {_code(plan.plan_id)}", ""]
    out += [
        f"- **Status:** {_text(plan.status)}",
        f"- **As of:** {iso(plan.as_of)}",
        f"- **Created:** {iso(plan.created_at)} by {_text(plan.created_by)}",
        f"- **Policy:** {_code(plan.policy_path or '-')} "
        f"(sha256 {_code(plan.policy_sha256 or '-')})",
        f"- **Fingerprint:** {_code(plan.fingerprint)}",
        "",
    ]
    if plan.refusal:
        out += [f"> **Refused:** {_text(plan.refusal)}", ""]
    out += ["## Totals", ""]
    out += _table(
        ["actions", "objects", "deleted", "transitioned", "archived"],
        [
            [
                f"{s.actions:,}",
                f"{s.objects:,}",
                format_bytes(s.bytes_deleted),
                format_bytes(s.bytes_transitioned),
                format_bytes(s.bytes_archived),
            ]
        ],
        right={0, 1, 2, 3, 4},
    )
    gone = deletes(plan)
    if gone is not None:
        out += [
            "",
            f"> **Deletes: {_text(gone.how)}**"
            if gone.permanent
            else f"**Deletes:** {_text(gone.how)}",
        ]
    out += [
        "",
        f"**Monthly cost:** {usd(s.monthly_cost_before_usd)} → {usd(s.monthly_cost_after_usd)}"
        f" ({saving_words(s.monthly_cost_before_usd, s.monthly_cost_after_usd)})",
        "",
        f"**One-off costs:** {charge(s.early_deletion_usd)} early deletion, "
        f"{charge(s.request_cost_usd)} requests.",
    ]
    out.append("")
    if plan.notes:
        out += ["## Notes", "", *[f"- {_item(n)}" for n in plan.notes], ""]
    if plan.history is not None:
        out += ["## History", "", *[f"- {_item(n)}" for n in plan.history.lines()], ""]
    out += _by_rule(plan) + _left(plan) + _by_run(plan) + _timeline(plan)
    out += _actions(plan) + _kept(plan)
    return "\n".join(out).rstrip() + "\n"


def _by_rule(plan: Plan) -> list[str]:
    if not plan.summary.by_rule:
        return []
    rows: list[list[object]] = [
        [
            name,
            f"{r.actions:,}",
            f"{r.objects:,}",
            format_bytes(r.bytes_deleted),
            format_bytes(r.bytes_transitioned),
            format_bytes(r.bytes_archived),
        ]
        for name, r in plan.summary.by_rule.items()
    ]
    header = ["rule", "actions", "objects", "deleted", "transitioned", "archived"]
    return ["## By rule", "", *_table(header, rows, {1, 2, 3, 4, 5}), ""]


def _left(plan: Plan) -> list[str]:
    if not plan.summary.left:
        return []
    rows: list[list[object]] = [
        [
            x.rule or "(no rule)",
            x.kind,
            f"{x.artifacts:,}",
            format_bytes(x.bytes),
            Raw(f"{_code_cell(x.example_uri)}: {_text(x.example_reason)}"),
        ]
        for x in plan.summary.left
    ]
    header = ["rule", "kind", "artifacts", "bytes", "for example"]
    intro = "Artifacts no action touches and the kept list does not name, by rule and kind."
    return ["## Left as they are", "", intro, "", *_table(header, rows, {2, 3}), ""]


def _by_run(plan: Plan) -> list[str]:
    totals = by_run(plan)
    if not totals:
        return []
    rows: list[list[object]] = [
        [
            t.label,
            t.root_url,
            f"{t.actions:,}",
            f"{t.objects:,}",
            format_bytes(t.bytes_deleted),
            format_bytes(t.bytes_transitioned + t.bytes_archived),
            f"{t.kept:,}",
        ]
        for t in totals
    ]
    header = ["run", "root", "actions", "objects", "deleted", "moved", "kept artifacts"]
    return ["## By run", "", *_table(header, rows, {2, 3, 4, 5, 6}), ""]


def _timeline(plan: Plan) -> list[str]:
    rows = timeline(plan)
    if not rows:
        return []
    out = ["## Checkpoints per run", ""]
    many_roots = len({row.root_url for row in rows}) > 1
    for row in rows:
        steps = ", ".join(f"{_text(c.label)} {c.phrase}" for c in row.cells)
        where = f" ({_text(row.root_url)})" if many_roots else ""  # as the html report does
        out.append(f"- **{_text(row.run)}**{where}: {row.counts_line()} — {steps}")
    return [*out, ""]


def _actions(plan: Plan) -> list[str]:
    if not plan.actions:
        return ["## Actions", "", "No actions: the policy keeps everything.", ""]
    rows: list[list[object]] = [
        [
            a.id,
            a.rule,
            a.tier or "",
            str(a.action),
            a.storage_class or (Code(a.dest_url) if a.dest_url else ""),
            Code(a.artifact.uri),
            f"{len(a.objects):,}",
            format_bytes(a.bytes),
            action_dollars(a),
            a.reason,
        ]
        for a in reading_order(plan.actions, ACTION_LIMIT)
    ]
    header = ["#", "rule", "tier", "action", "to", "artifact", "objects", "bytes", "$", "reason"]
    out = ["## Actions", "", *_table(header, rows, {0, 6, 7, 8})]
    if len(plan.actions) > ACTION_LIMIT:
        more = len(plan.actions) - ACTION_LIMIT
        out += ["", f"… and {more:,} more actions (`--format csv` lists every object)."]
    return [*out, ""]


def _kept(plan: Plan) -> list[str]:
    if not plan.kept:
        return []
    counts = Counter((k.rule or "-", k.tier or "-", kept_words(k.how)) for k in plan.kept)
    rows: list[list[object]] = [
        [rule, tier, how, f"{n:,}"] for (rule, tier, how), n in sorted(counts.items())
    ]
    return ["## Kept", "", *_table(["rule", "tier", "how", "artifacts"], rows, {3}), ""]
