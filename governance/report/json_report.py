"""The plan as JSON: exactly the schema of spec/cli.md, plus extra fields it allows.

`plan_document` is the single source of the plan's JSON shape; `govern plans` reuses its
policy and summary parts so the two documents never disagree. `write_json` writes the
same document indented, with each action and kept artifact on a line of its own: a
large plan streams in bounded memory through the C encoder (an indented encoding is
pure Python, ten times slower), and `grep` finds an action whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, TextIO

from governance.plan.types import Plan, PlanStatus, PlanSummary
from governance.report.common import action_dict, deletes, iso, kept_dict


def summary_document(summary: PlanSummary) -> dict[str, Any]:
    return {
        "actions": summary.actions,
        "objects": summary.objects,
        "bytes_deleted": summary.bytes_deleted,
        "bytes_transitioned": summary.bytes_transitioned,
        "bytes_archived": summary.bytes_archived,
        "monthly_cost_before_usd": summary.monthly_cost_before_usd,
        "monthly_cost_after_usd": summary.monthly_cost_after_usd,
        "early_deletion_usd": summary.early_deletion_usd,
        "request_cost_usd": summary.request_cost_usd,
        "by_rule": {
            name: {
                "actions": r.actions,
                "objects": r.objects,
                "bytes_deleted": r.bytes_deleted,
                "bytes_transitioned": r.bytes_transitioned,
                "bytes_archived": r.bytes_archived,
            }
            for name, r in summary.by_rule.items()
        },
        "left": [
            {
                "rule": x.rule,
                "kind": x.kind,
                "artifacts": x.artifacts,
                "bytes": x.bytes,
                "example": {"uri": x.example_uri, "reason": x.example_reason},
            }
            for x in summary.left
        ],
    }


def policy_document(path: str | None, sha256: str | None) -> dict[str, Any]:
    return {"path": path, "sha256": sha256}


def plan_document(plan: Plan) -> dict[str, Any]:
    """The whole plan as JSON-ready data."""
    doc = _head_document(plan)
    doc["actions"] = [action_dict(a) for a in plan.actions]
    doc["kept"] = [kept_dict(k) for k in plan.kept]
    return doc


def _head_document(plan: Plan) -> dict[str, Any]:
    """`plan_document` up to its two lists (left empty): everything but actions and kept."""
    return {
        "plan_id": plan.plan_id,
        "fingerprint": plan.fingerprint,
        "policy": policy_document(plan.policy_path, plan.policy_sha256),
        "as_of": iso(plan.as_of),
        "created_at": iso(plan.created_at),
        "created_by": plan.created_by,
        "status": PlanStatus(plan.status).value,
        "refusal": plan.refusal,
        "notes": list(plan.notes),
        "scans": dict(plan.scans),
        "summary": summary_document(plan.summary),
        "deletes": _deletes_document(plan),
        **({"history": plan.history.document()} if plan.history is not None else {}),
        "actions": [],
        "kept": [],
    }


def _deletes_document(plan: Plan) -> dict[str, Any] | None:
    """How apply carries out the plan's deletes and whether they can come back (null
    when the plan has no destructive action); see `common.Deletes`."""
    found = deletes(plan)
    return None if found is None else found.document()


_LISTS_END = '"actions": [],\n  "kept": []\n}'
"""How the indented head document ends: its two lists, written in place of this."""


def write_json(plan: Plan, out: TextIO) -> None:
    """`plan_document` as JSON, written as it is encoded (see the module docstring)."""
    head = json.dumps(_head_document(plan), indent=2, ensure_ascii=False)
    if not head.endswith(_LISTS_END):  # the lists are the document's last two keys
        raise AssertionError("plan document: actions and kept must come last")
    out.write(head[: -len(_LISTS_END)] + '"actions": [')
    write_json_items(out, _batches(map(action_dict, plan.actions)))
    out.write(',\n  "kept": [')
    write_json_items(out, _batches(map(kept_dict, plan.kept)))
    out.write("\n}\n")


def write_json_items(out: TextIO, pages: Iterable[list[dict[str, Any]]]) -> None:
    """A list's items, page by page, one per line (indented under a key of an indented
    document, whose `[` is written already), then its `]`: what a large document streams
    through the C encoder (an indented encoding is pure Python, ten times slower)."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    wrote = False
    for page in pages:
        if page:
            out.write(("," if wrote else "") + "\n    " + ",\n    ".join(map(encode, page)))
            wrote = True
    out.write("\n  ]" if wrote else "]")


def _batches(items: Iterable[dict[str, Any]], size: int = 2000) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch
