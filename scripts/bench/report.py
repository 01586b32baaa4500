#!/usr/bin/env python3
"""Benchmark reading a large saved plan back and writing its reports (`govern show`).

The plan is the one `plan.py` makes: the example policy over a catalog of 1,000,000
objects in 10,000 runs x 50 checkpoints (about 470,000 actions on 910,000 objects), saved
into a scratch copy of that catalog (`bench-out/plan/`, reused when it exists). Then each
phase runs in its own child process (so that each one's peak RSS is its own):

- *load*: `load_plan` of the saved plan (what `govern show` reads first);
- *FORMAT* (json, csv, md, html, table): `load_plan`, then `write_report` of that
  format into a sink that counts characters (no disk in the figure), as `govern show ID
  --format FORMAT` does; the row's seconds are the writing alone, its peak RSS the
  whole process's (the plan held, plus what writing adds).

References: the plan's own build time (`plan.py`'s *build*, measured here too) and the
load. No issue sets a target; the figures show whether a report costs more than making
the plan did, and whether memory stays at the plan's size.

Usage (from the repository root):

    .venv/bin/python scripts/bench/report.py                         # 1,000,000 / 10,000
    .venv/bin/python scripts/bench/report.py --n 100000 --runs 1000  # smoke check
    .venv/bin/python scripts/bench/report.py --json

Exit status: 0; 1 when a phase failed; 2 on bad arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plan as plan_bench
from _common import REPO_ROOT, Row, log, print_table, rows_as_json, run_phase_child

FORMATS = ("json", "csv", "md", "html", "table")


class _CountingSink:
    """A text stream that keeps nothing: counts what is written."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)

    def flush(self) -> None:
        return None


def run_phase(phase: str, db: Path, policy_path: Path) -> dict[str, Any]:
    """One phase in this process; returns its figures (printed as JSON by the caller)."""
    from governance.catalog.engine import open_engine
    from governance.catalog.plans import list_plans, load_plan, save_plan

    engine = open_engine(f"sqlite:///{db}")
    out: dict[str, Any] = {"phase": phase}
    if phase == "save":
        policy = plan_bench._load_policy(policy_path)
        start = time.perf_counter()
        made = plan_bench._build(engine, policy)
        out["build_seconds"] = time.perf_counter() - start
        save_plan(engine, made)
        out["plan_id"] = made.plan_id
        out["actions"] = len(made.actions)
        out["objects"] = made.summary.objects
        engine.dispose()
        return out
    from governance.report import write_report

    (header,) = list_plans(engine)
    start = time.perf_counter()
    loaded = load_plan(engine, header.plan_id)
    out["load_seconds"] = time.perf_counter() - start
    out["actions"] = len(loaded.actions)
    out["objects"] = sum(len(a.objects) for a in loaded.actions)
    if phase != "load":
        sink = _CountingSink()
        start = time.perf_counter()
        write_report(loaded, phase, sink)  # type: ignore[arg-type]
        out["write_seconds"] = time.perf_counter() - start
        out["chars"] = sink.chars
    engine.dispose()
    return out


def _child(phase: str, db: Path, policy_path: Path) -> tuple[dict[str, Any], int]:
    return run_phase_child(
        __file__, "--phase", phase, "--db", str(db), "--policy-file", str(policy_path)
    )


def main(argv: list[str] | None = None) -> int:
    p = plan_bench.catalog_parser(__doc__)
    args = p.parse_args(argv)
    if args.phase:
        print(json.dumps(run_phase(args.phase, args.db, args.policy_file)))
        return 0
    plan_bench.catalog_size(p, args)

    path = plan_bench.ensure_catalog(args.runs, args.checkpoints)
    work = path.parent / "scratch"
    work.mkdir(exist_ok=True)
    policy_path = plan_bench.bench_policy(work / f"policy-{os.getpid()}.yaml")
    scratch = work / f"report-{os.getpid()}.db"
    results: dict[str, tuple[dict[str, Any], int]] = {}
    try:
        plan_bench._remove_db(scratch)
        shutil.copyfile(path, scratch)
        log("plan: build and save ...")
        saved, _ = _child("save", scratch, policy_path)
        log(f"plan: {saved['actions']:,} actions, built in {saved['build_seconds']:.2f} s")
        for phase in ("load", *FORMATS):
            results[phase] = _child(phase, scratch, policy_path)
            done = results[phase][0]
            figure = done.get("write_seconds", done["load_seconds"])
            log(f"{phase}: {figure:.2f} s, peak RSS {results[phase][1] / 1024:.0f} MB")
    except RuntimeError as exc:
        log(f"a phase failed: {exc}")
        return 1
    finally:
        plan_bench._remove_db(scratch)
        policy_path.unlink(missing_ok=True)

    build = saved["build_seconds"]
    load, load_rss = results["load"]
    rows = [
        Row("plan build (reference)", build, saved["objects"], None),
        Row(
            "load_plan",
            load["load_seconds"],
            load["objects"],
            load_rss / 1024,
            ratio=load["load_seconds"] / build,
            reference="plan build",
            note=f"{load['actions']:,} actions",
        ),
    ]
    for fmt in FORMATS:
        done, rss = results[fmt]
        rows.append(
            Row(
                f"write {fmt}",
                done["write_seconds"],
                done["objects"],
                rss / 1024,
                ratio=done["write_seconds"] / build,
                reference="plan build",
                note=f"{done['chars'] / 1e6:,.1f} M characters",
                extra={"chars": done["chars"]},
            )
        )
    notes = [
        f"catalog: {path.relative_to(REPO_ROOT)}; the example policy's plan of it, saved",
        "ratio: seconds / the plan's build seconds; write rows exclude the load",
        "peak RSS: the whole child (load + write); compare the write rows with load_plan's",
    ]
    if args.json:
        print(rows_as_json(rows, benchmark="report", runs=args.runs, checkpoints=args.checkpoints))
    else:
        print_table(rows, "reports of a saved plan", notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
