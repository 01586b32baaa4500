#!/usr/bin/env python3
"""Benchmark classification against reading the same rows from the catalog, in one run.

From the issue: "A synthetic catalog of 1,000,000 objects in 10,000 runs: classification
time against the time to read the same rows from the catalog, in one run. Target: within
3x of the raw read, memory bounded by the largest run rather than the whole catalog."

1. **Catalog.** A real SQLite catalog (`open_engine`, so the schema is the migrated one)
   with one root and N object rows (`--n`, default 1,000,000) written with bulk Core
   `executemany`: R runs (`--runs`, default 10,000) under `{team}/{project}/runs/{run}/`,
   a mix of Hugging Face Trainer runs (sharded safetensors checkpoints, tokenizer files,
   W&B and TensorBoard logs, final weights, `COMPLETED`), Trainer + DeepSpeed runs
   (`checkpoint-N/global_stepN/` with ZeRO partitions, `latest`, `zero_to_fp32.py`),
   pure DeepSpeed runs and Lightning runs (`epoch=E-step=S.ckpt`, `last.ckpt`,
   `lightning_logs/`), some with an unfinished last checkpoint or a `.tmp` file, plus
   dataset shards outside the runs (`{team}/datasets/...`). The file goes to
   `bench-out/classify/` (git-ignored) and is reused by a later run with the same N, R and
   layout version.
2. **Phases**, each in its own child process (this script re-invoked with `--phase`), so
   that each one's peak RSS is its own (`os.wait4` rusage, via `_common.run_measured`):
   - *read*: iterate `iter_live_objects(engine, root_id)` to the end (that builds the
     `CatalogObject`s: it is "reading the rows");
   - *classify*: `classify(lambda: iter_live_objects(...), options, None, first_pass=...)`
     fully consumed, over the catalog as planning reads it (`plan.service.root_snapshots`):
     objects streamed once, and pass one over keys alone (`iter_live_keys` +
     `find_runs_by_keys`, then the few tracker objects fetched by key) when it is needed:
     at the first key no layout template matches (here the dataset shards outside runs;
     with `--no-templates`, the first key), see `model.classify`;
   - *classify_root* (unless `--skip-root`): `classify_root`, which also writes runs and
     artifacts to the catalog (metadata read through the catalog's cache; no store);
   - *classify CPU* (with `--cpu`): classification of objects preloaded into a list, the
     per-object classification cost alone (its RSS holds the whole catalog: not a memory
     figure).
   Seconds are measured inside the child around the phase only (no interpreter start-up,
   imports or engine opening); the child's `baseline` RSS after opening the engine is in
   the JSON output.

Usage (from the repository root):

    .venv/bin/python scripts/bench/classify.py                          # 1,000,000 / 10,000
    .venv/bin/python scripts/bench/classify.py --n 100000 --runs 1000   # smoke check
    .venv/bin/python scripts/bench/classify.py --json --repeat 3

`--profile` prints a cProfile of the classify phase (to stderr) instead of benchmarking.
Exit status: 0, even when the target is missed; 1 when a phase failed; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator
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

LAYOUT_VERSION = 2  # 2: tags stored as SQL NULL (as the scanner writes them), not JSON null
ROOT_URL = "file:///bench/classify/"
TEMPLATE = "{team}/{project}/runs/{run}/"
TEAMS = 10
PROJECTS_PER_TEAM = 10
AS_OF = datetime(2024, 9, 1, tzinfo=UTC)
T_START = datetime(2024, 1, 1, tzinfo=UTC)
TARGET_RATIO = 3.0


# --------------------------------------------------------------------------- synthetic data


def _us(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1_000_000


def _hf_checkpoint(step: int, deepspeed: bool, peft: bool) -> list[tuple[str, int]]:
    d = f"checkpoint-{step}/"
    files = [
        (d + "trainer_state.json", 4_000 + step),
        (d + "training_args.bin", 5_000),
        (d + "scheduler.pt", 1_000),
        (d + "rng_state.pth", 14_000),
        (d + "tokenizer.json", 2_000_000),
        (d + "tokenizer_config.json", 3_000),
        (d + "special_tokens_map.json", 500),
    ]
    if peft:
        files += [
            (d + "adapter_config.json", 700),
            (d + "adapter_model.safetensors", 50_000_000),
            (d + "optimizer.pt", 100_000_000),
        ]
    elif deepspeed:
        g = f"{d}global_step{step}/"
        files += [
            (d + "config.json", 700),
            (d + "generation_config.json", 200),
            (d + "model.safetensors", 2_000_000_000),
            (d + "latest", 16),
            (d + "zero_to_fp32.py", 30_000),
            (g + "mp_rank_00_model_states.pt", 1_000_000),
        ]
        files += [
            (g + f"bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt", 3_000_000_000)
            for r in range(4)
        ]
    else:
        files += [
            (d + "config.json", 700),
            (d + "generation_config.json", 200),
            (d + "model-00001-of-00002.safetensors", 4_900_000_000),
            (d + "model-00002-of-00002.safetensors", 1_100_000_000),
            (d + "model.safetensors.index.json", 25_000),
            (d + "optimizer.pt", 12_000_000_000),
        ]
    return files


def _deepspeed_tag(step: int) -> list[tuple[str, int]]:
    g = f"checkpoints/global_step{step}/"
    files = [(g + f"mp_rank_{m:02d}_model_states.pt", 3_000_000_000) for m in range(2)]
    files += [
        (g + f"zero_pp_rank_{r}_mp_rank_{m:02d}_optim_states.pt", 1_500_000_000)
        for r in range(4)
        for m in range(2)
    ]
    return files


def _lightning_ckpt(step: int, epoch: int) -> list[tuple[str, int]]:
    return [
        (
            f"checkpoints/epoch={epoch}-step={step}-val_loss={2.5 - step / 1e5:.3f}.ckpt",
            6_000_000_000,
        )
    ]


def _run_files(i: int, count: int) -> list[tuple[str, int]]:
    """About `count` (key, size) pairs of one run, relative to the run folder."""
    flavour = i % 8  # 0-3 Trainer, 4 Trainer+DeepSpeed, 5 PEFT, 6 DeepSpeed, 7 Lightning
    files: list[tuple[str, int]] = []
    if flavour == 7:
        files += [
            ("checkpoints/last.ckpt", 6_000_000_000),
            ("lightning_logs/version_0/hparams.yaml", 1_000),
            ("lightning_logs/version_0/metrics.csv", 200_000),
            ("lightning_logs/version_0/events.out.tfevents.1718000000.node1.1234.0", 5_000_000),
        ]
    elif flavour == 6:
        files += [
            ("checkpoints/latest", 16),
            ("checkpoints/zero_to_fp32.py", 30_000),
            ("ds_config.json", 2_000),
            ("logs/train.log", 9_000_000),
        ]
    else:
        files += [
            ("runs/Jun10_12-00-00_node1/events.out.tfevents.1718020800.node1.4242.0", 8_000_000),
            ("wandb/run-20240610_120000-abc123/files/config.yaml", 3_000),
            ("wandb/run-20240610_120000-abc123/files/output.log", 2_000_000),
            ("wandb/run-20240610_120000-abc123/files/wandb-summary.json", 2_000),
            ("wandb/run-20240610_120000-abc123/run-abc123.wandb", 40_000_000),
            ("train_results.json", 400),
            ("all_results.json", 600),
            ("eval_results.json", 300),
        ]
        if i % 3 == 0:  # finished: final export and a marker
            files += [
                ("final/config.json", 700),
                ("final/model.safetensors", 2_000_000_000),
                ("final/tokenizer.json", 2_000_000),
                ("COMPLETED", 0),
            ]
    step = 0
    while True:
        step += 500
        if flavour == 7:
            batch = _lightning_ckpt(step, step // 1000)
        elif flavour == 6:
            batch = _deepspeed_tag(step)
        else:
            batch = _hf_checkpoint(step, deepspeed=flavour == 4, peft=flavour == 5)
        if len(files) + len(batch) > count:
            break
        files += batch
    if i % 17 == 0 and flavour < 6 and step > 500:  # an unfinished last save
        files += [(f"checkpoint-{step}/model-00001-of-00002.safetensors", 0)]
    if i % 23 == 0:
        files.append(("checkpoint.tmp", 123))
    n = 0
    while len(files) < count:  # pad with per-rank logs and eval outputs
        files.append(
            (f"logs/rank-{n:03d}.log" if n % 2 else f"eval/predictions_{n:03d}.jsonl", 10_000)
        )
        n += 1
    return files[:count]


def _dataset_files(team: int, count: int) -> list[tuple[str, int]]:
    out = [("datasets/corpus-v1/dataset_info.json", 2_000), ("datasets/corpus-v1/state.json", 500)]
    out += [
        (f"datasets/corpus-v1/data-{k:05d}-of-99999.arrow", 500_000_000) for k in range(count // 2)
    ]
    out += [(f"datasets/raw/train-{k:05d}.parquet", 200_000_000) for k in range(count - len(out))]
    return out[:count]


def generate(n: int, runs: int) -> Iterator[tuple[str, int, int]]:
    """(key, size, last_modified µs) of the whole synthetic root, about n objects."""
    outside = n // 50 if n >= 1000 else 0
    in_runs = n - outside
    per_run, extra = divmod(in_runs, runs)
    per_team_runs = runs // TEAMS or 1
    run_i = 0
    for team in range(TEAMS):
        tname = f"team-{team:02d}"
        team_runs = per_team_runs if team < TEAMS - 1 else runs - per_team_runs * (TEAMS - 1)
        ds = outside // TEAMS + (outside % TEAMS if team == TEAMS - 1 else 0)
        t_ds = _us(T_START)
        for key, size in _dataset_files(team, ds):
            yield f"{tname}/{key}", size, t_ds
        for j in range(team_runs):
            project = f"project-{j * PROJECTS_PER_TEAM // max(team_runs, 1):02d}"
            count = per_run + (1 if run_i < extra else 0)
            prefix = f"{tname}/{project}/runs/run-{run_i:06d}/"
            # spread over 8 months: some running, many finished or abandoned
            t0 = T_START + timedelta(hours=(run_i * 5843) % (240 * 24))
            files = _run_files(run_i, count)
            files.sort()
            for k, (key, size) in enumerate(files):
                yield prefix + key, size, _us(t0 + timedelta(minutes=k))
            run_i += 1


def catalog_path(n: int, runs: int) -> Path:
    return BENCH_OUT / "classify" / f"catalog-n{n}-r{runs}-v{LAYOUT_VERSION}.db"


def _live_count(engine: Any, root_id: int) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM objects WHERE root_id = :r AND gone_scan_id IS NULL"),
                {"r": root_id},
            ).scalar_one()
        )


def ensure_catalog(n: int, runs: int) -> Path:
    """The catalog file for (n, runs): reused when it holds the right count, else built."""
    from governance.catalog.engine import open_engine
    from governance.catalog.roots import find_root, get_or_create_root, start_scan

    path = catalog_path(n, runs)
    url = f"sqlite:///{path}"
    if path.exists():
        try:
            engine = open_engine(url)
            root = find_root(engine, ROOT_URL)
            count = _live_count(engine, root.id) if root is not None and root.id else -1
            engine.dispose()
        except Exception as exc:  # a file from an older schema: build it again
            log(f"{path.name} is not usable ({type(exc).__name__}): rebuilding")
            count = -1
        if count == n:
            log(f"reusing {path.relative_to(REPO_ROOT)} ({count:,} objects)")
            return path
        if count >= 0:
            log(f"{path.name} holds {count:,} objects, not {n:,}: rebuilding")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    start = time.perf_counter()
    engine = open_engine(url)
    root_id = get_or_create_root(engine, ROOT_URL, "bench")
    scan_id = start_scan(engine, root_id, "bench")
    written, _ = fill_objects(engine, root_id, scan_id, generate(n, runs))
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    if written != n:
        raise SystemExit(f"generator wrote {written} objects, not {n}")
    log(
        f"built {path.relative_to(REPO_ROOT)}: {n:,} objects in {time.perf_counter() - start:.1f} s"
    )
    return path


# --------------------------------------------------------------------------- phases (child)


def _maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _options(templates: bool) -> Any:
    from governance.model.types import ClassifyOptions

    return ClassifyOptions(as_of=AS_OF, run_templates=(TEMPLATE,) if templates else ())


def run_phase(phase: str, path: Path, templates: bool) -> dict[str, Any]:
    """One phase in this process; returns its figures (printed as JSON by the caller)."""
    from governance.catalog.derived import classify_root
    from governance.catalog.engine import open_engine
    from governance.catalog.queries import iter_live_keys, iter_live_objects, live_objects_by_key
    from governance.catalog.roots import find_root, last_complete_scan
    from governance.model.classify import RunIndex, classify, find_runs_by_keys

    engine = open_engine(f"sqlite:///{path}")
    root = find_root(engine, ROOT_URL)
    assert root is not None
    assert root.id is not None
    root_id = root.id
    options = _options(templates)
    out: dict[str, Any] = {"phase": phase}

    def objects() -> Iterator[Any]:
        return iter_live_objects(engine, root_id)

    source: Callable[[], Any] = objects

    keys: Callable[[], Iterable[str]] = lambda: iter_live_keys(engine, root_id)  # noqa: E731

    def fetch(ks: list[str]) -> Iterable[Any]:
        return live_objects_by_key(engine, root_id, ks)

    if phase == "cpu":
        preloaded = list(objects())
        by_key = {o.key: o for o in preloaded}
        source = lambda: iter(preloaded)  # noqa: E731
        keys = lambda: (o.key for o in preloaded)  # noqa: E731
        fetch = lambda ks: [by_key[k] for k in ks if k in by_key]  # noqa: E731

    def first_pass() -> RunIndex:
        # As planning does (`plan.service.root_snapshots`): pass one, when `classify`
        # needs it, reads keys alone, then fetches the few tracker files it found.
        return find_runs_by_keys(keys(), options, fetch)

    out["baseline_rss_kib"] = _maxrss_kib()
    cpu_start = time.process_time()
    start = time.perf_counter()
    if phase == "read":
        count = 0
        for _ in objects():
            count += 1
        out["objects"] = count
    elif phase in ("classify", "cpu"):
        groups = runs = arts = objs = largest = 0
        for g in classify(source, options, None, first_pass=first_pass):
            groups += 1
            runs += g.run is not None
            arts += len(g.artifacts)
            size = sum(a.object_count for a in g.artifacts)
            objs += size
            largest = max(largest, size)
        out.update(objects=objs, groups=groups, runs=runs, artifacts=arts, largest_group=largest)
    elif phase == "classify_root":
        scan = last_complete_scan(engine, root_id)
        summary = classify_root(
            engine, None, root_id, ROOT_URL, scan.id if scan and scan.id else 1, options
        )
        out.update(
            objects=_live_count(engine, root_id),
            runs=summary.runs,
            artifacts=summary.artifacts,
            checkpoints=summary.checkpoints,
            residue=summary.residue,
        )
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    out["seconds"] = time.perf_counter() - start
    out["cpu_seconds"] = time.process_time() - cpu_start
    out["peak_rss_kib"] = _maxrss_kib()
    engine.dispose()
    return out


def profile(path: Path, templates: bool, top: int) -> None:
    """cProfile of the classify phase, sorted by own time, to stderr."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    result = run_phase("classify", path, templates)
    prof.disable()
    print(json.dumps(result), file=sys.stderr)
    stats = pstats.Stats(prof, stream=sys.stderr)
    stats.sort_stats("tottime").print_stats(top)


