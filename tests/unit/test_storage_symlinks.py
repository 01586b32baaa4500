"""The local walk meets symbolic links: it lists none, counts every one, and notes those
whose target lies inside the root, the same in the child process as in this one."""

from __future__ import annotations

import io
import marshal
import os
from pathlib import Path

import pytest

from governance.storage import local_walk, open_store
from governance.storage.base import Symlinks, listing_symlinks
from governance.storage.fs import FsspecStore
from governance.storage.local_walk import TreeWalk, WalkProcess, walk_tree


def write(root: Path, key: str, data: bytes = b"x") -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def link(root: Path, key: str, target: str | Path) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Links of every kind: to a folder, to a file, relative and absolute, chained, to
    the root, outside the root (and into a sibling whose name starts like the root's),
    dangling, a loop, and one inside an excluded folder."""
    root = tmp_path / "root"
    for step in (500, 1000):
        write(root, f"runs/x/checkpoint-{step}/model.safetensors", b"w" * step)
    write(root, "runs/pl/checkpoints/epoch=3-step=400.ckpt", b"c")
    write(tmp_path / "outside", "checkpoint-9/model.bin")
    write(tmp_path / "root-sibling", "weights.bin")
    link(root, "runs/x/best", "checkpoint-500")  # relative, a folder
    link(root, "runs/x/latest", root / "runs/x/checkpoint-1000")  # absolute, a folder
    link(root, "runs/pl/checkpoints/last.ckpt", "epoch=3-step=400.ckpt")  # a file
    link(root, "models/prod", "../runs/x/best")  # a chain: prod -> best -> checkpoint-500
    link(root, "models/weights", "../runs/x/checkpoint-500/model.safetensors")
    link(root, "everything", ".")  # the root itself
    link(root, "runs/x/elsewhere", tmp_path / "outside" / "checkpoint-9")
    link(root, "runs/x/sibling", tmp_path / "root-sibling" / "weights.bin")
    link(root, "runs/x/dangling", "checkpoint-42")
    link(root, "runs/x/loop-a", "loop-b")
    link(root, "runs/x/loop-b", "loop-a")
    link(root, "quarantine/old-best", "../runs/x/checkpoint-1000")
    return root


INSIDE = [
    ("everything", ""),
    ("models/prod", "runs/x/checkpoint-500/"),
    ("models/weights", "runs/x/checkpoint-500/model.safetensors"),
    ("runs/pl/checkpoints/last.ckpt", "runs/pl/checkpoints/epoch=3-step=400.ckpt"),
    ("runs/x/best", "runs/x/checkpoint-500/"),
    ("runs/x/latest", "runs/x/checkpoint-1000/"),
]
FILES = {
    "runs/x/checkpoint-500/model.safetensors",
    "runs/x/checkpoint-1000/model.safetensors",
    "runs/pl/checkpoints/epoch=3-step=400.ckpt",
}


def walk_here(root: Path, excludes: tuple[str, ...] = ()) -> tuple[set[str], Symlinks]:
    found = Symlinks()
    keys = {row[0] for row in walk_tree(f"{root}/", f"file://{root}/", excludes, found)}
    return keys, found


def walk_beside(root: Path, excludes: tuple[str, ...] = ()) -> tuple[set[str], Symlinks]:
    walker = WalkProcess(f"{root}/", f"file://{root}/", excludes)
    try:
        keys = {row[0] for row in walker}
    finally:
        walker.close()
    return keys, walker.symlinks


def test_links_inside_the_root_are_noted_with_their_targets(tree: Path) -> None:
    keys, found = walk_here(tree, ("quarantine/",))
    assert keys == FILES  # no link is listed, none is followed
    assert sorted(found.inside) == INSIDE
    assert found.count == 11  # every link met outside the excluded folder
    everything, _ = walk_here(tree)
    assert everything == FILES  # (the excluded folder holds nothing but a link)


def test_child_walk_gives_the_in_process_links(tree: Path) -> None:
    for excludes in ((), ("quarantine/",), ("runs/x/",)):
        here_keys, here = walk_here(tree, excludes)
        beside_keys, beside = walk_beside(tree, excludes)
        assert beside_keys == here_keys
        assert beside.inside == here.inside  # same links, same order
        assert beside.count == here.count
    assert ("quarantine/old-best", "runs/x/checkpoint-1000/") in walk_beside(tree)[1].inside


def test_the_store_listing_carries_the_links_both_ways(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(str(tree))
    assert isinstance(store, FsspecStore)
    seen = []
    for beside in (True, False):
        monkeypatch.setattr("governance.storage.fs.can_walk_beside", lambda b=beside: b)
        rows = store.list_compact_rows(("quarantine/",))
        assert isinstance(rows, WalkProcess if beside else TreeWalk)
        try:
            keys = {row[0] for row in rows}
        finally:
            rows.close()  # type: ignore[union-attr]
        found = listing_symlinks(rows)
        assert found is not None
        seen.append((keys, sorted(found.inside), found.count))
    assert seen[0] == seen[1] == (FILES, INSIDE, 11)
    assert listing_symlinks(iter([])) is None  # a store without links to meet


def test_dangling_links_and_loops_do_not_stop_the_walk(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "a/file.bin")
    link(root, "a/dangling", "nothing-here")
    link(root, "a/self", "self")
    link(root, "a/up", "..")  # a folder link to the root: not followed (no endless walk)
    os.mkfifo(root / "a" / "pipe")  # skipped too, but not a link
    for keys, found in (walk_here(root), walk_beside(root)):
        assert keys == {"a/file.bin"}
        assert found.count == 3
        assert found.inside == [("a/up", "")]


def test_a_root_reached_through_a_link_resolves_targets_under_its_real_path(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    write(real, "runs/x/checkpoint-1/w.bin")
    link(real, "runs/x/best", real / "runs/x/checkpoint-1")  # absolute, via the real path
    link(real, "runs/x/via-alias", tmp_path / "alias" / "runs/x/checkpoint-1")
    (tmp_path / "alias").symlink_to(real)
    for keys, found in (walk_here(tmp_path / "alias"), walk_beside(tmp_path / "alias")):
        assert keys == {"runs/x/checkpoint-1/w.bin"}
        assert sorted(found.inside) == [
            ("runs/x/best", "runs/x/checkpoint-1/"),
            ("runs/x/via-alias", "runs/x/checkpoint-1/"),
        ]


def test_many_links_go_in_several_messages_and_arrive_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    write(root, "target.bin")
    out = io.BytesIO()
    local_walk.serve(f"{root}/", f"file://{root}/", (), out)
    assert [type(m) for m in _messages(out.getvalue())] == [list, type(None)]  # no links: as before
    for i in range(7):
        link(root, f"links/l{i}", "../target.bin")
    link(root, "links/gone", "../missing.bin")
    monkeypatch.setattr(local_walk, "LINK_BATCH", 3)
    out = io.BytesIO()
    local_walk.serve(f"{root}/", f"file://{root}/", (), out)
    messages = _messages(out.getvalue())
    parts = [m for m in messages if isinstance(m, dict)]
    assert [len(m["inside"]) for m in parts] == [3, 3, 1]
    assert [m["count"] for m in parts] == [8, 0, 0]
    # the scanner's side of the pipe reads them back into one `Symlinks`
    reader = object.__new__(WalkProcess)
    reader.url = f"file://{root}/"
    reader.symlinks = Symlinks()
    reader._out = io.BytesIO(out.getvalue())
    assert [row[0] for row in reader._receive()] == ["target.bin"]
    assert reader.symlinks.count == 8
    assert sorted(reader.symlinks.inside) == [(f"links/l{i}", "target.bin") for i in range(7)]


def _messages(data: bytes) -> list[object]:
    found, at = [], 0
    while at < len(data):
        (size,) = local_walk._HEADER.unpack_from(data, at)
        at += local_walk._HEADER.size
        found.append(marshal.loads(data[at : at + size]))
        at += size
    return found
