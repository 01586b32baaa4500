"""The plan as one self-contained HTML file for a reviewer: inline CSS, no scripts or URLs.

The template (`templates/plan.html.j2`) reads top to bottom: refusal, totals and savings,
by rule, a per-run timeline of checkpoints, by run, then every action with its reason.
Autoescaping is on: object keys are user data and may hold `<` or `&`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any, TextIO

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from governance import __version__
from governance.plan.types import ActionType, Plan
from governance.policy.units import format_bytes
from governance.report.common import (
    STATE_LABELS,
    STATES,
    Lines,
    action_dollars,
    by_run,
    charge,
    deletes,
    iso,
    kept_words,
    one_off_text,
    reading_order,
    roots_of,
    saving_figure,
    timeline,
    usd,
)
from governance.wording import shown

ACTION_LIMIT = 50_000
"""Beyond this the file stops being readable in a browser; the CSV lists everything."""
OBJECTS_SHOWN = 20
"""Objects listed under each action (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class ActionView:
    id: int
    rule: str
    tier: str
    action: str
    css: str
    destructive: bool
    uri: str
    run: str
    objects: list[str]
    more_objects: int
    object_count: int
    bytes: str
    dollars: str  # what it saves a month, what it costs once (`action_dollars`)
    target: str
    reason: str


_CSS_FOR_ACTION = {
    ActionType.DELETE: "deleted",
    ActionType.DEDUPE: "deleted",
    ActionType.ABORT_UPLOAD: "deleted",
    ActionType.STRIP: "stripped",
    ActionType.ARCHIVE: "archived",
    ActionType.TRANSITION: "transitioned",
}


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("governance.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        # every printed value: a name's invisible characters (an ESC sequence, a bidi
        # override, a zero-width space) as escapes, as in every report a person reads
        finalize=_shown,
    )
    env.filters["bytes"] = format_bytes
    env.filters["usd"] = usd
    env.filters["charge"] = charge
    return env


def _action_view(a: Any) -> ActionView:
    root = a.artifact.root_url
    objects = [root + o.key for o in a.objects[:OBJECTS_SHOWN]]
    target = a.storage_class or a.dest_url or ""
    return ActionView(
        id=a.id,
        rule=a.rule,
        tier=a.tier or "",
        action=str(a.action),
        css=_CSS_FOR_ACTION[ActionType(a.action)],
        destructive=a.destructive,
        uri=a.artifact.uri,
        run=a.artifact.run or "",
        objects=objects,
        more_objects=len(a.objects) - len(objects),
        object_count=len(a.objects),
        bytes=format_bytes(a.bytes),
        dollars=action_dollars(a),
        target=target,
        reason=a.reason,
    )


def write_html(plan: Plan, out: TextIO) -> None:
    """The report as one HTML document, written as the template renders it."""
    for piece in _template().generate(**_context(plan)):
        out.write(piece)


def _template() -> Any:
    return _environment().get_template("plan.html.j2")


def _shown(value: Any) -> Any:
    """`wording.shown` of a string the template prints: a line break in a name escaped
    (raw, HTML showed it as a space: `a\nb.tmp` read as `a b.tmp`); a tooltip's own
    lines (`Lines`) kept."""
    if isinstance(value, Markup | Lines) or not isinstance(value, str):
        return value
    return shown(value)


def _context(plan: Plan) -> dict[str, Any]:
    """What the template reads."""
    s = plan.summary
    rows = timeline(plan)
    many_roots = len({r.root_url for r in rows}) > 1
    kept_counts = Counter((k.rule or "-", k.tier or "-", kept_words(k.how)) for k in plan.kept)
    return {
        "plan": plan,
        "s": s,
        "as_of": iso(plan.as_of),
        "created_at": iso(plan.created_at),
        "saving": dict(
            zip(
                ("figure", "label", "cost"),
                saving_figure(s.monthly_cost_before_usd, s.monthly_cost_after_usd),
                strict=True,
            )
        ),
        "one_off": one_off_text(s.early_deletion_usd, s.request_cost_usd),
        "deletes": deletes(plan),
        "roots": roots_of(plan),
        "by_rule": list(s.by_rule.items()),
        "left": s.left,
        "runs": by_run(plan),
        "timeline": rows,
        "many_roots": many_roots,
        "states": [(state, STATE_LABELS[state]) for state in STATES],
        "actions": [_action_view(a) for a in reading_order(plan.actions, ACTION_LIMIT)],
        "more_actions": max(0, len(plan.actions) - ACTION_LIMIT),
        "kept_counts": sorted(kept_counts.items()),
        "version": __version__,
    }
