"""The one interface every storage backend implements, and the records it yields.

Keys are always relative to the root and '/'-separated; `Store.uri(key)` gives the full URL.
Backends translate their own errors into `governance.errors.StorageError` subclasses that
name the root, keeping the cause (`raise ... from exc`).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed object (or, with `upload_id`, one incomplete multipart upload).

    `etag` is the S3 ETag without quotes, or on filesystems a modification-time token
    (`mtime:<ns>`) that changes whenever the file is rewritten.
    `last_modified` is timezone-aware UTC (for an upload: its initiation time).
    """

    key: str
    size: int
    last_modified: datetime
    etag: str
    storage_class: str | None = None
    version_id: str | None = None
    checksum_algorithm: str | None = None
    upload_id: str = ""


@dataclass(frozen=True, slots=True)
class ObjectState:
    """What a HEAD says about one object now: used by apply to re-check preconditions."""

    key: str
    size: int
    etag: str
    last_modified: datetime
    version_id: str | None = None
    storage_class: str | None = None
    lock_mode: str | None = None
    lock_until: datetime | None = None
    legal_hold: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    encryption: Encryption | None = None  # S3: how it is encrypted at rest; None: not said


@dataclass(frozen=True, slots=True)
class Encryption:
    """How S3 encrypts one object at rest, as its HEAD says. A server-side copy that does
    not name it is encrypted as the destination bucket's default instead: an object under
    a KMS key of its own would lose that key (and whoever may use it, its access rule)."""

    algorithm: str  # AES256 | aws:kms | aws:kms:dsse
    kms_key_id: str | None = None  # the key's ARN, for the aws:kms ones
    bucket_key: bool = False  # an S3 Bucket Key serves the KMS requests


@dataclass(frozen=True, slots=True)
class ObjectLock:
    """An object's S3 Object Lock state (`Store.object_lock`): all empty when unlocked."""

    mode: str | None = None  # GOVERNANCE | COMPLIANCE
    retain_until: datetime | None = None
    legal_hold: bool = False


@dataclass(frozen=True, slots=True)
class KeyResult:
    """Outcome for one key of a batch operation."""

    key: str
    ok: bool
    error: str | None = None
    version_id: str | None = None
    # A copy's result where the store tells it (S3): the new object's ETag and time
    # (`version_id` is then the copy's version, on a versioned bucket).
    etag: str | None = None
    last_modified: datetime | None = None
    # A copy's source's encryption where the store tells it (S3): recorded with a
    # quarantined object, so that restore gives it back as it was
    encryption: Encryption | None = None
    # A failed delete whose request may have gone through all the same (it raised: a
    # timeout, a dropped connection): whether the object is gone is not known. Apply keeps
    # its journal row pending and its quarantine copy, and the next apply settles it.
    unknown: bool = False


def etags_for(keys: Sequence[str], etags: Sequence[str | None] | None) -> list[str | None]:
    """`Store.delete`'s `etags`, one per key (None: unconditional): a list of another
    length is a bug in the caller."""
    if etags is None:
        return [None] * len(keys)
    if len(etags) != len(keys):
        raise ValueError(f"{len(keys)} keys but {len(etags)} ETags")
    return list(etags)


