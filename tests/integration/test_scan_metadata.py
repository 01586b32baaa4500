"""Metadata files are read once per ETag, before classification; runs are derived lazily."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from governance.catalog.derived import ensure_classified, options_to_json
from governance.catalog.engine import open_engine
from governance.catalog.queries import iter_artifact_rows, iter_run_rows
from governance.catalog.roots import record_layout
from governance.model.types import ClassifyOptions
from governance.scan.metadata import is_metadata_key, prefetch_metadata
from governance.scan.runner import scan_store
from governance.storage import open_store


def _checkpoint(root: Path, step: int, loss: float) -> None:
    ck = root / f"runs/r1/checkpoint-{step}"
    ck.mkdir(parents=True, exist_ok=True)
    (ck / "model.safetensors").write_bytes(b"w" * 10)
    (ck / "config.json").write_text("{}")
    state = {"global_step": step, "log_history": [{"step": step, "eval_loss": loss}]}
    (ck / "trainer_state.json").write_text(json.dumps(state))


def _scan(engine, store) -> int:  # type: ignore[no-untyped-def]
    summary = scan_store(engine, store, actor="t")
    record_layout(
        engine, summary.root_id, options_to_json(ClassifyOptions(as_of=datetime.now(UTC)))
    )
    return summary.root_id


def _cached(engine) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM meta_cache")).scalar_one())


def test_metadata_names() -> None:
    assert is_metadata_key("a/checkpoint-1/trainer_state.json")
    assert is_metadata_key("a/checkpoint-1/model.safetensors.index.json")
    assert is_metadata_key("save/latest")
    assert not is_metadata_key("a/checkpoint-1/optimizer.pt")
    assert not is_metadata_key("a/not_latest")


def test_metadata_read_once_per_etag_and_runs_classified_lazily(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for step, loss in ((100, 2.0), (200, 1.5)):
        _checkpoint(root, step, loss)
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    store = open_store(str(root))

    root_id = _scan(engine, store)
    assert _cached(engine) == 0  # a scan only lists
    assert ensure_classified(engine, datetime.now(UTC)) == 1  # reads both trainer states
    assert _cached(engine) == 2
    assert ensure_classified(engine, datetime.now(UTC)) == 0  # up to date: nothing to do
    (run,) = list(iter_run_rows(engine))
    assert run["checkpoints"] == 2
    metrics = {a["uri"].rsplit("/", 2)[-2]: a["metrics"] for a in iter_artifact_rows(engine)}
    assert metrics["checkpoint-200"] == {"eval_loss": 1.5}  # read from the cached trainer state

    _scan(engine, store)
    assert prefetch_metadata(engine, store, root_id) == 0  # unchanged tree: nothing to read

    state = root / "runs/r1/checkpoint-200/trainer_state.json"
    state.write_text(
        json.dumps({"global_step": 200, "log_history": [{"step": 200, "eval_loss": 0.5}]})
    )
    os.utime(state, ns=(state.stat().st_mtime_ns + 10**9,) * 2)
    _checkpoint(root, 300, 1.0)
    _scan(engine, store)
    assert prefetch_metadata(engine, store, root_id) == 2  # the rewritten one and the new one
    with engine.connect() as conn:
        cached = (
            conn.execute(
                text(
                    "SELECT content FROM meta_cache WHERE key = 'runs/r1/checkpoint-200/trainer_state.json'"
                )
            )
            .scalars()
            .all()
        )
    assert len(cached) == 1  # the old ETag's entry was replaced
    assert b"0.5" in cached[0]
    assert ensure_classified(engine, datetime.now(UTC)) == 1  # a new scan: classified again
    (run,) = list(iter_run_rows(engine))
    assert run["checkpoints"] == 3
    engine.dispose()


def test_unreachable_root_is_classified_from_the_cache(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _checkpoint(root, 100, 2.0)
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    _scan(engine, open_store(str(root)))
    import shutil

    shutil.rmtree(root)  # gone before anyone reads it: classification must still work
    assert ensure_classified(engine, datetime.now(UTC)) == 1
    (run,) = list(iter_run_rows(engine))
    assert run["checkpoints"] == 1  # listed files alone make it a complete checkpoint
    (ckpt,) = [a for a in iter_artifact_rows(engine) if a["kind"] == "checkpoint"]
    assert ckpt["metrics"] == {}  # but its trainer state was never read: no metrics
    engine.dispose()
