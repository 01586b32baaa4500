"""What `govern apply` says on local disk, and that it says it honestly: a file added to a
folder a delete removes whole makes the delete stale; progress and summary count ok,
skipped and failed apart; an execution that did only part of the plan says so; its tables
never cut a time, a status or an id at 80 columns.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from governance.cli.main import cli
from tests.fixtures.builders import lightning_run, local_writer
from tests.integration.test_apply_local import RUN, build
from tests.integration.test_apply_support import (
    NO_APPROVAL,
    Setup,
    govern,
    policy_text,
    snapshot,
)


def _by_path(report: dict[str, object], storage: Path) -> dict[str, dict[str, object]]:
    results = report["results"]
    assert isinstance(results, list)
    base = storage.as_uri() + "/"
    return {r["artifact_uri"][len(base) :]: r for r in results}


def test_a_file_added_to_a_deleted_folder_since_the_plan_makes_the_delete_stale(
    tmp_path: Path,
) -> None:
    """checkpoint-1000 is deleted whole: NOTES.md written into it after planning would be
    left behind in a folder that reads as an incomplete checkpoint. The strip of
    checkpoint-1500 removes only the components it names: a new file beside them changes
    nothing it does. A scan since the plan (the catalog now lists NOTES.md) changes
    nothing either: the plan never saw it."""
    setup, storage = build(tmp_path)
    doc = setup.plan()
    deleted, stripped = storage / RUN / "checkpoint-1000", storage / RUN / "checkpoint-1500"
    (deleted / "NOTES.md").write_text("eval numbers, keep with the checkpoint")
    (stripped / "NOTES.md").write_text("a note beside a stripped checkpoint")
    scanned = govern(setup.catalog, "scan", "--policy", str(setup.policy))
    assert scanned.exit_code == 0, scanned.stderr
    before = snapshot(deleted)

    applied = setup.apply(doc["plan_id"], code=3)
    by_path = _by_path(json.loads(applied.stdout), storage)
    stale = by_path[f"{RUN}checkpoint-1000/"]
    assert (stale["outcome"], stale["final"]) == ("skipped", False)
    assert stale["reason"] == (
        f"stale: unplanned object {RUN}checkpoint-1000/NOTES.md in the artifact (written, restored or listed anew) since the plan was made"
    )
    assert snapshot(deleted) == before  # untouched, NOTES.md and all
    assert by_path[f"{RUN}checkpoint-1500/"]["outcome"] == "ok"
    assert sorted(p.name for p in stripped.iterdir()) == sorted(
        ["NOTES.md", "config.json", "model.safetensors", "trainer_state.json",
         "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "training_args.bin"]
    )  # fmt: skip
    assert "1 action was skipped as stale" in applied.stderr
    assert setup.status(doc["plan_id"]) == "partially_applied"


def test_a_folder_holding_other_artifacts_files_is_not_stale_for_them(tmp_path: Path) -> None:
    """A Lightning log folder (`lightning_logs/version_0/`, a log artifact) holds the run's
    checkpoint files, artifacts of their own: the catalog held them when the plan was made,
    so deleting the log folder's own files is no stale action, and leaves them."""
    storage = tmp_path / "storage"
    lightning_run(local_writer(storage), "runs/l/")
    text = policy_text(str(storage)).replace(
        "transition: [{after: 1d, storage_class: STANDARD_IA}]", "expire: {after: 1d}"
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(text.replace("keep_last: 1", "keep_last: 10"))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    doc = setup.plan()
    folder = "runs/l/lightning_logs/version_0/"
    [log] = [a for a in doc["actions"] if a["artifact"]["uri"].endswith(folder)]
    assert log["action"] == "delete"
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    left = sorted(str(p.relative_to(storage / folder)) for p in (storage / folder).rglob("*.ckpt"))
    assert len(left) == 4


def test_progress_and_the_summary_count_skipped_actions_apart(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    (storage / RUN / "checkpoint-1000" / "optimizer.pt").write_bytes(b"rewritten")  # stale
    result = CliRunner().invoke(
        cli,
        ["--catalog", setup.catalog, "--as", "alice", "apply", doc["plan_id"],
         "--policy", str(setup.policy)],
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert result.exit_code == 3, result.stderr
    n = len(doc["actions"])
    assert f"apply {doc['plan_id']}: {n} of {n} actions: {n - 1} ok, 1 skipped (1 stale), " in (
        result.stderr
    )
    assert f"{n}/{n} actions" not in result.stderr
    assert f"this run: {n - 1} ok, 1 skipped (1 stale), 0 failed" in result.stdout


def test_only_non_destructive_leaves_an_execution_partially_applied(tmp_path: Path) -> None:
    """Every action of this plan is destructive: `--only-non-destructive` ran none of them,
    so its execution is not `applied`; the plan's status stays what it was."""
    setup, _ = build(tmp_path)
    doc = setup.plan()
    assert doc["status"] == "approved"
    part = json.loads(setup.apply(doc["plan_id"], "--only-non-destructive").stdout)
    assert len(part["not_run"]) == len(doc["actions"])
    assert [e["status"] for e in part["executions"]] == ["partially_applied"]
    assert setup.status(doc["plan_id"]) == "approved"
    whole = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert [e["status"] for e in whole["executions"]] == ["partially_applied", "applied"]
    assert whole["plan_status"] == "applied"


def test_apply_tables_never_cut_times_statuses_or_ids_at_80_columns(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    doc = setup.plan()
    (storage / RUN / "checkpoint-1000" / "optimizer.pt").write_bytes(b"rewritten")
    result = CliRunner().invoke(
        cli,
        ["--catalog", setup.catalog, "--as", "a-rather-long-operator-name@example.com", "-q",
         "apply", doc["plan_id"], "--policy", str(setup.policy)],
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert result.exit_code == 3, result.stderr
    out = result.stdout
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    runs = out[out.index("Executions") :].splitlines()
    [row] = [line for line in runs if line.strip().startswith("1 ")]
    assert "partially_applied" in row.split()
    day, minute = row.split()[1:3]
    assert (len(day), len(minute)) == (len("2026-12-02"), len("01:05"))
    flat = "".join(line.strip() for line in runs)
    assert "a-rather-long-operator-name@example.com" in flat
    assert doc["plan_id"] in out.splitlines()[0]


def test_files_restored_into_a_folder_since_the_plan_make_its_delete_stale(
    tmp_path: Path,
) -> None:
    """Plan 1 strips checkpoint-1500 (its training state goes to quarantine). Plan 2, made
    after, deletes checkpoint-1500 whole: it names only the weights and metadata left.
    Then plan 1 is restored: the training state is back. The catalog revives those rows
    in place (known, as rows, before plan 2), yet they were not there when plan 2 was
    made: deleting what plan 2 names would leave the restored state alone in a folder
    that reads as an incomplete checkpoint. Plan 2's delete is stale."""
    setup, storage = build(tmp_path)
    first = setup.plan()
    assert json.loads(setup.apply(first["plan_id"]).stdout)["plan_status"] == "applied"
    ckpt = storage / RUN / "checkpoint-1500"
    assert not (ckpt / "optimizer.pt").exists()
    # the thin tier goes: checkpoint-1500 is no longer kept, and plan 2 deletes it whole
    setup.policy.write_text(
        policy_text(str(storage), extra=NO_APPROVAL + "safety: {max_delete_fraction: 1}\n").replace(
            "      - name: thin\n        keep_every_steps: 1000\n"
            "        keep_components: [weights, metadata]\n",
            "",
        )
    )
    second = setup.plan()
    [delete] = [
        a for a in second["actions"] if a["artifact"]["uri"].endswith(f"{RUN}checkpoint-1500/")
    ]
    assert delete["action"] == "delete"
    assert not [o for o in delete["objects"] if o["uri"].endswith("optimizer.pt")]

    restored = json.loads(setup.restore(first["plan_id"]).stdout)
    assert restored["failed"] == 0
    assert (ckpt / "optimizer.pt").exists()

    report = json.loads(setup.apply(second["plan_id"], code=3).stdout)
    result = _by_path(report, storage)[f"{RUN}checkpoint-1500/"]
    assert result["outcome"] == "skipped"
    assert str(result["reason"]).startswith("stale: unplanned object")
    assert (ckpt / "model.safetensors").exists()  # the checkpoint stays whole
    assert (ckpt / "optimizer.pt").exists()


def test_a_file_back_in_a_folder_after_the_plan_makes_its_delete_stale(tmp_path: Path) -> None:
    """scaler.pt is out of checkpoint-1000 when the plan is made (the scan marks its row
    gone), back before apply and scanned again (the row revived): it was not there when
    the plan was made, and the delete, which does not name it, would leave it behind."""
    setup, storage = build(tmp_path)
    assert govern(setup.catalog, "scan", "--policy", str(setup.policy)).exit_code == 0
    ckpt = storage / RUN / "checkpoint-1000"
    aside = tmp_path / "scaler.pt"
    (ckpt / "scaler.pt").rename(aside)  # after a first scan saw it: its row is known
    doc = setup.plan()
    aside.rename(ckpt / "scaler.pt")
    assert govern(setup.catalog, "scan", "--policy", str(setup.policy)).exit_code == 0
    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)
    result = _by_path(report, storage)[f"{RUN}checkpoint-1000/"]
    assert result["outcome"] == "skipped"
    assert "unplanned object runs/a/checkpoint-1000/scaler.pt" in str(result["reason"])
    assert (ckpt / "model.safetensors").exists()


def test_a_file_in_the_way_of_the_quarantine_is_named_not_the_root(tmp_path: Path) -> None:
    """The quarantine folder beside the root cannot be made: the failure names it and
    says what is wrong, and nothing is removed (the root was there all along)."""
    setup, storage = build(tmp_path)
    blocker = storage.parent / ".govern-quarantine"
    blocker.write_text("a file where the quarantine folder goes")
    before = snapshot(storage)
    doc = setup.plan()

    report = json.loads(setup.apply(doc["plan_id"], code=1).stdout)

    failed = [r for r in report["results"] if r["outcome"] == "failed"]
    assert failed
    for r in failed:
        assert f"{blocker.as_uri()}/: a file is in the way of a folder" in r["reason"]
        assert f"{storage.as_uri()}/: does not exist" not in r["reason"]
    assert snapshot(storage) == before
