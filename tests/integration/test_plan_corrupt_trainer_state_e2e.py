"""A Trainer checkpoint whose `trainer_state.json` is cut short, end to end on local disk:
real files, `govern scan`, `govern ls artifacts` and `govern plan` through the CLI, the
metadata read through the catalog's cache.

Under `keep_last: 1` the live run's broken checkpoint-300 must not be "the newest
complete": inside the grace period it is in flight and checkpoint-200, which the Trainer
can resume from, is kept; past it, checkpoint-300 is residue and the residue rule
deletes it, checkpoint-200 still kept. A `trainer_state.json` over the metadata size limit
is not read: its checkpoint is not judged (it stays complete), and its run is left as it
is, since what that file says (the run's end, its metrics) is not known.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from governance.cli.main import cli
from tests.fixtures.builders import hf_run, local_writer
from tests.unit.plan_factories import KEEP_LAST_1_RESIDUE

NOW = datetime.now(UTC).replace(microsecond=0)
H = timedelta(hours=1)
CUT = b'{"global_step": 300, "max_st'
OVER_LIMIT = b'{"global_step": 300, "log_history": ['
OVER_LIMIT_SIZE = 65 * 1024 * 1024  # (sparse: past the 64 MiB limit, never read)


def _run(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


def _json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
    return json.loads(result.stdout)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[str, Path, Path]:
    """(catalog URL, policy, storage): two live runs with checkpoints 100, 200, 300 a day
    apart, the newest an hour old; `live`'s checkpoint-300 state cut short, `big`'s over
    the metadata size limit (and cut short too, unseen)."""
    storage = tmp_path / "storage"
    write = local_writer(storage)
    for run, state in (("live", CUT), ("big", OVER_LIMIT)):
        units = hf_run(
            write, f"runs/{run}", steps=(100, 200, 300), start=NOW - 73 * H, every=24 * H
        )
        write(units[-1] + "trainer_state.json", state, NOW - H)
        if state is OVER_LIMIT:
            path = storage / units[-1] / "trainer_state.json"
            os.truncate(path, OVER_LIMIT_SIZE)
            os.utime(path, ((NOW - H).timestamp(), (NOW - H).timestamp()))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage:
  - name: local
    url: {storage}
"""
        + KEEP_LAST_1_RESIDUE
        + "safety: {max_delete_fraction: 1}\n"
    )
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    _json(_run(catalog, "scan", "--policy", str(policy), "--format", "json"))
    return catalog, policy, storage


def _plan(catalog: str, policy: Path, as_of: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = _json(
        _run(
            catalog, "plan", "--policy", str(policy), "--no-scan", "--as-of",
            as_of.isoformat(), "--format", "json",
        )
    )  # fmt: skip
    acted = {a["artifact"]["uri"]: a for a in doc["actions"]}
    kept = {k["artifact"]["uri"]: k for k in doc["kept"]}
    return acted, kept


def test_cut_short_state_is_incomplete_and_an_unread_one_is_not_judged(
    tree: tuple[str, Path, Path],
) -> None:
    catalog, _policy, storage = tree
    rows = _json(_run(catalog, "ls", "artifacts", "--kind", "checkpoint", "--format", "json"))
    by_key = {r["uri"].removeprefix(storage.as_uri() + "/"): r for r in rows}
    bad = by_key["runs/live/checkpoint-300/"]
    assert bad["complete"] is False
    assert "trainer_state.json is not valid JSON (cut short?)" in bad["completeness_reason"]
    assert "in flight" in bad["note"]
    assert by_key["runs/live/checkpoint-200/"]["complete"] is True
    unread = by_key["runs/big/checkpoint-300/"]
    assert unread["complete"] is True, unread["completeness_reason"]


def test_within_the_grace_period_the_run_keeps_what_it_resumes_from(
    tree: tuple[str, Path, Path],
) -> None:
    catalog, policy, storage = tree
    acted, kept = _plan(catalog, policy, NOW)
    url = storage.as_uri() + "/runs/live/"
    assert kept[url + "checkpoint-300/"]["how"] == "in_flight"
    assert url + "checkpoint-300/" not in acted
    assert kept[url + "checkpoint-200/"]["tier"] == "recent"
    assert url + "checkpoint-200/" not in acted
    assert acted[url + "checkpoint-100/"]["action"] == "delete"
    # the state over the size limit was not read: the run is left as it is, each
    # checkpoint protected and saying why
    big = storage.as_uri() + "/runs/big/"
    for step in (100, 200, 300):
        assert big + f"checkpoint-{step}/" not in acted
        assert kept[big + f"checkpoint-{step}/"]["how"] == "protected"
    reason = kept[big + "checkpoint-100/"]["reason"]
    assert "metadata its decisions rest on could not be read: runs/big/checkpoint-300/" in reason
    assert "over the 67,108,864-byte metadata limit" in reason
    assert (storage / "runs/live/checkpoint-200/model.safetensors").exists()


def test_past_the_grace_period_the_broken_checkpoint_is_residue(
    tree: tuple[str, Path, Path],
) -> None:
    catalog, policy, storage = tree
    acted, kept = _plan(catalog, policy, NOW + 24 * H)
    url = storage.as_uri() + "/runs/live/"
    gone = acted[url + "checkpoint-300/"]
    assert (gone["action"], gone["rule"], gone["artifact"]["kind"]) == (
        "delete",
        "residue",
        "residue",
    )
    assert kept[url + "checkpoint-200/"]["tier"] == "recent"
    assert url + "checkpoint-200/" not in acted
    assert acted[url + "checkpoint-100/"]["action"] == "delete"
