"""A copy on local disk is a file of its own; only a move may share the source's bytes.

`FsspecStore.copy` between local roots must leave two independent files: an archive copy
that stays (and the quarantine copy apply makes of the same source right after) must not
change when the other, or the source, is written to in place. A copy the caller turns
into a move (`moving=True`: the source is removed right after, as restore does with a
quarantine copy) stays cheap: a second name for the same bytes, unless the source has
another name already. Holes stay holes; mode and times are kept; a copy to another
filesystem (tmpfs) works either way.

Real files; the apply steps are the real ones (`modes.copy_to`, `modes.remove`).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from governance.apply import StoreOpener
from governance.apply.modes import Item, copy_to, remove
from governance.storage import open_store
from governance.storage.fs import FsspecStore

MODEL = os.urandom(64 * 1024)


def _write(path: Path, data: bytes = MODEL) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    os.chmod(path, 0o640)
    return path


def _edit_in_place(path: Path, data: bytes = b"CORRUPTED") -> None:
    with open(path, "r+b") as handle:
        handle.write(data)


def _store(path: Path) -> FsspecStore:
    store = open_store(str(path))
    assert isinstance(store, FsspecStore)
    return store


@pytest.fixture
def other_filesystem() -> Iterator[Path]:
    """A folder on another filesystem than the tests' temporary folder (tmpfs)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no /dev/shm to copy across filesystems to")
    if os.stat(shm).st_dev == os.stat(tempfile.gettempdir()).st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the temporary folder")
    folder = Path(tempfile.mkdtemp(prefix="govern-test-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_copy_between_local_roots_is_independent_of_its_source(tmp_path: Path) -> None:
    source = _write(tmp_path / "root" / "runs/a/model.safetensors")
    result = _store(tmp_path / "root").copy(
        "runs/a/model.safetensors", _store(tmp_path / "archive"), "a/model.safetensors"
    )
    assert result.ok, result.error
    copied = tmp_path / "archive" / "a" / "model.safetensors"
    assert copied.read_bytes() == MODEL
    assert copied.stat().st_ino != source.stat().st_ino
    assert source.stat().st_nlink == copied.stat().st_nlink == 1
    # kept like S3's COPY keeps metadata: mode and modification time
    assert copied.stat().st_mtime_ns == source.stat().st_mtime_ns
    assert stat.S_IMODE(copied.stat().st_mode) == 0o640

    _edit_in_place(copied)
    assert source.read_bytes() == MODEL
    _edit_in_place(source, b"LIVE")
    assert copied.read_bytes()[:9] == b"CORRUPTED"
    assert copied.read_bytes()[9:] == MODEL[9:]


def test_an_archive_copy_and_the_quarantine_copy_are_two_files(tmp_path: Path) -> None:
    """What `govern apply` does for an archive by URL: copy to the archive, then remove
    the source through quarantine. Neither copy may change with the other."""
    root, archive, quarantine = (tmp_path / n for n in ("root", "archive", "quarantine"))
    source = _write(root / "runs/a/checkpoint-200/model.safetensors")
    stores = StoreOpener()
    root_url, archive_url = root.as_uri() + "/", archive.as_uri() + "/"
    key = "runs/a/checkpoint-200/model.safetensors"

    copied = copy_to(
        [(1, root_url, key, archive_url, "checkpoint-200/model.safetensors")], stores, 4
    )
    assert copied[(1, key)].ok, copied[(1, key)].error
    item = Item(1, root_url, key, quarantine.as_uri() + "/", f"p-1/{key}", len(MODEL))
    removed = remove([item], "quarantine", stores, 4)
    assert removed[(1, key)].ok, removed[(1, key)].error
    assert not source.exists()

    archived = archive / "checkpoint-200" / "model.safetensors"
    held = quarantine / "p-1" / key
    assert archived.read_bytes() == held.read_bytes() == MODEL
    assert archived.stat().st_ino != held.stat().st_ino
    _edit_in_place(archived)
    assert held.read_bytes() == MODEL  # what restore would put back is untouched


def test_a_move_on_one_filesystem_shares_the_bytes_and_costs_nothing(tmp_path: Path) -> None:
    """`moving=True`: the caller removes the source right after, so a hard link will do
    (a sparse 64 GiB checkpoint is neither read nor materialised)."""
    big = tmp_path / "quarantine" / "p-1" / "ckpt" / "optimizer.pt"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as handle:
        handle.truncate(64 * 2**30)
    quarantine, root = _store(tmp_path / "quarantine"), _store(tmp_path / "root")
    result = quarantine.copy("p-1/ckpt/optimizer.pt", root, "ckpt/optimizer.pt", moving=True)
    assert result.ok, result.error
    back = tmp_path / "root" / "ckpt" / "optimizer.pt"
    assert back.stat().st_ino == big.stat().st_ino
    assert quarantine.delete(["p-1/ckpt/optimizer.pt"])[0].ok
    assert back.stat().st_size == 64 * 2**30
    assert back.stat().st_nlink == 1
    assert not [p for p in back.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_move_of_a_file_with_another_name_is_a_real_copy(tmp_path: Path) -> None:
    """A quarantine copy that an older release hard-linked to an archive copy: moving it
    back must not tie the restored file to the archive."""
    held = _write(tmp_path / "quarantine" / "p-1" / "model.safetensors")
    archived = tmp_path / "archive" / "model.safetensors"
    archived.parent.mkdir()
    os.link(held, archived)
    quarantine = _store(tmp_path / "quarantine")
    result = quarantine.copy(
        "p-1/model.safetensors", _store(tmp_path / "root"), "model.safetensors", moving=True
    )
    assert result.ok, result.error
    back = tmp_path / "root" / "model.safetensors"
    assert back.read_bytes() == MODEL
    assert back.stat().st_ino != archived.stat().st_ino
    assert back.stat().st_mtime_ns == held.stat().st_mtime_ns
    _edit_in_place(archived)
    assert back.read_bytes() == MODEL


def test_a_copy_keeps_holes_as_holes_and_data_as_data(tmp_path: Path) -> None:
    """A sparse file with data in the middle and at the end: the copy is a file of its
    own with the same bytes, and its holes take no space."""
    path = tmp_path / "root" / "ckpt" / "optimizer.pt"
    path.parent.mkdir(parents=True)
    size = 2**30
    with open(path, "wb") as handle:
        handle.truncate(size)
        handle.seek(300 * 2**20)
        handle.write(b"middle" * 1000)
        handle.seek(size - 5)
        handle.write(b"tail!")
    result = _store(tmp_path / "root").copy(
        "ckpt/optimizer.pt", _store(tmp_path / "archive"), "ckpt/optimizer.pt"
    )
    assert result.ok, result.error
    copied = tmp_path / "archive" / "ckpt" / "optimizer.pt"
    assert copied.stat().st_ino != path.stat().st_ino
    assert copied.stat().st_size == size
    assert copied.stat().st_blocks * 512 < 16 * 2**20  # the holes were not written
    with open(copied, "rb") as handle:
        assert handle.read(4096) == b"\0" * 4096
        handle.seek(300 * 2**20)
        assert handle.read(6000) == b"middle" * 1000
        handle.seek(size - 5)
        assert handle.read() == b"tail!"


def test_a_copy_of_a_file_onto_itself_leaves_it_as_it_is(tmp_path: Path) -> None:
    path = _write(tmp_path / "root" / "a.bin")
    before = path.stat()
    store = _store(tmp_path / "root")
    assert store.copy("a.bin", store, "a.bin").ok
    assert path.read_bytes() == MODEL
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.bin"]


@pytest.mark.parametrize("moving", [False, True], ids=["copy", "move"])
def test_a_copy_to_another_filesystem_still_works(
    tmp_path: Path, other_filesystem: Path, moving: bool
) -> None:
    source = _write(tmp_path / "root" / "runs/a/model.safetensors")
    result = _store(tmp_path / "root").copy(
        "runs/a/model.safetensors", _store(other_filesystem), "q/model.safetensors", moving=moving
    )
    assert result.ok, result.error
    copied = other_filesystem / "q" / "model.safetensors"
    assert copied.read_bytes() == MODEL
    assert copied.stat().st_mtime_ns == source.stat().st_mtime_ns
    assert stat.S_IMODE(copied.stat().st_mode) == 0o640
    assert not [p for p in copied.parent.iterdir() if p.name.endswith(".tmp")]
    _edit_in_place(copied)
    assert source.read_bytes() == MODEL
    # and back again
    back = _store(other_filesystem).copy(
        "q/model.safetensors", _store(tmp_path / "root"), "back/model.safetensors"
    )
    assert back.ok, back.error
    assert (tmp_path / "root" / "back" / "model.safetensors").read_bytes()[:9] == b"CORRUPTED"
