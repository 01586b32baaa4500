"""`govern apply` / `govern restore` on local disk, end to end through the CLI.

One finished Hugging Face run (steps 500..2000, written in 2024) and some residue: the
plan deletes checkpoint-1000, strips 500 and 1500 to weights + metadata, keeps 2000 whole,
and deletes the residue.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from governance.apply import StoreOpener, purge_quarantine
from governance.plan.service import make_plan, root_snapshots
from governance.policy import load_policy
from tests.fixtures.builders import hf_run, local_writer, marker, residue
from tests.integration.test_apply_support import (
    NO_APPROVAL,
    Setup,
    actions_by,
    govern,
    policy_text,
    snapshot,
    without_restore_hold,
)

RUN = "runs/a/"
STRIPPED = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt")


def build(tmp_path: Path, extra: str | None = None) -> tuple[Setup, Path]:
    storage = tmp_path / "storage"
    plain = local_writer(storage)

    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        if key.endswith((".pt", ".pth", ".bin", ".safetensors")):
            content += key.encode()  # every blob distinct: restores must put each back
        plain(key, content, mtime)

    hf_run(write, RUN, steps=(500, 1000, 1500, 2000))
    marker(write, RUN)
    residue(write, "scratch")
    policy = tmp_path / "policy.yaml"
    kwargs = {} if extra is None else {"extra": extra}
    policy.write_text(policy_text(str(storage), **kwargs))
    return Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy), storage


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Setup, Path]:
    return build(tmp_path)


def test_quarantine_apply_then_restore_is_byte_identical(tree: tuple[Setup, Path]) -> None:
    setup, storage = tree
    before = snapshot(storage)
    doc = setup.plan()
    base = storage.as_uri() + "/"
    assert actions_by(doc, base) == {
        f"{RUN}checkpoint-1000/": ["delete"],
        f"{RUN}checkpoint-1500/": ["strip"],
        f"{RUN}checkpoint-500/": ["strip"],
        "scratch/blob.incomplete": ["delete"],
        "scratch/model.safetensors.partial": ["delete"],
        "scratch/upload.tmp": ["delete"],
    }
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert report["plan_status"] == "applied"
    assert {r["outcome"] for r in report["results"]} == {"ok"}

    ckpts = storage / RUN
    assert not (ckpts / "checkpoint-1000").exists()
    for step in (500, 1500):  # strip deleted only the named components
        left = {p.name for p in (ckpts / f"checkpoint-{step}").iterdir()}
        assert not left & set(STRIPPED)
        assert {"model.safetensors", "config.json", "trainer_state.json"} <= left
    assert snapshot(ckpts / "checkpoint-2000") == {
        k.removeprefix(f"{RUN}checkpoint-2000/"): v
        for k, v in before.items()
        if k.startswith(f"{RUN}checkpoint-2000/")
    }
    quarantine = storage.parent / ".govern-quarantine" / doc["plan_id"]
    moved = quarantine / str(storage).lstrip("/") / RUN / "checkpoint-1000" / "model.safetensors"
    assert moved.is_file()  # under the object's whole path: roots never collide
    assert setup.status(doc["plan_id"]) == "applied"

    # invariants hold on the new state: a new plan keeps the newest complete checkpoint
    engine = setup.engine()
    again = make_plan(engine, load_policy(setup.policy), datetime.now(UTC), actor="carol")
    kept = {k.artifact.uri for k in again.kept}
    assert f"{base}{RUN}checkpoint-2000/" in kept
    assert all("checkpoint-2000" not in a.artifact.uri for a in again.actions)
    engine.dispose()

    restored = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert restored["restored"] == 23
    assert restored["failed"] == 0
    assert snapshot(storage) == before  # bytes and modification times
    assert actions_by(setup.plan(), base) == {}  # what was restored is kept (restored_for)
    without_restore_hold(setup.policy)
    assert actions_by(setup.plan(), base) == actions_by(doc, base)  # as if never applied
    assert not quarantine.exists() or not any(quarantine.rglob("*.pt"))
    # nothing is restored twice
    assert json.loads(setup.restore(doc["plan_id"]).stdout)["restored"] == 0


def test_restore_by_uri_brings_back_one_artifact(tree: tuple[Setup, Path]) -> None:
    setup, storage = tree
    before = snapshot(storage)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    target = f"{storage.as_uri()}/{RUN}checkpoint-1000/"
    restored = json.loads(setup.restore(doc["plan_id"], "--uri", target).stdout)
    assert restored["restored"] == 12
    assert {o["artifact_uri"] for o in restored["objects"]} == {target}
    now = snapshot(storage)
    assert {k: v for k, v in now.items() if "checkpoint-1000" in k} == {
        k: v for k, v in before.items() if "checkpoint-1000" in k
    }
    assert not (storage / "scratch" / "upload.tmp").exists()
    nothing = setup.restore(doc["plan_id"], "--uri", f"{storage.as_uri()}/elsewhere/", code=2)
    assert "nothing removed" in nothing.stderr


def test_stale_artifacts_are_skipped_whole_and_the_rest_applied(
    tree: tuple[Setup, Path],
) -> None:
    setup, storage = tree
    doc = setup.plan()
    ckpt = storage / RUN
    (ckpt / "checkpoint-1000" / "optimizer.pt").write_bytes(b"rewritten after planning")
    (ckpt / "checkpoint-500" / "scheduler.pt").unlink()  # vanished
    upload = storage / "scratch" / "upload.tmp"
    upload.write_bytes(upload.read_bytes())  # re-uploaded: same bytes, new mtime token
    os.utime(upload, ns=(1, 2))
    # a dry run notes the stale ones (a dry run refuses nothing) and changes nothing
    dry = setup.apply(doc["plan_id"], "--dry-run", code=0)
    assert "3 actions would be skipped as stale" in dry.stderr
    # the rest is applied, then exit 3 (spec: refused, plan stale) with one line saying so
    applied = setup.apply(doc["plan_id"], code=3)
    stale_lines = [ln for ln in applied.stderr.splitlines() if "stale" in ln]
    assert stale_lines == [
        f"3 actions were skipped as stale: their objects changed since plan {doc['plan_id']} "
        "was made; the rest was applied (plan status: partially_applied); plan again "
        "(govern plan) to act on them"
    ]
    assert "failed" not in applied.stderr
    report = json.loads(applied.stdout)
    by_uri = {r["artifact_uri"].rsplit("storage/", 1)[1]: r for r in report["results"]}
    for key in (f"{RUN}checkpoint-1000/", f"{RUN}checkpoint-500/", "scratch/upload.tmp"):
        assert by_uri[key]["outcome"] == "skipped", key
        assert by_uri[key]["reason"].startswith("stale"), by_uri[key]
    assert "vanished" in by_uri[f"{RUN}checkpoint-500/"]["reason"]
    # on a filesystem the token is the modification time (no ETag to speak of)
    assert (
        "scratch/upload.tmp was written again (modification time differs)"
        in (by_uri["scratch/upload.tmp"]["reason"])
    )
    # the stale checkpoint is untouched: never half-processed
    assert len(list((ckpt / "checkpoint-1000").iterdir())) == 12
    assert (ckpt / "checkpoint-500" / "optimizer.pt").exists()
    assert by_uri[f"{RUN}checkpoint-1500/"]["outcome"] == "ok"
    assert not (ckpt / "checkpoint-1500" / "optimizer.pt").exists()
    assert by_uri["scratch/blob.incomplete"]["outcome"] == "ok"
    assert report["plan_status"] == "partially_applied"
    assert setup.status(doc["plan_id"]) == "partially_applied"

    # a second apply repeats nothing that was done and still refuses the stale ones
    again = json.loads(setup.apply(doc["plan_id"], code=3).stdout)
    assert len(again["done_before"]) == 3
    assert {r["outcome"] for r in again["results"]} == {"skipped"}
    assert [e["id"] for e in again["executions"]] == [1, 2]


def test_dry_run_changes_nothing_and_may_run_before_approval(tmp_path: Path) -> None:
    setup, storage = build(tmp_path, extra="")  # default approval: destructive needs one
    before = snapshot(storage)
    doc = setup.plan()
    assert doc["status"] == "pending_approval"
    report = json.loads(setup.apply(doc["plan_id"], "--dry-run").stdout)
    assert report["dry_run"]
    assert {r["outcome"] for r in report["results"]} == {"would_apply"}
    assert any("not approved" in n for n in report["notes"])
    assert report["executions"] == []
    assert snapshot(storage) == before

    refused = setup.apply(doc["plan_id"], code=3)
    assert "not approved" in refused.stderr
    assert snapshot(storage) == before

    setup.approve(doc["plan_id"])
    assert json.loads(setup.apply(doc["plan_id"]).stdout)["plan_status"] == "applied"
    setup.apply(doc["plan_id"], code=3)  # already applied: never applied twice


def test_permanent_needs_yes_and_cannot_be_restored(tmp_path: Path) -> None:
    setup, storage = build(
        tmp_path, extra="approval: {require_for: []}\napply: {delete_mode: permanent}\n"
    )
    before = snapshot(storage)
    doc = setup.plan()
    refused = setup.apply(doc["plan_id"], code=3)
    assert "--yes" in refused.stderr
    assert snapshot(storage) == before
    assert not (storage.parent / ".govern-quarantine").exists()

    report = json.loads(setup.apply(doc["plan_id"], "--yes").stdout)
    assert report["plan_status"] == "applied"
    assert not (storage / RUN / "checkpoint-1000").exists()
    assert not (storage.parent / ".govern-quarantine").exists()
    restore = json.loads(setup.restore(doc["plan_id"], code=1).stdout)
    assert restore["restored"] == 0
    assert "no way back" in restore["objects"][0]["error"]


def test_versioned_mode_is_refused_on_a_filesystem(tmp_path: Path) -> None:
    """A filesystem keeps no old versions: the policy is refused where it is written
    (exit 2, its position named), before any plan is made or anything touched."""
    setup, storage = build(
        tmp_path, extra="approval: {require_for: []}\napply: {delete_mode: versioned}\n"
    )
    before = snapshot(storage)
    result = govern(setup.catalog, "plan", "--policy", str(setup.policy), "--format", "json")
    assert result.exit_code == 2, result.stderr
    assert "apply.delete_mode: delete_mode versioned needs versioned S3 buckets" in result.stderr
    assert result.stdout == ""
    assert snapshot(storage) == before


def test_only_non_destructive_leaves_the_plan_pending(tmp_path: Path) -> None:
    setup, storage = build(tmp_path, extra="")
    before = snapshot(storage)
    doc = setup.plan()
    report = json.loads(setup.apply(doc["plan_id"], "--only-non-destructive").stdout)
    assert len(report["not_run"]) == len(doc["actions"])
    assert report["results"] == []
    assert snapshot(storage) == before
    assert setup.status(doc["plan_id"]) == "pending_approval"


def test_purge_deletes_quarantine_past_its_time(tree: tuple[Setup, Path]) -> None:
    setup, storage = tree
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    quarantine = storage.parent / ".govern-quarantine"
    assert any(quarantine.rglob("*.pt"))
    engine = setup.engine()
    opener = StoreOpener()
    soon = purge_quarantine(engine, now=datetime.now(UTC), stores=opener, actor="ops")
    assert soon.purged == 0
    later = datetime.now(UTC) + timedelta(days=15)
    assert (
        purge_quarantine(engine, now=later, stores=opener, actor="ops", dry_run=True).purged == 23
    )
    assert any(quarantine.rglob("*.pt"))
    assert purge_quarantine(engine, now=later, stores=opener, actor="ops").purged == 23
    assert not any(p.is_file() for p in quarantine.rglob("*"))
    from governance.audit import events

    assert [e.payload["objects"] for e in events(engine, doc["plan_id"]) if e.event == "purge"] == [
        23
    ]
    engine.dispose()
    # purged: no way back, and restore says so for each object (exit 1)
    report = json.loads(setup.restore(doc["plan_id"], code=1).stdout)
    assert (report["restored"], report["failed"]) == (0, 23)


def test_actions_edited_after_approval_refuse_the_apply_before_any_change(
    tmp_path: Path,
) -> None:
    # Apply lists the first batch's preconditions while it verifies the plan: an action
    # edited in the catalog after approval must still stop it before anything moves.
    from sqlalchemy import text

    setup, storage = build(tmp_path, extra="approval: {require_for: []}\n")
    before = snapshot(storage)
    doc = setup.plan()
    with setup.engine().begin() as conn:
        conn.execute(
            text(
                "UPDATE plan_actions SET rule = 'edited' WHERE plan_id = :p AND action_id = "
                "(SELECT max(action_id) FROM plan_actions WHERE plan_id = :p)"
            ),
            {"p": doc["plan_id"]},
        )
    refused = setup.apply(doc["plan_id"], code=3)
    assert "fingerprint" in refused.stderr
    assert snapshot(storage) == before
    assert not (storage.parent / ".govern-quarantine").exists()
    with setup.engine().connect() as conn:  # the lock was taken, then given back: no trace
        assert conn.execute(text("SELECT count(*) FROM executions")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM apply_locks")).scalar() == 0


def test_every_result_is_in_the_audit_chain_and_an_edited_one_breaks_it(
    tree: tuple[Setup, Path],
) -> None:
    from sqlalchemy import text

    from governance.audit import events, verify

    setup, _ = tree
    doc = setup.plan()
    applied = json.loads(setup.apply(doc["plan_id"]).stdout)
    engine = setup.engine()
    logged = events(engine, doc["plan_id"])
    batches = [e for e in logged if e.event == "action_results"]
    assert [e.event for e in logged if e.event.startswith("apply")] == ["apply_start", "apply_end"]
    assert batches
    results = [r for e in batches for r in e.payload["results"]]
    assert results == [[r["action_id"], r["outcome"], r["reason"]] for r in applied["results"]]
    assert sum(sum(e.payload["counts"].values()) for e in batches) == len(doc["actions"])
    assert verify(engine).ok
    edited = batches[0]
    payload = dict(edited.payload)
    payload["results"] = [[payload["results"][0][0], "failed", "edited"], *payload["results"][1:]]
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE audit_events SET payload = :p WHERE id = :i"),
            {"p": json.dumps(payload), "i": edited.id},
        )
    problems = verify(engine).problems
    engine.dispose()
    assert problems == [f"event {edited.id}: hash does not match its content (edited?)"]
    shown = govern(setup.catalog, "audit", "--verify")
    assert shown.exit_code == 1
    assert f"event {edited.id}: hash does not match" in shown.stdout


def test_roots_sharing_a_quarantine_folder_never_overwrite_each_other(tmp_path: Path) -> None:
    # Two sibling roots quarantine into the same folder beside them; the same relative
    # key under each, with different bytes, must both come back exactly.
    storage_a, storage_b = tmp_path / "data" / "a", tmp_path / "data" / "b"
    for storage, body in ((storage_a, b"from a"), (storage_b, b"from b")):
        write = local_writer(storage)
        for key in residue(lambda k, c, m: None, "scratch"):  # the residue keys, no writes
            write(key, body + key.encode(), datetime(2024, 1, 1, tzinfo=UTC))
        write("notes/README.md", b"kept: the safety limit needs most bytes to stay" * 9, None)
    policy = tmp_path / "policy.yaml"
    text = policy_text(str(storage_a), extra="approval: {require_for: []}\n")
    text = text.replace("storage:\n", f"storage:\n  - name: other\n    url: {storage_b}\n", 1)
    policy.write_text(text)
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    before_a, before_b = snapshot(storage_a), snapshot(storage_b)
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    assert list(snapshot(storage_a)) == list(snapshot(storage_b)) == ["notes/README.md"]
    moved = [p for p in (tmp_path / "data" / ".govern-quarantine").rglob("*") if p.is_file()]
    assert len(moved) == len(before_a) + len(before_b) - 2  # every residue file, both roots
    setup.restore(doc["plan_id"])
    assert snapshot(storage_a) == before_a
    assert snapshot(storage_b) == before_b


def test_a_plan_made_as_of_the_future_is_never_applied(tmp_path: Path) -> None:
    """A what-if plan ages everything: a running run's files written a minute ago look a
    month old, past `protect.min_age`. Approved on creation (no approval needed), it
    must still not be applied, in any form; a dry run says why."""
    setup, storage = build(tmp_path, extra="approval: {require_for: []}\n")
    write = local_writer(storage)
    hf_run(
        write, "runs/live/", steps=(100, 200, 300), start=datetime.now(UTC) - timedelta(minutes=9)
    )
    before = snapshot(storage)
    when = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = setup.plan(as_of=stamp)
    assert doc["status"] == "what_if"  # from the start: it needs no approval, yet never applies
    assert any("runs/live/" in a["artifact"]["uri"] for a in doc["actions"])
    message = (
        f"plan {doc['plan_id']} was made as of {stamp}, in the future: a what-if plan "
        "cannot be approved or applied; plan again without --as-of"
    )
    for extra in ((), ("--only-non-destructive",), ("--yes",)):
        refused = setup.apply(doc["plan_id"], *extra, code=3)
        assert message in refused.stderr, extra
    dry = json.loads(setup.apply(doc["plan_id"], "--dry-run").stdout)
    assert any(message in n for n in dry["notes"])
    assert snapshot(storage) == before
    assert not (storage.parent / ".govern-quarantine").exists()
    assert setup.status(doc["plan_id"]) == "what_if"  # shown as it is: nothing moved

    # the same tree planned now keeps the live run's fresh checkpoints, and applies
    now = setup.plan()
    assert not any("runs/live/" in a["artifact"]["uri"] for a in now["actions"])
    setup.apply(now["plan_id"])
    assert all(k in snapshot(storage) for k in before if k.startswith("runs/live/"))


def test_restore_dry_run_says_would_restore_and_restores_nothing(
    tree: tuple[Setup, Path],
) -> None:
    setup, storage = tree
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    applied = snapshot(storage)
    dry = json.loads(setup.restore(doc["plan_id"], "--dry-run").stdout)
    assert dry["dry_run"] is True
    assert dry["restored"] == 0
    assert dry["would_restore"] == 23
    assert dry["failed"] == 0
    assert len(dry["objects"]) == 23
    assert {o["status"] for o in dry["objects"]} == {"would_restore"}
    assert all(o["ok"] for o in dry["objects"])  # the existing fields stay
    table = govern(
        setup.catalog,
        "restore",
        doc["plan_id"],
        "--policy",
        str(setup.policy),
        "--dry-run",
        "--format",
        "table",
    )
    assert table.exit_code == 0, table.stderr
    assert "23 would be restored, 0 failed" in table.stdout
    assert "23 restored" not in table.stdout
    assert table.stdout.count("would restore") == 23  # one per object row
    assert " restored " not in table.stdout.replace("nothing restored", "")
    assert snapshot(storage) == applied  # nothing moved

    real = json.loads(setup.restore(doc["plan_id"]).stdout)
    assert (real["dry_run"], real["restored"], real["would_restore"]) == (False, 23, 0)
    assert {o["status"] for o in real["objects"]} == {"restored"}


def test_failures_and_stale_together_exit_1_and_say_both(tree: tuple[Setup, Path]) -> None:
    """Failed actions need a look (a retry may fix them): exit 1 wins over stale's 3."""
    setup, storage = tree
    doc = setup.plan()
    (storage / RUN / "checkpoint-1000" / "optimizer.pt").write_bytes(b"rewritten")  # stale
    (storage.parent / ".govern-quarantine").write_bytes(b"a file where the folder goes")
    result = setup.apply(doc["plan_id"], code=1)
    report = json.loads(result.stdout)
    assert report["counts"]["failed"] > 0
    assert report["counts"]["skipped"] == 1
    assert f"failed; plan {doc['plan_id']} is partially_applied" in result.stderr
    assert "1 action was skipped as stale" in result.stderr


