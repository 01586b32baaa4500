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
                a.reason,
            )


def write_csv(plan: Plan, out: TextIO) -> None:
    """The header, then a row per object, written as they come."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(iter_rows(plan))
