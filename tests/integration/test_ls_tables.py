"""`govern ls` tables at 60 and 80 columns (80 is a pipe) and on a wide terminal: run names
and URLs fold rather than end in `…` (two runs that share a prefix stay two), numbers
stay whole, and the table fits. `ls runs` counts complete checkpoints and in-flight ones
apart."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli
from governance.policy.units import format_bytes
from tests.fixtures.builders import hf_run, local_writer

RUNS = ("llama-1b-pretrain-a", "llama-1b-pretrain-b")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("ls-tables")
    storage = base / "storage"
    write = local_writer(storage)
    for run in RUNS:
        hf_run(write, f"nlp/llm/runs/{run}/", steps=(500, 1000))
    url = f"sqlite:///{base / 'catalog.db'}"
    result = CliRunner().invoke(cli, ["--catalog", url, "-q", "scan", "--root", str(storage)])
    assert result.exit_code == 0, result.output
    return url


def _ls(catalog: str, columns: int, *args: str) -> list[str]:
    result = CliRunner().invoke(
        cli, ["--catalog", catalog, "ls", *args], env={"COLUMNS": str(columns)}
    )
    assert result.exit_code == 0, result.output
    return [line.rstrip() for line in result.output.splitlines()]


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_ls_runs_shows_each_run_name_whole(catalog: str, columns: int) -> None:
    lines = _ls(catalog, columns, "runs")
    text = "\n".join(lines)
    assert "…" not in text
    assert max(map(len, lines)) <= columns
    cells = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    for run in RUNS:
        assert run in cells, run  # folded at 60, whole at 80 and up
    header = {cell.strip() for line in lines[1:3] for cell in line.split("┃")}
    # at 80 the reason goes under the run's name, not into a column of its own
    assert ("why" in header) is (columns == 200)


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_ls_artifacts_and_objects_fold_urls_and_keep_sizes_whole(
    catalog: str, columns: int
) -> None:
    for what in ("artifacts", "objects"):
        lines = _ls(catalog, columns, what)
        text = "\n".join(lines)
        assert "…" not in text, what
        assert max(map(len, lines)) <= columns, what
        cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
        joined = "".join(cells)  # a URL folded over lines reads whole again
        for run in RUNS:
            assert f"/nlp/llm/runs/{run}/checkpoint-500/" in joined, (what, run)
        listed = CliRunner().invoke(cli, ["--catalog", catalog, "ls", what, "--format", "json"])
        for row in json.loads(listed.output):
            size = format_bytes(row["bytes" if what == "artifacts" else "size"])
            assert any(size in line for line in lines), (what, size)
            if what == "objects":  # under the URL below 120 columns, in a column above
                assert row["etag"] in "".join("".join(line.split("│")) for line in lines)


@pytest.fixture(scope="module")
def in_flight(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two runs whose last checkpoint lacks its trainer state and a shard: `flying`
    wrote it an hour ago (inside the 3-day grace period: in flight), `stale` in 2024
    (past it: residue)."""
    base = tmp_path_factory.mktemp("ls-in-flight")
    storage = base / "storage"
    write = local_writer(storage)
    recent = datetime.now(UTC) - timedelta(hours=5)
    hf_run(write, "runs/flying/", sharded=True, incomplete_last=True, start=recent)
    hf_run(write, "runs/stale/", sharded=True, incomplete_last=True)
    return _scanned(base, storage)


def _scanned(base: Path, storage: Path) -> str:
    url = f"sqlite:///{base / 'catalog.db'}"
    result = CliRunner().invoke(cli, ["--catalog", url, "-q", "scan", "--root", str(storage)])
    assert result.exit_code == 0, result.output
    return url


def test_ls_runs_json_counts_complete_checkpoints_and_in_flight_ones_apart(
    in_flight: str,
) -> None:
    listed = CliRunner().invoke(cli, ["--catalog", in_flight, "ls", "runs", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    counts = {r["run"]: (r["checkpoints"], r["in_flight"]) for r in json.loads(listed.output)}
    # the stale run's third checkpoint is residue: in neither count
    assert counts == {"flying": (2, 1), "stale": (2, 0)}
    artifacts = CliRunner().invoke(
        cli, ["--catalog", in_flight, "ls", "artifacts", "--kind", "residue", "--format", "json"]
    )
    assert [a["run"] for a in json.loads(artifacts.output)] == ["stale"]


@pytest.mark.parametrize("columns", [80, 200])
def test_ls_runs_table_shows_in_flight_checkpoints_after_the_complete_ones(
    in_flight: str, columns: int
) -> None:
    lines = _ls(in_flight, columns, "runs")
    flying = next(line for line in lines if "flying" in line)
    stale = next(line for line in lines if "stale" in line)
    assert " 2 +1 " in flying
    assert " 2 " in stale
    assert "+" not in stale
    bottom = next(i for i, line in enumerate(lines) if line.startswith("└"))
    note = " ".join(lines[bottom + 1 :])
    assert "+N: incomplete ones still inside the grace period (in flight)" in note
    assert max(map(len, lines)) <= columns
