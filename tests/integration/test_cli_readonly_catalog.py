"""A SQLite catalog this user may read but not write (the nightly job's `catalog.db` shared
with an analyst, a file on a read-only mount): the commands that only read work, print
what a writer would, create no -wal, -shm or journal file and change no byte; the
commands that write fail as before (exit 2, the catalog must be writable); a catalog at
an older schema is not migrated but named as needing a writer.

Tests run as root here, and root ignores permission bits: `chmod` alone reproduces
nothing. Three real refusals by the OS are used instead, each skipped where the machine
cannot make it, and each checked to be real (the reader cannot create a file beside the
catalog) before anything is asserted:

- `other-user`: file 0444 and folder 0555, owned by root, and govern run as the
  unprivileged user `nobody` (the subprocess drops root with setgroups/setgid/setuid, all
  capabilities gone): the analyst reading another user's catalog, EACCES from the
  kernel. Not root, chmod alone does it, for this user.
- `chattr`: `chattr +i` on the file and its folder: EPERM even for root, as on a
  read-only medium (SQLite cannot create its -wal and -shm files).
- `ro-mount`: a read-only bind mount of the folder in a private mount namespace
  (`unshare --mount`), gone with the process: EROFS, a read-only mount.

The CLI runs in a subprocess under that refusal (one process for a list of commands,
through the real `govern` command group, for speed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governance.catalog.engine import SCHEMA_REVISION, current_revision, make_engine, upgrade
from governance.cli.main import cli

DRIVER = r"""
import importlib, json, os, pkgutil, sys
from click.testing import CliRunner
import governance
from governance.cli.main import cli

job = json.load(sys.stdin)


def run_all(url, runs):
    results = []
    for args in runs:
        r = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["--catalog", url, *args])
        crash = None
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            crash = repr(r.exception)
        results.append({"exit": r.exit_code, "stdout": r.stdout, "stderr": r.stderr,
                        "crash": crash})
    return results


