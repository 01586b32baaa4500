"""`--format md` shows names and words as typed: a run folder called `exp*big*`,
`run_[a](http://x)`, `a|b` or `# 1`, a reason or note holding a newline, is text in the
rendered report, never emphasis, a link, HTML, a heading, a nested list or a broken table.

Checked by parsing the report as a viewer does (markdown-it-py: CommonMark with GFM
tables and strikethrough) and comparing the text of each cell, list item and bold name
with what was typed.
"""

from __future__ import annotations

import re
import string
from dataclasses import replace

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from governance.history import DecisionEntry, PlanHistory
from governance.plan.types import ArtifactRef, LeftSummary, Plan, RuleSummary
from governance.report import render
from governance.report.common import natural_key
from tests.unit.plan_samples import AS_OF, ROOT, sample_plan

VIEWER = MarkdownIt("commonmark").enable(["table", "strikethrough"])

TRICKY = [
    "exp*big*",
    "run_[a](http://x)",
    "a|b",
    "|lead and trail|",
    "x<y>&z",
    "<img src=x onerror=alert(1)>",
    "<http://autolink.example>",
    "`tick` and ``two``",
    "# 1 heading",
    "###",
    "1. first",
    "2) second",
    "- dash",
    "+ plus",
    "> quote",
    "***",
    "___",
    "---",
    "~~struck~~ ~one~",
    "_under_ and __strong__",
    "__init__.py",
    "snake_case_name STANDARD_IA",
    "a\\*b\\_c",
    "trailing\\",
    "![img](x.png)",
    "[ref]: http://x",
    "*a **b** c*",
    "&amp; &#42; &copy; &nbsp;",
    "    indented code",
    "```fence",
    "~~~ tilde fence",
    "line one\nline two",
    "cr\rlf\r\nend",
    "two\n\n# paragraphs",
    "a | b\n| --- |",
    "é_ü *é* [ü]",
]
"""Names and words that Markdown or GFM would take as markup."""

PUNCTUATION = [
    pattern.format(c=c)
    for c in string.punctuation
    for pattern in ("{c}", "{c}{c}{c}", "a{c}b{c}c", "{c}x{c}", "x {c}y{c} z", "{c}{c}x{c}{c}")
]
"""Every ASCII punctuation character alone, doubled around a word, inside and between
words (CommonMark lets a backslash escape each: they are where markup comes from)."""

NAMES = list(dict.fromkeys(TRICKY + PUNCTUATION))


def shown(typed: str) -> str:
    """What a reader should see of `typed`: the same characters, on one line (a newline
    in a cell or a list item is a space), without the spaces Markdown trims at its ends."""
    return re.sub(r"\r\n|\r|\n", " ", typed).strip()


def kids(inline: Token) -> list[Token]:
    """The tokens inside an inline token, without the empty text ones markdown-it leaves
    where a delimiter was."""
    return [t for t in inline.children or [] if t.type != "text" or t.content]


def plain(inline: Token) -> str:
    """The text of an inline token, asserting it holds nothing but text: no emphasis,
    link, image, HTML, code span, strikethrough or line break."""
    children = kids(inline)
    assert [t.type for t in children if t.type != "text"] == [], inline.content
    return "".join(t.content for t in children)


def section(tokens: list[Token], title: str) -> list[Token]:
    """The tokens under the `## title` heading, up to the next heading."""
    start = next(
        i
        for i, t in enumerate(tokens)
        if t.type == "inline" and t.content == title and tokens[i - 1].tag == "h2"
    )
    end = next(
        (i for i in range(start + 2, len(tokens)) if tokens[i].type == "heading_open"),
        len(tokens),
    )
    return tokens[start + 2 : end]


def table_rows(tokens: list[Token]) -> list[list[Token]]:
    """The body rows of the one table in `tokens`, as the inline token of each cell."""
    assert [t.type for t in tokens].count("table_open") == 1
    rows: list[list[Token]] = []
    in_body = False
    for t in tokens:
        if t.type == "tbody_open":
            in_body = True
        elif in_body and t.type == "tr_open":
            rows.append([])
        elif in_body and t.type == "inline":
            rows[-1].append(t)
    return rows


def list_items(tokens: list[Token]) -> list[Token]:
    """The inline token of each item of the one flat list in `tokens`, asserting each item
    is a single line of text: no heading, nested list, quote, code block or break in it."""
    types = [t.type for t in tokens if t.type != "text"]
    items = types.count("list_item_open")
    assert types == [
        "bullet_list_open",
        *["list_item_open", "paragraph_open", "inline", "paragraph_close", "list_item_close"]
        * items,
        "bullet_list_close",
    ]
    return [t for t in tokens if t.type == "inline"]


def _with_names(names: list[str]) -> Plan:
    """The sample plan with an action per name: its run, rule, tier and reason the name."""
    plan = sample_plan()
    template = plan.actions[0]
    plan.actions = [
        replace(
            template,
            id=i,
            rule=name,
            tier=name,
            reason=name,
            artifact=ArtifactRef(f"{ROOT}runs/{i}/checkpoint-100/", "checkpoint", name, 100, ROOT),
        )
        for i, name in enumerate(names, start=1)
    ]
    plan.kept = []
    plan.summary = replace(
        plan.summary, by_rule={name: RuleSummary(1, 2, 3000, 0, 0) for name in names}
    )
    return plan