def test_a_quarantine_inside_the_root_is_never_planned(tmp_path: Path) -> None:
    """`scan --root` knows no policy, so it lists a policy's quarantine inside the root
    like any folder; a plan from that catalog must not plan the quarantined copies away
    (nor count them in the root's bytes that max_delete_fraction divides)."""
    storage = tmp_path / "storage"
    setup, _ = build(tmp_path, extra=NO_APPROVAL + f"apply: {{quarantine_url: {storage}/trash/}}\n")
    first = setup.plan()
    setup.apply(first["plan_id"])
    trash = storage / "trash"
    assert any(p.name == "upload.tmp" for p in trash.rglob("*"))  # residue moved in there

    scanned = govern(setup.catalog, "scan", "--root", str(storage), "--format", "json")
    assert scanned.exit_code == 0, scanned.stderr
    listed = json.loads(scanned.stdout)["scans"][0]
    in_trash = [p for p in trash.rglob("*") if p.is_file()]
    assert listed["objects"] >= len(in_trash) > 0  # the catalog holds the copies

    doc = setup.plan("--no-scan")
    base = storage.as_uri() + "/"
    planned = [a["artifact"]["uri"] for a in doc["actions"]]
    assert not [u for u in planned if u.startswith(base + "trash/")], planned
    kept = [k["artifact"]["uri"] for k in doc["kept"]]
    assert not [u for u in kept if u.startswith(base + "trash/")]
    # the planner's view of the root (its bytes are what max_delete_fraction divides)
    engine = setup.engine()
    try:
        [root] = root_snapshots(engine, load_policy(setup.policy), datetime.now(UTC))
        seen = [o for g in root.groups for a in g.artifacts for o in a.objects]
    finally:
        engine.dispose()
    assert not [o.key for o in seen if o.key.startswith("trash/")]
    outside = [p for p in storage.rglob("*") if p.is_file() and trash not in p.parents]
    assert sum(o.size for o in seen) == sum(p.stat().st_size for p in outside)


