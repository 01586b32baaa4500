#!/usr/bin/env python3
"""Benchmark `govern scan` against the reference listers, on the same data, in one run.

Local: a tree of N files laid out like ML training output (runs/run-XXXX/checkpoint-STEP/
{model-0000i-of-00004.safetensors, optimizer.pt, trainer_state.json, ...}, TensorBoard
logs, dataset shards; empty or few-byte files) is scanned by
`govern --catalog sqlite:///... scan --root DIR --format json` twice (first scan into an
empty catalog, then a re-scan of the unchanged tree) and listed by the reference
`find DIR -type f -printf '%s %T@ %p\\n'` (stdout to /dev/null). `find` runs once untimed
first so that every timed command sees a warm page cache.

S3: a bucket of M objects in a moto server (ThreadedMotoServer on 127.0.0.1, fake
credentials, nonexistent AWS config files: nothing can reach AWS) is scanned by
`govern scan --root s3://BUCKET/` (pointed at moto through AWS_ENDPOINT_URL, which botocore
honours for clients created without an explicit endpoint) and listed by the reference
`aws s3api list-objects-v2 --bucket BUCKET --endpoint-url URL` (which pages through every
key by itself; stdout to /dev/null).

The AWS CLI is not a project dependency: on first use it is installed into its own venv,
bench-out/awscli-venv (git-ignored), with `python -m venv` and `pip install awscli`; the
project venv is never touched. `--aws PATH` uses an existing CLI instead. If neither
works, the S3 reference is reported as unavailable and the rest still runs.

Every command is a child process timed from fork to exit (interpreter start-up included),
its peak RSS read from `os.wait4`. Targets (from the issue): first scan and re-scan of a
local tree within 3x of `find`; S3 scan at least as fast as the sequential `aws s3api`
listing; govern's peak RSS under 300 MB whatever N is.

Usage (from the repository root):

    .venv/bin/python scripts/bench/scan.py                    # N=200,000, M=20,000
    .venv/bin/python scripts/bench/scan.py --n 1000000        # the full run
    .venv/bin/python scripts/bench/scan.py --n 20000 --m 3000 --json

The tree is built under --dir (default: $TMPDIR/govern-bench-scan) as tree-N/ with a
marker tree-N.json; a later run with the same N reuses it when --keep was given.
Without --keep everything the benchmark created is removed at the end.

Exit status: 0, even when a target is missed (this is a benchmark, not a test); 1 when
a benchmarked command itself failed; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    VENV_BIN,
    Measurement,
    Row,
    ensure_awscli,
    fake_aws_env,
    isolated_env,
    log,
    moto_server,
    print_table,
    rows_as_json,
    rss_method,
    run_measured,
    timed,
)

LAYOUT_VERSION = 1
FIND_PRINTF = "%s %T@ %p\\n"  # find's own escape: a newline after each record
LOCAL_RATIO_TARGET = 3.0
S3_RATIO_TARGET = 1.0
RSS_TARGET_MB = 300.0
BUCKET = "govern-bench"

_JSON = b'{"global_step": 0, "log_history": []}\n'
CHECKPOINT_FILES: tuple[tuple[str, bytes], ...] = (
    ("config.json", b"{}\n"),
    ("generation_config.json", b"{}\n"),
    ("model.safetensors.index.json", b'{"weight_map": {}}\n'),
    *((f"model-{i:05d}-of-00004.safetensors", b"") for i in range(1, 5)),
    ("optimizer.pt", b""),
    ("scheduler.pt", b""),
    ("rng_state.pth", b""),
    ("trainer_state.json", _JSON),
    ("training_args.bin", b""),
    ("README.md", b"# checkpoint\n"),
)
CHECKPOINTS_PER_RUN = 25
SHARDS_PER_RUN = 64
RUNS_PER_DATASET = 16


def ml_layout() -> Iterator[tuple[str, bytes]]:
    """An endless, deterministic stream of (relative path, content) in an ML layout.

    Per run (~420 files): a config, 25 checkpoints of 14 files, a TensorBoard event file
    per checkpoint, eval results, and 64 shards of a dataset shared by 16 runs.
    """
    for run in itertools.count():
        run_dir = f"runs/run-{run:04d}"
        yield f"{run_dir}/config.yaml", b"lr: 3.0e-4\nbatch_size: 512\n"
        for ck in range(1, CHECKPOINTS_PER_RUN + 1):
            step = ck * 500
            for name, content in CHECKPOINT_FILES:
                yield f"{run_dir}/checkpoint-{step}/{name}", content
            yield (
                f"{run_dir}/logs/events.out.tfevents.{1_700_000_000 + run * 1000 + ck}.node-{ck % 8}.{ck}",
                b"",
            )
        for split in ("validation", "test"):
            yield f"{run_dir}/eval/{split}_results.json", b"{}\n"
        dataset = f"datasets/corpus-v{run // RUNS_PER_DATASET}"
        first = (run % RUNS_PER_DATASET) * SHARDS_PER_RUN
        for i in range(first, first + SHARDS_PER_RUN):
            split = "train" if i % 16 else "validation"
            yield f"{dataset}/{split}/shard-{i:05d}-of-01024.parquet", b""


# --------------------------------------------------------------------------- local tree


def build_tree(root: Path, n: int) -> None:
    """Write the first `n` files of `ml_layout()` under `root` (which must not exist)."""
    made: set[str] = set()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    base = str(root)
    os.makedirs(base)
    for rel, content in itertools.islice(ml_layout(), n):
        parent = rel.rpartition("/")[0]
        if parent not in made:
            os.makedirs(f"{base}/{parent}", exist_ok=True)
            made.add(parent)
        fd = os.open(f"{base}/{rel}", flags, 0o644)
        try:
            if content:
                os.write(fd, content)
        finally:
            os.close(fd)


def ensure_tree(work: Path, n: int) -> tuple[Path, bool]:
    """The tree of `n` files under `work`, built unless a matching marker says it exists.

    Returns (tree path, reused?). The tree is built as tree-N.partial and renamed, and the
    marker written last, so an interrupted build is never mistaken for a complete one.
    """
    tree = work / f"tree-{n}"
    marker = work / f"tree-{n}.json"
    expected = {"files": n, "layout": LAYOUT_VERSION}
    if tree.is_dir() and marker.is_file():
        with contextlib.suppress(ValueError, OSError):
            if json.loads(marker.read_text()) == expected:
                return tree, True
    marker.unlink(missing_ok=True)
    shutil.rmtree(tree, ignore_errors=True)
    partial = work / f"tree-{n}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with timed(f"built {n:,} files in {tree}"):
        build_tree(partial, n)
    partial.rename(tree)
    marker.write_text(json.dumps(expected))
    return tree, False


# --------------------------------------------------------------------------- S3 bucket


def fill_bucket(endpoint: str, m: int, method: str = "auto", workers: int = 16) -> str:
    """Create BUCKET in moto holding the first `m` keys of `ml_layout()`; return the method.

    "direct" writes through moto's in-process S3 backend (the one the threaded server
    serves, ~0.05 ms an object); "http" sends `put_object` calls from a thread pool
    (~5 ms an object: moto is slow to accept uploads). "auto" is direct, or http when
    moto's internals are not where expected. Either way the objects are real moto
    objects, and the bucket is then listed over HTTP to check that all `m` are there.
    """
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(max_pool_connections=workers, retries={"max_attempts": 5}),
    )
    client.create_bucket(Bucket=BUCKET)
    items = itertools.islice(ml_layout(), m)
    direct = _moto_direct_put() if method in ("auto", "direct") else None
    if direct is None and method == "direct":
        raise RuntimeError("--fill direct: moto's in-process S3 backend is not available")
    used = "direct" if direct is not None else "http"
    with timed(f"put {m:,} objects into s3://{BUCKET}/ ({used})"):
        if direct is not None:
            for key, body in items:
                direct(key, body)
        else:

            def put(item: tuple[str, bytes]) -> None:
                client.put_object(Bucket=BUCKET, Key=item[0], Body=item[1])

            with ThreadPoolExecutor(workers) as pool:
                for _ in pool.map(put, items):
                    pass
    # Counting over HTTP also warms moto's listing code paths, untimed.
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    count = sum(p.get("KeyCount", 0) for p in pages)
    client.list_multipart_uploads(Bucket=BUCKET)
    if count != m:
        raise RuntimeError(f"moto lists {count:,} objects in s3://{BUCKET}/, expected {m:,}")
    return used


def _moto_direct_put() -> Callable[[str, bytes], object] | None:
    """`put(key, body)` into BUCKET through moto's in-process backend, or None."""
    try:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
        backend.get_bucket(BUCKET)
    except Exception as exc:  # moto internals moved: fall back to HTTP
        log(f"moto's in-process backend unavailable ({exc!r}); uploading over HTTP")
        return None
    return lambda key, body: backend.put_object(BUCKET, key, body)


