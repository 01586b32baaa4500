#!/usr/bin/env python3
"""Benchmark planning against reading the same rows from the catalog, in one run.

From the issue: "A catalog of 1,000,000 objects in 10,000 runs with 50 checkpoints each:
the time to plan against the time to read those rows from the catalog, and the plan's
peak memory. Target: within 3x of the raw read; memory bounded by the plan's size, not
the catalog's."

1. **Catalog.** A real SQLite catalog (`open_engine`: the migrated schema) with one root
   `s3://bench-plan/`, one complete scan and the object rows, bulk-inserted with Core
   `executemany`: R runs (`--runs`, default 10,000) under `{team}/{project}/runs/{run}/`
   with C checkpoints each (`--checkpoints`, default 50; `--n` objects in all sets
   C = n / runs / 2). A checkpoint is two objects, a DeepSpeed tag
   `global_step<N>/mp_rank_00_model_states.pt` (weights, 4 GB) and
   `global_step<N>/zero_pp_rank_0_mp_rank_00_optim_states.pt` (optimizer, 12 GB), steps
   1000 apart, saves 2 hours apart; each run has DeepSpeed's `latest` (naming its last
   tag, so every tag is complete), 6 runs in 10 a `COMPLETED` marker and 1 in 10 a
   `FAILED` marker; the others are running or abandoned by age. Runs start spread over
   120 days before `AS_OF`. (Two objects per checkpoint cannot be a *complete* Hugging
   Face checkpoint: the Trainer's needs `trainer_state.json` and `config.json` besides
   the weights, and an incomplete checkpoint past the grace period is residue; a plan of
   half a million residue deletes would measure nothing interesting.) The catalog's
   metadata cache holds every `latest` file, as the first plan after a scan leaves it
   (`refresh_metadata` reads what the cache lacks): a nightly plan finds it complete, so
   planning reads no storage (the root is not reachable from the benchmark anyway); so
   does every object's tags (none: the example policy protects by tag, and a plan reads
   what the catalog lacks) and the root's Object Lock answer (none). The
   file goes to `bench-out/plan/` (git-ignored) and is reused by a later run with the
   same sizes.
2. **Phases**, each in its own child process (this script re-invoked with `--phase`), so
   that each one's peak RSS is its own (`os.wait4` rusage, via `_common.run_measured`):
   - *read*: `iter_live_objects(engine, root_id)` fully consumed (builds every
     `CatalogObject` through Core's result rows: "reading the rows");
   - *raw read*: `stream_live_objects(engine, root_id)`, the same objects read straight
     from the DBAPI cursor, as the planner itself reads them (about twice as fast): the
     strictest reference, so the build is judged against both;
   - *floor*: the least work any plan of this shape takes in this design, with no
     classification, rule or cost in it: the raw read, objects grouped by folder, one
     `PlannedAction` (holding the folder's catalog objects) per folder, and the fingerprint of
     those actions, with the garbage collector off. It shows how much
     of the build is the planner's logic and how much is holding a plan of half a million
     actions as Python objects at all;
   - *plan*: what `plan.service.make_plan` does with the example policy
     (`policies/retention.yaml` with its storage pointed at the root) at `AS_OF`:
     `root_snapshots` + `build_plan` (classification streamed from the catalog, then
     every decision; every key here is under a layout template, so classification's pass
     one over keys is never needed: see `model.classify`), timed as *build*; then `save_plan`, timed as *save*,
     into a scratch copy of the catalog (the benchmark catalog never grows). The peak RSS
     after the build alone is reported too (`getrusage` in the child).
   - *plan, no rule acts*: the same with the example policy's rules replaced by one
     matching nothing here (`quiet_policy`): every object read and classified, no action,
     every checkpoint on the kept list; its peak memory beside the full plan's shows that
     memory follows what the plan holds, not the catalog it reads.
   Seconds are measured inside the child around the phase only (no interpreter start-up,
   imports or engine opening); the notes give each phase's CPU seconds too, the steadier
   figure when other work shares the machine.

Usage (from the repository root):

    .venv/bin/python scripts/bench/plan.py                           # 1,000,000 / 10,000
    .venv/bin/python scripts/bench/plan.py --n 100000 --runs 1000    # smoke check
    .venv/bin/python scripts/bench/plan.py --json
    .venv/bin/python scripts/bench/plan.py --repeat 3                # fastest of 3, interleaved

`--profile` prints a cProfile of the plan build (to stderr) instead of benchmarking.
Exit status: 0, even when the target is missed; 1 when a phase failed; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import shutil
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH_OUT,
    REPO_ROOT,
    Row,
    fill_objects,
    log,
    print_table,
    rows_as_json,
    run_phase_child,
)

LAYOUT_VERSION = 1
ROOT_URL = "s3://bench-plan/"
TEAMS = 10
PROJECTS_PER_TEAM = 10
AS_OF = datetime(2026, 11, 30, tzinfo=UTC)
SPREAD = timedelta(days=120)
SAVE_EVERY = timedelta(hours=2)
STEP = 1000
MODEL_BYTES = 4_000_000_000
OPTIM_BYTES = 12_000_000_000
TARGET_RATIO = 3.0
EXAMPLE_POLICY = REPO_ROOT / "policies" / "retention.yaml"
EXTRA_FIELDS = (
    "actions",
    "kept",
    "action_objects",
    "by_action",
    "bytes_deleted",
    "status",
    "refusal",
    "build_cpu_seconds",
    "save_cpu_seconds",
    "cpu_seconds",
)


# --------------------------------------------------------------------------- synthetic data


def _us(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1_000_000


def generate(runs: int, checkpoints: int) -> Iterator[tuple[str, int, int]]:
    """(key, size, last_modified µs) of the whole root, in any order."""
    per_team = max(runs // TEAMS, 1)
    for i in range(runs):
        team = min(i // per_team, TEAMS - 1)
        project = (i % per_team) * PROJECTS_PER_TEAM // per_team
        prefix = f"team-{team:02d}/project-{project:02d}/runs/run-{i:06d}/"
        # starts spread over SPREAD before AS_OF (a multiplicative hash: not sorted by i)
        start = AS_OF - SPREAD + timedelta(minutes=(i * 7919) % int(SPREAD.total_seconds() // 60))
        t = start
        for k in range(checkpoints):
            t = start + SAVE_EVERY * k
            d = f"{prefix}global_step{(k + 1) * STEP}/"
            lm = _us(t)
            yield d + "mp_rank_00_model_states.pt", MODEL_BYTES, lm
            yield d + "zero_pp_rank_0_mp_rank_00_optim_states.pt", OPTIM_BYTES, lm
        end = _us(t + timedelta(minutes=5))
        yield prefix + "latest", 16, end
        if i % 10 == 0:
            yield prefix + "FAILED", 0, end
        elif i % 10 <= 6:
            yield prefix + "COMPLETED", 0, end


def catalog_path(runs: int, checkpoints: int) -> Path:
    return BENCH_OUT / "plan" / f"catalog-r{runs}-c{checkpoints}-v{LAYOUT_VERSION}.db"


def _live_count(engine: Any, root_id: int) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM objects WHERE root_id = :r AND gone_scan_id IS NULL"),
                {"r": root_id},
            ).scalar_one()
        )


def expected_objects(runs: int, checkpoints: int) -> int:
    markers = sum(1 for i in range(runs) if i % 10 <= 6)
    return runs * checkpoints * 2 + runs + markers


def ensure_catalog(runs: int, checkpoints: int) -> Path:
    """The catalog file for (runs, checkpoints): reused when complete, else built."""
    from governance.catalog.engine import open_engine
    from governance.catalog.roots import find_root, finish_scan, get_or_create_root, start_scan

    path = catalog_path(runs, checkpoints)
    want = expected_objects(runs, checkpoints)
    url = f"sqlite:///{path}"
    if path.exists():
        engine = open_engine(url)
        root = find_root(engine, ROOT_URL)
        count = _live_count(engine, root.id) if root is not None and root.id is not None else -1
        engine.dispose()
        if count == want:
            log(f"reusing {path.relative_to(REPO_ROOT)} ({count:,} objects)")
            fill_meta_cache(path, checkpoints)
            fill_attributes(path)
            return path
        log(f"{path.name} holds {count:,} objects, not {want:,}: rebuilding")
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    start = time.perf_counter()
    engine = open_engine(url)
    root_id = get_or_create_root(engine, ROOT_URL, "bench")
    scan_id = start_scan(engine, root_id, "bench")
    written, total = fill_objects(engine, root_id, scan_id, generate(runs, checkpoints))
    finish_scan(
        engine, scan_id, status="complete", objects_listed=written, bytes_listed=total,
        objects_new=written,
    )  # fmt: skip
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    if written != want:
        raise SystemExit(f"generator wrote {written} objects, not {want}")
    fill_meta_cache(path, checkpoints)
    fill_attributes(path)
    log(
        f"built {path.relative_to(REPO_ROOT)}: {written:,} objects in {time.perf_counter() - start:.1f} s"
    )
    return path


def fill_attributes(path: Path) -> None:
    """Every object's tags read (none) and the bucket known to have no Object Lock, as the
    first plan after a scan leaves them (`plan.service.root_snapshots` reads what the
    catalog lacks: the example policy protects by tag), unless already so."""
    import sqlite3

    db = sqlite3.connect(path)
    try:
        with db:
            db.execute("UPDATE objects SET tags = '{}' WHERE tags IS NULL")
            db.execute(
                "UPDATE roots SET object_lock = 0, tags_read_scan_id = "
                "(SELECT max(id) FROM scans WHERE scans.root_id = roots.id "
                "AND status = 'complete') WHERE tags_read_scan_id IS NULL"
            )
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def fill_meta_cache(path: Path, checkpoints: int) -> None:
    """Cache every run's DeepSpeed `latest` (naming its last tag), unless already cached."""
    import sqlite3

    latest = f"global_step{checkpoints * STEP}".encode()
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(
                "INSERT OR IGNORE INTO meta_cache (root_id, key, etag, content) "
                "SELECT root_id, key, etag, ? FROM objects "
                "WHERE key LIKE '%/latest' AND gone_scan_id IS NULL",
                (latest,),
            )
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def bench_policy(dest: Path) -> Path:
    """policies/retention.yaml with its storage block pointed at the benchmark root."""
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    text, n = re.subn(
        r"^storage:.*?\n\n", f"storage:\n  - name: bench\n    url: {ROOT_URL}\n\n", text,
        count=1, flags=re.S | re.M,
    )  # fmt: skip
    if n != 1:
        raise SystemExit(f"cannot find the storage block of {EXAMPLE_POLICY}")
    dest.write_text(text, encoding="utf-8")
    return dest