def test_a_quarantine_an_earlier_policy_used_is_never_scanned_or_planned(tmp_path: Path) -> None:
    """After `quarantine_url` changes, the copies in the old quarantine are the only way
    back for that plan: the next scan must not list them as the root's data, and a plan
    (also after `scan --root`, which knows no policy) must not expire them."""
    storage = tmp_path / "storage"
    setup, _ = build(tmp_path, extra=NO_APPROVAL + f"apply: {{quarantine_url: {storage}/trash/}}\n")
    first = setup.plan()
    setup.apply(first["plan_id"])
    trash = storage / "trash"
    in_trash = [p for p in trash.rglob("*") if p.is_file()]
    assert in_trash
    outside = [p for p in storage.rglob("*") if p.is_file() and trash not in p.parents]

    # the policy now quarantines elsewhere (the default): the old copies stay where they are
    setup.policy.write_text(policy_text(str(storage)))
    base = storage.as_uri() + "/"
    for scan in (("scan", "--policy", str(setup.policy)), ("scan", "--root", str(storage))):
        scanned = govern(setup.catalog, *scan, "--format", "json")
        assert scanned.exit_code == 0, scanned.stderr
        assert json.loads(scanned.stdout)["scans"][0]["objects"] == len(outside)
        doc = setup.plan("--no-scan", as_of="2099-01-01T00:00:00Z")  # everything is old
        touched = [a["artifact"]["uri"] for a in doc["actions"]]
        touched += [k["artifact"]["uri"] for k in doc["kept"]]
        assert touched
        assert not [u for u in touched if u.startswith(base + "trash/")], touched
    assert sorted(p for p in trash.rglob("*") if p.is_file()) == sorted(in_trash)
    restored = setup.restore(first["plan_id"])
    assert json.loads(restored.stdout)["failed"] == 0
    # every copy is back: the old quarantine holds nothing of govern's, and what is
    # written there now is the root's data, scanned and costed
    assert not [p for p in trash.rglob("*") if p.is_file()]
    (trash / "new-data.bin").write_bytes(b"x" * 10)
    scanned = govern(setup.catalog, "scan", "--policy", str(setup.policy), "--format", "json")
    files = [p for p in storage.rglob("*") if p.is_file()]  # (the restored ones with them)
    assert trash / "new-data.bin" in files
    assert json.loads(scanned.stdout)["scans"][0]["objects"] == len(files)