# --------------------------------------------------------------------------- running


@dataclass(slots=True)
class Best:
    """The fastest of several runs of one command, with the largest peak RSS seen."""

    runs: list[Measurement]

    @property
    def fastest(self) -> Measurement:
        return min(self.runs, key=lambda r: r.seconds)

    @property
    def seconds(self) -> float:
        return self.fastest.seconds

    @property
    def peak_rss_mb(self) -> float:
        return max(r.peak_rss_mb for r in self.runs)

    @property
    def failed(self) -> Measurement | None:
        return next((r for r in self.runs if not r.ok), None)


class Bench:
    """Runs the commands, collects rows, remembers failures."""

    def __init__(self, args: argparse.Namespace, scratch: Path) -> None:
        self.args = args
        self.scratch = scratch
        self.govern = args.govern
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.failures: list[str] = []
        self._catalogs = itertools.count(1)

    def new_catalog(self) -> str:
        return f"sqlite:///{self.scratch / f'catalog-{next(self._catalogs)}.db'}"

    def repeat(self, argv: list[str], env: dict[str, str]) -> Best:
        """Run a reference command --repeat times (stopping at a failure)."""
        runs: list[Measurement] = []
        for _ in range(self.args.repeat):
            m = run_measured(argv, env=env)
            runs.append(m)
            if not m.ok:
                break
        return Best(runs)

    def govern_scan(self, catalog: str, root: str, env: dict[str, str]) -> Measurement:
        argv = [self.govern, "--catalog", catalog, "scan", "--root", root, "--format", "json"]
        if self.args.concurrency:
            argv += ["--concurrency", str(self.args.concurrency)]
        return run_measured(argv, env=env, capture_stdout=True)

    def govern_row(
        self,
        name: str,
        runs: list[Measurement],
        expected: int,
        ref: Row | None,
        ratio_target: float,
        ref_name: str,
    ) -> Row:
        """A row for a govern command: checks its JSON output, computes ratio and target."""
        best = Best(runs)
        failed = best.failed
        target = f"<={ratio_target:g}x {ref_name}, <{RSS_TARGET_MB:g} MB"
        if failed is not None:
            self.failures.append(f"{name}: {failed.describe_failure()}")
            log(f"{name} FAILED: {failed.describe_failure()}")
            return Row(
                name,
                failed.seconds,
                None,
                failed.peak_rss_mb,
                target=target,
                target_met=False,
                note="FAILED",
            )
        scan = _parse_scan_json(best.fastest.stdout)
        objects = scan.get("objects")
        inner = scan.get("seconds")
        complete = objects == expected
        if scan.get("error"):
            note = f"scan error: {scan['error']}"
        elif objects is None:
            note = "no objects count in govern's JSON output"
        elif not complete:
            note = f"listed {objects:,}, expected {expected:,}"
        else:
            note = f"{inner:.2f} s inside govern" if isinstance(inner, int | float) else ""
        ratio = best.seconds / ref.seconds if ref is not None and ref.seconds else None
        met: bool | None = None
        if not complete:
            met = False
        elif ratio is not None:
            met = ratio <= ratio_target and best.peak_rss_mb < RSS_TARGET_MB
        if ratio is None:
            note = (note + "; " if note else "") + "reference unavailable"
        extra = {k: scan.get(k) for k in ("objects", "new", "changed", "gone", "seconds", "status")}
        return Row(
            name,
            best.seconds,
            expected,
            best.peak_rss_mb,
            ratio,
            ref_name,
            target,
            met,
            note,
            extra={"govern": extra, "runs": len(runs)},
        )

    # ----------------------------------------------------------------------- local

    def local(self, work: Path) -> None:
        n = self.args.n
        tree, reused = ensure_tree(work, n)
        if reused:
            log(f"reusing {tree} ({n:,} files)")
        env = isolated_env()
        find_argv = ["find", str(tree), "-type", "f", "-printf", FIND_PRINTF]
        log("warming the page cache: one untimed find")
        warm = run_measured(find_argv, env=env)
        if not warm.ok:
            self.failures.append(f"find: {warm.describe_failure()}")
            return
        log("timing find")
        found = self.repeat(find_argv, env)
        ref = Row("find (reference)", found.seconds, n, found.peak_rss_mb)
        if found.failed is not None:
            self.failures.append(f"find: {found.failed.describe_failure()}")
            ref.note = "FAILED"

        log("timing govern first scan (empty catalog each time)")
        first: list[Measurement] = []
        catalog = ""
        for _ in range(self.args.repeat):
            catalog = self.new_catalog()
            first.append(self.govern_scan(catalog, str(tree), env))
            if not first[-1].ok:
                break
        first_row = self.govern_row("local first scan", first, n, ref, LOCAL_RATIO_TARGET, "find")
        rescan: list[Measurement] = []
        if first[-1].ok:
            log("timing govern re-scan of the unchanged tree")
            for _ in range(self.args.repeat):
                rescan.append(self.govern_scan(catalog, str(tree), env))
                if not rescan[-1].ok:
                    break
        if rescan:
            rescan_row = self.govern_row(
                "local re-scan", rescan, n, ref, LOCAL_RATIO_TARGET, "find"
            )
            seen = rescan_row.extra.get("govern", {})
            drift = sum(seen.get(k) or 0 for k in ("new", "changed", "gone"))
            if drift:
                rescan_row.note += f"; unchanged tree but {drift:,} new/changed/gone"
        else:
            rescan_row = Row("local re-scan", None, note="not run: the first scan failed")
        self.rows += [first_row, rescan_row, ref]
        self.notes.append(
            f"local: N={n:,} files in {tree}; page cache warmed by one untimed find, "
            "so every local command ran with a warm cache"
        )

    # ----------------------------------------------------------------------- S3

    def s3(self) -> None:
        m = self.args.m
        aws = ensure_awscli(self.args.aws)
        with moto_server() as server:
            log(f"moto server at {server.url}")
            fill = fill_bucket(server.url, m, self.args.fill)
            env = isolated_env(fake_aws_env(server.url, self.scratch))
            ref: Row | None = None
            unavailable = Row("aws s3api (reference)", None, note="AWS CLI unavailable")
            argv = [aws or "aws", "s3api", "list-objects-v2", "--bucket", BUCKET]
            argv += ["--endpoint-url", server.url]
            # Interleaved (aws, govern, aws, govern, ...): a slow spell of the machine then
            # hits both sides alike, and the fastest of each is compared.
            log("timing aws s3api list-objects-v2 and govern S3 scan, interleaved")
            listed: list[Measurement] = []
            runs: list[Measurement] = []
            aws_requests = govern_requests = 0
            for _ in range(self.args.repeat):
                if aws is not None and (not listed or listed[-1].ok):
                    before = server.requests
                    listed.append(run_measured(argv, env=env))
                    aws_requests = server.requests - before
                before = server.requests
                runs.append(self.govern_scan(self.new_catalog(), f"s3://{BUCKET}/", env))
                requests = server.requests - before
                if not runs[-1].ok:
                    break
            if listed:
                best_aws = Best(listed)
                if best_aws.failed is not None:
                    log(
                        "aws s3api failed, reference unavailable: "
                        f"{best_aws.failed.describe_failure()}"
                    )
                    unavailable.note = "aws s3api failed: reference unavailable"
                else:
                    ref = Row(
                        "aws s3api (reference)",
                        best_aws.seconds,
                        m,
                        best_aws.peak_rss_mb,
                        note=f"{aws_requests:,} requests",
                        extra={"requests": aws_requests},
                    )
            govern_requests = requests
            row = self.govern_row("S3 scan", runs, m, ref, S3_RATIO_TARGET, "aws")
            row.note = (
                f"{row.note}; {govern_requests:,} requests"
                if row.note
                else f"{govern_requests:,} requests"
            )
            row.extra["requests"] = govern_requests
            self.rows += [row, ref if ref is not None else unavailable]
        self.notes.append(
            f"S3: M={m:,} objects (filled {fill}) in a moto server in this process on 127.0.0.1; "
            "govern reached it through AWS_ENDPOINT_URL. moto answers one request at a time "
            "(GIL) and each listing request costs it time in proportion to the bucket size, "
            "so many parallel prefix listings are penalised here more than on real S3"
        )