def test_rule_tier_and_reason_cells_show_as_typed() -> None:
    plan = _with_names(NAMES)
    tokens = VIEWER.parse(render(plan, "md"))
    rules = table_rows(section(tokens, "By rule"))
    assert [plain(row[0]) for row in rules] == [shown(n) for n in NAMES]
    actions = table_rows(section(tokens, "Actions"))
    assert len(actions) == len(NAMES)
    for row, a in zip(actions, plan.actions, strict=True):
        assert len(row) == 10
        assert [plain(row[i]) for i in (0, 1, 2, 9)] == [str(a.id), *[shown(a.rule)] * 3]
        # the artifact is still one code span holding its URI as it is
        [code] = kids(row[5])
        assert (code.type, code.content) == ("code_inline", a.artifact.uri)


def test_run_names_show_as_typed_in_the_by_run_table_and_the_timeline() -> None:
    plan = _with_names(NAMES)
    tokens = VIEWER.parse(render(plan, "md"))
    ordered = sorted(NAMES, key=natural_key)  # equal totals: by name, numbers as numbers
    runs = table_rows(section(tokens, "By run"))
    assert [plain(row[0]) for row in runs] == [shown(n) for n in ordered]
    assert {plain(row[1]) for row in runs} == {ROOT}
    for inline, name in zip(
        list_items(section(tokens, "Checkpoints per run")), ordered, strict=True
    ):
        # `**name**: counts — 100 deleted`: the name in bold, all of it, and nothing else
        first, *bold, last, rest = kids(inline)
        assert (first.type, last.type) == ("strong_open", "strong_close"), inline.content
        assert [t.type for t in bold] == ["text"], inline.content
        counts = ": 1 checkpoint: 0 kept, 0 stripped, 0 archived, 1 deleted — 100 deleted"
        assert (bold[0].content, rest.content) == (shown(name), counts)


def test_notes_and_history_lines_are_one_list_item_of_text_each() -> None:
    plan = sample_plan()
    plan.notes = NAMES
    plan.history = PlanHistory(
        "approved by *bob*",
        [DecisionEntry("approve", "_bob_ <b>", AS_OF, "# ok\n- [x](y) `z`", True)],
    )
    tokens = VIEWER.parse(render(plan, "md"))
    notes = list_items(section(tokens, "Notes"))
    assert [plain(t) for t in notes] == [shown(n) for n in NAMES]
    history = [plain(t) for t in list_items(section(tokens, "History"))]
    assert history[0] == "approval: approved by *bob*"
    assert history[1].endswith("  approved by _bob_ <b>: # ok - [x](y) `z`")


def test_the_refusal_and_the_maker_show_as_typed_after_their_labels() -> None:
    plan = sample_plan(refusal="over *limit* <now>\n# not a heading\n> nor a quote")
    plan.created_by = "__eve__ [admin](http://x)"
    tokens = VIEWER.parse(render(plan, "md"))
    quote = tokens.index(next(t for t in tokens if t.type == "blockquote_open"))
    assert [t.type for t in tokens[quote : quote + 5]] == [
        "blockquote_open",
        "paragraph_open",
        "inline",
        "paragraph_close",
        "blockquote_close",
    ]
    refused = kids(tokens[quote + 2])
    assert [t.type for t in refused] == ["strong_open", "text", "strong_close", "text"]
    assert refused[3].content == " over *limit* <now> # not a heading > nor a quote"
    [made] = [t for t in tokens if t.type == "inline" and t.content.startswith("**Created:**")]
    assert kids(made)[-1].content.endswith(" by __eve__ [admin](http://x)")
    assert [t.type for t in kids(made)] == [
        "strong_open",
        "text",
        "strong_close",
        "text",
    ]


def test_an_example_reason_beside_its_code_span_shows_as_typed() -> None:
    """The "for example" cell is Markdown already (a code span, then the reason): the URI
    is not escaped twice, the reason is escaped once."""
    plan = sample_plan()
    plan.summary = replace(
        plan.summary,
        left=[LeftSummary("*logs*", "log", 1, 1, f"{ROOT}logs/*a*|b.log", "not _due_ [yet]")],
    )
    tokens = VIEWER.parse(render(plan, "md"))
    [row] = table_rows(section(tokens, "Left as they are"))
    assert plain(row[0]) == "*logs*"
    code, text = kids(row[4])
    assert (code.type, code.content) == ("code_inline", f"{ROOT}logs/*a*|b.log")
    assert (text.type, text.content) == ("text", ": not _due_ [yet]")


@pytest.mark.parametrize(
    ("typed", "written"),
    [
        ("exp*big*", "exp\\*big\\*"),
        ("run_[a](http://x)", "run\\_\\[a\\](http://x)"),
        ("a|b", "a\\|b"),
        ("x<y>&z", "x&lt;y&gt;&amp;z"),
        ("`z` ~s~ \\", "\\`z\\` \\~s\\~ \\\\"),
        ("a\nb\r\nc", "a b c"),
        # `_` inside a word opens no emphasis: names of settings and classes stay readable
        ("protect.min_age STANDARD_IA", "protect.min_age STANDARD_IA"),
        ("_a_ b_ _c", "\\_a\\_ b\\_ \\_c"),
    ],
)
def test_inline_text_is_escaped_where_markdown_would_read_markup(typed: str, written: str) -> None:
    from governance.report.markdown import _text

    assert _text(typed) == written


@pytest.mark.parametrize(
    ("typed", "written"),
    [
        ("# 1", "\\# 1"),
        ("- a", "\\- a"),
        ("+ a", "\\+ a"),
        ("1. a", "1\\. a"),
        ("12) a", "12\\) a"),
        ("  1. a", "1\\. a"),
        ("2026-11-30T02:15:00Z  approved", "2026-11-30T02:15:00Z  approved"),
        ("a # b", "a # b"),
    ],
)
def test_a_list_item_escapes_what_would_start_a_heading_or_a_list(typed: str, written: str) -> None:
    from governance.report.markdown import _item

    assert _item(typed) == written