@runtime_checkable
class Store(Protocol):
    """A storage root. Listing streams; mutating methods are only called by `apply`."""

    url: str
    """Normalized root URL, always ending in '/': `s3://bucket/prefix/`, `file:///abs/dir/`."""

    supports_storage_classes: bool
    supports_versioning: bool

    def uri(self, key: str) -> str:
        """The full URL of a key under this root."""
        ...

    def list(self, exclude_prefixes: Sequence[str] = ()) -> Iterator[ObjectInfo]:
        """Every object under the root (and incomplete multipart uploads), streamed.

        Keys under any of `exclude_prefixes` (relative to the root, e.g. the quarantine)
        are left out. Order is not guaranteed.
        """
        ...

    def check(self) -> None:
        """Raise a StorageError subclass if the root does not exist or cannot be read."""
        ...

    def read_bytes(self, key: str, max_bytes: int) -> bytes:
        """At most `max_bytes` of an object (for small metadata files)."""
        ...

    def head(self, keys: Sequence[str]) -> dict[str, ObjectState]:
        """Current state of each key that exists (missing keys are absent from the result)."""
        ...

    def object_lock_enabled(self) -> bool:
        """Whether the root's bucket has Object Lock enabled (filesystems: False)."""
        ...

    def object_tags(self, key: str) -> dict[str, str]:
        """The object's tags ({} when it has none; filesystems: always {}). Raises a
        StorageError (KeyNotFoundError for a missing key) when they cannot be read."""
        ...

    def object_lock(self, key: str) -> ObjectLock:
        """The object's lock state (filesystems: unlocked). Raises like `object_tags`."""
        ...

    def delete(
        self, keys: Sequence[str], etags: Sequence[str | None] | None = None
    ) -> builtins.list[KeyResult]:
        """Delete keys (S3: DeleteObjects batches of <= 1000, per-key errors reported).

        `etags`, parallel to `keys`: delete each only while it still is that version of
        the object (S3's conditional delete; a filesystem has none and deletes what is
        there: the caller's check right before is its guard)."""
        ...

    def copy(
        self,
        key: str,
        dest: Store,
        dest_key: str,
        storage_class: str | None = None,
        size: int | None = None,
        *,
        moving: bool = False,
        encryption: Encryption | None = None,
        if_absent: bool = False,
    ) -> KeyResult:
        """Server-side copy when both sides allow it, keeping metadata, tags and (S3) the
        object's encryption (`encryption`: the one to give the copy instead, as recorded
        when the object was removed: restore). `size`, when the caller knows it (a plan's checked
        precondition): an object store refuses to copy an object of another size now (it
        changed since the check); a filesystem does not need it.
        `moving`: the caller removes the source right after (a quarantine, a restore), so
        the copy need not be a file of its own (a local store may hard-link it); any
        other copy (an archive) must be.
        `if_absent`: write only where no object is at `dest_key`, else fail without
        writing (restore: an object written at the key since it was checked stays). Atomic
        on local disk (a hard link, which never replaces a file) and in one S3 CopyObject
        (`If-None-Match: *`); elsewhere a look at the key right before the write."""
        ...

    def abort_upload(self, key: str, upload_id: str) -> KeyResult:
        """Abort one incomplete multipart upload (filesystems: not applicable)."""
        ...


ListingRow = tuple[str, str, int, str, int, str | None, str | None, str | None]
"""(key, upload_id, size, etag, last_modified in µs since the epoch, storage_class,
version_id, checksum_algorithm): the shape the scanner stages into the catalog."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_micros(value: datetime) -> int:
    """A timezone-aware time as integer microseconds since the epoch (the catalog's form)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def row_from_info(info: ObjectInfo) -> ListingRow:
    """One listed object as a staging row."""
    micros = epoch_micros(info.last_modified)
    return (
        info.key,
        info.upload_id,
        info.size,
        info.etag,
        micros,
        info.storage_class,
        info.version_id,
        info.checksum_algorithm,
    )


CompactRow = tuple[str, int, str, int]
"""(key, size, etag, last_modified in µs): a listing from a store with no storage classes,
versions or uploads (local disk); the scanner binds four values a row instead of eight."""


AnyRow = ListingRow | CompactRow


@dataclass(slots=True)
class Symlinks:
    """The symbolic links a local listing met and passed over (a scan lists none of them),
    and the files and folders it passed over because their names are not valid UTF-8.

    `count` counts every link under the root outside the excluded prefixes (dangling ones,
    loops and links that lead out of the root included); `inside` holds, for those that
    resolve (`os.path.realpath`, through chains) to a file or folder inside the root,
    (link key, target key): keys relative to the root, a folder's ending in '/', the
    root itself as ''. `unreadable_names` counts the regular files and folders outside the
    excluded prefixes whose names are not valid UTF-8 (a legacy Latin-1 name): neither
    listed nor, for a folder, entered, so what such a folder holds is not counted. Filled
    as the walk goes; whole once its rows are consumed.
    """

    count: int = 0
    inside: list[tuple[str, str]] = field(default_factory=list)
    unreadable_names: int = 0


def listing_symlinks(rows: object) -> Symlinks | None:
    """The links (and names that are not UTF-8) met by a listing (`rows`, as a store
    returned it), once it has been consumed; None for a store that has no symbolic links
    to meet (S3, fsspec)."""
    found = getattr(rows, "symlinks", None)
    return found if isinstance(found, Symlinks) else None


def list_compact_rows(
    store: Store, exclude_prefixes: Sequence[str] = ()
) -> Iterator[CompactRow] | None:
    """The listing as compact rows when the store can give them, else None."""
    fast = getattr(store, "list_compact_rows", None)
    if fast is None:
        return None
    rows: Iterator[CompactRow] | None = fast(exclude_prefixes)
    return rows


def list_rows(store: Store, exclude_prefixes: Sequence[str] = ()) -> Iterator[ListingRow]:
    """A store's listing as staging rows, through its fast path when it has one."""
    fast = getattr(store, "list_rows", None)
    if fast is not None:
        rows: Iterator[ListingRow] = fast(exclude_prefixes)
        return rows
    return (row_from_info(i) for i in store.list(exclude_prefixes))
