"""The local walk in a child process (`WalkProcess`): the same rows as the in-process walk,
the same errors, and no child left behind however the listing ends."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from governance.errors import AccessDeniedError, NoSuchRootError, StorageError
from governance.storage import open_store
from governance.storage.fs import FsspecStore
from governance.storage.local_walk import BATCH_ROWS, WalkProcess, walk_tree


def write(root: Path, key: str, data: bytes = b"x") -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write(root, "a.txt", b"aaa")
    write(root, "run 1/ckpt-100/model.safetensors", b"w" * 10)
    write(root, "ünï/データ.bin", b"u" * 5)
    write(root, "quarantine/old/model.pt", b"q")
    (root / "empty-dir" / "nested").mkdir(parents=True)
    (root / "link").symlink_to(root / "a.txt")
    # more files than one message holds, in two directories
    for i in range(BATCH_ROWS + 300):
        write(root, f"many/{i % 2}/f{i:05d}.bin", b"z" * (i % 7))
    return root


def walk_beside(root: Path, excludes: tuple[str, ...] = ()) -> list[tuple[str, int, str, int]]:
    url = f"file://{root}/"
    walker = WalkProcess(f"{root}/", url, excludes)
    try:
        return list(walker)
    finally:
        walker.close()


@pytest.mark.parametrize("excludes", [(), ("quarantine/", "many/1/"), ("many/0/f0001",)])
def test_child_walk_gives_the_in_process_rows(tree: Path, excludes: tuple[str, ...]) -> None:
    beside = walk_beside(tree, excludes)
    here = list(walk_tree(f"{tree}/", f"file://{tree}/", excludes))
    assert beside == here  # same rows, same order
    keys = {row[0] for row in beside}
    assert "link" not in keys
    assert "ünï/データ.bin" in keys
    if excludes:
        assert not any(k.startswith(excludes) for k in keys)
    else:
        assert len(keys) == BATCH_ROWS + 304  # several messages, nothing lost or repeated
    st = os.stat(tree / "a.txt")
    row = next(r for r in beside if r[0] == "a.txt")
    assert row == ("a.txt", 3, f"mtime:{st.st_mtime_ns}", st.st_mtime_ns // 1000)


def test_scanner_listing_uses_the_child_and_matches_list(tree: Path) -> None:
    store = open_store(str(tree))
    assert isinstance(store, FsspecStore)
    rows = store.list_compact_rows(("quarantine/",))
    assert isinstance(rows, WalkProcess)
    try:
        compact = {r[0]: r[1] for r in rows}
    finally:
        rows.close()
    assert compact == {o.key: o.size for o in store.list(("quarantine/",))}


def test_missing_root_is_the_same_error_from_the_child(tmp_path: Path) -> None:
    with pytest.raises(NoSuchRootError, match=f"{tmp_path}/gone/: does not exist"):
        walk_beside(tmp_path / "gone")
    write(tmp_path, "plain")
    with pytest.raises(NoSuchRootError, match="is not a directory"):
        walk_beside(tmp_path / "plain")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unreadable_subdir_is_access_denied_from_the_child(tmp_path: Path) -> None:
    write(tmp_path, "locked/inner/f")
    (tmp_path / "locked" / "inner").chmod(0)
    try:
        with pytest.raises(AccessDeniedError, match="locked/inner/"):
            walk_beside(tmp_path)
    finally:
        (tmp_path / "locked" / "inner").chmod(0o755)


def test_closing_early_stops_the_child(tree: Path) -> None:
    walker = WalkProcess(f"{tree}/", f"file://{tree}/", ())
    next(walker)
    proc = walker._proc
    walker.close()
    assert proc.poll() is not None
    walker.close()  # twice is fine


def test_a_child_that_dies_is_an_error_not_a_short_listing(tree: Path) -> None:
    walker = WalkProcess(f"{tree}/", f"file://{tree}/", ())
    try:
        # Killed at once: long before the interpreter it starts could walk the tree.
        os.kill(walker._proc.pid, signal.SIGKILL)
        with pytest.raises(StorageError, match=r"walking process stopped early \(exit -9\)"):
            list(walker)
    finally:
        walker.close()


def test_no_interpreter_to_start_walks_in_process(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cannot_start(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", "python")

    store = open_store(str(tree))
    assert isinstance(store, FsspecStore)
    monkeypatch.setattr("governance.storage.local_walk.subprocess.Popen", cannot_start)
    rows = store.list_compact_rows()
    assert rows is not None
    assert not isinstance(rows, WalkProcess)
    assert sorted(rows) == sorted(walk_tree(f"{tree}/", f"file://{tree}/", ()))


def test_a_folder_past_the_path_limit_is_named_short(tmp_path: Path) -> None:
    """The OS's error repeats the whole path (kilobytes): the scan's names the folder by
    its start and end, its length, and what to do."""
    here = tmp_path / "root"
    here.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(here)
        for _ in range(1100):  # 1,100 x "dddd/": past PATH_MAX (4,096 on Linux)
            os.mkdir("dddd")
            os.chdir("dddd")
    finally:
        os.chdir(cwd)
    try:
        with pytest.raises(StorageError) as err:
            list(walk_tree(str(here) + "/", here.as_uri() + "/", ()))
    finally:  # removed level by level: pytest's recursive clean-up would overflow
        _remove_chain(here, "dddd", 1100)
    message = str(err.value)
    assert "over the system's limit (move or rename its folders to list it)" in message
    assert "…" in message
    assert len(message) < 400


def _remove_chain(top: Path, name: str, depth: int) -> None:
    """Remove `depth` nested folders `name` under `top`, deepest first, without recursion."""
    cwd = os.getcwd()
    try:
        os.chdir(top)
        for _ in range(depth):
            os.chdir(name)
        for _ in range(depth):
            os.chdir("..")
            os.rmdir(name)
    finally:
        os.chdir(cwd)