if job["drop_to"]:
    # Root becomes `nobody` here, not before exec: the interpreter's own files may lie
    # where nobody cannot read them (a pyenv under /root). So every module is loaded
    # first: all of govern's, and what the reads load lazily (run once, on a copy).
    for mod in pkgutil.walk_packages(governance.__path__, "governance."):
        if ".migrations" not in mod.name:
            importlib.import_module(mod.name)
    run_all(job["warmup_url"], job["warmup"])
    uid, gid = job["drop_to"]
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
folder = job["folder"]
try:  # is the refusal real? (a file created beside the catalog: it is not)
    os.close(os.open(os.path.join(folder, ".probe"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    os.unlink(os.path.join(folder, ".probe"))
    can_write = True
except OSError:
    can_write = False
print(json.dumps({"can_write": can_write, "can_read": os.access(folder, os.R_OK | os.X_OK),
                  "results": run_all(job["catalog_url"], job["runs"])}))
"""


@dataclass
class Outcome:
    exit: int
    stdout: str
    stderr: str
    crash: str | None


def _nobody() -> tuple[int, int]:
    import pwd

    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return 65534, 65534
    return entry.pw_uid, entry.pw_gid


def _sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


class Reader:
    """One way to make a folder and its catalog unwritable for the process that reads."""

    name = ""

    def available(self, scratch: Path) -> str | None:
        """Why this machine cannot do it, or None."""
        return None

    def lock(self, folder: Path, catalog: Path) -> None: ...

    def unlock(self, folder: Path, catalog: Path) -> None: ...

    def command(self, folder: Path) -> list[str]:
        return [sys.executable, "-c", DRIVER]

    def drop_to(self) -> tuple[int, int] | None:
        return None

    def run(
        self, folder: Path, catalog: Path, runs: list[list[str]], warmup: list[list[str]]
    ) -> list[Outcome]:
        """The commands (each after `--catalog URL`) in one process under the refusal;
        `warmup`: reads to run first on a writable copy, where the process starts as root
        and becomes another user."""
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "GOVERN_USER": "analyst"}
        env.pop("GOVERN_CATALOG_URL", None)
        job: dict[str, Any] = {
            "folder": str(folder),
            "catalog": str(catalog),
            "catalog_url": f"sqlite:///{catalog}",
            "runs": runs,
            "drop_to": self.drop_to(),
        }
        if job["drop_to"]:
            copy = Path(tempfile.mkdtemp(dir=folder.parent)) / "catalog.db"
            shutil.copyfile(catalog, copy)
            job.update(warmup_url=f"sqlite:///{copy}", warmup=warmup)
        done = subprocess.run(
            self.command(folder),
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env=env,
            cwd=folder.parent,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        if not report["can_read"]:
            pytest.skip(f"{self.name}: the reader cannot reach {folder} (its parents)")
        assert not report["can_write"], f"{self.name}: the reader can still write {folder}"
        return [Outcome(**r) for r in report["results"]]


class OtherUser(Reader):
    name = "other-user"

    def lock(self, folder: Path, catalog: Path) -> None:
        catalog.chmod(0o444)
        folder.chmod(0o555)

    def unlock(self, folder: Path, catalog: Path) -> None:
        folder.chmod(0o755)
        catalog.chmod(0o644)

    def drop_to(self) -> tuple[int, int] | None:
        return _nobody() if os.geteuid() == 0 else None  # (not root: chmod is enough)


class Chattr(Reader):
    name = "chattr"

    def available(self, scratch: Path) -> str | None:
        if os.geteuid() != 0:
            return "chattr +i needs root"
        probe = scratch / "chattr-probe"
        probe.mkdir()
        done = _sh("chattr", "+i", str(probe)) if shutil.which("chattr") else None
        if done is None or done.returncode != 0:
            return f"chattr +i not possible here: {done.stderr.strip() if done else 'no chattr'}"
        _sh("chattr", "-i", str(probe))
        return None

    def lock(self, folder: Path, catalog: Path) -> None:
        done = _sh("chattr", "+i", str(catalog), str(folder))
        assert done.returncode == 0, done.stderr

    def unlock(self, folder: Path, catalog: Path) -> None:
        _sh("chattr", "-i", str(folder), str(catalog))


class ReadOnlyMount(Reader):
    name = "ro-mount"
    SCRIPT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'

    def available(self, scratch: Path) -> str | None:
        if os.geteuid() != 0 or not shutil.which("unshare"):
            return "a private read-only mount needs root and unshare"
        probe = scratch / "mount-probe"
        probe.mkdir()
        done = _sh("unshare", "--mount", "sh", "-c", self.SCRIPT, "sh", str(probe), "true")
        if done.returncode != 0:
            return f"unshare --mount / mount not possible here: {done.stderr.strip()}"
        return None

    def command(self, folder: Path) -> list[str]:
        return [
            "unshare",
            "--mount",
            "sh",
            "-c",
            self.SCRIPT,
            "sh",
            str(folder),
            *super().command(folder),
        ]


READERS = [OtherUser(), Chattr(), ReadOnlyMount()]


# ----------------------------------------------------------------------------- the catalog


@dataclass
class Shared:
    base: Path
    pristine: Path  # a demo catalog: scanned, planned, classified by a writer
    policy: Path
    plan_id: str
    artifact: str  # a URL for `explain`


@pytest.fixture(scope="module")
def shared() -> Iterator[Shared]:
    """`govern demo` (scan and plan) and a writer's `ls runs` (which stores the runs), in a
    folder under the system's temp folder that `nobody` can reach (pytest's own is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="govern-ro-"))
    base.chmod(0o755)
    try:
        demo = base / "demo"
        assert _writer(demo / "catalog.db", "demo", "--dir", str(demo)).exit_code == 0
        catalog = demo / "catalog.db"
        assert _writer(catalog, "ls", "runs").exit_code == 0
        plans = json.loads(_writer(catalog, "plans", "--format", "json").stdout)
        arts = json.loads(_writer(catalog, "ls", "artifacts", "--format", "json").stdout)
        assert not Path(f"{catalog}-wal").exists()
        yield Shared(
            base=base,
            pristine=catalog,
            policy=demo / "retention.yaml",
            plan_id=plans[0]["plan_id"],
            artifact=next(a["uri"] for a in arts if a["kind"] == "log"),
        )
    finally:
        if os.geteuid() == 0 and shutil.which("chattr"):
            _sh("chattr", "-R", "-i", str(base))  # (what a failed test left locked)
        for path in [base, *base.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o700)
        shutil.rmtree(base, ignore_errors=True)


def _writer(catalog: Path, *args: str) -> Any:
    """The command as the catalog's owner runs it, in this process."""
    runner = CliRunner(env={"COLUMNS": "200", "GOVERN_USER": "analyst"})
    return runner.invoke(cli, ["--catalog", f"sqlite:///{catalog}", *args])


@pytest.fixture(params=READERS, ids=lambda r: r.name)
def reader(request: pytest.FixtureRequest, shared: Shared) -> Reader:
    why = request.param.available(Path(tempfile.mkdtemp(dir=shared.base)))
    if why:
        pytest.skip(why)
    return request.param


@pytest.fixture
def folder(shared: Shared) -> Iterator[Path]:
    """A fresh folder of its own (0755, root's) holding a copy of the catalog."""
    path = Path(tempfile.mkdtemp(dir=shared.base))
    path.chmod(0o755)
    shutil.copyfile(shared.pristine, path / "catalog.db")
    yield path
    for r in READERS:
        r.unlock(path, path / "catalog.db")


def _state(folder: Path) -> dict[str, str]:
    """Each file in the folder and its bytes' digest."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def _locked_run(
    reader: Reader, folder: Path, runs: list[list[str]], warmup: list[list[str]] | None = None
) -> list[Outcome]:
    """`runs` under the reader's refusal; the folder is left exactly as it was."""
    catalog = folder / "catalog.db"
    before = _state(folder)
    reader.lock(folder, catalog)
    try:
        outcomes = reader.run(folder, catalog, runs, runs if warmup is None else warmup)
    finally:
        reader.unlock(folder, catalog)
    assert _state(folder) == before  # no -wal, -shm or -journal; not a byte changed
    return outcomes


def _reads(s: Shared) -> list[list[str]]:
    show = [["show", s.plan_id, "--format", f] for f in ("table", "json", "md", "csv", "html")]
    return [
        ["plans"],
        ["plans", "--format", "json"],
        *show,
        ["ls", "objects", "--format", "json"],
        ["ls", "runs", "--format", "json"],
        ["ls", "artifacts"],
        ["audit", "--format", "json"],
        ["audit", "--plan", s.plan_id],
        ["audit", "--verify"],
        # (at a fixed time: the writer's and the reader's runs may straddle a day's turn)
        ["explain", s.artifact, "--policy", str(s.policy), "--format", "json", *_AS_OF],
    ]


_AS_OF = ("--as-of", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _writes(s: Shared) -> list[list[str]]:
    return [
        ["approve", s.plan_id, "--comment", "ok"],
        ["reject", s.plan_id, "--comment", "no"],
        ["scan", "--policy", str(s.policy)],
        ["plan", "--policy", str(s.policy), "--no-scan"],
        ["apply", s.plan_id, "--yes"],
        ["restore", s.plan_id],
    ]


def _refused_for_writing(outcome: Outcome, catalog: Path) -> None:
    """Exit 2 and the one line writing commands have always given: the catalog (file and
    folder) must be writable."""
    assert outcome.crash is None, outcome.crash
    assert outcome.exit == 2, (outcome.exit, outcome.stderr)
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith(f"error: catalog sqlite:///{catalog} cannot be opened: "), lines
    assert "must be writable" in lines[0] or "must exist and be writable" in lines[0], lines


# ----------------------------------------------------------------------------- the tests


def test_reading_commands_print_what_a_writer_sees_and_writing_ones_are_refused(
    shared: Shared, reader: Reader, folder: Path
) -> None:
    reads, writes = _reads(shared), _writes(shared)
    catalog = folder / "catalog.db"
    expected = [_writer(shared.pristine, *r) for r in reads]  # the owner's view, unlocked
    outcomes = _locked_run(reader, folder, reads + writes, warmup=reads)
    for args, want, got in zip(reads, expected, outcomes[: len(reads)], strict=True):
        assert want.exit_code == 0, (args, want.stderr)
        assert got.crash is None, (args, got.crash)
        assert (got.exit, got.stderr) == (0, ""), (args, got.exit, got.stderr)
        assert got.stdout == want.stdout, args
    assert json.loads(outcomes[1].stdout)[0]["plan_id"] == shared.plan_id
    assert "audit chain OK: 1 event" in outcomes[len(reads) - 2].stdout
    for outcome in outcomes[len(reads) :]:
        _refused_for_writing(outcome, catalog)


def test_an_older_catalog_is_named_as_needing_a_writer_and_not_migrated(
    reader: Reader, folder: Path
) -> None:
    from alembic.script import ScriptDirectory

    from governance.catalog.engine import _alembic_config

    catalog = folder / "catalog.db"
    catalog.unlink()
    engine = make_engine(f"sqlite:///{catalog}")
    script = ScriptDirectory.from_config(_alembic_config(engine))
    older = script.get_revision(SCHEMA_REVISION).down_revision
    assert isinstance(older, str)
    upgrade(engine, older)
    engine.dispose()
    reads = [["plans"], ["audit", "--verify"]]
    outcomes = _locked_run(reader, folder, [*reads, ["approve", "p-1"]], warmup=reads)
    for outcome in outcomes[:2]:
        assert outcome.crash is None, outcome.crash
        assert outcome.exit == 2, (outcome.exit, outcome.stderr)
        lines = outcome.stderr.strip().splitlines()
        assert len(lines) == 1, outcome.stderr
        for fragment in (
            f"error: catalog sqlite:///{catalog} is at schema {older}",
            f"older than this govern's {SCHEMA_REVISION}",
            "can write the catalog file and its folder",
            "nothing was changed",
        ):
            assert fragment in lines[0], (fragment, lines[0])
    _refused_for_writing(outcomes[2], catalog)
    # what the message says to do works: the owner's next command upgrades it in place
    assert _writer(catalog, "plans").exit_code == 0
    engine = make_engine(f"sqlite:///{catalog}")
    assert current_revision(engine) == SCHEMA_REVISION
    engine.dispose()


def test_a_reader_sees_a_running_writers_last_commit_and_the_same_once_it_ended(
    shared: Shared, folder: Path
) -> None:
    """While the owner's job is connected its -wal and -shm files exist: the reader opens
    the catalog `mode=ro` and sees the job's last commit (an approval still only in the
    -wal file), not the older state of the catalog file alone, which is all `immutable=1`
    would show. Once the job has ended (the -wal file folded in and removed) the reader
    sees the same, from the file alone."""
    reader = READERS[0]
    catalog = folder / "catalog.db"
    held = sqlite3.connect(catalog)  # the running job: the -wal file stays while it is open
    try:
        held.execute("SELECT count(*) FROM plans").fetchone()
        approved = _writer(catalog, "--as", "reviewer", "approve", shared.plan_id)
        assert approved.exit_code == 0, approved.stderr
        assert Path(f"{catalog}-wal").stat().st_size > 0
        alone = sqlite3.connect(f"file:{catalog}?mode=ro&immutable=1", uri=True)
        events_in_file = alone.execute("SELECT count(*) FROM audit_events").fetchone()[0]
        alone.close()
        reads = [["plans", "--format", "json"], ["audit", "--verify"]]
        plans, verify = _locked_run(reader, folder, reads)
    finally:
        held.close()
    assert events_in_file == 1  # the approval's event is not in the file yet
    assert (plans.exit, plans.stderr) == (0, ""), plans.stderr
    assert json.loads(plans.stdout)[0]["status"] == "approved"
    assert (verify.exit, verify.stderr) == (0, ""), verify.stderr
    assert verify.stdout.strip() == "audit chain OK: 2 events"
    assert sorted(p.name for p in folder.iterdir()) == ["catalog.db"]
    plans_after, verify_after = _locked_run(reader, folder, reads)
    assert (plans_after.exit, plans_after.stdout) == (0, plans.stdout), plans_after.stderr
    assert (verify_after.exit, verify_after.stdout) == (0, verify.stdout), verify_after.stderr


def test_ls_runs_after_a_new_scan_shows_what_a_writer_would_without_storing_it(
    shared: Shared, folder: Path
) -> None:
    """`ls runs` stores the runs it classifies after each scan; the reader cannot (it
    was refused, exit 2, until the owner listed them once): it classifies in memory
    instead, and prints what the owner's `ls` prints, the catalog left as it was."""
    reader = READERS[0]
    catalog = folder / "catalog.db"
    assert _writer(catalog, "scan", "--policy", str(shared.policy)).exit_code == 0
    explain = ["explain", shared.artifact, "--policy", str(shared.policy), "--format", "json"]
    explain += list(_AS_OF)
    runs, artifacts, objects, explained = _locked_run(
        reader,
        folder,
        [
            ["ls", "runs", "--format", "json"],
            ["ls", "artifacts", "--format", "json"],
            ["ls", "objects"],
            explain,
        ],
    )
    for outcome in (runs, artifacts, objects, explained):
        assert (outcome.crash, outcome.exit, outcome.stderr) == (None, 0, "")
    want_explained = _writer(catalog, *explain)
    assert want_explained.exit_code == 0
    assert explained.stdout == want_explained.stdout
    assert json.loads(runs.stdout)  # there are runs to show
    want_runs = _writer(catalog, "ls", "runs", "--format", "json")
    want_artifacts = _writer(catalog, "ls", "artifacts", "--format", "json")
    assert (want_runs.exit_code, want_artifacts.exit_code) == (0, 0)
    assert runs.stdout == want_runs.stdout
    assert artifacts.stdout == want_artifacts.stdout
    (again,) = _locked_run(reader, folder, [["ls", "runs", "--format", "json"]])
    assert (again.exit, again.stdout) == (0, want_runs.stdout), again.stderr


def test_ls_runs_after_a_new_scan_while_the_writer_is_connected(
    shared: Shared, reader: Reader, folder: Path
) -> None:
    """With the owner's job connected (its -wal and -shm files there), a read-only mount
    opened the catalog for writing, and `ls runs` failed at its first write ("attempt to
    write a readonly database"): it classifies in memory instead, as with no writer."""
    if reader.name == "chattr":  # (`_locked_run` compares every byte of the folder)
        pytest.skip("chattr +i leaves the writer's -shm file writable: read marks change it")
    catalog = folder / "catalog.db"
    assert _writer(catalog, "scan", "--policy", str(shared.policy)).exit_code == 0
    want = _writer(catalog, "ls", "runs", "--format", "json")
    held = sqlite3.connect(catalog)  # the running job: the -wal file stays while it is open
    try:
        held.execute("PRAGMA journal_mode").fetchone()
        held.execute("SELECT count(*) FROM runs").fetchone()
        # the owner scans again (nothing changed: a new scan all the same), still connected
        assert _writer(catalog, "scan", "--policy", str(shared.policy)).exit_code == 0
        assert Path(f"{catalog}-wal").exists()
        (runs,) = _locked_run(reader, folder, [["ls", "runs", "--format", "json"]])
    finally:
        held.close()
    assert (runs.crash, runs.exit, runs.stderr) == (None, 0, ""), runs.stderr
    assert json.loads(runs.stdout) == json.loads(want.stdout)


class OtherUserNoRead(OtherUser):
    def lock(self, folder: Path, catalog: Path) -> None:
        super().lock(folder, catalog)
        catalog.chmod(0o000)


def test_a_catalog_the_reader_cannot_read_says_so(folder: Path) -> None:
    """Not even readable (mode 0000, another user's): the file's permission is named, not
    the folder's, which need not be writable for reading."""
    catalog = folder / "catalog.db"
    (plans,) = _locked_run(OtherUserNoRead(), folder, [["plans"]], warmup=[["plans"]])
    assert plans.exit == 2, (plans.exit, plans.stderr)
    assert plans.stderr == (
        f"error: catalog sqlite:///{catalog} cannot be read: permission denied (the catalog "
        "file must be readable; commands that only read need no more)\n"
    )
