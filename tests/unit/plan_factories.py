"""In-memory builders of runs, artifacts and snapshots for the planner tests, and hypothesis
strategies that generate whole runs (steps, ages, completeness, statuses, metrics, tags).

Everything is relative to `AS_OF`; ages are given as timedeltas or days.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from governance.model.types import (
    Artifact,
    CatalogObject,
    Component,
    Group,
    Kind,
    Member,
    Run,
    RunStatus,
)
from governance.plan.build import RootSnapshot, build_plan
from governance.plan.types import KeptArtifact, Plan, PlannedAction
from governance.policy import load_policy, load_policy_text
from governance.policy.models import Policy

AS_OF = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
ROOT = "s3://ml-artifacts/"
KiB, MiB, GiB = 2**10, 2**20, 2**30
EXAMPLE_POLICY_PATH = Path(__file__).resolve().parents[2] / "policies" / "retention.yaml"


def example_policy() -> Policy:
    """The shipped example policy (policies/retention.yaml)."""
    return load_policy(EXAMPLE_POLICY_PATH)


KEEP_LAST_1_RESIDUE = """
layout: {runs: ["runs/{run}/"]}
protect: {min_age: 12h}
rules:
  - name: residue
    select: {kind: residue}
    expire: {after: 12h}
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""
"""Runs under `runs/`, residue expires after 12h, each run keeps its newest checkpoint:
what a completeness test plans with (the newest complete one kept, the rest deleted)."""


def policy(body: str, *, storage: str = ROOT) -> Policy:
    """A policy from a YAML fragment (rules, protect, ...); `version` and `storage` added."""
    head = f"version: 1\nstorage:\n  - name: main\n    url: {storage}\n"
    return load_policy_text(head + body)


OBJECT_ATTRIBUTES: list[dict[str, Any]] = [
    {"legal_hold": True},
    {"lock_mode": "GOVERNANCE", "retain_until": AS_OF + timedelta(days=1)},
    {"lock_mode": "COMPLIANCE", "retain_until": AS_OF - timedelta(days=1)},  # lapsed
    {"unread": "tags"},
    {"unread": "lock"},
    {"unread": "tags lock"},
]
"""An object's lock state, or what protection lacks of it, as the catalog reads them."""


def transition_policy(kind: str, storage_class: str, rule: str = "logs") -> Policy:
    """One rule moving every artifact of `kind` to `storage_class` once a day old."""
    return policy(
        f"""
protect: {{min_age: 1d}}
rules:
  - name: {rule}
    select: {{kind: {kind}}}
    transition: [{{after: 1d, storage_class: {storage_class}}}]
"""
    )


def ago(days: float) -> datetime:
    return AS_OF - timedelta(days=days)


def obj(
    key: str,
    size: int = 1 * MiB,
    age_days: float = 10,
    *,
    storage_class: str | None = None,
    tags: dict[str, str] | None = None,
    upload_id: str = "",
    version_id: str | None = None,
) -> CatalogObject:
    return CatalogObject(
        key=key,
        size=size,
        last_modified=ago(age_days),
        etag='"' + hashlib.md5(f"{key}:{size}".encode()).hexdigest() + '"',
        storage_class=storage_class,
        version_id=version_id,
        upload_id=upload_id,
        tags=tags,
    )


FULL_STATE: tuple[tuple[str, Component, int], ...] = (
    ("model.safetensors", Component.WEIGHTS, 4 * MiB),
    ("optimizer.pt", Component.OPTIMIZER, 8 * MiB),
    ("scheduler.pt", Component.SCHEDULER, 200 * KiB),
    ("rng_state.pth", Component.RNG, 130 * KiB),
    ("trainer_state.json", Component.METADATA, 2 * KiB),
)


def checkpoint(
    run_key: str,
    step: int | None,
    age_days: float = 10,
    *,
    complete: bool = True,
    metrics: dict[str, float] | None = None,
    strippable: bool = True,
    files: Sequence[tuple[str, Component, int]] = FULL_STATE,
    storage_class: str | None = None,
    tags: dict[str, str] | None = None,
    name: str | None = None,
) -> Artifact:
    """An HF-style checkpoint directory `<run_key>checkpoint-<step>/` with the given files."""
    key = f"{run_key}{name or f'checkpoint-{step}'}/"
    members = [
        Member(obj(key + f, size, age_days, storage_class=storage_class, tags=tags), comp)
        for f, comp, size in files
    ]
    return Artifact.of_members(
        key,
        Kind.CHECKPOINT if complete or age_days <= 3 else Kind.RESIDUE,
        "hf",
        members,
        run=run_key,
        step=step,
        complete=complete,
        completeness_reason="" if complete else "no trainer_state.json",
        metrics=dict(metrics or {}),
        strippable=strippable,
    )


