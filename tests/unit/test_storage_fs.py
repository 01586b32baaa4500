"""FsspecStore on local disk and memory://, plus URL normalization and open_store."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import fsspec
import pytest

from governance.errors import AccessDeniedError, ArgumentError, NoSuchRootError, StorageError
from governance.storage import normalize_url, open_store, typed_url
from governance.storage.base import Store
from governance.storage.errors import KeyNotFoundError
from governance.storage.fs import FsspecStore, _open_filesystem


def write(root: Path, key: str, data: bytes = b"x") -> Path:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def listing(store: Store, exclude: tuple[str, ...] = ()) -> dict[str, int]:
    return {o.key: o.size for o in store.list(exclude)}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    write(root, "a.txt", b"aaa")
    write(root, "run 1/ckpt-100/model.safetensors", b"w" * 10)
    write(root, "run 1/ckpt-100/optimizer.pt", b"o" * 20)
    write(root, "ünï/データ.bin", b"u" * 5)
    write(root, "quarantine/old/model.pt", b"q")
    (root / "empty-dir" / "nested-empty").mkdir(parents=True)
    return root


@pytest.fixture
def memory_root() -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    base = f"/govern-{uuid.uuid4().hex[:8]}"
    fs.mkdir(base)
    yield f"memory://{base.lstrip('/')}/"
    if fs.exists(base):
        fs.rm(base, recursive=True)


# -- normalize_url / open_store ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket", "s3://bucket/"),
        ("s3://bucket/", "s3://bucket/"),
        ("s3://bucket/runs/a", "s3://bucket/runs/a/"),
        ("s3://bucket/runs/a/", "s3://bucket/runs/a/"),
        # slashes are bytes of a key: never dropped, or a root would name a wider one
        ("s3://bucket//", "s3://bucket//"),  # keys under "/", not the whole bucket
        ("s3://bucket//abs", "s3://bucket//abs/"),
        ("s3://bucket/runs//", "s3://bucket/runs//"),  # not all of runs/
        ("s3a://bucket/x", "s3://bucket/x/"),
        ("S3://bucket/x", "s3://bucket/x/"),
        ("gs://bucket/p", "gs://bucket/p/"),
        ("memory://scratch/x", "memory://scratch/x/"),
        ("/data/ckpts", "file:///data/ckpts/"),
        ("/data/ckpts/../runs/", "file:///data/runs/"),
        ("file:///data/ckpts", "file:///data/ckpts/"),
        ("file://localhost/data", "file:///data/"),
        ("file:/data/ckpts", "file:///data/ckpts/"),  # RFC 8089's form without a host
        ("file:////data/ckpts", "file:///data/ckpts/"),  # (POSIX keeps `//`: one root, 2 URLs)
        ("//data/ckpts", "file:///data/ckpts/"),
        ("/", "file:///"),
    ],
)
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


def test_normalize_relative_path_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_url("ckpts/run 1") == f"file://{tmp_path}/ckpts/run 1/"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "s3://",
        "s3:///prefix",
        "s3://my bucket/x",
        "nosuchscheme://x",
        "file://host/x",
        "s3:/bucket/x",  # read as the local folder `s3:/bucket/x`, relative: never meant
        "file:data/x",
    ],
)
def test_normalize_rejects_unusable_urls_naming_them(url: str) -> None:
    with pytest.raises(ArgumentError) as info:
        normalize_url(url)
    assert repr(url) in str(info.value)


def test_open_store_picks_backends(tmp_path: Path) -> None:
    from governance.storage.s3 import S3Store

    assert isinstance(open_store("s3://bucket/p"), S3Store)
    fs_s3 = open_store("s3://bucket/p", backend="fsspec", endpoint_url="http://127.0.0.1:9")
    assert isinstance(fs_s3, FsspecStore)
    assert fs_s3.supports_storage_classes
    local = open_store(str(tmp_path))
    assert isinstance(local, FsspecStore)
    assert local.url == f"file://{tmp_path}/"
    assert not local.supports_storage_classes
    assert not local.supports_versioning
    assert isinstance(local, Store)


@pytest.mark.parametrize(
    ("url", "kwargs"),
    [
        ("/x", {"backend": "boto"}),
        ("/x", {"backend": "s3"}),
        ("/x", {"concurrency": 0}),
    ],
)
def test_open_store_rejects_bad_options(url: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ArgumentError):
        open_store(url, **kwargs)  # type: ignore[arg-type]


# -- local listing ----------------------------------------------------------------------


def test_lists_nested_unicode_and_spaces_with_relative_keys(tree: Path) -> None:
    store = open_store(str(tree))
    assert listing(store) == {
        "a.txt": 3,
        "run 1/ckpt-100/model.safetensors": 10,
        "run 1/ckpt-100/optimizer.pt": 20,
        "ünï/データ.bin": 5,
        "quarantine/old/model.pt": 1,
    }
    assert store.uri("run 1/ckpt-100/optimizer.pt") == f"file://{tree}/run 1/ckpt-100/optimizer.pt"


def test_objects_carry_mtime_token_and_utc_time(tree: Path) -> None:
    obj = next(o for o in open_store(str(tree)).list() if o.key == "a.txt")
    st = os.stat(tree / "a.txt")
    assert obj.etag == f"mtime:{st.st_mtime_ns}"
    assert obj.last_modified.tzinfo is not None
    assert obj.last_modified.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert abs(obj.last_modified.timestamp() - st.st_mtime) < 1e-3
    assert obj.storage_class is None
    assert obj.upload_id == ""


def test_mtime_token_changes_when_a_file_is_rewritten(tmp_path: Path) -> None:
    path = write(tmp_path, "ckpt/model.pt", b"v1")
    store = open_store(str(tmp_path))
    before = {o.key: o.etag for o in store.list()}["ckpt/model.pt"]
    old_ns = os.stat(path).st_mtime_ns
    path.write_bytes(b"v2")
    # Coarse filesystem clocks can give a rewrite within the same tick the old mtime: move
    # it forward explicitly so the test is about the token, not the clock.
    os.utime(path, ns=(old_ns + 1_000_000, old_ns + 1_000_000))
    after = {o.key: o.etag for o in store.list()}["ckpt/model.pt"]
    assert before != after == f"mtime:{old_ns + 1_000_000}"
    assert store.head(["ckpt/model.pt"])["ckpt/model.pt"].etag == after


def test_empty_root_and_empty_dirs_list_nothing(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    store = open_store(str(tmp_path))
    store.check()
    assert list(store.list()) == []


def test_exclude_prefixes_skip_subtrees_without_entering_them(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered: list[str] = []
    real_scandir = os.scandir

    def recording_scandir(path: str) -> object:
        entered.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", recording_scandir)
    store = open_store(str(tree))
    keys = listing(store, ("quarantine/", "run 1/ckpt-100/opt"))
    assert set(keys) == {"a.txt", "run 1/ckpt-100/model.safetensors", "ünï/データ.bin"}
    assert not any("quarantine" in p for p in entered)
    assert any(p.endswith("ckpt-100/") for p in entered)  # a partial exclude still descends


def test_exclude_prefix_without_slash_is_a_key_prefix(tree: Path) -> None:
    assert set(listing(open_store(str(tree)), ("run",))) == {
        "a.txt",
        "ünï/データ.bin",
        "quarantine/old/model.pt",
    }


def test_symlinks_are_neither_followed_nor_listed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "real/file.bin", b"12345")
    (root / "link-to-file").symlink_to(root / "real" / "file.bin")
    (root / "link-to-dir").symlink_to(root / "real")
    (root / "loop").symlink_to(root)
    assert listing(open_store(str(root))) == {"real/file.bin": 5}


def test_missing_root_raises_no_such_root(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "missing"))
    with pytest.raises(NoSuchRootError) as info:
        store.check()
    assert str(tmp_path / "missing") in str(info.value)
    with pytest.raises(NoSuchRootError):
        list(store.list())


def test_root_that_is_a_file_raises_no_such_root(tmp_path: Path) -> None:
    write(tmp_path, "file")
    store = open_store(str(tmp_path / "file"))
    with pytest.raises(NoSuchRootError, match="not a directory"):
        store.check()
    with pytest.raises(NoSuchRootError):
        list(store.list())


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unreadable_root_and_subdir_raise_access_denied(tmp_path: Path) -> None:
    write(tmp_path, "locked/inner/f")
    (tmp_path / "locked" / "inner").chmod(0)
    try:
        with pytest.raises(AccessDeniedError, match="inner"):
            list(open_store(str(tmp_path)).list())
        with pytest.raises(AccessDeniedError):
            open_store(str(tmp_path / "locked" / "inner")).check()
    finally:
        (tmp_path / "locked" / "inner").chmod(0o755)


def test_permission_error_while_walking_is_access_denied(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs even as root (which ignores chmod): the OS refusal is simulated at scandir."""
    real_scandir = os.scandir

    def refusing_scandir(path: str) -> object:
        if "ckpt-100" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refusing_scandir)
    with pytest.raises(AccessDeniedError, match="run 1/ckpt-100/") as info:
        list(open_store(str(tree)).list())
    assert str(tree) in str(info.value)


