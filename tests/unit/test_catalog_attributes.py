"""Objects' tags and lock state in the catalog (SQLite file and PostgreSQL): the migration
that adds the lock columns, the scan resetting what it rewrites, the bulk write-back, and
the planner's reads (`iter_live_objects`, `stream_live_objects`) marking what is unread."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import inspect, text, update
from sqlalchemy.engine import Engine

from governance.catalog.derived import RootAttributes, refresh_object_attributes
from governance.catalog.engine import make_engine, open_engine, upgrade
from governance.catalog.queries import (
    UNREAD_BOTH,
    UNREAD_LOCK,
    UNREAD_TAGS,
    iter_live_objects,
    live_objects_by_key,
    stream_live_objects,
)
from governance.catalog.roots import find_root
from governance.catalog.tables import StoredObject, datetime_from_us
from governance.scan.attributes import refresh_attributes
from governance.scan.listing import ListingStart
from governance.scan.runner import ScanSummary, scan_listing
from governance.storage import open_store
from governance.storage.base import ListingRow
from tests.catalogs import catalog_url  # noqa: F401

ROOT = "s3://attributes-test/"
T0 = 1_700_000_000_000_000
DAY_US = 86_400_000_000
_O = StoredObject.__table__  # type: ignore[attr-defined]


def _row(key: str, etag: str = "e1", upload: str = "") -> ListingRow:
    return (key, upload, 1, etag, T0, None, None, None)


def _scan(engine: Engine, rows: list[ListingRow]) -> ScanSummary:
    store: Any = SimpleNamespace(url=ROOT)  # a listing as an S3 root gives it
    return scan_listing(engine, ListingStart(store, iter(rows), 2, time.perf_counter()), actor="t")


def _attrs(engine: Engine) -> dict[str, tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT key, tags, lock_read, lock_mode, lock_retain_until_us, legal_hold "
                "FROM objects WHERE gone_scan_id IS NULL"
            )
        ).all()
    return {r[0]: (r[1], bool(r[2]), r[3], r[4], r[5]) for r in rows}


def _set_all(engine: Engine) -> None:
    """Every object read: tagged, under legal hold."""
    with engine.begin() as conn:
        conn.execute(
            update(_O).values(
                tags={"retain": "true"}, lock_read=True, lock_mode="COMPLIANCE",
                lock_retain_until_us=T0, legal_hold=True,
            )
        )  # fmt: skip


def test_migration_adds_lock_columns_keeping_rows_as_not_read(
    catalog_url: str,  # noqa: F811
) -> None:
    engine = make_engine(catalog_url)
    upgrade(engine, "0007")
    assert "lock_read" not in {c["name"] for c in inspect(engine).get_columns("objects")}
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO roots (url, created_at) VALUES (:u, :t)"),
            {"u": ROOT, "t": datetime(2026, 1, 1)},
        )
        root_id = conn.execute(text("SELECT id FROM roots")).scalar_one()
        conn.execute(
            text(
                "INSERT INTO objects (root_id, key, upload_id, size, etag, last_modified, "
                "first_scan_id, changed_scan_id) VALUES (:r, 'a', '', 1, 'e', 0, 1, 1)"
            ),
            {"r": root_id},
        )
    engine.dispose()
    engine = open_engine(catalog_url)
    assert _attrs(engine) == {"a": (None, False, None, None, None)}
    root = find_root(engine, ROOT)
    assert root is not None
    assert root.object_lock is None
    engine.dispose()


def test_a_scan_resets_the_attributes_of_what_it_rewrites_only(
    catalog_url: str,  # noqa: F811
) -> None:
    engine = open_engine(catalog_url)
    _scan(engine, [_row("same"), _row("changed"), _row("revived"), _row("gone")])
    _scan(engine, [_row("same"), _row("changed"), _row("gone")])  # `revived` is gone
    _set_all(engine)
    _scan(engine, [_row("same"), _row("changed", "e2"), _row("revived"), _row("new")])
    got = _attrs(engine)
    assert got["same"][1:] == (True, "COMPLIANCE", T0, True)
    assert got["same"][0] is not None  # unchanged: what was read stays
    for key in ("changed", "revived", "new"):
        assert got[key] == (None, False, None, None, None), key
    assert "gone" not in got
    engine.dispose()


def test_a_rescan_merging_the_whole_stage_resets_too(tmp_path: Path) -> None:
    # SQLite falls back to the staged merge when another connection wrote meanwhile
    url = f"sqlite:///{tmp_path / 'c.db'}"
    engine = open_engine(url)
    _scan(engine, [_row("same"), _row("changed")])
    _set_all(engine)
    other = open_engine(url)

    def rows() -> Any:
        yield _row("same")
        with other.begin() as conn:  # a commit by someone else while the listing runs
            conn.execute(text("UPDATE roots SET name = 'x'"))
        yield _row("changed", "e2")

    store: Any = SimpleNamespace(url=ROOT)
    scan_listing(engine, ListingStart(store, rows(), 2, time.perf_counter()), actor="t")
    got = _attrs(engine)
    assert got["same"][1] is True
    assert got["changed"] == (None, False, None, None, None)
    other.dispose()
    engine.dispose()


def _objects_with_attributes(engine: Engine) -> int:
    """A root with objects in every state; returns its id."""
    _scan(
        engine,
        [_row(k) for k in ("copied", "plain", "tagged", "held", "locked", "lapsed")]
        + [_row("none-read"), _row("unread"), _row("upload", upload="u1")],
    )
    root = find_root(engine, ROOT)
    assert root is not None
    assert root.id is not None
    values: dict[str, dict[str, Any]] = {
        "plain": {"tags": {}, "lock_read": True},
        "tagged": {"tags": {"retain": "true"}, "lock_read": True},
        "held": {"tags": {}, "lock_read": True, "legal_hold": True},
        "locked": {"lock_read": True, "lock_mode": "GOVERNANCE", "lock_retain_until_us": T0 + 5},
        "lapsed": {"tags": {}, "lock_read": True, "lock_mode": "GOVERNANCE",
                   "lock_retain_until_us": T0, "legal_hold": False},
        "none-read": {"tags": {}, "lock_read": True, "legal_hold": False},
        # copied in place by govern a day after its content was written
        "copied": {"tags": {}, "lock_read": True, "content_modified_us": T0 - DAY_US},
    }  # fmt: skip
    with engine.begin() as conn:
        for key, row in values.items():
            conn.execute(update(_O).where(_O.c.key == key).values(**row))
    return root.id


@pytest.mark.parametrize("tags", [False, True])
@pytest.mark.parametrize("lock", [False, True])
def test_the_planners_reads_agree_and_mark_what_is_unread(
    catalog_url: str,  # noqa: F811
    tags: bool,
    lock: bool,
) -> None:
    engine = open_engine(catalog_url)
    root_id = _objects_with_attributes(engine)
    core = list(iter_live_objects(engine, root_id, tags=tags, lock=lock))
    fast = list(stream_live_objects(engine, root_id, tags=tags, lock=lock))
    assert fast == core
    keys = [o.key for o in core]
    assert live_objects_by_key(engine, root_id, keys, tags=tags, lock=lock) == core
    by = {(o.key, o.upload_id): o for o in fast}
    unread = {k: o.unread for k, o in by.items() if o.unread is not None}
    expected: dict[tuple[str, str], str] = {}
    if lock:
        expected[("unread", "")] = UNREAD_BOTH if tags else UNREAD_LOCK
    elif tags:
        expected[("unread", "")] = UNREAD_TAGS
    if tags:
        expected[("locked", "")] = UNREAD_TAGS  # lock read, tags not
    assert unread == expected
    assert by[("upload", "u1")].unread is None  # an upload has neither tags nor lock
    # the lock state comes with the objects of a bucket with Object Lock
    held, locked, lapsed = by[("held", "")], by[("locked", "")], by[("lapsed", "")]
    if lock:
        assert (held.legal_hold, held.retain_until, held.lock_mode) == (True, None, None)
        assert (locked.lock_mode, locked.retain_until) == (
            "GOVERNANCE",
            datetime_from_us(T0 + 5),
        )
        assert lapsed.retain_until == datetime_from_us(T0)
    else:
        assert not any(o.legal_hold or o.retain_until or o.lock_mode for o in fast)
    # ages count from the content; the class's minimum duration from the copy
    copied = by[("copied", "")]
    assert (copied.last_modified, copied.class_since) == (
        datetime_from_us(T0 - DAY_US),
        datetime_from_us(T0),
    )
    assert all(o.class_since is None for o in fast if o.key != "copied")
    plain = by[("plain", "")]
    assert (plain.legal_hold, plain.retain_until, plain.unread) == (False, None, None)
    assert by[("none-read", "")].legal_hold is False
    assert by[("tagged", "")].tags == {"retain": "true"}
    assert plain.tags == {}
    engine.dispose()


def _content_times(engine: Engine) -> dict[str, int | None]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT key, content_modified_us FROM objects")).all()
    return {r[0]: r[1] for r in rows}


def test_a_rescan_keeps_the_content_time_of_an_unchanged_copy_and_clears_a_rewritten_one(
    catalog_url: str,  # noqa: F811
) -> None:
    engine = open_engine(catalog_url)
    _scan(engine, [_row("kept"), _row("rewritten"), _row("touched")])
    with engine.begin() as conn:  # as apply records its copies in place
        conn.execute(update(_O).values(content_modified_us=T0 - DAY_US))
    # the same listing again, then one where two objects were written again
    _scan(engine, [_row("kept"), _row("rewritten"), _row("touched")])
    assert _content_times(engine) == dict.fromkeys(("kept", "rewritten", "touched"), T0 - DAY_US)
    touched = ("touched", "", 1, "e1", T0 + 1, None, None, None)  # same ETag, new time
    _scan(engine, [_row("kept"), _row("rewritten", "e2"), touched])
    assert _content_times(engine) == {"kept": T0 - DAY_US, "rewritten": None, "touched": None}
    engine.dispose()


def test_refresh_attributes_writes_back_in_bulk_and_a_filesystem_root_needs_nothing(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    from governance.scan.runner import scan_store

    (tmp_path / "data").mkdir()
    for name in ("a.log", "b.log"):
        (tmp_path / "data" / name).write_text(name)
    store = open_store(str(tmp_path / "data"))
    engine = open_engine(catalog_url)
    scanned = scan_store(engine, store, actor="t")
    # a filesystem root has neither tags nor locks: nothing to read, nothing unread
    needs = refresh_object_attributes(engine, scanned.root_id, store.url, store=store, tags=True)
    assert needs == RootAttributes(tags=False, lock=False)
    assert {v[:2] for v in _attrs(engine).values()} == {(None, False)}
    # asked anyway, the store answers "none" for every object, written back at once
    reads = refresh_attributes(engine, scanned.root_id, store, tags=True, lock=True)
    assert (reads.tags, reads.locks, reads.failed) == (2, 2, 0)
    got = _attrs(engine)
    assert {v[1:] for v in got.values()} == {(True, None, None, False)}
    assert all(v[0] is not None for v in got.values())
    # nothing left to read, and the root says so as of its last scan (one query)
    root = find_root(engine, store.url)
    assert root is not None
    assert (root.tags_read_scan_id, root.locks_read_scan_id) == (scanned.scan_id,) * 2
    again = refresh_attributes(engine, scanned.root_id, store, tags=True, lock=True)
    assert (again.tags, again.locks, again.failed) == (0, 0, 0)
    # a scan that rewrites an object: it is read again, the mark moves on
    (tmp_path / "data" / "b.log").write_text("changed, longer")
    rescanned = scan_store(engine, store, actor="t")
    assert rescanned.changed == 1
    assert _attrs(engine)[("b.log")][:2] == (None, False)
    third = refresh_attributes(engine, scanned.root_id, store, tags=True, lock=False)
    assert (third.tags, third.locks, third.failed) == (1, 0, 0)
    root = find_root(engine, store.url)
    assert root is not None
    assert (root.tags_read_scan_id, root.locks_read_scan_id) == (
        rescanned.scan_id,
        scanned.scan_id,
    )
    engine.dispose()


def test_the_objects_of_acted_on_artifacts_are_those_under_their_folders() -> None:
    """`reread_tags` reads again the tags of every object of an artifact a plan acts on:
    a file artifact's own key, and everything under a folder artifact's key."""
    from governance.scan.attributes import _covered

    acted = {"runs/a/checkpoint-500/", "logs/a.log"}
    assert _covered("runs/a/checkpoint-500/model.safetensors", acted)  # a file a strip leaves
    assert _covered("runs/a/checkpoint-500/sub/optimizer.pt", acted)
    assert _covered("logs/a.log", acted)
    assert not _covered("logs/a.log.1", acted)
    assert not _covered("runs/a/checkpoint-5000/model.safetensors", acted)
    assert not _covered("runs/a/", acted)