def test_apply_with_a_policy_not_holding_the_plans_root_changes_nothing(
    tree: tuple[Setup, Path], tmp_path: Path
) -> None:
    """`--policy` gives apply its endpoints and credentials: one whose roots do not hold
    the plan's root is the wrong file (its settings would silently not apply), refused
    with exit 2 before any change; for restore likewise."""
    setup, storage = tree
    doc = setup.plan()
    other = tmp_path / "other.yaml"
    other.write_text(policy_text(str(tmp_path / "elsewhere")))
    before = snapshot(storage)
    for command in ("apply", "restore"):
        result = govern(setup.catalog, command, doc["plan_id"], "--policy", str(other))
        assert result.exit_code == 2, (command, result.stderr)
        assert f"--policy {other}: no storage root of it is in plan" in result.stderr
        assert storage.resolve().as_uri() + "/" in result.stderr
    assert snapshot(storage) == before
    assert setup.status(doc["plan_id"]) == "approved"
    setup.apply(doc["plan_id"])  # the plan's own policy holds it
    assert snapshot(storage) != before


def test_the_json_report_of_a_large_apply_streams_every_result(
    tree: tuple[Setup, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the results a report holds, `apply --format json` streams them all from the
    journal, one per line: the document parses, and holds a result per action in order."""
    monkeypatch.setattr("governance.apply.executor.RESULTS_KEPT", 1)
    setup, _ = tree
    doc = setup.plan()
    result = setup.apply(doc["plan_id"])
    applied = json.loads(result.stdout)
    assert [r["action_id"] for r in applied["results"]] == [a["id"] for a in doc["actions"]]
    lines = [line for line in result.stdout.splitlines() if line.startswith('    {"action_id"')]
    assert len(lines) == len(doc["actions"]) > 1


def test_a_default_quarantine_at_the_top_of_a_root_is_never_scanned_or_planned(
    tmp_path: Path,
) -> None:
    """A local root's default quarantine sits beside it; once its parent is governed (or
    the catalog that made the copies is lost), the copies sit at the top of a root that
    no catalog knows as a quarantine: by its name, they are still not the root's data."""
    setup, storage = build(tmp_path)
    first = setup.plan()
    setup.apply(first["plan_id"])
    quarantine = tmp_path / ".govern-quarantine"
    copies = sorted(p for p in quarantine.rglob("*") if p.is_file())
    assert copies
    parent = tmp_path / "parent.yaml"
    parent.write_text(policy_text(str(tmp_path)))
    fresh = Setup(f"sqlite:///{tmp_path / 'fresh.db'}", parent)

    scanned = govern(fresh.catalog, "scan", "--policy", str(parent), "--format", "json")

    assert scanned.exit_code == 0, scanned.stderr
    shown = govern(fresh.catalog, "ls", "objects", "--format", "json")
    rows = json.loads(shown.stdout)
    uris = [r["uri"] for r in (rows["objects"] if isinstance(rows, dict) else rows)]
    assert any(u.startswith(storage.as_uri() + "/runs/") for u in uris)  # the data is listed
    assert not [u for u in uris if "/.govern-quarantine/" in u]
    doc = fresh.plan("--no-scan", as_of="2099-01-01T00:00:00Z")  # everything is old
    touched = [a["artifact"]["uri"] for a in doc["actions"]] + [
        k["artifact"]["uri"] for k in doc["kept"]
    ]
    assert not [u for u in touched if "/.govern-quarantine/" in u], touched
    assert sorted(p for p in quarantine.rglob("*") if p.is_file()) == copies
