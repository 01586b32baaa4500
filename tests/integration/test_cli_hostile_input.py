"""Bad input met by hand: each gets one clear message naming it, its exit code, and no
change (found by a session of hostile use; each crashed, changed something, or named
something other than what was typed).

Run as the real program where what happens at the process edge is the point (its
arguments' bytes, its stdout's file descriptor); otherwise through click's runner.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli

GOVERN = Path(sys.executable).with_name("govern")


def _run(*args: str | bytes, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    env.update(kwargs.pop("env", {}))  # type: ignore[call-overload]
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(  # (our own program)
        [os.fsencode(str(GOVERN)), *[a if isinstance(a, bytes) else a.encode() for a in args]],
        stderr=subprocess.PIPE,
        env=env,
        timeout=120,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """(catalog URL, a plan id, the demo folder) of one `govern demo`."""
    base = tmp_path_factory.mktemp("hostile") / "demo"
    result = CliRunner().invoke(cli, ["-q", "demo", "--dir", str(base)])
    assert result.exit_code == 0, result.output
    catalog = f"sqlite:///{base / 'catalog.db'}"
    plans = CliRunner().invoke(cli, ["--catalog", catalog, "plans", "--format", "json"])
    plan_id = plans.stdout.split('"plan_id": "', 1)[1].split('"', 1)[0]
    return catalog, plan_id, base


def _plan_count(catalog: str) -> int:
    with sqlite3.connect(catalog.removeprefix("sqlite:///")) as db:
        return int(db.execute("SELECT count(*) FROM plans").fetchone()[0])


def test_an_argument_that_is_not_utf8_is_named_not_a_traceback(
    demo: tuple[str, str, Path],
) -> None:
    catalog, plan_id, _ = demo
    for args in (
        [b"--as", b"a\xff", b"approve", plan_id.encode()],
        [b"show", b"p-\xff"],
        [b"reject", plan_id.encode(), b"--comment", b"bad\xfe"],
    ):
        done = _run("--catalog", catalog, *args)
        assert done.returncode == 2, done.stderr
        assert b"Traceback" not in done.stderr
        assert b"is not valid UTF-8: it is read as text" in done.stderr
    assert _plan_count(catalog) == 1
    shown = _run("--catalog", catalog, "show", plan_id, env={"GOVERN_USER": "a\udcff"})
    assert shown.returncode == 2
    assert shown.stderr == b"error: GOVERN_USER 'a\\xff' is not valid UTF-8: it is read as text\n"
    catalog_env = _run("plans", env={"GOVERN_CATALOG_URL": "sqlite:////tmp/\udcff.db"})
    assert catalog_env.returncode == 2
    assert b"GOVERN_CATALOG_URL 'sqlite:////tmp/\\xff.db' is not valid UTF-8" in catalog_env.stderr


def test_a_full_disk_on_stdout_is_one_error_exit_1(demo: tuple[str, str, Path]) -> None:
    catalog, plan_id, _ = demo
    policy = str(demo[2] / "retention.yaml")
    for args in (
        ["plans"],
        ["show", plan_id, "--format", "json"],
        ["audit", "--verify"],  # (click.echo probes the stream first, and swallowed that)
        ["policy", "validate", policy],
    ):
        with open("/dev/full", "wb") as full:
            done = _run("--catalog", catalog, *args, stdout=full)
        assert done.returncode == 1, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith(b"error:")]
        assert errors == [b"error: cannot write to standard output: No space left on device"]
        assert b"Traceback" not in done.stderr


def test_an_escape_sequence_in_an_argument_is_shown_escaped_in_the_error(tmp_path: Path) -> None:
    """Under a terminal it ran (an OSC sequence set the window title); piped, click
    stripped it and the message named another path."""
    typed = f"{tmp_path}/\x1b]0;pwned\x07X.yaml"
    result = CliRunner().invoke(cli, ["policy", "validate", typed])
    assert result.exit_code == 2
    assert result.stderr == f"error: policy file not found: {tmp_path}/\\x1b]0;pwned\\x07X.yaml\n"


def test_an_escape_sequence_in_a_scanned_root_is_shown_escaped(tmp_path: Path) -> None:
    """`scan` printed its per-root errors raw: a colour code in the path ran under a
    terminal, and piped, click stripped it (the error named `.../red/`)."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    typed = f"{tmp_path}/\x1b[31mred"
    result = _run("--catalog", catalog, "scan", "--root", typed)
    assert result.returncode == 2, result.stderr
    assert b"\x1b" not in result.stderr
    assert result.stderr.decode() == (f"error: file://{tmp_path}/\\x1b[31mred/: does not exist\n")


def test_demo_refuses_a_folder_it_cannot_make_and_a_bad_catalog_before_writing(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for where, words in (
        (a_file, "is a file, not a folder"),
        (a_file / "sub", "cannot make the folder: Not a directory"),
    ):
        result = CliRunner().invoke(cli, ["demo", "--dir", str(where)])
        assert result.exit_code == 2
        assert result.stderr == f"error: --dir {where}: {words}\n"
    not_a_catalog = tmp_path / "text.db"
    not_a_catalog.write_text("not a database")
    workdir = tmp_path / "demo"
    result = CliRunner().invoke(
        cli, ["--catalog", f"sqlite:///{not_a_catalog}", "demo", "--dir", str(workdir)]
    )
    assert result.exit_code == 2
    assert "cannot be opened: file is not a database" in result.stderr
    assert not workdir.exists()  # no tree of 312 files left behind


def test_a_catalog_missing_a_table_is_refused_unchanged(demo: tuple[str, str, Path]) -> None:
    catalog, _, base = demo
    damaged = base.parent / "damaged.db"
    with sqlite3.connect(catalog.removeprefix("sqlite:///")) as db, sqlite3.connect(damaged) as out:
        db.backup(out)
    with sqlite3.connect(damaged) as db:
        db.execute("DROP TABLE plan_actions")
        scans = db.execute("SELECT count(*) FROM scans").fetchone()[0]
    url = f"sqlite:///{damaged}"
    for args in (["audit", "--verify"], ["scan", "--root", str(base / "storage")]):
        result = CliRunner().invoke(cli, ["--catalog", url, *args])
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"error: catalog {url} is at schema 0018 but lacks the table plan_actions: it is "
            "damaged; restore it from a backup\n"
        )
    with sqlite3.connect(damaged) as db:
        assert db.execute("SELECT count(*) FROM scans").fetchone()[0] == scans


def test_a_policy_past_16_mib_is_refused_and_a_pipe_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as out:
        out.truncate(16 * 1024 * 1024 + 1)  # (sparse: nothing written)
    result = CliRunner().invoke(cli, ["policy", "validate", str(huge)])
    assert result.exit_code == 2
    assert result.stderr == f"error: policy file {huge} is larger than 16 MiB: it is not a policy\n"
    policy = Path(__file__).parents[2] / "policies" / "retention.yaml"
    with policy.open("rb") as stdin:
        piped = _run("policy", "validate", "/dev/stdin", stdin=stdin)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith(b"policy OK")


@pytest.mark.parametrize("option", [["policy", "validate", ""], ["plan", "--policy", ""]])
def test_an_empty_path_is_named_as_empty_not_as_the_current_folder(option: list[str]) -> None:
    result = CliRunner().invoke(cli, option)
    assert result.exit_code == 2
    assert "'' is empty: give a path" in result.stderr
    assert "cannot read policy file ." not in result.stderr


def test_bad_aws_settings_in_the_environment_are_bad_input(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    garbage = _run(
        "--catalog", catalog, "scan", "--root", "s3://mlb/", env={"AWS_ENDPOINT_URL": "garbage"}
    )
    assert garbage.returncode == 2, garbage.stderr
    assert garbage.stderr == (
        b"error: s3://mlb/: Invalid endpoint: garbage (from AWS_ENDPOINT_URL): an endpoint is "
        b"a URL like https://host\n"
    )
    config = tmp_path / "config"
    config.write_text("[default\nregion")
    broken = _run(
        "--catalog", catalog, "scan", "--root", "s3://mlb/", env={"AWS_CONFIG_FILE": str(config)}
    )
    assert broken.returncode == 2, broken.stderr
    assert f"Unable to parse config file: {config}".encode() in broken.stderr
    assert b"Traceback" not in broken.stderr


def test_a_catalog_given_as_a_path_gets_the_url_it_meant(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    result = CliRunner().invoke(cli, ["--catalog", str(path), "plans"])
    assert result.exit_code == 2
    assert result.stderr.rstrip().endswith(f"(for this file: sqlite:///{path})")
    assert not path.exists()


def test_a_busy_timeout_too_large_to_wait_is_refused(demo: tuple[str, str, Path]) -> None:
    catalog, _, _ = demo
    result = CliRunner(env={"GOVERN_SQLITE_BUSY_TIMEOUT": "1e20"}).invoke(
        cli, ["--catalog", catalog, "plans"]
    )
    assert result.exit_code == 2
    assert "GOVERN_SQLITE_BUSY_TIMEOUT='1e20': not a positive number of seconds up to" in (
        result.stderr
    )


def test_a_report_that_cannot_be_written_after_the_plan_is_saved_says_so(
    demo: tuple[str, str, Path],
) -> None:
    """`--out` is checked before planning; a disk that fills while the report is written
    (a link to /dev/full here) is a failed operation, exit 1, not bad input: the plan is
    saved, and the message says how to write its report again."""
    catalog, _, base = demo
    out = base.parent / "full.json"
    out.symlink_to("/dev/full")
    before = _plan_count(catalog)
    result = CliRunner().invoke(
        cli,
        ["--catalog", catalog, "plan", "--policy", str(base / "retention.yaml"), "--no-scan",
         "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert _plan_count(catalog) == before + 1
    plan_id = result.stderr.split("saved plan ", 1)[1].split(" ", 1)[0]
    assert result.stderr.strip().endswith(
        f"--out {out}: cannot write: No space left on device; plan {plan_id} is saved: "
        f"`govern show {plan_id} --format json > FILE` writes its report"
    )