def single(
    key: str,
    kind: Kind,
    size: int = 1 * MiB,
    age_days: float = 10,
    *,
    storage_class: str | None = None,
    tags: dict[str, str] | None = None,
    run_key: str | None = None,
    component: Component = Component.OTHER,
) -> Artifact:
    """A one-object artifact (a log, a dataset file, a temp file)."""
    o = obj(key, size, age_days, storage_class=storage_class, tags=tags)
    return Artifact(key, kind, "file", [o], (component,), run=run_key)


def upload(key: str, size: int = 5 * MiB, age_days: float = 10) -> Artifact:
    """A stale multipart upload (residue with an upload id)."""
    o = obj(key, size, age_days, upload_id="upl-" + hashlib.md5(key.encode()).hexdigest()[:8])
    return Artifact(key, Kind.RESIDUE, "multipart-upload", [o], (Component.OTHER,), complete=False)


def run(
    name: str,
    status: RunStatus = RunStatus.COMPLETED,
    last_write_days: float | None = None,
    artifacts: Iterable[Artifact] = (),
    *,
    key: str | None = None,
    attributes: dict[str, str] | None = None,
) -> Run:
    """A run; its last write defaults to the newest object of `artifacts` (else 10 days ago)."""
    arts = list(artifacts)
    if last_write_days is not None:
        last = ago(last_write_days)
    elif arts:
        last = max(a.last_modified for a in arts)
    else:
        last = ago(10)
    return Run(
        key=key or f"runs/{name}/",
        name=name,
        status=status,
        status_reason="test",
        last_write=last,
        attributes={"run": name, **(attributes or {})},
    )


def group(
    name: str | None,
    artifacts: Sequence[Artifact],
    status: RunStatus = RunStatus.COMPLETED,
    **kwargs: object,
) -> Group:
    """A group of one run named `name` (None: objects outside any run)."""
    if name is None:
        return Group(run=None, artifacts=list(artifacts))
    r = run(name, status, artifacts=artifacts, **kwargs)  # type: ignore[arg-type]
    return Group(run=r, artifacts=list(artifacts))


def snapshot(
    groups: Sequence[Group],
    url: str = ROOT,
    *,
    total_bytes: int | None = None,
    classes: bool = True,
    scan_id: int = 1,
) -> RootSnapshot:
    """A root snapshot; its total bytes default to the sum of its artifacts."""
    if total_bytes is None:
        total_bytes = sum(a.bytes for g in groups for a in g.artifacts)
    return RootSnapshot(url, scan_id, total_bytes, classes, list(groups))


# ----------------------------------------------------------------------------- hypothesis


@st.composite
def checkpoints_of(draw: st.DrawFn, run_key: str) -> list[Artifact]:
    """0-10 checkpoints with unique steps (sometimes none at all), random ages and states."""
    n = draw(st.integers(0, 10))
    # every checkpoint with a step, none, or some (Lightning's `last.ckpt` among steps)
    mode = draw(st.sampled_from(["steps", "steps", "none", "some"]))
    steps = draw(st.lists(st.integers(0, 40_000), min_size=n, max_size=n, unique=True))
    out: list[Artifact] = []
    for i, step in enumerate(steps):
        with_steps = mode == "steps" or (mode == "some" and draw(st.booleans()))
        age = draw(st.integers(0, 120 * 24)) / 24
        complete = draw(st.sampled_from([True, True, True, False]))
        metrics = {}
        if draw(st.booleans()):
            metrics["eval_loss"] = draw(st.sampled_from([0.5, 0.7, 1.0, 1.25, 2.0]))
        tags = draw(st.sampled_from([None, None, None, {"retain": "true"}, {"legal-hold": "x"}]))
        out.append(
            checkpoint(
                run_key,
                step if with_steps else None,
                age,
                complete=complete,
                metrics=metrics,
                strippable=draw(st.sampled_from([True, True, False])),
                tags=tags,
                name=None if with_steps else f"ckpt-{i}",
            )
        )
    return out


@st.composite
def run_groups(draw: st.DrawFn, index: int = 0, prefix: str = "runs/") -> Group:
    """One run: checkpoints, maybe logs, residue and a stale upload; any status. The run
    lives at `<prefix>r<index>/`."""
    name = f"r{index}"
    run_key = f"{prefix}{name}/"
    artifacts = draw(checkpoints_of(run_key))
    for j in range(draw(st.integers(0, 2))):
        artifacts.append(
            single(f"{run_key}logs/events-{j}.log", Kind.LOG, 300 * KiB, draw(st.integers(0, 400)),
                   run_key=run_key)
        )  # fmt: skip
    if draw(st.booleans()):
        artifacts.append(
            single(f"{run_key}tmp-checkpoint-9/x.bin", Kind.RESIDUE, 1 * MiB,
                   draw(st.integers(0, 30)), run_key=run_key)
        )  # fmt: skip
    if draw(st.booleans()):
        artifacts.append(upload(f"{run_key}upload.bin", 2 * MiB, draw(st.integers(0, 30))))
    status = draw(st.sampled_from(list(RunStatus)))
    if not artifacts:
        artifacts.append(single(f"{run_key}config.yaml", Kind.OTHER, 1 * KiB, 5, run_key=run_key))
    return group(name, sorted(artifacts, key=lambda a: a.key), status, key=run_key)


