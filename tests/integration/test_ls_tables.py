"""`govern ls` tables at 80 columns (a pipe) and on a wide terminal: run names and URLs
fold rather than end in `…` (two runs that share a prefix stay two), numbers stay whole."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize("columns", [80, 200])
def test_ls_runs_shows_each_run_name_whole(catalog: str, columns: int) -> None:
    lines = _ls(catalog, columns, "runs")
    text = "\n".join(lines)
    assert "…" not in text
    assert max(map(len, lines)) <= columns
    for run in RUNS:
        assert run in text, run
    header = {cell.strip() for line in lines[1:3] for cell in line.split("┃")}
    # at 80 the reason goes under the run's name, not into a column of its own
    assert ("why" in header) is (columns == 200)


@pytest.mark.parametrize("columns", [80, 200])
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