def quiet_policy(source: Path, dest: Path) -> Path:
    """The benchmark policy with its rules replaced by one that matches nothing here
    (datasets): the same storage, layout and protections, so the same read and
    classification of every object, and a plan of no action, whose kept list names every
    checkpoint (a plan lists each checkpoint it leaves, and why). Its peak memory against
    the full plan's shows what memory follows: what the plan holds, not the objects read."""
    text = source.read_text(encoding="utf-8")
    text, n = re.subn(
        r"^rules:.*?(?=^\S)",
        "rules:\n  - name: datasets\n    select: {kind: dataset}\n    expire: {after: 3650d}\n\n",
        text,
        count=1,
        flags=re.S | re.M,
    )
    if n != 1:
        raise SystemExit(f"cannot find the rules block of {source}")
    dest.write_text(text, encoding="utf-8")
    return dest


# --------------------------------------------------------------------------- phases (child)


def _maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _build(engine: Any, policy: Any) -> Any:
    """What `make_plan` does before saving (the policy is loaded by the caller, untimed)."""
    from governance.catalog.plans import new_plan_id
    from governance.plan.build import build_plan
    from governance.plan.service import root_snapshots

    now = datetime.now(UTC)
    roots = root_snapshots(engine, policy, AS_OF)
    return build_plan(
        roots, policy, AS_OF, plan_id=new_plan_id(now), created_by="bench", created_at=now
    )