# -- local reads and mutations ----------------------------------------------------------


def test_head_reports_files_only(tree: Path) -> None:
    store = open_store(str(tree))
    states = store.head(["a.txt", "missing.txt", "run 1", "ünï/データ.bin"])
    assert set(states) == {"a.txt", "ünï/データ.bin"}
    assert states["a.txt"].size == 3
    assert states["a.txt"].etag == f"mtime:{os.stat(tree / 'a.txt').st_mtime_ns}"
    assert states["a.txt"].last_modified.tzinfo is not None


def test_read_bytes_truncates_and_reports_missing(tree: Path) -> None:
    store = open_store(str(tree))
    assert store.read_bytes("run 1/ckpt-100/optimizer.pt", 4) == b"oooo"
    assert store.read_bytes("a.txt", 100) == b"aaa"
    assert store.read_bytes("a.txt", 0) == b""
    with pytest.raises(KeyNotFoundError) as info:
        store.read_bytes("nope.json", 10)
    assert isinstance(info.value, FileNotFoundError)
    assert "nope.json" in str(info.value)


def test_delete_is_idempotent_and_prunes_emptied_dirs(tree: Path) -> None:
    store = open_store(str(tree))
    keys = ["run 1/ckpt-100/model.safetensors", "run 1/ckpt-100/optimizer.pt", "never-was"]
    results = store.delete(keys)
    assert [(r.key, r.ok) for r in results] == [(k, True) for k in keys]
    assert not (tree / "run 1").exists()  # emptied checkpoint and run dirs are gone
    assert tree.is_dir()
    assert (tree / "empty-dir").is_dir()  # untouched: not emptied by this delete
    assert store.delete(keys[:1])[0].ok  # again: still fine