# --------------------------------------------------------------------------- driver


def _child(phase: str, args: argparse.Namespace, path: Path) -> tuple[dict[str, Any], int]:
    extra = () if args.templates else ("--no-templates",)
    return run_phase_child(__file__, "--phase", phase, "--db", str(path), *extra)


def _best(phase: str, args: argparse.Namespace, path: Path) -> tuple[dict[str, Any], int]:
    """The fastest of --repeat runs of one phase (peak RSS: the largest seen)."""
    best: dict[str, Any] | None = None
    rss = 0
    for r in range(args.repeat):
        log(f"{phase} ({r + 1}/{args.repeat}) ...")
        result, peak = _child(phase, args, path)
        log(
            f"{phase}: {result['seconds']:.2f} s (CPU {result['cpu_seconds']:.2f} s), "
            f"peak RSS {peak / 1024:.0f} MB"
        )
        rss = max(rss, peak)
        if best is None or result["seconds"] < best["seconds"]:
            best = result
    assert best is not None
    return best, rss


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--n", type=int, default=1_000_000, help="objects in the catalog (default 1,000,000)"
    )
    p.add_argument("--runs", type=int, default=10_000, help="runs among them (default 10,000)")
    p.add_argument(
        "--repeat", type=int, default=1, help="run each phase R times, report the fastest"
    )
    p.add_argument("--skip-root", action="store_true", help="skip the classify_root phase")
    p.add_argument(
        "--cpu", action="store_true", help="also time classification of preloaded objects"
    )
    p.add_argument(
        "--no-templates",
        dest="templates",
        action="store_false",
        help=f"classify without the run template {TEMPLATE} (runs found from checkpoints)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--profile", action="store_true", help="cProfile the classify phase instead")
    p.add_argument("--top", type=int, default=40, help="rows of --profile output")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.n < 1 or args.runs < 1 or args.runs > args.n or args.repeat < 1:
        p.error("need 1 <= --runs <= --n and --repeat >= 1")

    if args.phase:
        print(json.dumps(run_phase(args.phase, args.db, args.templates)))
        return 0
    path = ensure_catalog(args.n, args.runs)
    if args.profile:
        profile(path, args.templates, args.top)
        return 0

    try:
        read, read_rss = _best("read", args, path)
        cls, cls_rss = _best("classify", args, path)
        root = root_rss = None
        if not args.skip_root:
            root, root_rss = _best("classify_root", args, path)
        cpu = cpu_rss = None
        if args.cpu:
            cpu, cpu_rss = _best("cpu", args, path)
    except RuntimeError as exc:
        log(f"a phase failed: {exc}")
        return 1

    ratio = cls["seconds"] / read["seconds"]
    cpu_ratio = cls["cpu_seconds"] / read["cpu_seconds"]
    rows = [
        Row(
            "read (iter_live_objects)",
            read["seconds"],
            read["objects"],
            read_rss / 1024,
            reference=None,
        ),
        Row(
            "classify (streamed)",
            cls["seconds"],
            cls["objects"],
            cls_rss / 1024,
            ratio=ratio,
            reference="read",
            target=f"<= {TARGET_RATIO:g}x read",
            target_met=ratio <= TARGET_RATIO,
            note=(
                f"CPU-time ratio {cpu_ratio:.2f}x; {cls['runs']:,} runs, {cls['artifacts']:,} "
                f"artifacts, largest group {cls['largest_group']:,} objects"
            ),
            extra={
                "cpu_seconds": round(cls["cpu_seconds"], 4),
                "read_cpu_seconds": round(read["cpu_seconds"], 4),
                "cpu_ratio": round(cpu_ratio, 3),
                **{k: cls[k] for k in ("groups", "runs", "artifacts", "largest_group")},
            },
        ),
    ]
    if root is not None and root_rss is not None:
        rows.append(
            Row(
                "classify_root (+ write)",
                root["seconds"],
                root["objects"],
                root_rss / 1024,
                ratio=root["seconds"] / read["seconds"],
                reference="read",
                note=f"{root['artifacts']:,} artifact rows, {root['runs']:,} run rows",
                extra={k: root[k] for k in ("runs", "artifacts", "checkpoints", "residue")},
            )
        )
    if cpu is not None and cpu_rss is not None:
        rows.append(
            Row(
                "classify CPU (preloaded)",
                cpu["seconds"],
                cpu["objects"],
                None,
                ratio=cpu["seconds"] / read["seconds"],
                reference="read",
                note="objects in a list: classification work alone; RSS holds the catalog",
            )
        )
    base_mb = read["baseline_rss_kib"] / 1024
    notes = [
        f"catalog: {path.relative_to(REPO_ROOT)}; run template {TEMPLATE if args.templates else '(none)'}",
        "seconds: the phase alone, inside its child process (no start-up, imports, engine "
        "opening); with --repeat the fastest. The CPU-time ratio (process_time) is steadier "
        "than the wall-clock one on a busy machine",
        f"peak RSS: wait4 rusage of each phase's process; after imports and opening the catalog "
        f"a phase holds ~{base_mb:.0f} MB",
        "memory target: classify's peak RSS should not grow with --n at a fixed run size "
        "(compare runs at two sizes)",
    ]
    if args.json:
        print(
            rows_as_json(
                rows,
                benchmark="classify",
                n=args.n,
                runs=args.runs,
                templates=args.templates,
                repeat=args.repeat,
                target_ratio=TARGET_RATIO,
                python=sys.version.split()[0],
            )
        )
    else:
        print_table(rows, f"classify: {args.n:,} objects, {args.runs:,} runs", notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