@st.composite
def root_groups(draw: st.DrawFn) -> list[Group]:
    """1-4 runs and a protected release folder outside any run."""
    groups = [draw(run_groups(i)) for i in range(draw(st.integers(1, 4)))]
    release = single("releases/v1/model.safetensors", Kind.WEIGHTS, 3 * MiB, 200)
    groups.append(group(None, [release]))
    return groups


PROTECTED_PREFIX = "releases/"
"""Keys under the example policy's `protect.paths` (`s3://ml-artifacts/releases/**`)."""


@st.composite
def dead_run_group(draw: st.DrawFn, index: int, prefix: str = PROTECTED_PREFIX) -> Group:
    """A failed or abandoned run long past every expiry at `<prefix>r<index>/`: complete
    and incomplete checkpoints, logs, residue and a stale upload, all 30-400 days old.
    Anywhere else, the example policy's `failed-runs` rule would delete every one of them."""
    name = f"r{index}"
    run_key = f"{prefix}{name}/"
    artifacts: list[Artifact] = []
    steps = draw(st.lists(st.integers(0, 40_000), min_size=1, max_size=5, unique=True))
    for step in steps:
        artifacts.append(
            checkpoint(run_key, step, draw(st.integers(30, 400)), complete=draw(st.booleans()),
                       metrics={"eval_loss": draw(st.sampled_from([0.5, 1.0]))})
        )  # fmt: skip
    for j in range(draw(st.integers(1, 2))):
        artifacts.append(
            single(f"{run_key}logs/events-{j}.log", Kind.LOG, 300 * KiB,
                   draw(st.integers(30, 400)), run_key=run_key)
        )  # fmt: skip
    if draw(st.booleans()):
        artifacts.append(
            single(f"{run_key}tmp-checkpoint-9/x.bin", Kind.RESIDUE, 1 * MiB,
                   draw(st.integers(30, 400)), run_key=run_key)
        )  # fmt: skip
    if draw(st.booleans()):
        artifacts.append(upload(f"{run_key}upload.bin", 2 * MiB, draw(st.integers(30, 400))))
    status = draw(st.sampled_from([RunStatus.FAILED, RunStatus.ABANDONED]))
    return group(name, sorted(artifacts, key=lambda a: a.key), status, key=run_key)


@st.composite
def released_groups(draw: st.DrawFn) -> list[Group]:
    """`root_groups`, plus runs stored under the protected path `releases/`: one long dead
    (see `dead_run_group`), 0-2 of any kind (as `run_groups` makes them), and old logs
    outside any run. Rules would delete or transition most of them, were they not there."""
    groups = draw(root_groups())
    groups.append(draw(dead_run_group(10)))
    for i in range(draw(st.integers(0, 2))):
        groups.append(draw(run_groups(11 + i, prefix=PROTECTED_PREFIX)))
    loose = [
        single(f"{PROTECTED_PREFIX}notes/build-{j}.log", Kind.LOG, 300 * KiB,
               draw(st.integers(30, 400)))
        for j in range(draw(st.integers(0, 2)))
    ]  # fmt: skip
    if loose:
        groups.append(group(None, loose))
    return groups


# ----------------------------------------------------------------------------- plan helpers


def make_plan(groups_or_roots: Sequence[Group] | Sequence[RootSnapshot], pol: Policy) -> Plan:
    """Plan one root of `groups` (or the given snapshots) at AS_OF."""
    roots: list[RootSnapshot]
    if groups_or_roots and isinstance(groups_or_roots[0], RootSnapshot):
        roots = [r for r in groups_or_roots if isinstance(r, RootSnapshot)]
    else:
        roots = [snapshot([g for g in groups_or_roots if isinstance(g, Group)])]
    return build_plan(roots, pol, AS_OF, plan_id="p-test", created_by="tester", created_at=AS_OF)


def actions_for(plan: Plan, key: str, root: str = ROOT) -> list[PlannedAction]:
    return [a for a in plan.actions if a.artifact.uri == root + key]


def kept_for(plan: Plan, key: str, root: str = ROOT) -> KeptArtifact | None:
    found = [k for k in plan.kept if k.artifact.uri == root + key]
    assert len(found) <= 1, found
    return found[0] if found else None


def kinds(plan: Plan, key: str, root: str = ROOT) -> list[str]:
    """The action types planned on one artifact, e.g. ['strip', 'archive']."""
    return [a.action.value for a in actions_for(plan, key, root)]