def _parse_scan_json(stdout: str) -> dict[str, Any]:
    """The first scan summary of `govern scan --format json`, or {} when unreadable."""
    try:
        scans = json.loads(stdout)["scans"]
    except (ValueError, KeyError, TypeError):
        return {}
    return scans[0] if isinstance(scans, list) and scans and isinstance(scans[0], dict) else {}


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time `govern scan` against find and aws s3api list-objects-v2.",
    )
    p.add_argument(
        "--n",
        type=int,
        default=200_000,
        help="files in the local tree (default %(default)s; 1000000 for the full run)",
    )
    p.add_argument(
        "--m",
        type=int,
        default=20_000,
        help="objects in the S3 (moto) bucket (default %(default)s)",
    )
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to build the tree (default: $TMPDIR/govern-bench-scan)",
    )
    p.add_argument(
        "--keep", action="store_true", help="keep the tree for the next run (reused if N matches)"
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each timed command R times, report the fastest (default %(default)s)",
    )
    p.add_argument(
        "--concurrency", type=int, default=None, help="pass --concurrency to govern scan"
    )
    p.add_argument(
        "--govern",
        default=str(VENV_BIN / "govern"),
        help="the govern executable (default %(default)s)",
    )
    p.add_argument(
        "--aws",
        default=None,
        help="an existing aws CLI to use (default: bench-out/awscli-venv, installed on first use)",
    )
    p.add_argument(
        "--fill",
        choices=("auto", "direct", "http"),
        default="auto",
        help="how to put the M objects into moto: its in-process backend, or put_object over HTTP (default %(default)s)",
    )
    p.add_argument("--skip-local", action="store_true", help="skip the local benchmark")
    p.add_argument("--skip-s3", action="store_true", help="skip the S3 benchmark")
    p.add_argument(
        "--json", action="store_true", help="print the figures as JSON instead of a table"
    )
    args = p.parse_args(argv)
    if args.n < 1 or args.m < 1 or args.repeat < 1:
        p.error("--n, --m and --repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = (args.dir or Path(tempfile.gettempdir()) / "govern-bench-scan").resolve()
    created_work = not work.exists()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=work))  # catalogs; always removed
    bench = Bench(args, scratch)
    try:
        if not args.skip_local:
            bench.local(work)
        if not args.skip_s3:
            bench.s3()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if args.keep:
            log(f"kept {work}")
        else:
            for name in (f"tree-{args.n}", f"tree-{args.n}.partial"):
                shutil.rmtree(work / name, ignore_errors=True)
            (work / f"tree-{args.n}.json").unlink(missing_ok=True)
            if created_work:
                with contextlib.suppress(OSError):
                    work.rmdir()

    meta: dict[str, Any] = {
        "benchmark": "scan",
        "n": None if args.skip_local else args.n,
        "m": None if args.skip_s3 else args.m,
        "repeat": args.repeat,
        "warm_cache": True,
        "rss_method": rss_method(),
        "targets": {
            "local_ratio_max": LOCAL_RATIO_TARGET,
            "s3_ratio_max": S3_RATIO_TARGET,
            "peak_rss_mb_max": RSS_TARGET_MB,
        },
        "host": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "failures": bench.failures,
    }
    if args.json:
        print(rows_as_json(bench.rows, **meta))
    else:
        bench.notes.append(
            f"times: fork to exit of each command (start-up included); peak RSS: its wait4 "
            f"rusage, forked by {rss_method()} so the benchmark's own RSS is not counted"
        )
        title = "govern scan benchmark" + (
            f" (fastest of {args.repeat})" if args.repeat > 1 else ""
        )
        print_table(bench.rows, title, bench.notes)
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
