"""`RescanDiff` (SQLite: compare while listing) leaves the catalog exactly as the staged
merge does, whatever the listings, and falls back to that merge when another connection
commits to the catalog while the listing runs."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import Engine

from governance.catalog import rescan
from governance.catalog.engine import open_engine
from governance.scan.listing import ListingStart
from governance.scan.runner import ScanSummary, scan_listing
from governance.storage.base import ListingRow

ROOT = "s3://rescan-test/"
COLUMNS = (
    "key, upload_id, size, etag, last_modified, storage_class, version_id, "
    "first_scan_id, changed_scan_id, gone_scan_id"
)

# One object's listed state: (size, etag, storage class, version id)
State = tuple[int, str, str | None, str | None]
Listing = dict[tuple[str, str], State]

keys = st.sampled_from([f"runs/r{i}/ckpt-{j}/model.pt" for i in range(3) for j in range(4)])
uploads = st.sampled_from(["", "", "", "u1"])
states = st.tuples(
    st.integers(0, 3),
    st.sampled_from(["e1", "e2"]),
    st.sampled_from([None, "STANDARD_IA"]),
    st.sampled_from([None, "v1"]),
)
listings = st.dictionaries(st.tuples(keys, uploads), states, max_size=12)


def _rows(listing: Listing) -> list[ListingRow]:
    return [
        (key, upload, size, etag, 1_700_000_000_000_000 + size, sc, version, None)
        for (key, upload), (size, etag, sc, version) in sorted(listing.items(), reverse=True)
    ]


def _scan(engine: Engine, rows: Iterator[ListingRow] | list[ListingRow]) -> ScanSummary:
    store: Any = SimpleNamespace(url=ROOT)
    listing = ListingStart(store, iter(rows), 2, time.perf_counter())
    return scan_listing(engine, listing, actor="t")


def _objects(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.exec_driver_sql(f"SELECT {COLUMNS} FROM objects ORDER BY key, upload_id")
        ]


def _counts(s: ScanSummary) -> tuple[int, int, int, int]:
    return (s.objects, s.new, s.changed, s.gone)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(listings, min_size=2, max_size=4))
def test_compare_while_listing_matches_the_staged_merge(scans: list[Listing]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        diffing = open_engine(f"sqlite:///{Path(tmp) / 'diff.db'}")
        staged = open_engine(f"sqlite:///{Path(tmp) / 'staged.db'}")
        try:
            for listing in scans:
                by_diff = _scan(diffing, _rows(listing))
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr(rescan, "applies_to", lambda conn: False)
                    by_merge = _scan(staged, _rows(listing))
                assert _counts(by_diff) == _counts(by_merge)
                assert _objects(diffing) == _objects(staged)
            live = {r[:2] for r in _objects(diffing) if r[-1] is None}
            assert live == set(scans[-1])  # and both are right, not merely alike
        finally:
            diffing.dispose()
            staged.dispose()


def _commit_midway(engine: Engine, rows: list[ListingRow], sql: str) -> Iterator[ListingRow]:
    """The listing, with another connection committing `sql` halfway through."""
    for i, row in enumerate(rows):
        if i == len(rows) // 2:
            other = open_engine(str(engine.url))
            with other.begin() as conn:
                conn.exec_driver_sql(sql)
            other.dispose()
        yield row


def test_a_commit_during_the_listing_falls_back_to_the_staged_merge(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'cat.db'}")
    first: Listing = {(f"k{i:05d}", ""): (i, "e", None, None) for i in range(12_000)}
    _scan(engine, _rows(first))
    second = dict(first)
    del second[("k00007", "")]  # vanished: one gone
    # Meanwhile something else marks gone an object that the listing finds, after its
    # batch (the first 5,000 rows, listed in reverse) was compared: what was set aside
    # while listing no longer holds.
    rows = _commit_midway(
        engine, _rows(second), "UPDATE objects SET gone_scan_id = 1 WHERE key = 'k09000'"
    )
    summary = _scan(engine, rows)
    assert _counts(summary) == (11_999, 0, 1, 1)  # k09000 revived, k00007 gone
    by_key = {r[0]: r for r in _objects(engine)}
    assert by_key["k09000"][-1] is None
    assert by_key["k00007"][-1] == summary.scan_id
    assert sum(1 for r in by_key.values() if r[-1] is None) == 11_999
    engine.dispose()


def test_temporary_tables_are_dropped(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'cat.db'}")
    listing: Listing = {("a", ""): (1, "e", None, None), ("b", ""): (2, "e", None, None)}
    _scan(engine, _rows(listing))
    del listing[("a", "")]
    assert _counts(_scan(engine, _rows(listing))) == (1, 0, 0, 1)
    with engine.connect() as conn:
        temp = conn.execute(text("SELECT name FROM sqlite_temp_master WHERE type = 'table'"))
        assert temp.all() == []
    engine.dispose()
