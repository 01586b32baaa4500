"""A run stays completed when an apply removes the evidence of it (`catalog.completions`).

A finished Trainer run writes no marker: its final checkpoint's `trainer_state.json` says
it finished. A `final` tier that archives that checkpoint to another location takes the
evidence away; read from what is left, the run was abandoned, and the next plan's rule for
dead runs expired the checkpoints the tiers had kept. On local disk, on each catalog
backend (SQLite file, PostgreSQL when configured).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.catalogs import catalog_url  # noqa: F401  (fixture)
from tests.fixtures.builders import hf_run, local_writer
from tests.integration.test_apply_support import NO_APPROVAL, Setup, actions_by, govern

RUN = "runs/a/"


def _setup(tmp_path: Path, catalog: str) -> tuple[Setup, str, Path]:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), RUN, steps=(100, 200, 300), finished=True)
    archive = tmp_path / "archive"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage: [{{name: root, url: {storage}}}]
layout: {{runs: ["runs/{{run}}/"]}}
rules:
  - {{name: failed-runs, select: {{run_status: [failed, abandoned]}}, expire: {{after: 14d}}}}
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - name: long
        keep: [final]
        keep_components: [weights]
        archive: {{url: {archive.as_uri()}/}}
      - {{name: recent, keep_last: 2}}
    otherwise: delete
safety: {{max_delete_fraction: 1.0}}
{NO_APPROVAL}"""
    )
    return Setup(catalog, policy), storage.as_uri() + "/", storage


def _run_status(setup: Setup) -> tuple[str, str]:
    result = govern(setup.catalog, "ls", "runs", "--format", "json")
    assert result.exit_code == 0, result.stderr
    [run] = json.loads(result.stdout)
    return run["status"], run["status_reason"]


def test_archiving_a_finished_runs_final_checkpoint_leaves_it_completed(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    setup, base, storage = _setup(tmp_path, catalog_url)
    first = setup.plan()
    assert actions_by(first, base) == {
        f"{RUN}checkpoint-100/": ["delete"],
        f"{RUN}checkpoint-300/": ["strip", "archive"],
    }
    setup.apply(first["plan_id"])
    assert not (storage / RUN / "checkpoint-300").exists()  # the evidence is archived away

    for again in (setup.plan("--no-scan"), setup.plan()):  # from the catalog; scanned anew
        assert again["actions"] == []
        kept = {k["artifact"]["uri"]: k["tier"] for k in again["kept"]}
        assert kept[f"{base}{RUN}checkpoint-200/"] == "recent"
    status, reason = _run_status(setup)
    assert status == "completed"
    assert f"completed when plan {first['plan_id']} was made" in reason
    assert "global_step 300 reached max_steps 300" in reason


def test_a_run_written_to_again_is_read_from_what_it_holds(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """The record holds only while nothing in the run is newer than what the plan saw:
    training resumed in the same folder is a run running again."""
    setup, _base, storage = _setup(tmp_path, catalog_url)
    setup.apply(setup.plan()["plan_id"])
    (storage / RUN / "resumed.log").write_text("step 301\n")  # written now

    setup.plan()

    status, reason = _run_status(setup)
    assert status == "running"
    assert "completed when plan" not in reason


def test_a_run_completed_by_its_marker_keeps_the_final_its_plan_archived(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """With a `COMPLETED` marker the run stays completed by its own evidence once its
    final is archived away; but each later plan took the newest checkpoint left for the
    final, stripped it and archived it too, one a night, until the run held none."""
    from tests.fixtures.builders import marker

    setup, base, storage = _setup(tmp_path, catalog_url)
    marker(local_writer(storage), RUN)
    first = setup.plan()
    assert actions_by(first, base)[f"{RUN}checkpoint-300/"] == ["strip", "archive"]
    setup.apply(first["plan_id"])
    assert not (storage / RUN / "checkpoint-300").exists()

    for again in (setup.plan("--no-scan"), setup.plan()):
        assert again["actions"] == [], [a["reason"] for a in again["actions"]]
        kept = {k["artifact"]["uri"]: k["tier"] for k in again["kept"]}
        assert kept[f"{base}{RUN}checkpoint-200/"] == "recent"
    assert (storage / RUN / "checkpoint-200" / "optimizer.pt").exists()
    status, reason = _run_status(setup)
    assert (status, reason) == ("completed", f"completed marker {RUN}COMPLETED")