def _floor(engine: Any, root_id: int, tags: bool) -> int:
    """The floor phase (see the module docstring); returns how many actions it made."""
    from governance.catalog.queries import stream_live_objects
    from governance.plan.fingerprint import fingerprint
    from governance.plan.types import ActionType, ArtifactRef, PlannedAction

    actions: list[Any] = []
    delete = ActionType.DELETE

    def act(folder: str, members: list[Any]) -> None:
        ref = ArtifactRef(ROOT_URL + folder, "checkpoint", None, None, ROOT_URL)
        actions.append(  # (the plan holds the catalog objects themselves: `ObjectRef`)
            PlannedAction(0, "floor", None, delete, True, ref, members, "floor", None, None)
        )

    gc.disable()  # the least it can cost: no collection at all (the build freezes, see build)
    try:
        # One action per folder, in the order of their URIs, as a plan orders its actions
        # (the fingerprint then hashes them as they come; out of that order it sorts them
        # all, which a plan never needs): a run's own files (`COMPLETED`, `latest`) come
        # before and after its tag folders in key order, so folders are gathered, not cut.
        folders: dict[str, list[Any]] = {}
        for o in stream_live_objects(engine, root_id, tags=tags):
            key = o.key
            here = key[: key.rfind("/") + 1]
            members = folders.get(here)
            if members is None:
                members = folders[here] = []
            members.append(o)
        for folder, members in folders.items():
            act(folder, members)
        fingerprint(actions, [])
    finally:
        gc.enable()
    return len(actions)


