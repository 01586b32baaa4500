"""Apply, restore and what comes after, end to end on each catalog backend: a SQLite file
and PostgreSQL (when GOVERN_TEST_POSTGRES_URL is set). The apply journal, the way back
and the checks against older plans write and read the catalog in SQL of their own
(executemany with the driver's placeholders): each dialect runs it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.catalogs import catalog_url  # noqa: F401  (the fixture)
from tests.integration.test_apply_local import build
from tests.integration.test_apply_support import (
    Setup,
    actions_by,
    govern,
    snapshot,
    without_restore_hold,
)


def test_apply_restore_and_an_older_plan_on_each_catalog(
    catalog_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    local, storage = build(tmp_path)
    without_restore_hold(local.policy)  # (the plan after the restore decides anew)
    setup = Setup(catalog_url, local.policy)
    before = snapshot(storage)
    base = storage.as_uri() + "/"
    first = setup.plan()
    older = setup.plan()  # the same content, made before the restore, never applied
    report = json.loads(setup.apply(first["plan_id"]).stdout)
    assert report["plan_status"] == "applied"
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    setup.plan()  # its scan marks the removed objects gone

    restored = json.loads(setup.restore(first["plan_id"]).stdout)
    assert (restored["restored"], restored["failed"]) == (23, 0)
    assert snapshot(storage) == before  # bytes and modification times
    assert actions_by(setup.plan(), base) == actions_by(first, base)  # as if never applied

    stale = json.loads(setup.apply(older["plan_id"], code=3).stdout)
    removing = [r for r in stale["results"] if r["action"] in ("delete", "strip")]
    assert removing
    assert all(r["outcome"] == "skipped" for r in removing)
    assert all("restored since the plan was made" in r["reason"] for r in removing)
    assert snapshot(storage) == before

    shown = govern(catalog_url, "show", first["plan_id"], "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    history = json.loads(shown.stdout)["history"]
    assert [e["status"] for e in history["executions"]] == ["applied"]
    assert history["removed_objects"] == {"restored": 23}
    assert [r["restored"] for r in history["restores"]] == [23]
    assert govern(catalog_url, "audit", "--verify").exit_code == 0


def _live_keys(catalog: str, base: str) -> set[str]:
    shown = govern(catalog, "ls", "objects", "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    doc = json.loads(shown.stdout)
    rows = doc["objects"] if isinstance(doc, dict) else doc
    return {r["uri"][len(base) :] for r in rows}


def test_what_an_apply_removed_is_gone_from_the_catalog_before_the_next_scan(
    catalog_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Until the next scan, `plan --no-scan` planned the same removals again (each stale
    at apply) and `ls` listed what was gone; a plan made before the apply still finds its
    objects held at its scan; a restore brings them back in the catalog too."""
    local, storage = build(tmp_path)
    without_restore_hold(local.policy)  # (the plan after the restore decides anew)
    setup = Setup(catalog_url, local.policy)
    base = storage.as_uri() + "/"
    first = setup.plan()
    older = setup.plan()  # made before the apply, never applied
    removed = {
        o["uri"][len(base) :]
        for a in first["actions"]
        if a["action"] in ("delete", "strip")
        for o in a["objects"]
    }
    assert removed
    listed = _live_keys(catalog_url, base)
    assert removed <= listed

    setup.apply(first["plan_id"])

    assert _live_keys(catalog_url, base) == listed - removed
    assert setup.plan("--no-scan")["actions"] == []
    runs = json.loads(govern(catalog_url, "ls", "artifacts", "--format", "json").stdout)
    rows = runs["artifacts"] if isinstance(runs, dict) else runs
    deleted = {a["artifact"]["uri"] for a in first["actions"] if a["action"] == "delete"}
    assert deleted.isdisjoint({r["uri"] for r in rows})
    # the older plan's objects were there at its scan: vanished (stale), not "unplanned"
    stale = json.loads(setup.apply(older["plan_id"], code=3).stdout)
    reasons = [r["reason"] for r in stale["results"] if r["outcome"] == "skipped"]
    assert reasons
    assert all("vanished" in r and "unplanned" not in r for r in reasons), reasons
    # the next scan finds nothing more gone: the catalog already knew
    scanned = govern(catalog_url, "scan", "--policy", str(local.policy), "--format", "json")
    assert scanned.exit_code == 0, scanned.stderr
    [summary] = json.loads(scanned.stdout)["scans"]
    assert (summary["gone"], summary["new"], summary["changed"]) == (0, 0, 0)

    restored = json.loads(setup.restore(first["plan_id"]).stdout)
    assert restored["failed"] == 0
    assert _live_keys(catalog_url, base) == listed
    assert actions_by(setup.plan("--no-scan"), base) == actions_by(first, base)


