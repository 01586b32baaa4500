"""A SQLite catalog inside a scanned root is not the root's data.

`govern scan --root .` with the default catalog (`.govern/catalog.db` under the current
folder) listed the catalog file and its -wal and -shm files as objects of the root:
"changed" on every scan, and planned like any file (a rule over kind `other` deleted it;
only apply's staleness check saved it). Real CLI in the folder, default catalog.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli
from tests.fixtures.builders import hf_run, local_writer

POLICY = """version: 1
storage:
  - name: here
    url: {url}
protect: {{min_age: 0d}}
rules:
  - name: others
    select: {{kind: other}}
    expire: {{after: 0d}}
approval: {{require_for: []}}
"""


def _govern(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["-q", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("through", ["default", "a link to the folder"])
def test_the_catalog_in_the_scanned_folder_is_never_listed_or_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    here = tmp_path / "work"
    hf_run(local_writer(here), "runs/a/")
    (here / "notes.txt").write_text("a file of kind other")
    monkeypatch.delenv("GOVERN_CATALOG_URL", raising=False)
    monkeypatch.chdir(here)
    catalog: tuple[str, ...] = ()
    if through != "default":  # the catalog named through a link to the scanned folder
        (tmp_path / "link").symlink_to(here, target_is_directory=True)
        catalog = ("--catalog", f"sqlite:///{tmp_path / 'link' / '.govern' / 'catalog.db'}")
    for _ in range(2):
        code, out, err = _govern(*catalog, "scan", "--root", ".", "--format", "json")
        assert code == 0, err
    [scan] = json.loads(out)["scans"]
    assert scan["changed"] == 0  # the catalog, written by the scan, is not listed
    code, out, err = _govern(*catalog, "ls", "objects", "--format", "json")
    assert code == 0, err
    keys = [o["uri"] for o in json.loads(out)]
    assert any(k.endswith("notes.txt") for k in keys)
    assert not [k for k in keys if "/.govern/" in k], keys

    policy = here / "policy.yaml"
    policy.write_text(POLICY.format(url=here.as_uri() + "/"))
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, out, err = _govern(
        *catalog, "plan", "--policy", str(policy), "--as-of", tomorrow, "--format", "json"
    )
    assert code == 0, err
    uris = [a["artifact"]["uri"] for a in json.loads(out)["actions"]]
    assert any(u.endswith("notes.txt") for u in uris)  # the rule acts on what is data
    assert not [u for u in uris if "/.govern/" in u], uris