def _load_policy(policy_path: Path) -> Any:
    """The policy, with the planner's modules imported (neither is timed: `make_plan`
    gets a loaded policy). `normalize_url` imports fsspec on first use: done here too."""
    import governance.plan.build
    import governance.plan.service  # noqa: F401
    from governance.policy import load_policy
    from governance.storage import normalize_url

    normalize_url(ROOT_URL)
    return load_policy(policy_path)


def run_phase(phase: str, path: Path, policy_path: Path) -> dict[str, Any]:
    """One phase in this process; returns its figures (printed as JSON by the caller)."""
    from governance.catalog.engine import open_engine
    from governance.catalog.plans import save_plan
    from governance.catalog.queries import iter_live_objects, stream_live_objects
    from governance.catalog.roots import find_root
    from governance.plan.service import uses_tags

    engine = open_engine(f"sqlite:///{path}")
    root = find_root(engine, ROOT_URL)
    assert root is not None
    assert root.id is not None
    policy = _load_policy(policy_path)  # with the planner's imports: not timed
    out: dict[str, Any] = {"phase": phase, "baseline_rss_kib": _maxrss_kib()}
    start = time.perf_counter()
    cpu = time.process_time()
    if phase in ("read", "stream"):
        count = 0
        reader = iter_live_objects if phase == "read" else stream_live_objects
        # the rows as the planner reads them: with what protection needs (tags, here)
        for _ in reader(engine, root.id, tags=uses_tags(policy)):
            count += 1
        out["objects"] = count
        out["seconds"] = time.perf_counter() - start
        out["cpu_seconds"] = time.process_time() - cpu
    elif phase == "floor":
        actions = _floor(engine, root.id, uses_tags(policy))
        out["seconds"] = time.perf_counter() - start
        out["cpu_seconds"] = time.process_time() - cpu
        out["objects"] = _live_count(engine, root.id)
        out["actions"] = actions
    elif phase == "plan":
        plan = _build(engine, policy)
        out["build_seconds"] = time.perf_counter() - start
        out["build_cpu_seconds"] = time.process_time() - cpu
        out["build_rss_kib"] = _maxrss_kib()
        t = time.perf_counter()
        c = time.process_time()
        save_plan(engine, plan)
        out["save_seconds"] = time.perf_counter() - t
        out["save_cpu_seconds"] = time.process_time() - c
        out["seconds"] = time.perf_counter() - start
        out["cpu_seconds"] = time.process_time() - cpu
        out["objects"] = _live_count(engine, root.id)
        s = plan.summary
        out.update(
            status=str(plan.status),
            actions=len(plan.actions),
            kept=len(plan.kept),
            action_objects=s.objects,
            by_action=_by_action(plan),
            bytes_deleted=s.bytes_deleted,
            refusal=plan.refusal,
        )
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    out["peak_rss_kib"] = _maxrss_kib()
    engine.dispose()
    return out


