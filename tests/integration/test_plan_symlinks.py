"""Symbolic links on local disk, end to end: real files and links, a real catalog (SQLite
file, and PostgreSQL when GOVERN_TEST_POSTGRES_URL is set), a real scan and plan.

A scan lists no link, but records those whose target lies inside the root, and a plan
leaves what they point at alone (protected, still counted by the tiers): a plan that
deleted `checkpoint-500` under `runs/x/best -> checkpoint-500` would break a resume or a
deployed model. The catalog keeps a root's links as of its last complete scan.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import Engine

from governance.catalog.engine import open_engine
from governance.catalog.links import root_links
from governance.catalog.roots import find_root
from governance.cli.main import cli
from governance.plan.service import explain_uri, make_plan
from governance.plan.types import Plan
from governance.policy import load_policy_text
from governance.policy.models import Policy
from governance.scan.runner import ScanSummary, scan_store
from governance.storage import open_store
from tests.catalogs import catalog_url  # noqa: F401
from tests.fixtures.builders import hf_run, lightning_run, local_writer

NOW = datetime.now(UTC).replace(microsecond=0)
D = timedelta(days=1)
STEPS = tuple(range(100, 1001, 100))
LIGHTNING = "runs/pl/lightning_logs/version_0/checkpoints/"
EPOCH_1 = LIGHTNING + "epoch=1-step=200-val_loss=0.90.ckpt"
BEST = "protected: the symbolic link runs/x/best points at it"


def build(root: Path) -> None:
    """Run x: ten Trainer checkpoints, 40 to 31 days old (no marker: abandoned, so the
    newest is not kept by invariant 1 and only the tiers decide)."""
    hf_run(local_writer(root), "runs/x/", steps=STEPS, start=NOW - 41 * D, every=D)


def policy_for(root: Path) -> Policy:
    return load_policy_text(
        f"""
version: 1
storage:
  - name: data
    url: {root}
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - {{name: recent, keep_last: 2}}
    otherwise: delete
safety: {{max_delete_fraction: 1}}
"""
    )


def scan(engine: Engine, root: Path) -> ScanSummary:
    summary = scan_store(engine, open_store(str(root)), actor="t")
    assert summary.status == "complete"
    return summary


def outcome(engine: Engine, root: Path) -> dict[str, str]:
    """Each artifact's fate by key: the action, or `kept: REASON`."""
    plan: Plan = make_plan(engine, policy_for(root), NOW, actor="planner")
    url = f"file://{root}/"
    fate = {a.artifact.uri.removeprefix(url): a.action.value for a in plan.actions}
    for k in plan.kept:
        fate[k.artifact.uri.removeprefix(url)] = f"kept: {k.reason}"
    return fate


def ckpt(step: int) -> str:
    return f"runs/x/checkpoint-{step}/"


def deleted(fate: dict[str, str]) -> set[str]:
    return {key for key, what in fate.items() if what == "delete"}


