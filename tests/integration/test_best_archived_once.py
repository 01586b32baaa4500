"""A run's best checkpoint, archived to another location by an applied plan, stays the
run's best: the next plan compares what is left with it (`catalog.bests`). Before, read
from what was left, each night's plan found the next best and archived that too. On
local disk, on each catalog backend (SQLite file, PostgreSQL when configured)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.catalogs import catalog_url  # noqa: F401  (fixture)
from tests.fixtures.builders import hf_run, local_writer
from tests.integration.test_apply_support import NO_APPROVAL, Setup, actions_by

RUN = "runs/a/"
STEPS = tuple(range(100, 1001, 100))


def _setup(tmp_path: Path, catalog: str) -> tuple[Setup, str, Path]:
    storage = tmp_path / "storage"
    # eval_loss is lowest at step 400, higher the further a step is from it
    hf_run(local_writer(storage), RUN, steps=STEPS, best_step=400, finished=True)
    archive = tmp_path / "archive"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"""version: 1
storage: [{{name: root, url: {storage}}}]
layout: {{runs: ["runs/{{run}}/"]}}
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - name: best
        keep: [best]
        best_metric: {{name: eval_loss, mode: min}}
        archive: {{url: {archive.as_uri()}/}}
      - {{name: recent, keep_last: 2}}
    otherwise: delete
safety: {{max_delete_fraction: 1.0}}
{NO_APPROVAL}"""
    )
    return Setup(catalog, policy), storage.as_uri() + "/", archive


def test_the_next_plan_does_not_archive_the_next_best(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    setup, base, archive = _setup(tmp_path, catalog_url)
    first = setup.plan()
    acts = actions_by(first, base)
    assert acts[f"{RUN}checkpoint-400/"] == ["archive"]
    assert {k for k, v in acts.items() if v == ["delete"]} == {
        f"{RUN}checkpoint-{s}/" for s in STEPS if s not in (400, 900, 1000)
    }
    setup.apply(first["plan_id"])
    assert (archive / RUN / "checkpoint-400" / "trainer_state.json").is_file()

    for again in (setup.plan("--no-scan"), setup.plan()):  # from the catalog; scanned anew
        # 900 (eval_loss 2.0) is the best of what is left, but 400 (1.5) was archived:
        # nothing is archived again, and the recent tier keeps 900 and 1000 as they are
        assert again["actions"] == []
        kept = {k["artifact"]["uri"]: k["tier"] for k in again["kept"]}
        assert kept == {
            f"{base}{RUN}checkpoint-900/": "recent",
            f"{base}{RUN}checkpoint-1000/": "recent",
        }


def test_a_best_archived_by_a_plan_not_applied_is_the_best_still(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """Recorded with the plan, the archived best counts only once its action is done: a
    plan never applied leaves the best where it is, and the next plan archives it."""
    setup, base, _ = _setup(tmp_path, catalog_url)
    setup.plan()  # never applied
    again = setup.plan()
    assert actions_by(again, base)[f"{RUN}checkpoint-400/"] == ["archive"]


def test_a_new_run_in_the_same_folder_is_not_compared_with_the_old_runs_best(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """The folder wiped and a new run trained into it (one output_dir, run again): its
    best (worse than the old run's archived one) was neither archived nor kept, and
    `otherwise: delete` removed it. A run with no checkpoint as old as the archiving
    plan is another run: its best is archived as any run's."""
    setup, base, _ = _setup(tmp_path, catalog_url)
    first = setup.plan()
    setup.apply(first["plan_id"])
    storage = tmp_path / "storage"
    shutil.rmtree(storage / "runs")
    later = datetime.now(UTC) + timedelta(hours=1)
    # the new run's best is step 300, eval_loss 1.5 + 0.1 (the old best was 1.5)
    hf_run(local_writer(storage), RUN, steps=(100, 200, 300, 400, 500), best_step=300,
           finished=True, start=later)  # fmt: skip
    as_of = (datetime.now(UTC) + timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    acts = actions_by(setup.plan(as_of=as_of), base)
    assert acts[f"{RUN}checkpoint-300/"] == ["archive"]
    assert acts[f"{RUN}checkpoint-100/"] == ["delete"]
