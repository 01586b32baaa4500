"""Apply, restore and what comes after, end to end on each catalog backend: a SQLite file
and PostgreSQL (when GOVERN_TEST_POSTGRES_URL is set). The apply journal, the way back
and the checks against older plans write and read the catalog in SQL of their own
(executemany with the driver's placeholders): each dialect runs it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.catalogs import catalog_url  # noqa: F401  (the fixture)
from tests.integration.test_apply_local import build
from tests.integration.test_apply_support import Setup, actions_by, govern, snapshot


def test_apply_restore_and_an_older_plan_on_each_catalog(
    catalog_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    local, storage = build(tmp_path)
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