def test_a_link_keeps_its_checkpoint_and_the_other_deletes_stay(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/best").symlink_to("checkpoint-500")
    engine = open_engine(catalog_url)
    summary = scan(engine, root)
    assert (summary.links, summary.links_inside) == (1, 1)
    fate = outcome(engine, root)
    assert fate[ckpt(500)] == f"kept: {BEST}"
    assert deleted(fate) == {ckpt(s) for s in (100, 200, 300, 400, 600, 700, 800)}
    assert fate[ckpt(1000)].startswith("kept: recent tier")
    engine.dispose()


def test_removing_the_link_and_scanning_again_lifts_the_protection(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/best").symlink_to("checkpoint-500")
    engine = open_engine(catalog_url)
    scan(engine, root)
    assert outcome(engine, root)[ckpt(500)] == f"kept: {BEST}"
    (root / "runs/x/best").unlink()
    (root / "runs/x/best").symlink_to("checkpoint-600/")  # moved on: now 600 is the best
    scan(engine, root)
    fate = outcome(engine, root)
    assert fate[ckpt(500)] == "delete"
    assert fate[ckpt(600)] == f"kept: {BEST}"
    (root / "runs/x/best").unlink()
    summary = scan(engine, root)
    assert (summary.links, summary.links_inside) == (0, 0)
    root_id = _root_id(engine, root)
    assert root_links(engine, root_id) == []
    assert deleted(outcome(engine, root)) == {ckpt(s) for s in STEPS[:8]}
    engine.dispose()


def test_folder_file_and_chained_links_each_keep_what_they_point_at(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    root = tmp_path / "data"
    build(root)
    lightning_run(local_writer(root), "runs/pl/", epochs=4, last=False, start=NOW - 30 * D, every=D)
    (root / "runs/x/latest").symlink_to("checkpoint-300/")  # a folder, written with its '/'
    (root / LIGHTNING / "last.ckpt").symlink_to(Path(EPOCH_1).name)  # save_last="link"
    (root / "models").mkdir()
    (root / "models/prod").symlink_to("../runs/x/latest")  # a chain, to checkpoint-300
    (root / "models/weights.safetensors").symlink_to(
        root / "runs/x/checkpoint-700/model.safetensors"  # absolute, a file in a checkpoint
    )
    engine = open_engine(catalog_url)
    summary = scan(engine, root)
    assert (summary.links, summary.links_inside) == (4, 4)
    assert root_links(engine, _root_id(engine, root)) == [
        ("models/prod", "runs/x/checkpoint-300/"),
        ("models/weights.safetensors", "runs/x/checkpoint-700/model.safetensors"),
        ("runs/pl/lightning_logs/version_0/checkpoints/last.ckpt", EPOCH_1),
        ("runs/x/latest", "runs/x/checkpoint-300/"),
    ]
    fate = outcome(engine, root)
    assert fate[ckpt(300)] == "kept: protected: the symbolic link models/prod points at it"
    assert fate[ckpt(700)] == (
        "kept: protected: the symbolic link models/weights.safetensors points at "
        "runs/x/checkpoint-700/model.safetensors, inside it"
    )
    assert fate[EPOCH_1] == (
        f"kept: protected: the symbolic link {LIGHTNING}last.ckpt points at it"
    )
    assert deleted(fate) == {ckpt(s) for s in (100, 200, 400, 500, 600, 800)} | {
        LIGHTNING + "epoch=0-step=100-val_loss=1.00.ckpt"
    }
    engine.dispose()


def test_a_link_out_of_the_root_protects_nothing_and_is_counted(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build(root)
    hf_run(local_writer(tmp_path / "data-old"), "", steps=(500,), start=NOW - 50 * D)
    (root / "runs/x/best").symlink_to(tmp_path / "data-old" / "checkpoint-500")
    (root / "runs/x/etc").symlink_to("/etc")
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    summary = scan(engine, root)
    assert (summary.links, summary.links_inside) == (2, 0)
    fate = outcome(engine, root)
    assert deleted(fate) == {ckpt(s) for s in STEPS[:8]}  # 500 included
    engine.dispose()


def test_dangling_links_and_a_loop_do_not_break_the_scan(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/best").symlink_to("checkpoint-5000")  # dangling
    (root / "runs/x/loop-a").symlink_to("loop-b")
    (root / "runs/x/loop-b").symlink_to("loop-a")
    (root / "runs/x/checkpoint-800/up").symlink_to("..")  # a folder loop, into the run
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    summary = scan(engine, root)
    assert (summary.objects, summary.links, summary.links_inside) == (120, 4, 1)
    fate = outcome(engine, root)
    up = "the symbolic link runs/x/checkpoint-800/up points at runs/x/, which holds it"
    assert {fate[ckpt(s)] for s in STEPS[:8]} == {f"kept: protected: {up}"}
    engine.dispose()


@pytest.mark.parametrize("beside", [True, False], ids=["child-walk", "in-process-walk"])
def test_the_child_and_in_process_walks_record_the_same_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, beside: bool
) -> None:
    monkeypatch.setattr("governance.storage.fs.can_walk_beside", lambda: beside)
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/best").symlink_to("checkpoint-500")
    (root / "runs/x/latest").symlink_to(root / "runs/x/checkpoint-1000")
    (root / "runs/x/gone").symlink_to("checkpoint-1")
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    summary = scan(engine, root)
    assert (summary.links, summary.links_inside) == (3, 2)
    assert root_links(engine, _root_id(engine, root)) == [
        ("runs/x/best", "runs/x/checkpoint-500/"),
        ("runs/x/latest", "runs/x/checkpoint-1000/"),
    ]
    engine.dispose()


def test_a_superseded_scan_leaves_the_newer_scans_links(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """Scan A lists (and meets `old`); meanwhile `old` goes, `new` comes and scan B
    completes. A is superseded: it must not put its older links back."""
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/old").symlink_to("checkpoint-100")
    engine = open_engine(catalog_url)
    scan(engine, root)
    newer: list[ScanSummary] = []

    def meanwhile(listed: int, _bytes: int) -> None:
        if not newer:
            (root / "runs/x/old").unlink()
            (root / "runs/x/new").symlink_to("checkpoint-200")
            newer.append(scan(engine, root))

    a = scan_store(engine, open_store(str(root)), actor="a", progress=meanwhile)
    assert a.status == "superseded"
    assert root_links(engine, _root_id(engine, root)) == [("runs/x/new", "runs/x/checkpoint-200/")]
    engine.dispose()


def test_a_link_in_a_quarantine_an_earlier_apply_used_is_not_the_roots(tmp_path: Path) -> None:
    """A scan leaves out every quarantine applies have used under the root (their copies
    are not the root's data), and a link kept there protects nothing either."""
    from governance.catalog.execution_tables import RemovedObjectRow

    root = tmp_path / "data"
    build(root)
    (root / "old-trash/runs/x").mkdir(parents=True)
    (root / "old-trash/runs/x/best").symlink_to(root / "runs/x/checkpoint-500")
    (root / "runs/x/latest").symlink_to("checkpoint-1000")
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    url = open_store(str(root)).url
    with engine.begin() as conn:
        conn.execute(
            RemovedObjectRow.__table__.insert(),  # type: ignore[attr-defined]
            {
                **{"plan_id": "p-1", "action_id": 1, "execution_id": 1, "size": 1},
                **{"artifact_uri": url + "k", "root_url": url, "key": "k", "etag": "e"},
                **{"mode": "quarantine", "quarantine_root": url + "old-trash/"},
                **{"state": "removed"},
            },
        )
    summary = scan(engine, root)
    assert summary.links_inside == 1
    assert root_links(engine, _root_id(engine, root)) == [
        ("runs/x/latest", "runs/x/checkpoint-1000/")
    ]
    engine.dispose()


def test_explain_names_the_link(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/best").symlink_to("checkpoint-500")
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    scan(engine, root)
    why = explain_uri(engine, policy_for(root), NOW, str(root / "runs/x/checkpoint-500") + "/")
    assert why.protected_by == "the symbolic link runs/x/best points at it"
    assert why.reason == BEST
    assert explain_uri(engine, policy_for(root), NOW, f"{root}/{ckpt(400)}").protected_by is None
    engine.dispose()


def test_govern_scan_counts_the_links_it_skipped(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build(root)
    (root / "runs/x/best").symlink_to("checkpoint-500")
    (root / "runs/x/etc").symlink_to("/etc")
    (root / "runs/x/gone").symlink_to("nothing")
    catalog = ["--catalog", f"sqlite:///{tmp_path / 'c.db'}"]
    result = CliRunner().invoke(cli, [*catalog, "scan", "--root", str(root), "--format", "json"])
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)["scans"]
    assert (entry["links"], entry["links_inside"]) == (3, 1)
    note = "3 symbolic links not listed; plans keep what the one inside the root points at"
    assert f"note: file://{root}/: {note}" in result.stderr
    result = CliRunner().invoke(
        cli, [*catalog, "scan", "--root", str(root)], env={"COLUMNS": "200"}
    )
    header = next(line for line in result.stdout.splitlines() if "objects" in line)
    assert header.replace("┃", " ").split() == [
        "root", "objects", "bytes", "new", "changed", "gone", "links", "seconds"
    ]  # fmt: skip
    quiet = CliRunner().invoke(cli, [*catalog, "-q", "scan", "--root", str(root)])
    assert "symbolic" not in quiet.stderr


def _root_id(engine: Engine, root: Path) -> int:
    found = find_root(engine, open_store(str(root)).url)
    assert found is not None
    assert found.id is not None
    return found.id


def test_a_checkpoint_holding_a_link_to_what_lies_outside_it_is_kept(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """Weights deduplicated as a link to a shared copy: the listing skips the link, so
    checkpoint-300 read as "no weights", residue, and its plan removed what else it held
    (the optimizer, config and trainer state) and left a link where a checkpoint was."""
    root = tmp_path / "data"
    build(root)
    shared = root / "shared" / "model.safetensors"
    shared.parent.mkdir()
    weights = root / "runs/x/checkpoint-300/model.safetensors"
    shared.write_bytes(weights.read_bytes())
    weights.unlink()
    weights.symlink_to("../../../shared/model.safetensors")
    engine = open_engine(catalog_url)
    summary = scan(engine, root)
    assert (summary.links, summary.links_inside) == (1, 1)
    fate = outcome(engine, root)
    assert fate[ckpt(300)] == (
        "kept: protected: it holds the symbolic link runs/x/checkpoint-300/model.safetensors "
        "(to shared/model.safetensors): what it needs lies outside it, and a listing sees "
        "no file there"
    )
    assert ckpt(200) in deleted(fate)  # the others as before
    engine.dispose()
