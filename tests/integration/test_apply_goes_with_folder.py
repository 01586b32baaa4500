"""Files that go with their folder (a run's status marker, DeepSpeed's `latest`) are
deleted by apply only once everything the plan does in that folder is done: a marker
deleted beside a checkpoint apply had to leave made the run read as abandoned, and a
`latest` deleted beside one made it incomplete, residue to the next plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fixtures.builders import deepspeed_run, hf_run, local_writer, marker
from tests.integration.test_apply_support import Setup, govern

RUN = "runs/gone/"
DS = "runs/ds/"


def _policy(url: str) -> str:
    return f"""version: 1
storage:
  - name: root
    url: {url}
layout:
  runs: ["runs/{{run}}/"]
approval: {{require_for: []}}
safety: {{max_delete_fraction: 1.0}}
rules:
  - name: dead-runs
    select: {{run_status: [failed]}}
    expire: {{after: 1d}}
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers: [{{name: recent, keep_last: 1}}]
    otherwise: delete
"""


def _build(tmp_path: Path) -> tuple[Setup, Path]:
    storage = tmp_path / "storage"
    write = local_writer(storage)
    hf_run(write, RUN, steps=(500, 1000))
    marker(write, RUN, "FAILED")
    deepspeed_run(write, DS, steps=(100, 200))  # `latest` names step 200
    marker(write, DS, "FAILED")
    policy = tmp_path / "policy.yaml"
    policy.write_text(_policy(str(storage)))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage


def _touch(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_marker_and_a_tracker_stay_while_their_folder_keeps_an_artifact(
    tmp_path: Path,
) -> None:
    setup, storage = _build(tmp_path)
    doc = setup.plan()
    base = storage.as_uri() + "/"
    planned = {a["artifact"]["uri"][len(base) :] for a in doc["actions"]}
    assert {RUN + "FAILED", DS + "FAILED", DS + "latest", RUN + "checkpoint-1000/"} <= planned
    assert DS + "global_step200/" in planned

    # since the plan: one checkpoint of each run written again (stale: left as it is)
    _touch(next((storage / RUN / "checkpoint-1000").iterdir()))
    _touch(next((storage / DS / "global_step200").iterdir()))

    dry = govern(setup.catalog, "apply", doc["plan_id"], "--dry-run", "--format", "json")
    applied = setup.apply(doc["plan_id"], code=3)
    for result in (dry, applied):
        by_uri = {r["artifact_uri"][len(base) :]: r for r in json.loads(result.stdout)["results"]}
        for kept in (RUN + "FAILED", DS + "FAILED", DS + "latest"):
            assert by_uri[kept]["outcome"] == "skipped", by_uri[kept]
            assert by_uri[kept]["reason"].startswith("stale: "), by_uri[kept]
            assert "in its folder was not carried out" in by_uri[kept]["reason"]
        assert by_uri[RUN + "checkpoint-500/"]["outcome"] in ("ok", "would_apply")
    for kept in (RUN + "FAILED", DS + "FAILED", DS + "latest"):
        assert (storage / kept).exists()
    assert not (storage / RUN / "checkpoint-500").exists()  # the rest went as planned

    # a plan made now still sees failed runs, and the DeepSpeed step complete
    again = setup.plan()
    reasons = {a["artifact"]["uri"][len(base) :]: a["reason"] for a in again["actions"]}
    assert DS + "global_step200/" in reasons
    assert "residue" not in reasons[DS + "global_step200/"]
    assert "failed" in reasons[RUN + "checkpoint-1000/"]


def test_with_nothing_left_undone_the_folder_files_go_last(tmp_path: Path) -> None:
    setup, storage = _build(tmp_path)
    doc = setup.plan()
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    assert not (storage / RUN / "FAILED").exists()
    assert not (storage / DS / "latest").exists()
    # after every folder of theirs (`FAILED` sorts before `checkpoint-500/` by key)
    order = [r["artifact_uri"][len(storage.as_uri()) + 1 :] for r in report["results"]]
    assert order.index(RUN + "FAILED") > order.index(RUN + "checkpoint-500/")
    assert order.index(DS + "latest") > order.index(DS + "global_step200/")
