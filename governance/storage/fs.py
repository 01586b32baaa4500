"""FsspecStore: a Store over any fsspec filesystem.

Local disk is walked with `os.scandir` directory by directory (`local_walk`; fsspec's
`find` builds the whole listing in memory and its per-file overhead is several times a
plain scandir), in a child process when the scanner asks; every other protocol streams
through `fs.walk`, one directory per listing call.
Symbolic links are neither followed nor listed: following them could count (and delete)
the same bytes twice, or escape the root. The scanner's listing of local disk reports the
links it met (`base.Symlinks`), so that plans can leave their targets alone. Files and
folders whose names are not valid UTF-8 are passed over too, in every local listing (a
folder's, as apply makes, included): no key can hold such a name, so nothing acts on them.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import os
import shutil
import socket
import stat
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from governance.errors import ArgumentError, NoSuchRootError, StorageError
from governance.storage import BUCKET_SCHEMES, WritableStore
from governance.storage.base import (
    CompactRow,
    Encryption,
    KeyResult,
    ListingRow,
    ObjectInfo,
    ObjectLock,
    ObjectState,
    Store,
    Symlinks,
    etags_for,
    row_from_info,
)
from governance.storage.errors import KeyNotFoundError, KeyOccupiedError, translate
from governance.storage.local_walk import (
    TreeWalk,
    WalkProcess,
    can_walk_beside,
    note_link,
    walk_tree,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TIME_FIELDS = ("LastModified", "last_modified", "mtime", "modified", "updated", "created")
_ETAG_FIELDS = ("ETag", "etag", "md5Hash")
_COPY_CHUNK = 8 * 1024 * 1024
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})  # a write's errors: the target's


class FsspecStore:
    """A root on any fsspec filesystem (`file://`, `memory://`, `s3://` via s3fs, gs, az...).

    `url` must already be normalized (see `governance.storage.normalize_url`).
    """

    supports_versioning: bool = False
    follows_links: bool = False
    """True for a location holding govern's own copies (a quarantine, an archive): a
    folder of it an admin moved elsewhere and linked back is followed. A root's never is
    (`_linked_folder`): the scan never listed what lies behind a link."""

    def __init__(
        self,
        url: str,
        *,
        fs: fsspec.AbstractFileSystem | None = None,
        storage_options: Mapping[str, Any] | None = None,
        concurrency: int = 16,
    ) -> None:
        self.url = url
        self._protocol = url.split("://", 1)[0]
        if fs is None:
            fs = _open_filesystem(url, self._protocol, storage_options)
        self._fs = fs
        self._local = isinstance(self._fs, LocalFileSystem)
        self._base = self._fs._strip_protocol(url).rstrip("/") + "/"
        self._concurrency = concurrency
        self.supports_storage_classes = self._protocol == "s3"

    def __repr__(self) -> str:
        return f"FsspecStore({self.url!r})"

    def uri(self, key: str) -> str:
        """The full URL of a key under this root."""
        return self.url + key

    def _path(self, key: str) -> str:
        """The filesystem path of a key; refuses keys that would leave the root.

        On filesystems `..` and a leading '/' change the meaning of a path, so a corrupt
        or crafted key must never reach `unlink`. (In object stores they are plain bytes.)
        """
        if self._protocol not in BUCKET_SCHEMES and (
            not key or key.startswith("/") or "/../" in f"/{key}/" or "\x00" in key
        ):
            raise StorageError(self.url, f"{key!r} is not a key under this root")
        return self._base + key

    # -- listing -------------------------------------------------------------------------

    def list(self, exclude_prefixes: Sequence[str] = ()) -> Iterator[ObjectInfo]:
        """Every file under the root, streamed; excluded subtrees are never entered."""
        excludes = tuple(p for p in exclude_prefixes if p)
        walker = self._list_local(excludes) if self._local else self._walk_fsspec(excludes)
        try:
            yield from walker
        except StorageError:
            raise
        except Exception as exc:
            raise translate(self.url, exc) from exc

    def list_rows(self, exclude_prefixes: Sequence[str] = ()) -> Iterator[ListingRow]:
        """The listing as catalog staging rows (the scanner's fast path: no datetime or
        ObjectInfo per file on local disk; times are integer microseconds)."""
        excludes = tuple(p for p in exclude_prefixes if p)
        if not self._local:
            yield from (row_from_info(i) for i in self.list(excludes))
            return
        try:
            for key, size, etag, micros in self._walk_local(excludes):
                yield (key, "", size, etag, micros, None, None, None)
        except StorageError:
            raise
        except Exception as exc:
            raise translate(self.url, exc) from exc

    def list_compact_rows(
        self, exclude_prefixes: Sequence[str] = ()
    ) -> Iterator[CompactRow] | None:
        """Local disk only: (key, size, mtime token, µs) rows, the scanner's fastest path,
        walked by a child process when there is a second CPU (`local_walk.WalkProcess`).
        Either way the rows carry the symbolic links met (`base.listing_symlinks`)."""
        if not self._local:
            return None
        excludes = tuple(p for p in exclude_prefixes if p)
        if can_walk_beside():
            try:
                return WalkProcess(self._base, self.url, excludes)
            except OSError:
                pass  # no interpreter to start (an embedded or frozen Python): walk here
        symlinks = Symlinks()
        return TreeWalk(self._compact(excludes, symlinks), symlinks)

    def _compact(self, excludes: tuple[str, ...], symlinks: Symlinks) -> Iterator[CompactRow]:
        try:
            yield from walk_tree(self._base, self.url, excludes, symlinks)
        except StorageError:
            raise
        except Exception as exc:
            raise translate(self.url, exc) from exc

    def links_in(self, folder: str) -> builtins.list[tuple[str, str]]:
        """The symbolic links right in `folder` (a key ending in '/', '' the root) that
        point inside the root, as a scan notes them (`local_walk.note_link`): (link key,
        target key; a link whose name is not valid UTF-8 under its escaped name). Local
        disk only (elsewhere, and for a folder gone: none); one directory read, no walk."""
        if not self._local:
            return []
        symlinks = Symlinks()
        real_root = os.path.realpath(self._base)
        try:
            with os.scandir(self._base + folder) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        note_link(symlinks, folder + entry.name, entry.path, real_root)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise translate(self.url, exc) from exc
        return symlinks.inside

    def _list_local(self, excludes: tuple[str, ...]) -> Iterator[ObjectInfo]:
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        for key, size, etag, micros in self._walk_local(excludes):
            yield ObjectInfo(key, size, epoch + timedelta(microseconds=micros), etag)

    def _walk_local(self, excludes: tuple[str, ...]) -> Iterator[CompactRow]:
        return walk_tree(self._base, self.url, excludes)

    def _walk_fsspec(self, excludes: tuple[str, ...]) -> Iterator[ObjectInfo]:
        """`fs.walk` (one directory at a time) with excluded directories pruned in place."""
        root_listed = False

        def on_error(exc: OSError) -> None:
            if isinstance(exc, FileNotFoundError) and root_listed:
                return  # a directory vanished while we walked
            raise exc

        try:
            walk = self._fs.walk(self._base.rstrip("/"), detail=True, on_error=on_error)
            for dirpath, dirs, files in walk:
                root_listed = True
                rel = (dirpath.rstrip("/") + "/")[len(self._base) :]
                for name in [d for d in dirs if excludes and (rel + d + "/").startswith(excludes)]:
                    del dirs[name]
                for name, info in files.items():
                    key = rel + name
                    if not name or (excludes and key.startswith(excludes)):
                        continue
                    yield self._to_object(key, info)
        except FileNotFoundError:
            if root_listed:
                raise
            self.check()  # raises unless the root is an empty prefix of an existing bucket

    def _to_object(self, key: str, info: Mapping[str, Any]) -> ObjectInfo:
        size = int(info.get("size") or 0)
        modified = _info_time(info)
        if modified is None:
            raise StorageError(self.url, f"{key}: the backend reports no modification time")
        etag = next((str(info[f]).strip('"') for f in _ETAG_FIELDS if info.get(f)), "")
        if not etag:
            etag = f"mtime:{(modified - _EPOCH) // timedelta(microseconds=1) * 1000}"
        storage_class = info.get("StorageClass") if self.supports_storage_classes else None
        return ObjectInfo(
            key=key,
            size=size,
            last_modified=modified,
            etag=etag,
            storage_class=str(storage_class) if storage_class else None,
            version_id=info.get("VersionId") or None,
        )

    # -- reads ---------------------------------------------------------------------------

    def check(self) -> None:
        """Raise NoSuchRootError / AccessDeniedError unless the root can be listed."""
        try:
            if self._local:
                self._check_local()
            elif not self._fs.isdir(self._base):
                if self._fs.exists(self._base.rstrip("/")):
                    raise NoSuchRootError(self.url, "is not a directory")
                if self._protocol not in BUCKET_SCHEMES:
                    raise NoSuchRootError(self.url, "does not exist")
                # Object stores have no directories: an empty prefix of a bucket is fine.
                self._fs.info(self._base.split("/", 1)[0])
        except StorageError:
            raise
        except Exception as exc:
            raise translate(self.url, exc) from exc

    def _check_local(self) -> None:
        try:
            mode = os.stat(self._base.rstrip("/") or "/").st_mode
        except FileNotFoundError:
            raise NoSuchRootError(self.url, "does not exist") from None
        if not stat.S_ISDIR(mode):
            raise NoSuchRootError(self.url, "is not a directory")
        with os.scandir(self._base) as entries:  # PermissionError -> AccessDeniedError
            next(entries, None)

    def read_bytes(self, key: str, max_bytes: int) -> bytes:
        """At most `max_bytes` of a file; a missing key raises KeyNotFoundError."""
        if max_bytes <= 0:
            return b""
        path = self._path(key)
        try:
            if self._local:
                with open(path, "rb") as handle:
                    return handle.read(max_bytes)
            data = self._fs.cat_file(path, start=0, end=max_bytes)
            return bytes(data)
        except (FileNotFoundError, IsADirectoryError):
            raise KeyNotFoundError(self.url, f"{key}: no such key") from None
        except Exception as exc:
            raise translate(self.url, exc) from exc

    def _linked_folder(self, path: str, seen: dict[str, bool] | None = None) -> str | None:
        """The first folder between the root and the file at `path` that is a symbolic
        link, or None. The scan neither lists nor follows links, so a key whose way passes
        through one (a checkpoint folder moved to another disk and linked back after the
        plan) is not the file the plan saw: acting through it would reach files outside the
        root, or others inside it. `seen` remembers folders within one call."""
        if not self._local or self.follows_links:
            return None
        base = self._base
        end = path.find("/", len(base))
        while end != -1:
            folder = path[:end]
            linked = seen.get(folder) if seen is not None else None
            if linked is None:
                try:
                    linked = stat.S_ISLNK(os.lstat(folder).st_mode)
                except (FileNotFoundError, NotADirectoryError):
                    return None  # nothing there to follow
                if seen is not None:
                    seen[folder] = linked
            if linked:
                return folder
            end = path.find("/", end + 1)
        return None

    def _refuse_links(self, key: str, path: str, seen: dict[str, bool] | None = None) -> None:
        """Raise when the way to `path` passes through a symbolic link (`_linked_folder`)."""
        folder = self._linked_folder(path, seen)
        if folder is not None:
            raise StorageError(
                self.url,
                f"{key}: its folder {folder} is a symbolic link; govern neither follows "
                "links nor acts through them",
            )

    def head(self, keys: Sequence[str]) -> dict[str, ObjectState]:
        """Current state of each existing file (directories, missing keys and keys whose
        way passes through a symbolic link are absent)."""
        if self._local:
            seen: dict[str, bool] = {}
            states = [self._head_one(k, seen) for k in keys]
        elif len(keys) < 2:
            states = [self._head_one(k) for k in keys]
        else:
            with ThreadPoolExecutor(min(self._concurrency, len(keys))) as pool:
                states = list(pool.map(self._head_one, keys))
        return {s.key: s for s in states if s is not None}

    def _head_one(self, key: str, seen: dict[str, bool] | None = None) -> ObjectState | None:
        path = self._path(key)
        try:
            if self._local:
                if self._linked_folder(path, seen) is not None:
                    return None
                st = os.stat(path, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    return None
                return ObjectState(
                    key=key,
                    size=st.st_size,
                    etag=f"mtime:{st.st_mtime_ns}",
                    last_modified=_mtime(st),
                )
            info = self._fs.info(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Exception as exc:
            raise translate(self.url, exc) from exc
        if info.get("type") != "file":
            return None
        obj = self._to_object(key, info)
        return ObjectState(
            key=key,
            size=obj.size,
            etag=obj.etag,
            last_modified=obj.last_modified,
            version_id=obj.version_id,
            storage_class=obj.storage_class,
        )

    # -- tags and object lock ------------------------------------------------------------

    def object_lock_enabled(self) -> bool:
        """Filesystems have no Object Lock. S3 through s3fs: not known here (the boto3
        backend reads it)."""
        if self._protocol == "s3":
            raise StorageError(self.url, "Object Lock is not read through fsspec")
        return False

    def object_tags(self, key: str) -> dict[str, str]:
        """Filesystems have no tags: {}. S3 through s3fs: its `get_tags`."""
        if self._protocol != "s3":
            return {}
        try:
            tags: dict[str, str] = self._fs.get_tags(self._path(key))
        except FileNotFoundError:
            raise KeyNotFoundError(self.url, f"{key}: no such key") from None
        except Exception as exc:
            raise translate(self.url, exc) from exc
        return dict(tags)

    def object_lock(self, key: str) -> ObjectLock:
        """Filesystems have no locks: unlocked. S3 through s3fs: not known here."""
        if self._protocol == "s3":
            raise StorageError(self.url, f"{key}: object lock state is not read through fsspec")
        return ObjectLock()

    # -- mutations -----------------------------------------------------------------------

    def delete(
        self, keys: Sequence[str], etags: Sequence[str | None] | None = None
    ) -> builtins.list[KeyResult]:
        """Remove files; a missing file counts as deleted (retries are idempotent).

        `etags` (parallel to `keys`): on local disk a file whose modification-time token
        (`mtime:<ns>`, its ETag here) is not that one any more was written since the
        caller checked it, and is not removed (its result fails saying so): the file is
        looked at right before it is unlinked. Other filesystems have no conditional
        delete: the caller's check is their guard.

        On local disk, directories left empty by the deletion are removed too (never the
        root), so a deleted checkpoint does not linger as an empty folder.
        """
        results: list[KeyResult] = []
        emptied: set[str] = set()
        seen: dict[str, bool] = {}  # (each folder looked at once in a call)
        for key, etag in zip(keys, etags_for(keys, etags), strict=True):
            try:
                path = self._path(key)
                if self._local:
                    self._refuse_links(key, path, seen)
                    if etag and etag.startswith("mtime:"):
                        now = f"mtime:{os.lstat(path).st_mtime_ns}"
                        if now != etag:
                            error = (
                                f"{self.uri(key)} changed since it was checked (written "
                                "again: its modification time is not the one checked): "
                                "not deleted"
                            )
                            results.append(KeyResult(key, False, error=error))
                            continue
                    os.unlink(path)
                    emptied.add(os.path.dirname(path))
                else:
                    self._fs.rm_file(path)
            except FileNotFoundError:
                pass
            except Exception as exc:
                results.append(KeyResult(key, False, error=str(translate(self.url, exc))))
                continue
            results.append(KeyResult(key, True))
        self._remove_empty_dirs(emptied)
        return results

    def _remove_empty_dirs(self, directories: set[str]) -> None:
        root = self._base.rstrip("/")
        for directory in sorted(directories, key=len, reverse=True):
            while directory.startswith(root + "/"):
                try:
                    os.rmdir(directory)
                except OSError:
                    break  # not empty (or already gone / not ours to remove)
                directory = os.path.dirname(directory)

    def copy(
        self,
        key: str,
        dest: Store,
        dest_key: str,
        storage_class: str | None = None,
        size: int | None = None,
        *,
        moving: bool = False,
        encryption: Encryption | None = None,  # (S3's: a filesystem keeps only the bytes)
        if_absent: bool = False,
    ) -> KeyResult:
        """Same-filesystem copy via the filesystem; otherwise stream the bytes across
        (`size` is not needed here).

        The copy is a file of its own, as an S3 COPY is an object of its own: writing to
        either in place never changes the other (an archive copy, and the quarantine copy
        apply makes of the same source next, must not share their bytes). `moving`: the
        caller removes the source right after, as part of the same operation (restore,
        with a quarantine copy it has checked), so on one local filesystem the copy may
        be a second name for the source's bytes (a hard link: no bytes read or written)
        unless the source has another name already. On local disk the result carries
        the copy's ETag (its mtime token) and time, as an S3 copy's does. `if_absent`:
        see `Store.copy` (on local disk the copy is linked into place, never renamed over
        a file; on other filesystems the key is looked at right before)."""
        if storage_class and not (self.supports_storage_classes and dest.supports_storage_classes):
            return KeyResult(key, False, error=f"storage classes are not supported by {dest.url}")
        written: os.stat_result | None = None
        try:
            if isinstance(dest, FsspecStore) and self._same_filesystem(dest):
                written = self._copy_within(
                    key, dest, dest_key, storage_class, moving, if_absent=if_absent
                )
            elif isinstance(dest, WritableStore):
                with self._open(key) as stream:
                    dest.put_stream(
                        dest_key, stream, storage_class=storage_class, if_absent=if_absent
                    )
            else:
                return KeyResult(key, False, error=f"cannot write to {dest.url}")
        except KeyOccupiedError as exc:
            return KeyResult(key, False, error=str(exc))
        except Exception as exc:
            if self._blames(dest, exc):  # (the destination's folder cannot be made, ...)
                return KeyResult(key, False, error=str(translate(dest.url, exc)))
            if isinstance(exc, FileNotFoundError):
                return KeyResult(key, False, error=f"{self.uri(key)}: no such key")
            return KeyResult(key, False, error=str(translate(self.url, exc)))
        if written is None:
            return KeyResult(key, True)
        return KeyResult(
            key,
            True,
            etag=f"mtime:{written.st_mtime_ns}",
            last_modified=_mtime(written),
        )

    def _blames(self, dest: Store, exc: Exception) -> bool:
        """Whether a failed local copy failed at `dest` (the path the error names lies
        under its folder, deeper than under this root's), so its message names `dest`: a
        file in the way of the quarantine folder is not a missing root."""
        if not (self._local and isinstance(dest, FsspecStore) and dest._local):
            return False
        named = getattr(exc, "filename", None)
        if not isinstance(named, str):
            return False
        mine, theirs = named.startswith(self._base), named.startswith(dest._base)
        return theirs and (not mine or len(dest._base) > len(self._base))

    def _same_filesystem(self, other: FsspecStore) -> bool:
        if type(self._fs) is not type(other._fs):
            return False
        return self._local or self._fs.storage_options == other._fs.storage_options

    def _copy_within(
        self,
        key: str,
        dest: FsspecStore,
        dest_key: str,
        storage_class: str | None,
        moving: bool = False,
        *,
        if_absent: bool = False,
    ) -> os.stat_result | None:
        """The copy on one filesystem; on local disk, what was written (its stat)."""
        source, target = self._path(key), dest._path(dest_key)
        if not self._local:
            if if_absent and dest._holds_file(target):
                raise KeyOccupiedError(dest.uri(dest_key))
            extra = {"StorageClass": storage_class} if storage_class else {}
            self._fs.copy(source, target, **extra)
            return None
        if source == target:  # a copy onto itself (a storage class change): nothing to do
            return None
        self._refuse_links(key, source)
        dest._refuse_links(dest_key, target)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # One temporary name per target: a copy killed before its rename (a SIGKILLed
        # apply) leaves it behind, and the next copy to the target, as a resumed apply
        # makes, clears it instead of leaving a stray file for good.
        temporary = _temporary_name(target, stable=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        try:
            if not (moving and _link_alone(source, temporary)):
                _copy_file(source, temporary)
            written = os.stat(temporary)
            _into_place(temporary, target, dest.uri(dest_key) if if_absent else None)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        return written

    def _open(self, key: str) -> IO[bytes]:
        path = self._path(key)
        self._refuse_links(key, path)
        handle: IO[bytes] = open(path, "rb") if self._local else self._fs.open(path, "rb")  # noqa: SIM115
        return handle

    def put_stream(
        self,
        key: str,
        stream: IO[bytes],
        storage_class: str | None = None,
        metadata: Mapping[str, str] | None = None,
        *,
        if_absent: bool = False,
    ) -> None:
        """Write a stream to `key` (local: via a temporary file moved into place).
        `if_absent`: see `WritableStore.put_stream` (atomic on local disk only)."""
        path = self._path(key)
        if self._local:
            self._refuse_links(key, path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = _temporary_name(path)
            try:
                with open(temporary, "wb") as handle:
                    shutil.copyfileobj(stream, handle, _COPY_CHUNK)
                _into_place(temporary, path, self.uri(key) if if_absent else None)
            finally:
                if os.path.exists(temporary):
                    os.unlink(temporary)
            return
        if if_absent and self._holds_file(path):
            raise KeyOccupiedError(self.uri(key))
        options: dict[str, Any] = {}
        if self._protocol == "s3":
            extra: dict[str, Any] = {}
            if storage_class:
                extra["StorageClass"] = storage_class
            if metadata:
                extra["Metadata"] = dict(metadata)
            if extra:
                options["s3_additional_kwargs"] = extra
        with self._fs.open(path, "wb", **options) as handle:
            shutil.copyfileobj(stream, handle, _COPY_CHUNK)

    def _holds_file(self, path: str) -> bool:
        """Whether an object (a file, as `head` counts them) is at `path` now: on an
        object store a "folder" of that name is other keys, and the key itself is free."""
        try:
            return bool(self._fs.info(path).get("type") == "file")
        except FileNotFoundError:
            return False

    def abort_upload(self, key: str, upload_id: str) -> KeyResult:
        """Filesystems have no multipart uploads: always a failed, explained result."""
        return KeyResult(key, False, error=f"multipart uploads do not exist on {self._protocol}")


def _mtime(st: os.stat_result) -> datetime:
    """A file's modification time to the microsecond, truncated as the listing's is
    (`local_walk`: nanoseconds // 1000). From the float `st_mtime` it was rounded, and
    a restored file then read as changed to the next scan, about every other one."""
    return _EPOCH + timedelta(microseconds=st.st_mtime_ns // 1000)


def _open_filesystem(
    url: str, protocol: str, storage_options: Mapping[str, Any] | None
) -> fsspec.AbstractFileSystem:
    """The fsspec filesystem of `url`, with what the URL itself says (an FTP or SFTP
    host and port, a user: the filesystem's own `_get_kwargs_from_urls`) under the
    options given. One clear error, never a traceback, when it cannot be made."""
    try:
        cls = fsspec.get_filesystem_class(protocol)
        options = {**cls._get_kwargs_from_urls(url), **dict(storage_options or {})}
        return fsspec.filesystem(protocol, **options)
    except ImportError as exc:  # e.g. gs:// without gcsfs, az:// without adlfs
        raise ArgumentError(
            f"storage URL {url!r}: the {protocol}:// filesystem is not installed ({exc})"
        ) from exc
    except OSError as exc:
        reached = isinstance(exc, TimeoutError | ConnectionError | socket.gaierror)
        if reached or (exc.errno is not None and exc.errno not in _NOT_THE_URLS):
            raise translate(url, exc) from exc  # its server cannot be reached, or refuses
        # a library it needs is missing (HDFS: "Unable to load libjvm", then a line per
        # place looked in), or the URL names no archive (`zip://x`: the folder)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ArgumentError(
            f"storage URL {url!r}: the {protocol}:// filesystem cannot be opened from "
            f"this URL here ({first})"
        ) from exc
    except Exception as exc:  # it needs what neither the URL nor govern gives it
        raise ArgumentError(
            f"storage URL {url!r}: the {protocol}:// filesystem cannot be opened from "
            f"this URL ({type(exc).__name__}: {exc})"
        ) from exc


_NOT_THE_URLS = frozenset({errno.ENOENT, errno.EISDIR, errno.ENOTDIR})
"""A filesystem that fails to open with these names no place the URL gave (an archive
filesystem given no archive): bad input, not an unreachable store."""


_NO_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS})
"""What `link` answers on a filesystem that cannot hard-link this file (FAT, some network
filesystems): there a no-overwrite write falls back to a look and a rename."""


def _into_place(temporary: str, target: str, if_absent: str | None) -> None:
    """Move a written temporary file to `target`: renamed over whatever is there, or, when
    `if_absent` (the target's URI, for the error), linked, which never replaces a file
    (the temporary name is removed by the caller): an object written at the key since the
    caller looked stays, and `KeyOccupiedError` says so."""
    if if_absent is None:
        os.replace(temporary, target)
        return
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise _occupied(target, if_absent) from None
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        if os.path.lexists(target):
            raise _occupied(target, if_absent) from None
        os.replace(temporary, target)


def _occupied(target: str, uri: str) -> KeyOccupiedError:
    """What holds `target`, said as it is: a file (written since the caller looked: it
    saw none), or what a listing never counts as an object and so was there all along."""
    try:
        mode = os.lstat(target).st_mode
    except OSError:
        return KeyOccupiedError(uri)
    if stat.S_ISLNK(mode):
        return KeyOccupiedError(uri, "is a symbolic link, not an object")
    if stat.S_ISDIR(mode):
        return KeyOccupiedError(uri, "is a folder, not an object")
    return KeyOccupiedError(uri)


def _link_alone(source: str, target: str) -> bool:
    """Make `target` a second name of `source` (a hard link: the first half of a move,
    no bytes read or written, a sparse multi-GiB checkpoint not materialised) when the
    source has no other name; False where that cannot be done (another filesystem, no
    links there) or must not: a source with another name already (one an older release
    linked to an archive copy, a user's own link) would leave the copy sharing its bytes
    with a file that stays."""
    if os.stat(source, follow_symlinks=False).st_nlink != 1:
        return False
    try:
        os.link(source, target)
    except FileNotFoundError:
        raise
    except OSError:
        return False
    return True


def _copy_file(source: str, target: str) -> None:
    """Write `target` anew as a copy of `source` that shares nothing with it, keeping mode
    and times (as `shutil.copy2`, like S3's COPY keeps metadata) and holes as holes, so a
    sparse checkpoint is not materialised. Data goes by `copy_file_range` where there is
    one (in the kernel; on btrfs and XFS a copy-on-write clone, still a file of its own),
    else through memory."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        fd_in, fd_out = src.fileno(), dst.fileno()
        try:
            size = os.fstat(fd_in).st_size
            in_kernel = hasattr(os, "copy_file_range")
            for start, end in _data_ranges(fd_in, size):
                in_kernel = _copy_range(fd_in, fd_out, start, end, in_kernel)
            os.ftruncate(fd_out, size)  # the hole at the end, if any
            # on disk before the caller may remove the source (a quarantine copy is then
            # the only one): the rename that follows must not outlive the bytes in a crash
            os.fsync(fd_out)
        except OSError as exc:
            if exc.filename is None and exc.errno in _FULL:
                exc.filename = target  # so that the error names the destination
            raise
    shutil.copystat(source, target)


def _data_ranges(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The (start, end) ranges of `fd` that hold data, below `size`; the whole file
    where the filesystem cannot tell data from holes."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        yield 0, size
        return
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, seek_data)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # nothing but a hole from here to the end
            yield offset, size  # SEEK_DATA not supported here: all of it is data
            return
        if start >= size:
            return
        end = min(os.lseek(fd, start, seek_hole), size)
        yield start, end
        offset = end


def _copy_range(fd_in: int, fd_out: int, start: int, end: int, in_kernel: bool) -> bool:
    """Bytes [start, end) of `fd_in` to the same offsets of `fd_out`, by `copy_file_range`
    while `in_kernel`; returns whether it is still worth a try for the next range."""
    offset = start
    while in_kernel and offset < end:
        try:
            n = os.copy_file_range(fd_in, fd_out, min(end - offset, 1 << 30), offset, offset)
        except OSError:
            in_kernel = False  # not between these filesystems, or not here: through memory
            break
        if n == 0:
            break  # an early end, or a filesystem that copies nothing: read it to be sure
        offset += n
    while offset < end:
        data = os.pread(fd_in, min(end - offset, _COPY_CHUNK), offset)
        if not data:
            break  # the source ended early (it shrank): the truncate sets the size
        view = memoryview(data)
        while view:
            written = os.pwrite(fd_out, view, offset)
            view, offset = view[written:], offset + written
    return in_kernel


def _temporary_name(path: str, stable: bool = False) -> str:
    """A hidden name beside `path` to write it under before renaming it into place;
    `stable`: the same one for every write of `path` (for writers that hold a lock)."""
    directory, name = os.path.split(path)
    tag = "" if stable else "-" + uuid.uuid4().hex[:12]
    temporary = f".{name}.govern{tag}.tmp"
    if len(os.fsencode(temporary)) > _NAME_MAX:
        # a name near the limit itself (255 bytes on most filesystems): the temporary one
        # would pass it, and every write of that name failed (ENAMETOOLONG)
        digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:32]
        temporary = f".govern-{digest}{tag}.tmp"
    return os.path.join(directory, temporary)


_NAME_MAX = 255
"""The longest file name in bytes on the filesystems govern meets (ext4, XFS, APFS, tmpfs)."""


def _info_time(info: Mapping[str, Any]) -> datetime | None:
    """The modification time of an fsspec info dict, whatever the backend calls it."""
    for field in _TIME_FIELDS:
        value = info.get(field)
        if value is None or value == "":
            continue
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
    return None
