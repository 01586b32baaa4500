"""An empty `govern ls` listing says so in one line, as `govern plans` ("no plans yet")
and `govern audit` ("no audit events") do, rather than a header squeezed into a column
above no rows; `--format json` stays an empty array."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli
from tests.fixtures.builders import hf_run, local_writer


def _govern(catalog: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--catalog", catalog, *args], env={"COLUMNS": "80"})
    return result.exit_code, result.stdout


@pytest.fixture
def empty(tmp_path: Path) -> tuple[str, str]:
    """(catalog URL, root URL): a catalog holding one scanned, empty root."""
    (tmp_path / "storage").mkdir()
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    code, _ = _govern(catalog, "-q", "scan", "--root", str(tmp_path / "storage"))
    assert code == 0
    return catalog, (tmp_path / "storage").as_uri() + "/"


@pytest.mark.parametrize("what", ["artifacts", "runs", "objects"])
def test_an_empty_listing_says_so_in_one_line(empty: tuple[str, str], what: str) -> None:
    catalog, root = empty
    assert _govern(catalog, "ls", what) == (0, f"no {what} in the catalog\n")
    assert _govern(catalog, "ls", what, "--root", root) == (0, f"no {what} in root {root}\n")
    code, out = _govern(catalog, "ls", what, "--format", "json")
    assert (code, json.loads(out)) == (0, [])


def test_ls_artifacts_names_the_filters_that_left_nothing(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), "runs/llama-a/", steps=(500,))
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    assert _govern(catalog, "-q", "scan", "--root", str(storage))[0] == 0
    code, out = _govern(catalog, "ls", "artifacts", "--kind", "eval", "--run", "llama-*")
    assert (code, out) == (
        0,
        "no artifacts of kind eval of runs matching 'llama-*' in the catalog\n",
    )
    code, out = _govern(catalog, "ls", "artifacts", "--kind", "checkpoint", "--format", "json")
    assert code == 0
    assert len(json.loads(out)) == 1
