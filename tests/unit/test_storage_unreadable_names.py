"""The local walk meets names that are not valid UTF-8 (a legacy Latin-1 `caf\\xe9.txt`).

Python hands such a name over with surrogate escapes, which no catalog can store. The walk
lists no such file and enters no such folder, counts them (outside the excluded prefixes)
in the child process as in this one, and every other local listing (a folder's, as apply
makes) passes over them too. A link so named is a link: counted, and noted under its name
with the bad bytes escaped, so that what it points at is still kept.
"""

from __future__ import annotations

import io
import marshal
import os
from pathlib import Path

import pytest

from governance.cli import scan_cmd
from governance.scan.runner import ScanSummary
from governance.storage import local_walk, open_store
from governance.storage.base import listing_symlinks
from governance.storage.fs import FsspecStore
from tests.unit.test_storage_symlinks import walk_beside, walk_here


def put(root: Path, key: bytes, data: bytes = b"x") -> None:
    """Write the file at `key` (bytes: any name) under `root`, with its folders."""
    path = os.fsencode(root) + b"/" + key
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Good names (ASCII and UTF-8) beside bad ones: a file, a folder holding files (and a
    folder), a FIFO, and a bad file inside the excluded quarantine."""
    root = tmp_path / "root"
    put(root, b"runs/a/model.bin")
    put(root, "runs/a/café-ü-日本.txt".encode())  # valid UTF-8: listed as ever
    put(root, b"runs/a/latin1-\xe9.txt")
    put(root, b"runs/r\xe9sultats/w.bin")
    put(root, b"runs/r\xe9sultats/deeper/more.bin")
    put(root, b"runs/\xff\xfe/x.bin")
    put(root, b"quarantine/old-\xe9.bin")
    os.mkfifo(os.fsencode(root) + b"/runs/a/pipe-\xe9")  # not a file: skipped, not counted
    return root


LISTED = {"runs/a/model.bin", "runs/a/café-ü-日本.txt"}


def test_readable_name() -> None:
    assert local_walk.readable_name("café.txt")
    assert local_walk.readable_name("plain.bin")
    assert not local_walk.readable_name(os.fsdecode(b"caf\xe9.txt"))
    assert not local_walk.readable_name(os.fsdecode(b"\xed\xa0\x80"))  # an encoded surrogate


def test_names_that_are_not_utf8_are_skipped_and_counted_both_ways(tree: Path) -> None:
    for walk in (walk_here, walk_beside):
        keys, found = walk(tree, ("quarantine/",))
        assert keys == LISTED
        for key in keys:
            key.encode()  # every key listed can be stored
        assert found.unreadable_names == 3  # the file and two folders (not entered)
        assert (found.count, found.inside) == (0, [])
        everything, found = walk(tree)
        assert everything == LISTED
        assert found.unreadable_names == 4  # the quarantine's counts when not excluded
        _, found = walk(tree, ("runs/",))
        assert found.unreadable_names == 1  # (only the quarantine's, then)


def test_a_folder_listing_passes_over_them_without_counting(tree: Path) -> None:
    """`Store.list`, as apply lists a folder it removes whole, and the listing of a
    folder itself so named: no surrogate reaches a caller."""
    store = open_store(str(tree))
    keys = [o.key for o in store.list()]
    assert set(keys) == LISTED
    under = open_store(str(tree / "runs" / "a"))
    assert {o.key for o in under.list()} == {"model.bin", "café-ü-日本.txt"}


def test_the_store_listing_carries_the_count_both_ways(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(str(tree))
    assert isinstance(store, FsspecStore)
    for beside in (True, False):
        monkeypatch.setattr("governance.storage.fs.can_walk_beside", lambda b=beside: b)
        rows = store.list_compact_rows(("quarantine/",))
        assert rows is not None
        try:
            assert {row[0] for row in rows} == LISTED
        finally:
            rows.close()  # type: ignore[attr-defined]
        found = listing_symlinks(rows)
        assert found is not None
        assert found.unreadable_names == 3


def test_the_child_sends_the_count_even_without_links(tmp_path: Path) -> None:
    root = tmp_path / "root"
    put(root, b"ok.bin")
    put(root, b"bad-\xe9.bin")
    out = io.BytesIO()
    local_walk.serve(f"{root}/", f"file://{root}/", (), out)
    messages = _messages(out.getvalue())
    assert messages[-2] == {"count": 0, "unreadable_names": 1, "inside": []}
    assert messages[-1] is None


def test_links_so_named_or_pointing_at_such_names(tmp_path: Path) -> None:
    """A link named in Latin-1 is a link: counted, its target kept under an escaped
    name; a link to a file or folder so named keeps nothing (no scan lists it)."""
    root = tmp_path / "root"
    put(root, b"runs/x/checkpoint-1/w.bin")
    put(root, b"runs/x/latin1-\xe9.bin")
    put(root, b"runs/r\xe9s/w.bin")
    raw = os.fsencode(root)
    os.symlink(b"checkpoint-1", raw + b"/runs/x/best-\xe9")
    os.symlink(b"latin1-\xe9.bin", raw + b"/runs/x/to-bad-file")
    os.symlink(b"../r\xe9s", raw + b"/runs/x/to-bad-folder")
    os.symlink(b"../r\xe9s/w.bin", raw + b"/runs/x/into-bad-folder")
    expected = [("runs/x/best-\\xe9", "runs/x/checkpoint-1/")]
    for walk in (walk_here, walk_beside):
        keys, found = walk(root)
        assert keys == {"runs/x/checkpoint-1/w.bin"}
        assert found.count == 4
        assert found.unreadable_names == 2  # the file and the folder, not the link
        assert found.inside == expected
    store = open_store(str(root))
    assert isinstance(store, FsspecStore)
    assert store.links_in("runs/x/") == expected  # as apply reads the links of a folder


def test_the_summary_gives_the_count_only_for_local_roots() -> None:
    local = ScanSummary(
        "file:///d/", 1, 2, "complete", 1, 1, 1, 0, 0, 0.1,
        links=0, links_inside=0, unreadable_names=3,
    )  # fmt: skip
    assert local.as_dict()["unreadable_names"] == 3
    s3 = ScanSummary("s3://b/", 1, 2, "complete", 1, 1, 1, 0, 0, 0.1)
    assert "unreadable_names" not in s3.as_dict()


def test_the_note_and_the_table() -> None:
    def summary(n: int, links: int = 0) -> ScanSummary:
        return ScanSummary(
            "file:///d/", 1, 2, "complete", 1, 1, 1, 0, 0, 0.1,
            links=links, links_inside=0, unreadable_names=n,
        )  # fmt: skip

    assert scan_cmd.unreadable_names_note(summary(1)) == (
        "file:///d/: 1 file or folder not listed: its name is not valid UTF-8 "
        "(such a folder is not entered; rename it to have it scanned)"
    )
    assert scan_cmd.unreadable_names_note(summary(1234)).startswith(
        "file:///d/: 1,234 files or folders not listed: their names are not valid UTF-8 "
    )
    s3 = ScanSummary("s3://b/", 1, 2, "complete", 1, 1, 1, 0, 0, 0.1)
    headers = [c.header for c in scan_cmd._scan_table([summary(2), s3], boxed=True).columns]
    assert headers[-2] == "non-UTF-8"
    assert "links" not in headers  # (none met: no column)
    cells = list(scan_cmd._scan_table([summary(2), s3], boxed=True).columns[-2].cells)
    assert cells == ["2", "-"]
    headers = [c.header for c in scan_cmd._scan_table([summary(0, links=1)], boxed=True).columns]
    assert "non-UTF-8" not in headers


def _messages(data: bytes) -> list[object]:
    found, at = [], 0
    while at < len(data):
        (size,) = local_walk._HEADER.unpack_from(data, at)
        at += local_walk._HEADER.size
        found.append(marshal.loads(data[at : at + size]))
        at += size
    return found
