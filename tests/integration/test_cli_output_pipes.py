"""`govern ... | head -1`: a reader that stops early is not an error. The command writes
nothing more, prints no traceback or message (nor Python's "Exception ignored ...
BrokenPipeError" at exit) and ends with its own exit code: 0 here. Run as a real program
on a real pipe, since the point is what happens at the file descriptor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli

GOVERN = Path(sys.executable).with_name("govern")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A catalog with a saved plan and thousands of objects: (catalog URL, plan id, an
    artifact the plan explains)."""
    base = tmp_path_factory.mktemp("pipes")
    result = CliRunner().invoke(cli, ["-q", "demo", "--dir", str(base / "demo")])
    assert result.exit_code == 0, result.output
    catalog = f"sqlite:///{base / 'demo' / 'catalog.db'}"
    many = base / "many"
    for i in range(3000):  # `ls objects --format json` well past a pipe's 64 KiB
        path = many / f"d{i % 30:02d}" / f"file-{i:05d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    scanned = CliRunner().invoke(cli, ["--catalog", catalog, "-q", "scan", "--root", str(many)])
    assert scanned.exit_code == 0, scanned.output
    plans = CliRunner().invoke(cli, ["--catalog", catalog, "plans", "--format", "json"])
    plan_id = json.loads(plans.stdout)[-1]["plan_id"]
    storage = (base / "demo" / "storage").resolve().as_uri()
    artifact = f"{storage}/nlp/llm-pretrain/runs/llama-1b-a/checkpoint-1000/"
    return catalog, plan_id, artifact


def _commands(demo: tuple[str, str, str]) -> dict[str, list[str]]:
    catalog, plan_id, artifact = demo
    policy = str(Path(catalog.removeprefix("sqlite:///")).with_name("retention.yaml"))
    return {
        "ls objects json": ["ls", "objects", "--format", "json"],
        "ls objects table": ["ls", "objects"],
        "ls runs table": ["ls", "runs"],
        "show json": ["show", plan_id, "--format", "json"],
        "show table": ["show", plan_id],
        "explain": ["explain", artifact, "--policy", policy],
    }


@pytest.mark.parametrize(
    "name",
    ["ls objects json", "ls objects table", "ls runs table", "show json", "show table", "explain"],
)
def test_a_reader_gone_before_the_first_write_is_exit_0_and_silent(
    demo: tuple[str, str, str], name: str
) -> None:
    """The read end is closed before the command starts: its first write to stdout
    meets a broken pipe, whatever the command and however little it prints."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [str(GOVERN), "--catalog", demo[0], *_commands(demo)[name]],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, ""), name


@pytest.mark.parametrize("args", [["ls", "objects", "--format", "json"], ["ls", "objects"]])
def test_head_1_of_a_long_listing_is_exit_0_and_silent(
    demo: tuple[str, str, str], args: list[str]
) -> None:
    """The usual shape: `| head -1` reads one line of a listing far longer than a pipe
    holds and exits while govern still writes; stderr goes through the shell too."""
    line = " ".join([str(GOVERN), "--catalog", demo[0], *args])
    done = subprocess.run(
        ["bash", "-c", f'{line} 2>"$ERR" | head -1; echo "exit ${{PIPESTATUS[0]}}"'],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ERR": str(Path(demo[0].removeprefix("sqlite:///")).with_name("e"))},
        check=False,
    )
    first, status = done.stdout.splitlines()
    assert first.startswith("[" if "json" in args else "┏")
    assert status == "exit 0"
    assert Path(demo[0].removeprefix("sqlite:///")).with_name("e").read_text() == ""


def test_a_command_that_keeps_its_reader_still_writes_everything(
    demo: tuple[str, str, str],
) -> None:
    """The guard changes nothing while someone reads: the whole listing arrives."""
    done = subprocess.run(
        [str(GOVERN), "--catalog", demo[0], "ls", "objects", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) > 3000
