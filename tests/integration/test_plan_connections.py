"""Planning gives back every catalog connection it takes (SQLite file and PostgreSQL).

Classification holds the metadata reader in a reference cycle; the reader's connection
must go back to the pool when the groups stream ends (or is dropped, as `explain` does),
not whenever the cyclic collector runs: until then, on PostgreSQL, it sat idle in a
transaction. The collector is off in these tests, so only an explicit close counts.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from governance.catalog.engine import open_engine
from governance.plan.service import explain_uri, make_plan
from governance.policy import load_policy
from governance.scan.runner import scan_store
from governance.storage import open_store
from tests.catalogs import catalog_url  # noqa: F401
from tests.fixtures.builders import deepspeed_run, hf_run, local_writer, marker
from tests.integration.test_apply_support import policy_text

AS_OF = datetime.now(UTC) + timedelta(days=30)


@pytest.fixture
def no_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _scanned(tmp_path: Path, url: str) -> tuple[Engine, Path]:
    storage = tmp_path / "storage"
    w = local_writer(storage)
    hf_run(w, "runs/hf/", steps=(500, 1000, 1500))
    marker(w, "runs/hf/")
    deepspeed_run(w, "runs/ds/", steps=(100, 200, 300))  # its `latest` is read (cached)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage)))
    engine = open_engine(url)
    assert scan_store(engine, open_store(str(storage)), actor="tester").status == "complete"
    return engine, policy


def test_a_plan_returns_its_connections(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
    no_collector: None,
) -> None:
    engine, policy_path = _scanned(tmp_path, catalog_url)
    plan = make_plan(engine, load_policy(policy_path), AS_OF, actor="tester")
    assert plan.actions  # the tree was planned, metadata read through the cache
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]  # QueuePool
    engine.dispose()


def test_explain_returns_its_connections(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
    no_collector: None,
) -> None:
    engine, policy_path = _scanned(tmp_path, catalog_url)
    uri = (tmp_path / "storage" / "runs" / "ds" / "global_step100").as_uri() + "/"
    # `explain` stops reading groups once it has found the artifact
    found = explain_uri(engine, load_policy(policy_path), AS_OF, uri)
    assert found.uri == uri
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]  # QueuePool
    engine.dispose()
