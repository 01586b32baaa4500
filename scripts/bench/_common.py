"""Helpers shared by the benchmarks in scripts/bench/.

- `run_measured`: run a command as a child process and report its wall time, exit status
  and peak RSS (the `wait4` rusage of that one child, forked from a small launcher so
  that this process's own RSS does not leak into the figure; see `rss_method`).
- `Row` / `print_table` / `rows_as_json`: the result table every benchmark prints.
- `moto_server`: a `ThreadedMotoServer` on 127.0.0.1 and a free port, counting requests.
- `isolated_env` / `fake_aws_env`: child environments that cannot reach real AWS.
- `ensure_awscli`: the AWS CLI in a private venv under bench-out/ (never the project venv).

Only the standard library is imported at module level, so `--help` stays fast; moto and
boto3 are imported where used.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_OUT = REPO_ROOT / "bench-out"  # git-ignored
VENV_BIN = REPO_ROOT / ".venv" / "bin"
AWSCLI_VENV = BENCH_OUT / "awscli-venv"

MIB = 1024 * 1024


def log(message: str) -> None:
    """Progress messages go to stderr so that stdout stays clean for `--json`."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def timed(label: str) -> Iterator[None]:
    """Log how long an in-process step (building data, uploading) took."""
    start = time.perf_counter()
    yield
    log(f"{label}: {time.perf_counter() - start:.2f} s")


# --------------------------------------------------------------------------- children


@dataclass(slots=True)
class Measurement:
    """One child process run: wall-clock seconds, exit code, peak RSS and captured output."""

    argv: list[str]
    seconds: float
    returncode: int
    peak_rss_kib: int
    stdout: str = ""
    stderr: str = ""

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss_kib / 1024

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe_failure(self) -> str:
        """A short message for a failed run: the command, its exit code, its stderr tail."""
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        return f"`{' '.join(self.argv)}` exited {self.returncode}\n{tail}"


# Why a launcher: the rusage that `os.wait4` returns for a child includes the RSS the child
# inherited at fork/exec time (Linux folds the pre-exec address space's high-water mark
# into `ru_maxrss`), so a child forked straight from this process - which holds moto and
# boto3, ~100 MB - reports at least this process's RSS, even for /bin/true. A small
# launcher forks the command instead and reports its `wait4` rusage: GNU time (floor
# ~1 MB) when it works, else a `python -S -I` launcher (floor ~5 MB).
_PY_LAUNCHER = """
import os, sys, time
fd, argv = int(sys.argv[1]), sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"cannot run {argv[0]}: {exc}\\n")
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
os.write(fd, f"{seconds!r} {os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}".encode())
"""
GNU_TIME = "/usr/bin/time"


