"""The plan as JSON: exactly the schema of spec/cli.md, plus extra fields it allows.

`plan_document` is the single source of the plan's JSON shape; `govern plans` reuses its
policy and summary parts so the two documents never disagree.
"""

from __future__ import annotations

import json
from typing import Any

from governance.plan.types import Plan, PlanStatus, PlanSummary
from governance.report.common import action_dict, iso, kept_dict


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
        "actions": [action_dict(a) for a in plan.actions],
        "kept": [kept_dict(k) for k in plan.kept],
    }


def render_json(plan: Plan) -> str:
    return json.dumps(plan_document(plan), indent=2, ensure_ascii=False) + "\n"