def test_a_strip_whose_weights_vanished_is_stale_on_each_catalog(
    catalog_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The files a strip keeps are found by a range query over the folder's keys (in
    byte order on PostgreSQL too, whatever the database's collation)."""
    local, storage = build(tmp_path)
    setup = Setup(catalog_url, local.policy)
    base = storage.as_uri() + "/"
    doc = setup.plan()
    stripped = [a["artifact"]["uri"] for a in doc["actions"] if a["action"] == "strip"]
    assert stripped
    folder = stripped[0][len(base) :]
    (storage / folder / "model.safetensors").unlink()

    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)

    [result] = [r for r in report["results"] if r["artifact_uri"] == stripped[0]]
    assert result["outcome"] == "skipped"
    assert f"{folder}model.safetensors, which the strip keeps, vanished" in result["reason"]


def _later_scan_rewrote(catalog: str, storage: Path, key: str, written_us: int | None) -> None:
    """What a complete scan after the plan's writes when it lists `key` anew: its row
    rewritten (`changed_scan_id`), with the time it lists (`written_us`; None: as it was,
    as a storage-class change by S3 lifecycle keeps it) and a new class."""
    from sqlalchemy import text

    from governance.catalog.engine import open_engine
    from governance.catalog.roots import find_root, finish_scan, start_scan

    engine = open_engine(catalog)
    try:
        root = find_root(engine, storage.as_uri() + "/")
        assert root is not None
        assert root.id is not None
        scan = start_scan(engine, root.id, "test")
        finish_scan(engine, scan, status="complete")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE objects SET changed_scan_id = :scan, storage_class = 'STANDARD_IA', "
                    "last_modified = coalesce(:lm, last_modified) WHERE root_id = :root AND key = :key"
                ),
                {"scan": scan, "lm": written_us, "root": root.id, "key": key},
            )
    finally:
        engine.dispose()


def test_a_strip_goes_on_when_a_later_scan_saw_only_its_weights_class_change(
    catalog_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A scan between the plan and the apply that rewrote a kept file's row for a class
    change alone (its time kept) leaves the strip as it was; one that found the file
    written after the plan makes it stale."""
    from datetime import UTC, datetime, timedelta

    local, storage = build(tmp_path)
    setup = Setup(catalog_url, local.policy)
    base = storage.as_uri() + "/"
    doc = setup.plan()
    stripped = sorted(a["artifact"]["uri"] for a in doc["actions"] if a["action"] == "strip")
    assert len(stripped) == 2
    classed, rewritten = (uri[len(base) :] + "model.safetensors" for uri in stripped)
    later = datetime.now(UTC) + timedelta(minutes=5)
    _later_scan_rewrote(catalog_url, storage, classed, None)
    _later_scan_rewrote(catalog_url, storage, rewritten, int(later.timestamp() * 1_000_000))

    report = json.loads(setup.apply(doc["plan_id"], code=3).stdout)

    by_uri = {r["artifact_uri"]: r for r in report["results"]}
    assert by_uri[stripped[0]]["outcome"] == "ok", by_uri[stripped[0]]["reason"]
    assert by_uri[stripped[1]]["outcome"] == "skipped"
    assert f"{rewritten}, which the strip keeps, was written again" in by_uri[stripped[1]]["reason"]