@functools.cache
def rss_method() -> str:
    """'gnu-time' when /usr/bin/time is GNU time (it takes -f/-o), else 'python-launcher'."""
    if sys.platform.startswith("linux") and os.access(GNU_TIME, os.X_OK):
        probe = subprocess.run(
            [GNU_TIME, "-f", "%M", "-o", os.devnull, "true"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return "gnu-time"
    return "python-launcher"


def run_measured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    capture_stdout: bool = False,
) -> Measurement:
    """Run `argv` to completion; return its wall time, exit code and peak RSS.

    The peak RSS is the `wait4` rusage of the command itself, forked from a small launcher
    (see `rss_method`), never from this large process. The time runs from the fork to the
    reap, so the command's interpreter start-up counts against it, as it would for a user:
    measured here for GNU time (its own start-up, ~1 ms, is included), inside the
    launcher for the Python one.

    stdout goes to /dev/null unless `capture_stdout` (then to a temporary file, read
    afterwards: a pipe could fill up while we wait). stderr is always kept (in a
    temporary file) so that failures can be reported.
    """
    argv = [str(a) for a in argv]
    method = rss_method()
    with contextlib.ExitStack() as stack:
        err_file = stack.enter_context(tempfile.TemporaryFile())
        out_file = stack.enter_context(tempfile.TemporaryFile()) if capture_stdout else None
        report = stack.enter_context(tempfile.NamedTemporaryFile(prefix="bench-rusage-"))
        if method == "gnu-time":
            launcher = [GNU_TIME, "-f", "%M", "-o", report.name, "--", *argv]
        else:
            launcher = [sys.executable, "-S", "-I", "-c", _PY_LAUNCHER, str(report.fileno()), *argv]
        start = time.perf_counter()
        proc = subprocess.Popen(
            launcher,
            stdin=subprocess.DEVNULL,
            stdout=out_file if out_file is not None else subprocess.DEVNULL,
            stderr=err_file,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            pass_fds=(report.fileno(),) if method != "gnu-time" else (),
        )
        proc.wait()
        seconds = time.perf_counter() - start
        returncode = proc.returncode
        fields = Path(report.name).read_text().split()
        stdout = _read(out_file) if out_file is not None else ""
        stderr = _read(err_file)
    if method == "gnu-time":
        # On failure GNU time writes "Command exited with non-zero status N" first.
        rss_kib = int(fields[-1]) if fields and fields[-1].isdigit() else 0
    elif len(fields) == 3:
        seconds, returncode, rss_kib = float(fields[0]), int(fields[1]), int(fields[2])
    else:  # the launcher itself failed; its stderr says why
        rss_kib = 0
    return Measurement(argv, seconds, returncode, rss_kib, stdout, stderr)


@contextlib.contextmanager
def _stdout_target(capture: bool) -> Iterator[IO[bytes] | None]:
    if not capture:
        yield None
        return
    with tempfile.TemporaryFile() as f:
        yield f


def _read(f: IO[bytes]) -> str:
    f.seek(0)
    return f.read().decode("utf-8", errors="replace")


def run_phase_child(script: str | os.PathLike[str], *args: str) -> tuple[dict[str, Any], int]:
    """Run `script` (a benchmark re-invoked for one phase) with `args` under this
    checkout's code; returns the JSON its last stdout line prints and its peak RSS (KiB).
    RuntimeError with the child's stderr when it fails."""
    argv = [sys.executable, str(Path(script).resolve()), *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    m = run_measured(argv, env=env, capture_stdout=True)
    if not m.ok:
        raise RuntimeError(m.describe_failure())
    return json.loads(m.stdout.strip().splitlines()[-1]), m.peak_rss_kib


# --------------------------------------------------------------------------- environments


def isolated_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current environment without any AWS_* or GOVERN_* variable, plus `extra`.

    PYTHONPATH is prefixed with the repository root so that `govern` runs the working
    tree's code even if the editable install in .venv is stale.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOVERN_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    env.update(extra or {})
    return env


def fake_aws_env(endpoint_url: str, scratch: Path) -> dict[str, str]:
    """AWS variables that point every SDK at the moto server and never at real AWS.

    The config and credentials files are paths under `scratch` that do not exist, so no
    profile, SSO session or credential process from the user's ~/.aws can be picked up.
    """
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ENDPOINT_URL_S3": endpoint_url,
        "AWS_CONFIG_FILE": str(scratch / "no-such-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(scratch / "no-such-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_PAGER": "",
    }


@contextlib.contextmanager
def patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables in this process for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --------------------------------------------------------------------------- moto


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _RequestCounter(logging.Handler):
    """Counts the werkzeug request-log records instead of printing them, in all and by
    kind (`request_kind`: method plus the S3 sub-resource, e.g. "POST ?delete")."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.kinds: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:  # called under the handler's lock
        self.count += 1
        args = record.args if isinstance(record.args, tuple) else ()
        self.kinds[request_kind(str(args[0]) if args else "")] += 1


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours some request lines


def request_kind(request_line: str) -> str:
    """ "GET /b?list-type=2&prefix=x HTTP/1.1" -> "GET ?list-type"; "HEAD /b/k ..." -> "HEAD".

    A PUT with an x-amz-copy-source header (CopyObject) cannot be told from an upload by
    its request line; both are "PUT".
    """
    parts = _ANSI.sub("", request_line).split()
    if len(parts) < 2:
        return "?"
    method, target = parts[0], parts[1]
    query = target.partition("?")[2]
    if not query:
        return method
    first = query.split("&", 1)[0].split("=", 1)[0]
    return f"{method} ?{first}"


@dataclass(slots=True)
class MotoServer:
    """A running moto server: its endpoint URL and how many HTTP requests it has served."""

    url: str
    _counter: _RequestCounter

    @property
    def requests(self) -> int:
        return self._counter.count

    def request_kinds(self) -> Counter[str]:
        """A copy of the per-kind request counts so far (subtract two to get a delta)."""
        return Counter(self._counter.kinds)


@contextlib.contextmanager
def moto_server() -> Iterator[MotoServer]:
    """Run a moto server in a thread of this process on 127.0.0.1 and a free port.

    werkzeug's per-request log lines are counted (`MotoServer.requests`), not printed.
    The server shares this process's moto backends, so `moto.s3.models.s3_backends` can
    be filled directly (see scan.py).
    """
    from moto.server import ThreadedMotoServer

    counter = _RequestCounter()
    wlog = logging.getLogger("werkzeug")
    saved = (wlog.level, wlog.propagate, list(wlog.handlers))
    wlog.setLevel(logging.INFO)
    wlog.propagate = False
    wlog.handlers = [counter]
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield MotoServer(f"http://127.0.0.1:{port}", counter)
    finally:
        server.stop()
        wlog.setLevel(saved[0])
        wlog.propagate = saved[1]
        wlog.handlers = saved[2]


# --------------------------------------------------------------------------- AWS CLI


def pip_install_tool(package: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`pip install PACKAGE` into bench-out/awscli-venv (the tools' venv, never the project's)."""
    return subprocess.run(
        [
            str(AWSCLI_VENV / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            package,
        ],
        check=check,
        capture_output=True,
        text=True,
    )


def ensure_awscli(explicit: str | None = None) -> str | None:
    """Path of an `aws` executable, or None (with a message) when none can be had.

    `explicit` (a `--aws` flag) wins. Otherwise the CLI lives in its own venv,
    bench-out/awscli-venv, created with `python -m venv` and `pip install awscli` on
    first use; the project venv is never touched.
    """
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            log(f"aws CLI {explicit!r} not found: the AWS CLI reference is unavailable")
        return found
    aws = AWSCLI_VENV / "bin" / "aws"
    if aws.exists():
        return str(aws)
    log(f"installing the AWS CLI into {AWSCLI_VENV} (first use only)")
    try:
        BENCH_OUT.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(AWSCLI_VENV)],
            check=True,
            capture_output=True,
            text=True,
        )
        pip_install_tool("awscli", check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        log(
            f"could not install the AWS CLI ({detail.strip().splitlines()[-1:]}): "
            "the AWS CLI reference is unavailable"
        )
        shutil.rmtree(AWSCLI_VENV, ignore_errors=True)
        return None
    return str(aws) if aws.exists() else None


# --------------------------------------------------------------------------- results


@dataclass(slots=True)
class Row:
    """One line of a benchmark's result table.

    `ratio` is seconds / the reference's seconds (None for references or when the
    reference is unavailable); `target_met` is None when there is no target.
    """

    name: str
    seconds: float | None
    objects: int | None = None
    peak_rss_mb: float | None = None
    ratio: float | None = None
    reference: str | None = None
    target: str | None = None
    target_met: bool | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def objects_per_second(self) -> float | None:
        if self.seconds is None or self.objects is None or self.seconds <= 0:
            return None
        return self.objects / self.seconds

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["objects_per_second"] = (
            round(self.objects_per_second, 1) if self.objects_per_second is not None else None
        )
        for key in ("seconds", "ratio", "peak_rss_mb"):
            if d[key] is not None:
                d[key] = round(d[key], 4 if key == "seconds" else 3)
        return d


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(
    rows: Sequence[Row], title: str, notes: Sequence[str] = (), file: IO[str] | None = None
) -> None:
    """A plain-text table (no dependencies): one line per row, then the notes."""
    out = file or sys.stdout
    header = ["", "seconds", "objects/s", "ratio", "peak RSS MB", "target", "met"]
    body = [
        [
            r.name,
            _fmt(r.seconds, ".3f"),
            _fmt(r.objects_per_second, ",.0f"),
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            _fmt(r.peak_rss_mb, ".1f"),
            r.target or "-",
            {True: "yes", False: "NO", None: "-"}[r.target_met],
        ]
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (
            c.rjust(w) if i < 4 else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells[1:], widths[1:], strict=True))
        )
        return "  ".join([first, *rest]).rstrip()

    print(title, file=out)
    print(line(header), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for cells, row in zip(body, rows, strict=True):
        print(line(cells) + (f"   ({row.note})" if row.note else ""), file=out)
    for note in notes:
        print(f"* {note}", file=out)


def rows_as_json(rows: Sequence[Row], **meta: Any) -> str:
    """The figures as a JSON document: `meta` fields plus a `results` list."""
    return json.dumps({**meta, "results": [r.as_dict() for r in rows]}, indent=2)


def fill_objects(
    engine: Any, root_id: int, scan_id: int, rows: Iterator[tuple[str, int, int]]
) -> tuple[int, int]:
    """Bulk-insert (key, size, last_modified µs) rows as live objects; returns (count, bytes).

    `tags` is left out of the rows so that it is SQL NULL, as the scanner writes it: a None
    given for a JSON column would be stored as the JSON text 'null' and decoded on every read.
    """
    from governance.catalog.tables import StoredObject

    table = StoredObject.__table__  # type: ignore[attr-defined]
    batch: list[dict[str, Any]] = []
    written = total = 0
    with engine.begin() as conn:
        for key, size, lm in rows:
            batch.append(
                {
                    "root_id": root_id,
                    "key": key,
                    "upload_id": "",
                    "size": size,
                    "etag": f"{written:032x}",
                    "last_modified": lm,
                    "storage_class": "STANDARD",
                    "version_id": None,
                    "checksum_algorithm": None,
                    "first_scan_id": scan_id,
                    "changed_scan_id": scan_id,
                    "gone_scan_id": None,
                }
            )
            written += 1
            total += size
            if len(batch) >= 50_000:
                conn.execute(table.insert(), batch)
                batch = []
        if batch:
            conn.execute(table.insert(), batch)
    return written, total