def test_delete_reports_per_key_failure(tree: Path) -> None:
    results = open_store(str(tree)).delete(["run 1", "a.txt"])  # a directory is not a key
    assert [r.ok for r in results] == [False, True]
    assert results[0].error


@pytest.mark.parametrize("key", ["../outside.txt", "a/../../outside.txt", "/etc/passwd", ""])
def test_keys_that_would_leave_the_root_are_refused(tmp_path: Path, key: str) -> None:
    outside = write(tmp_path, "outside.txt")
    store = open_store(str(tmp_path / "root" / "sub"))
    (tmp_path / "root" / "sub").mkdir(parents=True)
    [result] = store.delete([key])
    assert not result.ok
    assert "not a key under this root" in (result.error or "")
    assert outside.exists()
    assert not store.copy(key, store, "x").ok
    with pytest.raises(StorageError):
        store.head([key])


def test_delete_root_files_keeps_root(tmp_path: Path) -> None:
    write(tmp_path, "only.bin")
    assert open_store(str(tmp_path)).delete(["only.bin"])[0].ok
    assert tmp_path.is_dir()


def test_copy_within_local_creates_parents_and_keeps_mtime(tree: Path, tmp_path: Path) -> None:
    source = open_store(str(tree))
    dest = open_store(str(tmp_path / "archive"))
    result = source.copy("run 1/ckpt-100/optimizer.pt", dest, "deep/er/opt.pt")
    assert result.ok, result.error
    copied = tmp_path / "archive" / "deep" / "er" / "opt.pt"
    assert copied.read_bytes() == b"o" * 20
    assert os.stat(copied).st_mtime_ns == os.stat(tree / "run 1/ckpt-100/optimizer.pt").st_mtime_ns
    assert not [p for p in copied.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_copy_clears_what_a_killed_copy_to_its_target_left(tree: Path, tmp_path: Path) -> None:
    """A copy killed between its link and its rename (a SIGKILLed apply) leaves its
    temporary file; the next copy to the same target (the resumed apply's) removes it."""
    source = open_store(str(tree))
    dest = open_store(str(tmp_path / "q"))
    folder = tmp_path / "q" / "deep"
    folder.mkdir(parents=True)
    (folder / ".opt.pt.govern.tmp").write_bytes(b"half")  # what the killed copy left
    assert source.copy("run 1/ckpt-100/optimizer.pt", dest, "deep/opt.pt").ok
    assert sorted(p.name for p in folder.iterdir()) == ["opt.pt"]
    assert (folder / "opt.pt").read_bytes() == b"o" * 20


def test_copy_refuses_storage_class_and_reports_missing(tree: Path) -> None:
    store = open_store(str(tree))
    refused = store.copy("a.txt", store, "b.txt", storage_class="GLACIER")
    assert not refused.ok
    assert "storage classes" in (refused.error or "")
    missing = store.copy("nope", store, "b.txt")
    assert not missing.ok
    assert "nope" in (missing.error or "")
    assert not (tree / "b.txt").exists()


def test_abort_upload_is_not_applicable(tree: Path) -> None:
    result = open_store(str(tree)).abort_upload("a.txt", "upload-1")
    assert not result.ok
    assert "multipart" in (result.error or "")


# -- memory:// (the generic fsspec path) ------------------------------------------------


def test_memory_listing_excludes_and_times(memory_root: str) -> None:
    fs = fsspec.filesystem("memory")
    base = fs._strip_protocol(memory_root)
    fs.pipe({f"{base}/a/b.bin": b"12", f"{base}/a/c d.txt": b"1", f"{base}/q/x": b"123"})
    store = open_store(memory_root)
    store.check()
    objects = {o.key: o for o in store.list()}
    assert {k: o.size for k, o in objects.items()} == {"a/b.bin": 2, "a/c d.txt": 1, "q/x": 3}
    obj = objects["a/b.bin"]
    assert obj.etag.startswith("mtime:")
    assert obj.last_modified.tzinfo is not None
    assert abs((datetime.now(UTC) - obj.last_modified).total_seconds()) < 60
    assert set(listing(store, ("q/",))) == {"a/b.bin", "a/c d.txt"}
    assert store.head(["a/b.bin", "missing"])["a/b.bin"].size == 2
    assert store.read_bytes("q/x", 2) == b"12"


def test_memory_missing_root_raises(memory_root: str) -> None:
    store = open_store(memory_root + "missing/")
    with pytest.raises(NoSuchRootError):
        store.check()
    with pytest.raises(NoSuchRootError):
        list(store.list())


def test_copy_across_filesystems_streams_bytes(tree: Path, memory_root: str) -> None:
    local = open_store(str(tree))
    memory = open_store(memory_root)
    assert local.copy("ünï/データ.bin", memory, "x/y.bin").ok
    assert memory.read_bytes("x/y.bin", 100) == b"u" * 5
    assert memory.copy("x/y.bin", local, "back/y.bin").ok
    assert (tree / "back" / "y.bin").read_bytes() == b"u" * 5
    assert [r.ok for r in memory.delete(["x/y.bin", "x/y.bin"])] == [True, True]
    assert listing(memory) == {}


def test_copy_of_a_sparse_file_on_one_filesystem_takes_no_space(tmp_path: Path) -> None:
    """Quarantining a sparse 64 GiB checkpoint must not materialise it (a hard link)."""
    big = tmp_path / "root" / "ckpt" / "optimizer.pt"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(64 * 2**30)
    source = open_store(str(tmp_path / "root"))
    quarantine = open_store(str(tmp_path / "quarantine"))
    assert source.copy("ckpt/optimizer.pt", quarantine, "p-1/ckpt/optimizer.pt").ok
    copied = tmp_path / "quarantine" / "p-1" / "ckpt" / "optimizer.pt"
    assert copied.stat().st_size == 64 * 2**30
    assert copied.stat().st_blocks * 512 < 2**20  # still sparse: nothing was written
    assert source.delete(["ckpt/optimizer.pt"])[0].ok
    assert copied.stat().st_size == 64 * 2**30  # the quarantined copy outlives the source


def test_local_mutations_refuse_a_way_through_a_symbolic_link(tmp_path: Path) -> None:
    """Whatever apply checked before, the store itself never deletes, reads for a copy or
    writes through a folder below the root that is a link (a checkpoint moved elsewhere
    and linked back): `head` calls such a key absent, and each mutation fails by key."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "runs").mkdir(parents=True)
    outside.mkdir()
    (outside / "w.bin").write_bytes(b"weights")
    (root / "runs" / "ck").symlink_to(outside, target_is_directory=True)
    (root / "plain.bin").write_bytes(b"x")
    store = open_store(normalize_url(str(root)))
    assert isinstance(store, FsspecStore)

    assert store.head(["runs/ck/w.bin", "plain.bin"]).keys() == {"plain.bin"}
    [result] = store.delete(["runs/ck/w.bin"])
    assert not result.ok
    assert f"its folder {root}/runs/ck is a symbolic link" in (result.error or "")
    assert (outside / "w.bin").read_bytes() == b"weights"
    copied = store.copy("runs/ck/w.bin", store, "copies/w.bin")
    assert not copied.ok
    assert "symbolic link" in (copied.error or "")
    assert not (root / "copies" / "w.bin").exists()
    written = store.copy("plain.bin", store, "runs/ck/new.bin")
    assert not written.ok
    assert not (outside / "new.bin").exists()
    with (root / "plain.bin").open("rb") as stream, pytest.raises(StorageError, match="link"):
        store.put_stream("runs/ck/streamed.bin", stream)
    assert sorted(os.listdir(outside)) == ["w.bin"]


def test_a_filesystem_url_gives_its_host_and_port_and_fails_in_one_clear_error() -> None:
    """`ftp://host:port/path` opened fsspec's FTP filesystem without the host the URL
    names (a TypeError traceback, exit 1); one that needs what no URL gives (GitHub's org
    and repo) did too. The URL's own host and port are used now (a closed port on this
    machine refuses: the error names the root), and what cannot be made is a bad URL."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StorageError, match=r"^ftp://127\.0\.0\.1:\d+/data/: .*refused") as err:
        open_store(normalize_url(f"ftp://127.0.0.1:{port}/data"))
    assert not isinstance(err.value, ArgumentError)
    with pytest.raises(ArgumentError, match="github:// filesystem cannot be opened"):
        open_store(normalize_url("github://x/y"))
    # a server that answers nothing (a timeout: no errno) is unreachable, not a bad URL
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepts, never greets
        quiet = silent.getsockname()[1]
        with pytest.raises(StorageError, match="unreachable") as timed_out:
            _open_filesystem(f"ftp://127.0.0.1:{quiet}/x/", "ftp", {"timeout": 1})
    assert not isinstance(timed_out.value, ArgumentError)
    # an archive filesystem given no archive (it opened the current folder): exit 2, not
    # "IsADirectoryError" as a store that failed
    with pytest.raises(ArgumentError, match=r"zip:// filesystem cannot be opened .*Is a dir"):
        open_store(normalize_url("zip://x"))


