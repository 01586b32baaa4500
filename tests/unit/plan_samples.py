"""A hand-built Plan covering every action type and kept form, for store and report tests.

Built directly from `governance.plan.types` so the tests do not depend on the planner.
Names carry characters that break naive renderers: `|` (Markdown), `<&` (HTML),
`[x]` (rich markup), a comma and a quote (CSV), and non-ASCII.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from governance.plan.fingerprint import fingerprint
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    LeftSummary,
    ObjectRef,
    Plan,
    PlannedAction,
    PlanStatus,
    PlanSummary,
    RuleSummary,
)

ROOT = "s3://ml-artifacts/"
AS_OF = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _obj(key: str, size: int, i: int, **kw: object) -> ObjectRef:
    return ObjectRef(
        key=key,
        size=size,
        etag=f'"etag-{i}"',
        last_modified=T0 + timedelta(hours=i, microseconds=123),
        **kw,  # type: ignore[arg-type]
    )


def _ckpt(run: str, step: int) -> ArtifactRef:
    return ArtifactRef(
        uri=f"{ROOT}runs/{run}/checkpoint-{step}/",
        kind="checkpoint",
        run=run,
        step=step,
        root_url=ROOT,
    )


def sample_plan(
    plan_id: str = "p-20261130-021500-3f9a",
    *,
    refusal: str | None = None,
    created_at: datetime | None = None,
    controls: dict[str, Any] | None = None,
) -> Plan:
    r1 = "r1|x<&é"
    r2 = "r2[x]"
    actions = [
        PlannedAction(
            id=1,
            rule="checkpoints",
            tier=None,
            action=ActionType.DELETE,
            destructive=True,
            artifact=_ckpt(r1, 1000),
            objects=[
                _obj(f"runs/{r1}/checkpoint-1000/model.safetensors", 1000, 1),
                _obj(f"runs/{r1}/checkpoint-1000/optimizer.pt", 2000, 2, version_id="v1"),
            ],
            reason="no tier keeps step 1000; otherwise: delete",
            monthly_cost_before_usd=0.5,
        ),
        PlannedAction(
            id=2,
            rule="checkpoints",
            tier="mid-term",
            action=ActionType.STRIP,
            destructive=True,
            artifact=_ckpt(r1, 4000),
            objects=[_obj(f"runs/{r1}/checkpoint-4000/optimizer.pt", 4000, 3)],
            reason='mid-term tier: step 4000 is the newest in bucket 0-4999; "optimizer", rng dropped',
        ),
        PlannedAction(
            id=3,
            rule="checkpoints",
            tier="long-term",
            action=ActionType.ARCHIVE,
            destructive=True,
            artifact=_ckpt(r2, 9000),
            objects=[_obj(f"runs/{r2}/checkpoint-9000/model.safetensors", 9000, 4)],
            reason="long-term tier: final",
            storage_class="DEEP_ARCHIVE",
        ),
        PlannedAction(
            id=4,
            rule="logs",
            tier=None,
            action=ActionType.TRANSITION,
            destructive=False,
            artifact=ArtifactRef(f"{ROOT}runs/{r2}/logs/", "log", r2, None, ROOT),
            objects=[_obj(f"runs/{r2}/logs/train.log", 500, 5, storage_class="STANDARD")],
            reason="older than 14d, to STANDARD_IA",
            storage_class="STANDARD_IA",
            early_deletion_usd=0.01,
        ),
        PlannedAction(
            id=5,
            rule="residue",
            tier=None,
            action=ActionType.ABORT_UPLOAD,
            destructive=True,
            artifact=ArtifactRef(f"{ROOT}tmp/big.bin", "residue", None, None, ROOT),
            objects=[_obj("tmp/big.bin", 64, 6, upload_id="up-1")],
            reason="stale multipart upload, 9d old",
        ),
        PlannedAction(
            id=6,
            rule="archive-copy",
            tier=None,
            action=ActionType.DEDUPE,
            destructive=True,
            artifact=ArtifactRef(f"{ROOT}copies/w.bin", "weights", None, None, ROOT),
            objects=[
                ObjectRef(
                    key="copies/w.bin",
                    size=7,
                    etag="e7",
                    last_modified=T0,
                )
            ],
            reason="duplicate of s3://ml-artifacts/w.bin, a comma, here",
        ),
    ]
    kept = [
        KeptArtifact(
            _ckpt(r1, 5000), "checkpoints", "recent", KeptHow.WHOLE, "one of the newest 3"
        ),
        KeptArtifact(_ckpt(r1, 4000), "checkpoints", "mid-term", KeptHow.STRIPPED, "bucket 0-4999"),
        KeptArtifact(_ckpt(r2, 9000), "checkpoints", "long-term", KeptHow.ARCHIVED, "final"),
        KeptArtifact(
            _ckpt(r2, 9500), None, None, KeptHow.IN_FLIGHT, "incomplete: no trainer_state"
        ),
        KeptArtifact(
            ArtifactRef(f"{ROOT}releases/v1/", "weights", None, None, ROOT),
            None,
            None,
            KeptHow.PROTECTED,
            "protect.paths",
        ),
    ]
    summary = PlanSummary(
        actions=6,
        objects=7,
        bytes_deleted=3000 + 4000 + 64 + 7,
        bytes_transitioned=500,
        bytes_archived=9000,
        early_deletion_usd=0.01,
        request_cost_usd=0.002,
        monthly_cost_before_usd=12.5,
        monthly_cost_after_usd=3.25,
        by_rule={
            "checkpoints": RuleSummary(3, 4, 7000, 0, 9000),
            "logs": RuleSummary(1, 1, 0, 500, 0),
            "residue": RuleSummary(1, 1, 64, 0, 0),
            "archive-copy": RuleSummary(1, 1, 7, 0, 0),
        },
        left=[
            LeftSummary("logs", "log", 12, 3 * 1024**2, f"{ROOT}logs/a|b.log", "not due <yet>"),
            LeftSummary(None, "other", 2, 10, f"{ROOT}README.md", "no rule matches"),
        ],
    )
    return Plan(
        plan_id=plan_id,
        fingerprint=fingerprint(actions, kept),  # (approve and apply check it)
        as_of=AS_OF,
        created_at=created_at or AS_OF + timedelta(seconds=5, microseconds=42),
        created_by="alice",
        policy_path="policies/retention.yaml",
        policy_sha256="cd" * 32,
        status=PlanStatus.REFUSED if refusal else PlanStatus.PENDING_APPROVAL,
        scans={ROOT: 7, "file:///data/scratch/": 3},
        actions=actions,
        kept=kept,
        summary=summary,
        refusal=refusal,
        notes=["transitions do not apply to file:///data/scratch/"],
        controls=dict(controls or {}),
    )
