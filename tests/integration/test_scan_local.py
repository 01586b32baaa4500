"""The scanner on local disk and memory://, against a real catalog (SQLite file, PostgreSQL)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from governance.catalog.engine import open_engine
from governance.cli.main import cli
from governance.errors import NoSuchRootError
from governance.scan.runner import ScanSummary, scan_store
from governance.storage import open_store
from governance.storage.base import ObjectInfo
from tests.catalogs import catalog_url  # noqa: F401


def _tree(root: Path, n: int = 30) -> None:
    for i in range(n):
        path = root / f"runs/r{i % 3}/checkpoint-{i}/model.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (i + 1))
    (root / "name with spaces é.txt").write_text("hi")
    (root / "empty-dir").mkdir()


def _live(engine, root_url: str) -> dict[str, tuple[int, str, int]]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT o.key, o.size, o.etag, o.changed_scan_id FROM objects o "
                "JOIN roots r ON r.id = o.root_id WHERE r.url = :u AND o.gone_scan_id IS NULL"
            ),
            {"u": root_url},
        ).all()
    return {k: (s, e, c) for k, s, e, c in rows}


def test_first_scan_indexes_every_file(tmp_path: Path, catalog_url: str) -> None:  # noqa: F811
    _tree(tmp_path / "data")
    engine = open_engine(catalog_url)
    store = open_store(str(tmp_path / "data"))
    summary = scan_store(engine, store, actor="tester")
    assert summary.status == "complete"
    assert summary.objects == 31
    assert summary.new == 31
    assert summary.bytes == sum(range(1, 31)) + 2
    live = _live(engine, store.url)
    assert "name with spaces é.txt" in live
    assert live["runs/r0/checkpoint-0/model.safetensors"][0] == 1
    engine.dispose()


def test_rescan_is_incremental(tmp_path: Path, catalog_url: str) -> None:  # noqa: F811
    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    store = open_store(str(root))
    first = scan_store(engine, store, actor="t")
    before = _live(engine, store.url)

    again = scan_store(engine, store, actor="t")
    assert (again.new, again.changed, again.gone) == (0, 0, 0)
    assert _live(engine, store.url) == before  # unchanged rows were not rewritten

    changed = root / "runs/r1/checkpoint-1/model.safetensors"
    changed.write_bytes(b"new content, longer")
    os.utime(changed, ns=(changed.stat().st_mtime_ns + 10**9,) * 2)
    (root / "runs/r2/checkpoint-2/model.safetensors").unlink()
    (root / "added.log").write_text("log")
    third = scan_store(engine, store, actor="t")
    assert (third.new, third.changed, third.gone) == (1, 1, 1)
    live = _live(engine, store.url)
    assert "runs/r2/checkpoint-2/model.safetensors" not in live
    assert live["runs/r1/checkpoint-1/model.safetensors"][0] == len(b"new content, longer")
    assert live["runs/r1/checkpoint-1/model.safetensors"][2] == third.scan_id
    assert live["runs/r0/checkpoint-0/model.safetensors"][2] == first.scan_id

    (root / "runs/r2/checkpoint-2/model.safetensors").write_bytes(b"back")
    fourth = scan_store(engine, store, actor="t")
    assert fourth.changed == 1  # the gone row is revived in place
    assert "runs/r2/checkpoint-2/model.safetensors" in _live(engine, store.url)
    engine.dispose()


class _FailingStore:
    """A real store whose listing breaks after `after` objects (a dropped connection)."""

    def __init__(self, inner, after: int, exc: BaseException) -> None:  # type: ignore[no-untyped-def]
        self._inner = inner
        self._after = after
        self._exc = exc
        self.url = inner.url

    def check(self) -> None:
        self._inner.check()

    def list(self, exclude_prefixes: Sequence[str] = ()) -> Iterator[ObjectInfo]:
        for i, info in enumerate(self._inner.list(exclude_prefixes)):
            if i == self._after:
                raise self._exc
            yield info


@pytest.mark.parametrize("exc", [OSError("connection reset"), KeyboardInterrupt()])
def test_failed_or_interrupted_scan_changes_nothing(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
    exc: BaseException,
) -> None:
    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    store = open_store(str(root))
    scan_store(engine, store, actor="t")
    before = _live(engine, store.url)
    for p in list(root.rglob("*.safetensors"))[:5]:
        p.unlink()
    with pytest.raises(type(exc)):
        scan_store(engine, _FailingStore(store, 10, exc), actor="t")  # type: ignore[arg-type]
    assert _live(engine, store.url) == before  # nothing marked gone
    with engine.connect() as conn:
        status, error = conn.execute(
            text("SELECT status, error FROM scans ORDER BY id DESC")
        ).first()  # type: ignore[misc]
    assert status == "failed"
    assert error == ("interrupted" if isinstance(exc, KeyboardInterrupt) else "connection reset")
    engine.dispose()


def test_missing_root_fails_before_touching_the_catalog(tmp_path: Path, catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    with pytest.raises(NoSuchRootError, match="does-not-exist"):
        scan_store(engine, open_store(str(tmp_path / "does-not-exist")), actor="t")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM roots")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM scans")).scalar() == 0
    engine.dispose()


def test_memory_filesystem_scan(catalog_url: str) -> None:  # noqa: F811
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe({"/bench-mem/a/b.bin": b"123", "/bench-mem/c.txt": b"4"})
    engine = open_engine(catalog_url)
    summary = scan_store(engine, open_store("memory://bench-mem/"), actor="t")
    assert (summary.objects, summary.bytes) == (2, 4)
    engine.dispose()


def test_cli_scan_and_ls_objects_json(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _tree(root, n=3)
    catalog = f"sqlite:///{tmp_path / 'cat.db'}"
    runner = CliRunner()
    result = runner.invoke(
        cli, ["--catalog", catalog, "scan", "--root", str(root), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["scans"][0]["objects"] == 4
    assert doc["scans"][0]["root"] == root.resolve().as_uri() + "/"

    result = runner.invoke(cli, ["--catalog", catalog, "ls", "objects", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 4
    assert {"uri", "size", "etag", "last_modified", "storage_class"} <= set(rows[0])
    assert all(r["uri"].startswith("file:///") for r in rows)
    assert [r["uri"] for r in rows] == sorted(r["uri"] for r in rows)


@pytest.mark.parametrize("what", ["objects", "runs", "artifacts"])
def test_cli_ls_of_a_root_not_in_the_catalog_is_bad_input(tmp_path: Path, what: str) -> None:
    """`ls --root` with a root never scanned (a typo) says so, naming the known roots,
    rather than listing nothing as if the root were empty."""
    root = tmp_path / "data"
    _tree(root, n=1)
    catalog = f"sqlite:///{tmp_path / 'cat.db'}"
    runner = CliRunner()
    assert runner.invoke(cli, ["--catalog", catalog, "scan", "--root", str(root)]).exit_code == 0
    args = ["--catalog", catalog, "ls", what, "--format", "json", "--root"]
    found = runner.invoke(cli, [*args, str(root)])
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)
    typo = runner.invoke(cli, [*args, str(tmp_path / "dta")])
    assert typo.exit_code == 2
    assert typo.stdout == ""
    assert "dta: not a root in the catalog" in typo.stderr
    assert root.resolve().as_uri() + "/" in typo.stderr


def test_cli_scan_of_missing_root_exits_2_with_one_message(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'cat.db'}"
    result = CliRunner().invoke(
        cli, ["--catalog", catalog, "scan", "--root", str(tmp_path / "nope")]
    )
    assert result.exit_code == 2
    assert "nope" in result.stderr
    assert result.stderr.count("error:") == 1
    assert result.stdout == ""  # no empty table above the error


@pytest.mark.parametrize(("typed", "meant"), [("s3:/bucket/runs", "s3://bucket/runs")])
def test_cli_scan_of_a_url_missing_a_slash_suggests_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str, meant: str
) -> None:
    """`s3:/bucket` is a slip for `s3://bucket`, not a local folder named `s3:`."""
    monkeypatch.chdir(tmp_path)
    catalog = f"sqlite:///{tmp_path / 'cat.db'}"
    result = CliRunner().invoke(cli, ["--catalog", catalog, "scan", "--root", typed])
    assert result.exit_code == 2
    assert f"did you mean {meant!r}?" in result.stderr
    assert "file://" not in result.stderr


def test_cli_scan_without_roots_is_bad_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "scan"])
    assert result.exit_code == 2
    assert "nothing to scan" in result.stderr


def test_cli_corrupt_catalog_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 1000)
    result = CliRunner().invoke(cli, ["--catalog", f"sqlite:///{bad}", "ls", "objects"])
    assert result.exit_code == 2
    assert "cannot be opened" in result.stderr


def test_failed_first_scan_leaves_no_rows(tmp_path: Path, catalog_url: str) -> None:  # noqa: F811
    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    store = open_store(str(root))
    with pytest.raises(OSError, match="reset"):
        scan_store(engine, _FailingStore(store, 20, OSError("reset")), actor="t")  # type: ignore[arg-type]
    assert _live(engine, store.url) == {}
    summary = scan_store(engine, store, actor="t")  # the next scan starts clean
    assert (summary.objects, summary.new) == (31, 31)
    engine.dispose()


def test_a_scan_overtaken_by_a_newer_one_does_not_write_its_older_listing(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """Two scans of one root at once (the nightly job's, and the one `govern plan` runs):
    A lists, then B lists and completes after files were added. A's listing is older;
    folded in after B it marked the new files gone (and would bring deleted ones back).
    A is recorded as superseded and changes nothing."""
    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    store = open_store(str(root))
    scan_store(engine, store, actor="t")
    added = root / "runs/r0/checkpoint-99/model.safetensors"
    newer: list[int] = []

    def meanwhile(listed: int, _bytes: int) -> None:
        if newer:
            return
        added.parent.mkdir(parents=True)
        added.write_bytes(b"written after A listed")
        newer.append(scan_store(engine, open_store(str(root)), actor="b").scan_id)

    a = scan_store(engine, store, actor="a", progress=meanwhile)
    assert a.status == "superseded"
    assert (a.new, a.changed, a.gone) == (0, 0, 0)
    assert "runs/r0/checkpoint-99/model.safetensors" in _live(engine, store.url)
    with engine.connect() as conn:
        status, error = conn.execute(
            text("SELECT status, error FROM scans WHERE id = :id"), {"id": a.scan_id}
        ).one()
    assert status == "superseded"
    assert error.startswith(f"superseded by scan {newer[0]}, which began later")
    assert a.error == error
    # the next scan is an ordinary one
    assert scan_store(engine, store, actor="t").status == "complete"
    engine.dispose()


def test_scans_are_ordered_by_when_their_listing_began_not_by_their_row(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """A scan's row (and id) is made once the catalog is open, after its listing began: a
    scan delayed there (a slow open, a lock) got a later id than a scan whose listing
    began after its own, and folded its older listing in over the newer one's."""
    from governance.scan.listing import start_listing
    from governance.scan.runner import scan_listing

    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    scan_store(engine, open_store(str(root)), actor="t")
    older = start_listing(open_store(str(root)))  # A began listing ...
    (root / "runs/r0/checkpoint-99").mkdir(parents=True)
    (root / "runs/r0/checkpoint-99/model.safetensors").write_bytes(b"new")
    newer = scan_store(engine, open_store(str(root)), actor="b")  # ... B began and ended
    assert newer.status == "complete"

    late = scan_listing(engine, older, actor="a")  # A's row comes after B's

    assert late.scan_id > newer.scan_id
    assert late.status == "superseded"
    assert "runs/r0/checkpoint-99/model.safetensors" in _live(engine, newer.root)
    engine.dispose()


def test_an_interrupt_after_the_listing_is_written_leaves_the_scan_complete(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while the scan only tidies up (its staging dropped) after its listing and
    status were committed: the scan stays `complete` (before, it was marked failed, and
    the catalog's classification went on reading the scan before it)."""
    from governance.catalog import bulk, rescan

    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    store = open_store(str(root))
    scan_store(engine, store, actor="t")
    (root / "runs/r0/checkpoint-99").mkdir(parents=True)
    (root / "runs/r0/checkpoint-99/model.safetensors").write_bytes(b"new")

    def interrupted(*_args: object, **_kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bulk, "drop_stage", interrupted)
    monkeypatch.setattr(rescan.RescanDiff, "drop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        scan_store(engine, store, actor="t")
    with engine.connect() as conn:
        status = conn.execute(text("SELECT status FROM scans ORDER BY id DESC LIMIT 1")).scalar()
    assert status == "complete"
    engine.dispose()


def test_two_first_scans_of_one_new_root_at_once_one_is_superseded(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """Both found the root empty and wrote their listing straight into `objects`: the one
    whose inserts came second failed with a traceback (a UNIQUE violation, exit 1). It is
    now superseded by the other, as an older listing is by a newer complete scan. The
    race is made exact: A's listing runs the whole of B when A reads its first rows."""
    from dataclasses import replace

    from governance.scan.listing import start_listing
    from governance.scan.runner import scan_listing

    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    a = start_listing(open_store(str(root)))
    other: list[ScanSummary] = []

    def racing() -> Iterator[Any]:
        for i, row in enumerate(a.rows):
            if i == 0:
                other.append(scan_store(engine, open_store(str(root)), actor="b"))
            yield row

    late = scan_listing(engine, replace(a, rows=racing()), actor="a")

    [b] = other
    assert b.status == "complete"
    assert late.status == "superseded"
    assert late.error is not None
    assert late.error.startswith(f"superseded by scan {b.scan_id}, a first scan of this root")
    assert len(_live(engine, b.root)) == b.objects
    assert scan_store(engine, open_store(str(root)), actor="t").status == "complete"
    engine.dispose()


def test_objects_an_apply_removed_while_a_scan_listed_stay_gone(
    tmp_path: Path,
    catalog_url: str,  # noqa: F811
) -> None:
    """A scan whose listing began before an apply removed objects (a long S3 listing, an
    apply meanwhile) saw them before they went: its merge brought every one back live,
    and the next `plan --no-scan` planned them again. The apply's record is newer than
    the listing: they stay gone. (The files are left on disk: the listing saw them.)"""
    from datetime import UTC, datetime

    from governance.catalog.removals import mark_removed_gone
    from governance.scan.listing import start_listing
    from governance.scan.runner import scan_listing

    root = tmp_path / "data"
    _tree(root)
    engine = open_engine(catalog_url)
    first = scan_store(engine, open_store(str(root)), actor="t")
    listing = start_listing(open_store(str(root)))  # the scan's listing begins ...
    removed = sorted(k for k in _live(engine, first.root) if k.startswith("runs/r1/"))
    assert removed
    with engine.begin() as conn:  # ... an apply removes objects and records it ...
        sizes = {k: v[0] for k, v in _live(engine, first.root).items()}
        marked = mark_removed_gone(
            conn,
            [(first.root, k, "", sizes[k]) for k in removed],
            actor="apply",
            now=datetime.now(UTC),
        )
    assert marked == len(removed)

    late = scan_listing(engine, listing, actor="t")  # ... and the scan merges

    assert late.status == "complete"
    assert late.changed == 0
    live = _live(engine, first.root)
    assert not [k for k in removed if k in live]
    assert len(live) == first.objects - len(removed)
    # a scan that begins after the apply sees what is there, and says so
    again = scan_store(engine, open_store(str(root)), actor="t")
    assert again.changed == len(removed)
    assert all(k in _live(engine, first.root) for k in removed)
    engine.dispose()