def test_dot_dot_after_a_symbolic_link_is_read_as_the_os_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `deep -> real/runs`, the OS reads `deep/..` as `real/`: the root was taken as
    the link's own folder (`abspath` drops `..` as text), a wider root holding folders the
    user never named. A link with no `..` after it keeps the name given."""
    (tmp_path / "real" / "runs").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "deep").symlink_to(tmp_path / "real" / "runs", target_is_directory=True)
    real = (tmp_path / "real").as_uri() + "/"
    assert normalize_url(f"{tmp_path}/deep/..") == real
    assert normalize_url(f"file://{tmp_path}/deep/../x") == real + "x/"
    monkeypatch.chdir(tmp_path)
    assert normalize_url("deep/..") == real
    assert normalize_url("deep") == (tmp_path / "deep").as_uri() + "/"  # (as given)
    assert normalize_url(f"{tmp_path}/real/../other") == (tmp_path / "other").as_uri() + "/"


def test_a_root_path_that_is_not_utf8_is_a_clear_error() -> None:
    """Such a name inside a root is passed over; as the root itself it crashed when its
    row was written (UnicodeEncodeError)."""
    with pytest.raises(ArgumentError, match=r"'/tmp/d\\\\xe9': the path is not valid UTF-8"):
        normalize_url(os.fsdecode(b"/tmp/d\xe9"))


def test_a_leading_slash_of_an_s3_prefix_is_part_of_it() -> None:
    """In a bucket `/` is a byte of the key: `s3://b//abs/` names the keys under `/abs/`
    (dropped, it named `abs/`, another root, which listed nothing)."""
    assert normalize_url("s3://bkt//abs") == "s3://bkt//abs/"
    # so are trailing ones but the folder's own: `abs//` is not all of `abs/`
    assert normalize_url("s3://bkt/abs//") == "s3://bkt/abs//"
    assert normalize_url("s3a://bkt") == "s3://bkt/"


def test_a_files_time_reads_alike_from_its_listing_and_its_head(tmp_path: Path) -> None:
    """The listing truncates nanoseconds to microseconds; `head` (and a local copy's
    answer, as restore records it) rounded the float `st_mtime`: a restored file read as
    changed to the next scan whenever its time rounded up."""
    from datetime import timedelta

    (tmp_path / "w.bin").write_bytes(b"w")
    ns = 1_765_000_000_241_654_999  # .241654999 s: rounds up, truncates down
    os.utime(tmp_path / "w.bin", ns=(ns, ns))
    store = open_store(normalize_url(str(tmp_path)))
    want = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)
    [listed] = [i for i in store.list() if i.key == "w.bin"]
    assert listed.last_modified == want
    assert store.head(["w.bin"])["w.bin"].last_modified == want
    copied = store.copy("w.bin", store, "copy/w.bin")
    assert copied.last_modified == want  # (a copy keeps the source's time)


def test_a_password_in_a_root_url_is_refused_and_never_echoed() -> None:
    """A root's URL is stored in the catalog and printed in every report: with fsspec
    taking the URL's user and password (ftp://u:secret@host/), the secret would be too."""
    with pytest.raises(ArgumentError, match=r"ftp://u:\*\*\*@\.\.\.: has a password") as err:
        normalize_url("ftp://u:secret@127.0.0.1:21/data")
    assert "secret" not in str(err.value)
    assert normalize_url("ftp://u@127.0.0.1:21/data") == "ftp://u@127.0.0.1:21/data/"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("s3://b/runs/r1/checkpoint-4000/", "s3://b/runs/r1/checkpoint-4000/"),
        ("S3A://b/runs/x.pt", "s3://b/runs/x.pt"),
        ("/data/runs/r1/checkpoint-4000/", "file:///data/runs/r1/checkpoint-4000/"),
        ("/data/runs/x.pt", "file:///data/runs/x.pt"),
        ("file:///data/x.pt", "file:///data/x.pt"),
        ("file://localhost/data/x.pt", "file:///data/x.pt"),
        ("file:/data/x.pt", "file:///data/x.pt"),
        ("file:////data/x.pt", "file:///data/x.pt"),
        ("//data/runs/", "file:///data/runs/"),
    ],
)
def test_typed_url_keeps_what_was_typed_as_a_full_url(typed: str, expected: str) -> None:
    assert typed_url(typed) == expected


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("s3:/b/runs/x.pt", "did you mean 's3://b/runs/x.pt'?"),
        ("file://data/x.pt", "'data' would be a host"),
        ("file:data/x.pt", "file URLs need an absolute path"),
        ("nosuch://b/x", "unknown scheme 'nosuch'"),
        ("", "empty"),
    ],
)
def test_typed_url_names_a_url_that_cannot_be_one_as_typed(typed: str, why: str) -> None:
    """`explain s3:/b/x` was read as a local path under the current folder, and
    `file://data/x` lost its "host": the error then named another URL than the one typed."""
    with pytest.raises(ArgumentError) as info:
        typed_url(typed)
    assert repr(typed) in str(info.value)
    assert why in str(info.value)


def test_a_name_near_the_length_limit_can_be_copied_and_written(tmp_path: Path) -> None:
    """The temporary name beside a target (`.NAME.govern.tmp`) passed 255 bytes for any
    name over 242: its quarantine copy failed (ENAMETOOLONG) on every apply."""
    import io

    from governance.storage import open_store

    name = "c" * 250 + ".bin"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_bytes(b"weights")
    source = open_store((tmp_path / "src").as_uri() + "/")
    dest = open_store((tmp_path / "dst").as_uri() + "/")
    for if_absent, key in ((False, name), (True, "sub/" + name)):
        result = source.copy(name, dest, key, size=7, if_absent=if_absent)
        assert result.ok, result.error
        assert (tmp_path / "dst" / key).read_bytes() == b"weights"
    dest.put_stream("put/" + name, io.BytesIO(b"back"), if_absent=True)
    assert (tmp_path / "dst" / "put" / name).read_bytes() == b"back"
    assert not list((tmp_path / "dst").rglob("*.tmp"))  # nothing left beside them
