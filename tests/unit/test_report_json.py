"""`--format json` carries every field of the spec/cli.md plan schema, with the right types."""

from __future__ import annotations

import json
from typing import Any

from governance.report import render
from tests.unit.plan_samples import sample_plan

TOP = {
    "plan_id": str,
    "fingerprint": str,
    "policy": dict,
    "as_of": str,
    "status": str,
    "summary": dict,
    "actions": list,
    "kept": list,
}
SUMMARY = {
    "actions": int,
    "objects": int,
    "bytes_deleted": int,
    "bytes_transitioned": int,
    "bytes_archived": int,
    "monthly_cost_before_usd": float,
    "monthly_cost_after_usd": float,
    "by_rule": dict,
}
ACTION = {
    "id": int,
    "rule": str,
    "tier": (str, type(None)),
    "action": str,
    "destructive": bool,
    "artifact": dict,
    "objects": list,
    "bytes": int,
    "reason": str,
}
ARTIFACT = {"uri": str, "kind": str, "run": (str, type(None)), "step": (int, type(None))}
OBJECT = {"uri": str, "size": int, "etag": str, "last_modified": str}
KEPT = {"artifact": dict, "rule": (str, type(None)), "tier": (str, type(None)), "reason": str}


def _check(doc: dict[str, Any], shape: dict[str, Any]) -> None:
    for key, kind in shape.items():
        assert key in doc, key
        assert isinstance(doc[key], kind), (key, doc[key])


def test_every_schema_field_is_present_with_its_type() -> None:
    plan = sample_plan()
    doc = json.loads(render(plan, "json"))
    _check(doc, TOP)
    assert doc["policy"] == {"path": "policies/retention.yaml", "sha256": "cd" * 32}
    assert doc["as_of"] == "2026-11-30T02:15:00Z"
    assert doc["status"] == "pending_approval"
    assert doc["fingerprint"].startswith("sha256:")
    _check(doc["summary"], SUMMARY)
    assert doc["summary"]["by_rule"]["checkpoints"] == {
        "actions": 3,
        "objects": 4,
        "bytes_deleted": 7000,
        "bytes_transitioned": 0,
        "bytes_archived": 9000,
    }
    assert len(doc["actions"]) == 6
    for action in doc["actions"]:
        _check(action, ACTION)
        _check(action["artifact"], ARTIFACT)
        assert action["objects"]
        for obj in action["objects"]:
            _check(obj, OBJECT)
            assert obj["last_modified"].endswith("Z")
        assert action["bytes"] == sum(o["size"] for o in action["objects"])
    first = doc["actions"][0]
    assert first["artifact"]["step"] == 1000
    assert first["objects"][1]["uri"].endswith("/optimizer.pt")
    assert {a["action"] for a in doc["actions"]} == {
        "delete",
        "strip",
        "archive",
        "transition",
        "abort_upload",
        "dedupe",
    }
    for kept in doc["kept"]:
        _check(kept, KEPT)
        _check(kept["artifact"], ARTIFACT)


def test_refusal_and_extras_are_there() -> None:
    doc = json.loads(render(sample_plan(refusal="over 50 TiB"), "json"))
    assert doc["status"] == "refused"
    assert doc["refusal"] == "over 50 TiB"
    assert doc["notes"] == ["transitions do not apply to file:///data/scratch/"]
    assert doc["summary"]["early_deletion_usd"] == 0.01
    assert doc["summary"]["left"] == [
        {
            "rule": "logs",
            "kind": "log",
            "artifacts": 12,
            "bytes": 3 * 1024**2,
            "example": {"uri": "s3://ml-artifacts/logs/a|b.log", "reason": "not due <yet>"},
        },
        {
            "rule": None,
            "kind": "other",
            "artifacts": 2,
            "bytes": 10,
            "example": {"uri": "s3://ml-artifacts/README.md", "reason": "no rule matches"},
        },
    ]
    assert doc["actions"][3]["storage_class"] == "STANDARD_IA"
    assert doc["kept"][0]["how"] == "whole"