def _by_action(plan: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in plan.actions:
        counts[str(a.action)] = counts.get(str(a.action), 0) + 1
    return dict(sorted(counts.items()))


def profile(path: Path, policy_path: Path, top: int) -> None:
    """cProfile of the plan build, sorted by cumulative and own time, to stderr."""
    import cProfile
    import pstats

    from governance.catalog.engine import open_engine

    engine = open_engine(f"sqlite:///{path}")
    policy = _load_policy(policy_path)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    plan = _build(engine, policy)
    prof.disable()
    log(f"build: {time.perf_counter() - start:.2f} s under cProfile, {len(plan.actions):,} actions")
    stats = pstats.Stats(prof, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


# --------------------------------------------------------------------------- driver


def _child(phase: str, path: Path, policy_path: Path) -> tuple[dict[str, Any], int]:
    return run_phase_child(
        __file__, "--phase", phase, "--db", str(path), "--policy-file", str(policy_path)
    )


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def catalog_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options of a benchmark over this catalog (`report.py` shares them): its size,
    `--json`, and the hidden ones a phase's child process is given."""
    p = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--n", type=int, help="objects (about): sets --checkpoints to n / runs / 2")
    p.add_argument("--runs", type=int, default=10_000, help="runs (default 10,000)")
    p.add_argument("--checkpoints", type=int, default=50, help="checkpoints per run (default 50)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--policy-file", type=Path, help=argparse.SUPPRESS)
    return p


def catalog_size(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`--n` into `--checkpoints`; a bad argument error for sizes below 1."""
    if args.n is not None:
        args.checkpoints = max(args.n // max(args.runs, 1) // 2, 1)
    if args.runs < 1 or args.checkpoints < 1:
        p.error("need --runs >= 1 and --checkpoints >= 1")


def main(argv: list[str] | None = None) -> int:
    p = catalog_parser(__doc__)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the read and plan phases this many times, interleaved; keep the fastest of each",
    )
    p.add_argument("--profile", action="store_true", help="cProfile the plan build instead")
    p.add_argument("--top", type=int, default=30, help="rows of --profile output")
    args = p.parse_args(argv)
    if args.phase:
        print(json.dumps(run_phase(args.phase, args.db, args.policy_file)))
        return 0
    catalog_size(p, args)
    if args.repeat < 1:
        p.error("need --repeat >= 1")

    path = ensure_catalog(args.runs, args.checkpoints)
    work = path.parent / "scratch"
    work.mkdir(exist_ok=True)
    # per process: two benchmarks run at once must not share (or delete) each other's files
    policy_path = bench_policy(work / f"policy-{os.getpid()}.yaml")
    quiet_path = quiet_policy(policy_path, work / f"policy-quiet-{os.getpid()}.yaml")
    if args.profile:
        try:
            profile(path, policy_path, args.top)
        finally:
            policy_path.unlink(missing_ok=True)
            quiet_path.unlink(missing_ok=True)
        return 0
    scratch = work / f"catalog-{os.getpid()}.db"
    reads: list[tuple[dict[str, Any], int]] = []
    streams: list[tuple[dict[str, Any], int]] = []
    floors: list[tuple[dict[str, Any], int]] = []
    plans: list[tuple[dict[str, Any], int]] = []
    quiets: list[tuple[dict[str, Any], int]] = []
    try:
        for i in range(1, args.repeat + 1):
            _remove_db(scratch)
            # plans are saved into a fresh copy each time, never into the reusable catalog
            shutil.copyfile(path, scratch)
            log(f"read {i}/{args.repeat} ...")
            reads.append(read_rss := _child("read", path, policy_path))
            log(f"read: {read_rss[0]['seconds']:.2f} s, peak RSS {read_rss[1] / 1024:.0f} MB")
            streams.append(fast := _child("stream", path, policy_path))
            log(f"raw read: {fast[0]['seconds']:.2f} s")
            floors.append(least := _child("floor", path, policy_path))
            log(f"floor: {least[0]['seconds']:.2f} s ({least[0]['actions']:,} actions)")
            log(f"plan {i}/{args.repeat} ...")
            plans.append(done := _child("plan", scratch, policy_path))
            log(f"plan: build {done[0]['build_seconds']:.2f} s + save "
                f"{done[0]['save_seconds']:.2f} s, peak RSS {done[1] / 1024:.0f} MB")  # fmt: skip
            quiets.append(calm := _child("plan", scratch, quiet_path))
            log(f"plan of nothing: build {calm[0]['build_seconds']:.2f} s, peak RSS "
                f"{calm[1] / 1024:.0f} MB ({calm[0]['actions']} actions, "
                f"{calm[0]['kept']} kept)")  # fmt: skip
    except RuntimeError as exc:
        log(f"a phase failed: {exc}")
        return 1
    finally:
        _remove_db(scratch)
        policy_path.unlink(missing_ok=True)
        quiet_path.unlink(missing_ok=True)
    read, read_rss = min(reads, key=lambda r: r[0]["seconds"])
    raw, raw_rss = min(streams, key=lambda r: r[0]["seconds"])
    floor, floor_rss = min(floors, key=lambda r: r[0]["seconds"])
    plan, plan_rss = min(plans, key=lambda r: r[0]["build_seconds"])
    quiet, _ = min(quiets, key=lambda r: r[0]["build_seconds"])

    build_ratio = plan["build_seconds"] / read["seconds"]
    raw_ratio = plan["build_seconds"] / raw["seconds"]
    total_ratio = plan["seconds"] / read["seconds"]
    target = f"<= {TARGET_RATIO:g}x read"
    size = (
        f"{plan['actions']:,} actions ({plan['action_objects']:,} objects), {plan['kept']:,} kept"
    )
    rows = [
        Row(
            "read (iter_live_objects)",
            read["seconds"],
            read["objects"],
            read_rss / 1024,
            extra={"cpu_seconds": read["cpu_seconds"]},
        ),
        Row(
            "plan build (classify + decide)",
            plan["build_seconds"],
            plan["objects"],
            plan["build_rss_kib"] / 1024,
            ratio=build_ratio,
            reference="read",
            target=target,
            target_met=build_ratio <= TARGET_RATIO,
            note=size,
        ),
        Row(
            "raw read (stream_live_objects)",
            raw["seconds"],
            raw["objects"],
            raw_rss / 1024,
            extra={"cpu_seconds": raw["cpu_seconds"]},
            note="the planner's own reader: rows from the DBAPI cursor",
        ),
        Row(
            "plan build vs raw read",
            plan["build_seconds"],
            plan["objects"],
            None,
            ratio=raw_ratio,
            reference="raw read",
            target=f"<= {TARGET_RATIO:g}x raw read",
            target_met=raw_ratio <= TARGET_RATIO,
        ),
        Row(
            "floor (read, group, hold actions)",
            floor["seconds"],
            floor["objects"],
            floor_rss / 1024,
            ratio=floor["seconds"] / raw["seconds"],
            reference="raw read",
            extra={"cpu_seconds": floor["cpu_seconds"], "actions": floor["actions"]},
            note=f"{floor['actions']:,} actions, no planning logic; build = "
            f"{plan['build_seconds'] / floor['seconds']:.2f}x this",
        ),
        Row(
            "plan build, no rule acts",
            quiet["build_seconds"],
            quiet["objects"],
            quiet["build_rss_kib"] / 1024,
            ratio=quiet["build_seconds"] / raw["seconds"],
            reference="raw read",
            extra={"actions": quiet["actions"], "kept": quiet["kept"]},
            note=f"{quiet['actions']:,} actions, {quiet['kept']:,} kept (every checkpoint, "
            "listed as left alone): the same objects read and classified, no objects held",
        ),
        Row("plan save (save_plan)", plan["save_seconds"], None, None, note="into a scratch copy"),
        Row(
            "make_plan (build + save)",
            plan["seconds"],
            plan["objects"],
            plan_rss / 1024,
            ratio=total_ratio,
            reference="read",
            target=target,
            target_met=total_ratio <= TARGET_RATIO,
            note=f"status {plan['status']}",
            extra={k: plan[k] for k in EXTRA_FIELDS},
        ),
    ]
    notes = [
        f"catalog: {path.relative_to(REPO_ROOT)}: {args.runs:,} runs x {args.checkpoints} "
        f"checkpoints x 2 objects (+ latest and markers); policy: {EXAMPLE_POLICY.name} on "
        f"{ROOT_URL}, as of {AS_OF:%Y-%m-%d}",
        f"plan: {size}; by action {plan['by_action']}",
        "seconds: the phase alone, inside its child process (no start-up, imports, engine "
        f"opening); fastest of {args.repeat} (read and plan interleaved)",
        f"CPU seconds of the same phases (steadier than wall time on a shared machine): read "
        f"{read['cpu_seconds']:.2f}, raw read {raw['cpu_seconds']:.2f}, build {plan['build_cpu_seconds']:.2f} "
        f"({plan['build_cpu_seconds'] / read['cpu_seconds']:.2f}x), save "
        f"{plan['save_cpu_seconds']:.2f}, build + save {plan['cpu_seconds']:.2f} "
        f"({plan['cpu_seconds'] / read['cpu_seconds']:.2f}x)",
        f"peak RSS: wait4 rusage of each phase's process (build row: getrusage after the "
        f"build, before saving); after imports and opening the catalog a phase holds "
        f"~{read['baseline_rss_kib'] / 1024:.0f} MB",
        f"memory target: the build's RSS follows what the plan holds, not the catalog it "
        f"reads: {plan['build_rss_kib'] / 1024:.0f} MB for {size}; "
        f"{quiet['build_rss_kib'] / 1024:.0f} MB for {quiet['actions']:,} actions and "
        f"{quiet['kept']:,} kept over the same {read['objects']:,} objects (after imports "
        f"and opening the catalog a phase holds ~{read['baseline_rss_kib'] / 1024:.0f} MB)",
    ]
    if plan["refusal"]:
        notes.append(
            f"the plan is refused by a safety limit (timing is unaffected): {plan['refusal'][:160]}"
        )
    if args.json:
        print(
            rows_as_json(
                rows,
                benchmark="plan",
                runs=args.runs,
                checkpoints=args.checkpoints,
                objects=read["objects"],
                target_ratio=TARGET_RATIO,
                python=sys.version.split()[0],
            )
        )
    else:
        print_table(rows, f"plan: {read['objects']:,} objects, {args.runs:,} runs", notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
