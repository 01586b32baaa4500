"""The plan as CSV: one row per object acted on, for spreadsheets and review tools."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import TextIO

from governance.plan.types import ActionType, Plan
from governance.report.common import iso

COLUMNS = (
    "plan_id",
    "action_id",
    "rule",
    "tier",
    "action",
    "destructive",
    "artifact_uri",
    "object_uri",
    "size",
    "etag",
    "last_modified",
    "storage_class",
    "target_storage_class",
    "dest_url",  # an archive's copy to another location: where it goes
    "reason",
)


def iter_rows(plan: Plan) -> Iterator[tuple[object, ...]]:
    """The CSV rows (without the header), in action then object order."""
    for a in plan.actions:
        action = ActionType(a.action).value
        root = a.artifact.root_url
        for o in a.objects:
            yield (
                plan.plan_id,
                a.id,
                a.rule,
                a.tier or "",
                action,
                "true" if a.destructive else "false",
                a.artifact.uri,
                root + o.key,
                o.size,
                o.etag,
                iso(o.last_modified),
                o.storage_class or "",
                a.storage_class or "",
                a.dest_url or "",
                a.reason,
            )


def write_csv(plan: Plan, out: TextIO) -> None:
    """The header, then a row per object, written as they come.

    Lines end in '\n', and the csv module then quotes a field holding '\n' but not one
    holding a carriage return, which every reader takes for a line break: a row whose
    text holds one (a key may) is written with every field quoted, so each object stays
    one row."""
    writer = csv.writer(out, lineterminator="\n")
    quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(COLUMNS)
    for row in iter_rows(plan):
        # A rule or tier name is the policy writer's to choose, and a reason starts
        # with one: a spreadsheet would run one beginning with `=` (`=HYPERLINK(...)`)
        # as a formula. Such a field gets a leading `'`, as OWASP advises against CSV
        # injection (a URI always begins with its scheme; sizes and times are ours).
        if any(str(row[i])[:1] in _FORMULA_START for i in _WORDS):
            row = tuple(_inert(v) if i in _WORDS else v for i, v in enumerate(row))
        # (the fields that hold names or words: the artifact's and object's URIs, the
        # rule, the reason; checked by what the row's text holds, not field by field)
        if any("\r" in str(row[i]) for i in _TEXTS):
            quoted.writerow(row)
        else:
            writer.writerow(row)


_WORDS = tuple(COLUMNS.index(c) for c in ("rule", "tier", "etag", "reason"))
_TEXTS = tuple(
    COLUMNS.index(c) for c in ("rule", "artifact_uri", "object_uri", "dest_url", "reason")
)
_FORMULA_START = frozenset("=+-@\t\r")


def _inert(value: object) -> object:
    """A text field a spreadsheet would read as a formula, made plain text."""
    if isinstance(value, str) and value[:1] in _FORMULA_START:
        return "'" + value
    return value
