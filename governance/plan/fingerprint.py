"""The plan fingerprint: what an approval binds to (invariant 6).

A SHA-256 over a canonical JSON of the actions and the kept list. Only what apply acts on
and what the plan promises to keep goes in (rule, tier, action, artifact URI, each
object's URI/size/ETag/version id, target class or URL; kept URI/rule/tier/how), never the
plan id, creation time, reasons or costs, so the same catalog, policy and `as_of` give the
same fingerprint, and reordering the input does not change it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from governance.plan.types import KeptArtifact, PlannedAction


def _action_doc(a: PlannedAction) -> dict[str, Any]:
    return {
        "rule": a.rule,
        "tier": a.tier,
        "action": a.action.value,
        "artifact": a.artifact.uri,
        "objects": sorted(
            ([o.uri, o.size, o.etag, o.version_id] for o in a.objects),
            key=lambda row: (row[0], row[3] or ""),
        ),
        "storage_class": a.storage_class,
        "dest_url": a.dest_url,
    }


def _kept_doc(k: KeptArtifact) -> dict[str, Any]:
    return {"artifact": k.artifact.uri, "rule": k.rule, "tier": k.tier, "how": k.how.value}


def fingerprint(actions: Sequence[PlannedAction], kept: Sequence[KeptArtifact]) -> str:
    """`sha256:<hex>` of the canonical plan content; independent of the input order."""
    docs = sorted(
        (_action_doc(a) for a in actions),
        key=lambda d: json.dumps(d, sort_keys=True, separators=(",", ":")),
    )
    kept_docs = sorted(
        (_kept_doc(k) for k in kept),
        key=lambda d: json.dumps(d, sort_keys=True, separators=(",", ":")),
    )
    text = json.dumps(
        {"version": 1, "actions": docs, "kept": kept_docs},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
