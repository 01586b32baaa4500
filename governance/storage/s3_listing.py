"""Parallel, memory-bounded listing of one S3 prefix (and its incomplete uploads).

Pages of one listing are sequential in ListObjectsV2 (each needs the previous continuation
token), so parallelism needs split points, and finding them costs requests. A listing
therefore starts as one plain flat listing, the cheapest way through a small bucket (the
sequential `aws s3api` pace, one request a page). Only when it is still going after
`split_after_pages` pages is the key space after its position split: a few delimiter
requests find common prefixes beyond it (going deeper while they are fewer than the
workers), and these become the bounds of key ranges (lo, hi] that other workers list flat
with `StartAfter=lo`, each stopping past `hi`; the first worker keeps its own continuation
and stops at the first bound. Ranges partition the key space whatever the bounds are, so
every key is listed exactly once. A worker that reaches a key under an excluded prefix
jumps past the whole prefix (`StartAfter` = prefix + the highest character), so an
excluded quarantine of a million objects costs one request, not a thousand.

Pages travel to the consumer through a bounded queue, so memory stays bounded however
large the bucket; when the consumer stops early or a worker fails, the other workers stop
at their next page. A listing may be started before it is consumed: its first requests
then overlap whatever the caller does meanwhile (the scanner opens its catalog), and
`check()` waits for the first answer, which doubles as the proof that the root is readable.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from xml.etree import ElementTree

from botocore.exceptions import ClientError

from governance.storage.base import ListingRow, ObjectInfo, epoch_micros

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # S3's most keys a page
SPLIT_AFTER_PAGES = 32
"""A listing still going after this many pages (32,000 keys) is split: below that, the
requests that find split points and the page each range reads past its end cost more
than parallel listing saves (on real S3, 32 pages take a few seconds)."""
MAX_SPLITS_PER_WORKER = 2
SPLIT_LEVELS = 3  # the root plus at most two deeper levels of split-point discovery
MAX_KEY_BYTES = 1024
HIGHEST_CHARACTER = "\U0010ffff"  # sorts after every character (and UTF-8 byte string)
_DONE = object()

T = TypeVar("T")

Emit = Callable[[list[Any]], None]
"""Hands one page to the consumer; raises _Cancelled once the listing is abandoned."""


class _Cancelled(Exception):
    """Raised inside a worker when the consumer has gone or another worker failed."""


def utc(value: datetime) -> datetime:
    """botocore parses timestamps tz-aware; make sure, and normalise to UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Rows(Generic[T]):
    """What one listed object or incomplete upload becomes (key already made relative)."""

    def __init__(
        self,
        obj: Callable[[str, Mapping[str, Any]], T],
        upload: Callable[[str, Mapping[str, Any]], T],
    ) -> None:
        self.obj = obj
        self.upload = upload


def _info_object(key: str, item: Mapping[str, Any]) -> ObjectInfo:
    algorithms = item.get("ChecksumAlgorithm")
    return ObjectInfo(
        key=key,
        size=item["Size"],
        last_modified=utc(item["LastModified"]),
        etag=item.get("ETag", "").strip('"'),
        storage_class=item.get("StorageClass") or "STANDARD",
        version_id=item.get("VersionId"),
        checksum_algorithm=algorithms[0] if algorithms else None,
    )


def _upload_written(upload: Mapping[str, Any]) -> datetime:
    """When an incomplete upload was last written: its newest part's upload (the
    `LastWrite` its parts' listing found), else its start. A multi-day upload of a large
    checkpoint started long ago is written still: its start made it look old enough to
    abort while parts were arriving."""
    started = utc(upload["Initiated"])
    last = upload.get("LastWrite")
    return max(started, utc(last)) if last is not None else started


def _info_upload(key: str, upload: Mapping[str, Any]) -> ObjectInfo:
    return ObjectInfo(
        key=key,
        size=upload.get("Size", 0),
        last_modified=_upload_written(upload),
        etag="",
        storage_class=upload.get("StorageClass") or "STANDARD",
        upload_id=upload["UploadId"],
    )


def _row_object(key: str, item: Mapping[str, Any]) -> ListingRow:
    algorithms = item.get("ChecksumAlgorithm")
    return (
        key,
        "",
        item["Size"],
        item.get("ETag", "").strip('"'),
        epoch_micros(utc(item["LastModified"])),
        item.get("StorageClass") or "STANDARD",
        item.get("VersionId"),  # (ListObjectVersions only)
        algorithms[0] if algorithms else None,
    )


def _row_upload(key: str, upload: Mapping[str, Any]) -> ListingRow:
    micros = epoch_micros(_upload_written(upload))
    storage_class = upload.get("StorageClass") or "STANDARD"
    return (key, upload["UploadId"], upload.get("Size", 0), "", micros, storage_class, None, None)


AS_INFO: Rows[ObjectInfo] = Rows(_info_object, _info_upload)
AS_ROWS: Rows[ListingRow] = Rows(_row_object, _row_upload)
"""ObjectInfo for callers, or the scanner's staging rows straight from the page (no
ObjectInfo or second datetime per object on the scanner's hot path)."""


class ParallelListing(Generic[T]):
    """Iterate once over every object and incomplete upload under `prefix`.

    Keys are made relative to `prefix`; keys starting with any of `excludes` (absolute
    key prefixes) are left out, and listing jumps past them. A worker's error is raised to
    the consumer through `translate` (the store's error mapping). `start()` sends the
    first requests before iteration begins; `check()` waits for the first answer;
    `close()` stops the workers whether or not anything was consumed.
    """

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        excludes: tuple[str, ...],
        concurrency: int,
        rows: Rows[T],
        translate: Callable[[Exception], Exception] = lambda exc: exc,
        *,
        page_size: int = PAGE_SIZE,
        split_after_pages: int = SPLIT_AFTER_PAGES,
        versions: bool = False,
    ) -> None:
        self._client = client
        # ListObjectVersions (each key's current version, with its version id), for a
        # bucket with versioning: a plan's preconditions then name the version it saw
        self._versions = versions
        self._rows = rows
        self._translate = translate
        self._bucket = bucket
        self._prefix = prefix
        self._excludes = excludes
        self._concurrency = concurrency
        self._page_size = page_size
        self._split_after_pages = split_after_pages
        self._results: queue.Queue[Any] = queue.Queue(maxsize=concurrency * 4)
        self._abort = threading.Event()  # workers stop producing
        self._parts_unread = False  # an incomplete upload's parts could not be listed
        self._consumer_gone = threading.Event()
        self._answered = threading.Event()  # a first page arrived, or the listing ended
        self._failure: Exception | None = None
        self._coordinator: threading.Thread | None = None
        self._pages: Generator[T, None, None] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._tasks: list[Future[None]] = []
        self._tasks_lock = threading.Lock()
        self._start_after_ignored = False  # some S3-compatible server did not honour it

    def start(self) -> ParallelListing[T]:
        """Send the first requests now (idempotent); pages wait in the bounded queue."""
        if self._coordinator is None:
            self._coordinator = threading.Thread(
                target=self._produce, name=f"govern-list-{self._bucket}", daemon=True
            )
            self._coordinator.start()
        return self

    def check(self) -> None:
        """Wait for the first answer; raise the (translated) error if the listing failed
        first: no such bucket, access denied, bad credentials, unreachable endpoint."""
        self.start()
        self._answered.wait()
        if self._failure is not None:
            raise self._translate(self._failure) from self._failure

    def close(self) -> None:
        """Stop the workers and wait for them (safe at any point, and more than once)."""
        if self._pages is not None:
            self._pages.close()  # runs its `finally`, which stops the workers
        self._stop()

    def __iter__(self) -> ParallelListing[T]:
        return self

    def __next__(self) -> T:
        if self._pages is None:
            self._pages = self._consume()
        return next(self._pages)

    def _consume(self) -> Generator[T, None, None]:
        self.start()
        try:
            while True:
                item = self._results.get()
                if item is _DONE:
                    return
                if isinstance(item, Exception):
                    raise self._translate(item) from item
                if isinstance(item, BaseException):
                    raise item
                yield from item
        finally:
            self._stop()

    def _stop(self) -> None:
        self._abort.set()
        self._consumer_gone.set()
        coordinator = self._coordinator
        while coordinator is not None and coordinator.is_alive():
            with contextlib.suppress(queue.Empty):  # unblock workers waiting on a full queue
                self._results.get(timeout=0.05)

    def _emit(self, page: list[T]) -> None:
        while not self._abort.is_set():
            try:
                self._results.put(page, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Cancelled

    def _produce(self) -> None:
        """Coordinator thread: run the workers, then hand over DONE or the first error."""
        final: object = _DONE
        with ThreadPoolExecutor(self._concurrency, thread_name_prefix="govern-s3") as pool:
            self._pool = pool
            try:
                self._run(pool)
            except _Cancelled:
                self._answered.set()
                return
            except Exception as exc:
                self._abort.set()  # stop the other workers before the pool waits for them
                self._failure = exc
                final = exc
        self._answered.set()
        while not self._consumer_gone.is_set():
            try:
                self._results.put(final, timeout=0.1)
                return
            except queue.Full:
                continue

    def _run(self, pool: ThreadPoolExecutor) -> None:
        """Start the flat listing and the uploads listing; wait for them and for every
        range the flat listing hands out when it splits, raising the first error."""
        self._submit(self._list_range, None, None, self._concurrency > 1)
        self._submit(self._list_uploads)
        while True:
            with self._tasks_lock:
                tasks = list(self._tasks)
            done, pending = wait(tasks, return_when=FIRST_EXCEPTION)
            for task in done:
                error = task.exception()
                if error is not None:
                    raise error
            if not pending:
                with self._tasks_lock:
                    if len(self._tasks) == len(tasks):  # ranges are handed out before
                        return  # the listing that splits ends, so none can come later

    def _submit(self, work: Callable[..., None], *args: Any) -> None:
        assert self._pool is not None
        with self._tasks_lock:
            self._tasks.append(self._pool.submit(self._guarded, work, *args))

    def _guarded(self, work: Callable[..., None], *args: Any) -> None:
        """Run one worker; its failure stops the others at their next page."""
        try:
            work(*args)
        except _Cancelled:
            raise
        except BaseException:
            self._abort.set()
            raise

    def _list_range(self, after: str | None, upto: str | None, may_split: bool = False) -> None:
        """List the keys in (after, upto] flat (None: from the start, to the end).

        The listing that may split does so once, after `split_after_pages` pages that did
        not reach the end: it then hands the key space beyond its position to ranges and
        keeps only the part up to the first bound.
        """
        versions = self._versions
        if versions:
            # One flat pass, excluded keys filtered out: ranges and jumps need a marker
            # that is not a key, and servers differ there (moto skips the first key at or
            # after such a KeyMarker; S3 lists the keys after it). A missed key could make
            # a checkpoint look incomplete: a versioned bucket is listed page by page.
            may_split = False
        paginator = self._client.get_paginator(
            "list_object_versions" if versions else "list_objects_v2"
        )
        pages = 0
        while True:  # once more after each jump past an excluded prefix
            params: dict[str, Any] = {
                "Bucket": self._bucket,
                "Prefix": self._prefix,
                "PaginationConfig": {"PageSize": self._page_size},
            }
            if after is not None:
                params["KeyMarker" if versions else "StartAfter"] = after
            jump: str | None = None
            for page in paginator.paginate(**params):
                self._answered.set()
                contents = _current(page) if versions else page.get("Contents", ())
                if after is not None and contents and contents[0]["Key"] <= after:
                    # The server ignored StartAfter: list no key twice, and jump no more.
                    self._start_after_ignored = True
                    contents = [c for c in contents if c["Key"] > after]
                # the page's last key (of versions: any, deleted keys' and old ones' too)
                last = _last_listed(page) if versions else contents[-1]["Key"] if contents else None
                if last is None:
                    continue
                if upto is not None and last > upto:
                    self._emit(self._objects([c for c in contents if c["Key"] <= upto]))
                    return
                if contents:
                    self._emit(self._objects(contents))
                if not page.get("IsTruncated"):
                    return
                jump = None if versions else self._past_excluded(last)
                if jump is not None:
                    break
                pages += 1
                if may_split and pages >= self._split_after_pages:
                    may_split = False
                    upto = self._split(last)
            if jump is None or (upto is not None and jump >= upto):
                return  # the end, or the rest of the range is excluded
            after = jump

    def _past_excluded(self, key: str) -> str | None:
        """Where to resume when `key` is under an excluded prefix: past all of its keys
        (they are contiguous in key order), or None when `key` is not excluded."""
        under = [e for e in self._excludes if key.startswith(e)]
        if not under or self._start_after_ignored:
            return None
        outermost = min(under, key=len)  # the one whose keys reach furthest
        if len(outermost.encode()) > MAX_KEY_BYTES - 4:
            return None  # no valid key to start after: list through it, filtered
        return outermost + HIGHEST_CHARACTER

    def _split(self, position: str) -> str | None:
        """Hand the key space after `position` to range workers; return the caller's new
        upper bound (None: no split points were found, the caller lists on to the end)."""
        bounds = _spread(self._split_points(position), MAX_SPLITS_PER_WORKER * self._concurrency)
        if not bounds:
            return None
        for lo, hi in zip(bounds, [*bounds[1:], None], strict=True):
            self._submit(self._list_range, lo, hi)
        return bounds[0]

    def _split_points(self, position: str) -> list[str]:
        """Common prefixes after `position`, level by level while they are fewer than the
        workers: one delimiter request per prefix looked into, at most SPLIT_LEVELS deep."""
        found: set[str] = set()
        parents = [self._prefix]
        with ThreadPoolExecutor(self._concurrency, thread_name_prefix="govern-s3-split") as pool:
            for _level in range(SPLIT_LEVELS):
                deeper: list[str] = []
                for prefixes in pool.map(lambda p: self._common_prefixes(p, position), parents):
                    for common in prefixes:
                        if self._excludes and common.startswith(self._excludes):
                            continue
                        if common > position:
                            found.add(common)
                            deeper.append(common)
                        elif position.startswith(common):
                            deeper.append(common)  # holds the position: may hold more after it
                if len(found) >= self._concurrency or not deeper:
                    break
                parents = deeper
        return sorted(found)

    def _common_prefixes(self, parent: str, position: str) -> list[str]:
        """One delimiter page of `parent`, from `position` on when it lies inside."""
        if self._abort.is_set():
            raise _Cancelled
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Prefix": parent,
            "Delimiter": "/",
            "MaxKeys": self._page_size,
        }
        if position > parent:
            params["StartAfter"] = position
        response = self._client.list_objects_v2(**params)
        return [common["Prefix"] for common in response.get("CommonPrefixes", ())]

    def _list_uploads(self) -> None:
        """Incomplete multipart uploads: residue that costs storage but lists as no object.
        Each one's parts are listed in a task of its own, for its size (the bytes S3 bills
        for it: what aborting it saves); uploads are few beside the objects."""
        paginator = self._client.get_paginator("list_multipart_uploads")
        excludes = self._excludes
        for page in paginator.paginate(Bucket=self._bucket, Prefix=self._prefix):
            if self._abort.is_set():  # (it emits nothing itself: `_emit` cannot tell it)
                raise _Cancelled
            for upload in page.get("Uploads", ()):
                if not (excludes and upload["Key"].startswith(excludes)):
                    self._submit(self._upload_with_size, upload)

    def _upload_with_size(self, upload: Mapping[str, Any]) -> None:
        """One incomplete upload, its size the sum of its parts (0 when they cannot be
        listed); none when it was completed or aborted since it was listed. A listing
        that stops (an error, Ctrl-C) skips the queued ones without a request."""
        if self._abort.is_set():
            raise _Cancelled
        size = 0
        last: datetime | None = None  # the newest part's upload
        try:
            paginator = self._client.get_paginator("list_parts")
            pages = paginator.paginate(
                Bucket=self._bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            )
            for page in pages:
                for part in page.get("Parts", ()):
                    size += int(part.get("Size", 0))
                    written = part.get("LastModified")
                    if written is not None and (last is None or written > last):
                        last = written
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchUpload", "404"):
                return  # gone since it was listed: nothing to record
            # (denied, not implemented, throttled past the retries: the upload is still
            # recorded, its size unknown; its size is a cost figure, not a precondition)
            if not self._parts_unread:  # once a listing: a missing permission hits all
                log.warning(
                    "s3://%s/%s: the parts of incomplete uploads could not be listed (%s): "
                    "their sizes are recorded as 0",
                    self._bucket, self._prefix, code or exc,
                )  # fmt: skip
            self._parts_unread = True
            size = 0
        seen = {**upload, "Size": size, "LastWrite": last}
        self._emit([self._rows.upload(upload["Key"][len(self._prefix) :], seen)])

    def _objects(self, contents: Sequence[Mapping[str, Any]]) -> list[T]:
        cut, excludes, make = len(self._prefix), self._excludes, self._rows.obj
        out: list[T] = []
        for item in contents:
            key = item["Key"]
            if len(key) == cut or (excludes and key.startswith(excludes)):
                continue  # the root's own folder marker, or excluded
            out.append(make(key[cut:], item))
        return out


def nearest_entries(
    client: Any, bucket: str, prefix: str, limit: int
) -> tuple[str, list[str], bool] | None:
    """For a `prefix` that lists no object: what the nearest level above it holds, to
    suggest what a mistyped prefix meant. One delimiter request a level, from the prefix's
    parent up to the bucket's top, stopping at the first that holds anything (and one
    more, of the prefix itself, when its parent holds more than a page: a listing that
    found nothing is rare, so this costs nothing in the usual case).

    Returns (that level's key prefix, '' at the top; up to `limit` of its entries relative
    to it, folders ending in '/'; whether it holds more), with no entries when the whole
    bucket is empty; or None when `prefix` itself is there (it holds only its own folder
    marker, or what a scan passes over: its spelling is not the question).

        >>> nearest_entries(client, "ml-artifacts", "nope/", 5)  # doctest: +SKIP
        ('', ['datasets/', 'runs/'], False)
    """
    level = _parent(prefix)
    first = True
    while True:
        response = client.list_objects_v2(
            Bucket=bucket, Prefix=level, Delimiter="/", MaxKeys=limit + 2
        )
        found = {common["Prefix"] for common in response.get("CommonPrefixes", ())}
        found |= {item["Key"] for item in response.get("Contents", ())}
        if prefix in found:
            return None
        # the parent's page ended before the prefix's place: asked of the prefix itself
        # (a folder marker sorting after `limit` neighbours is no misspelling)
        if (
            first
            and response.get("IsTruncated")
            and client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount")
        ):
            return None
        first = False
        names = sorted(found - {level})  # (a level's own folder marker is no entry of it)
        if names or not level:
            more = bool(response.get("IsTruncated")) or len(names) > limit
            return level, [name[len(level) :] for name in names[:limit]], more
        level = _parent(level)


def _parent(prefix: str) -> str:
    """The key prefix one folder up: 'a/b/' -> 'a/', 'a/' -> ''."""
    return prefix[: prefix.rstrip("/").rfind("/") + 1]


def _current(page: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The current versions on a ListObjectVersions page, in key order (a key whose
    current version is a delete marker is deleted: none of its versions is current)."""
    return [v for v in page.get("Versions", ()) if v.get("IsLatest")]


def _last_listed(page: Mapping[str, Any]) -> str | None:
    """The greatest key a ListObjectVersions page lists, version or delete marker."""
    ends = [
        items[-1]["Key"] for items in (page.get("Versions"), page.get("DeleteMarkers")) if items
    ]
    return max(ends) if ends else None


def _spread(bounds: list[str], limit: int) -> list[str]:
    """At most `limit` of the sorted `bounds`, evenly spaced: more ranges than that cost
    a request each (the page a range reads past its end) for little more parallelism."""
    if len(bounds) <= limit:
        return bounds
    return [bounds[i * len(bounds) // limit] for i in range(limit)]


# --------------------------------------------------------------------------- fast parsing
#
# botocore parses each XML response element by element in Python (tens of microseconds
# per listed object, and an apply lists and deletes every object once). These read the two
# bulk responses with ElementTree's C parser into exactly the structure botocore's parser
# would produce (a test compares the two), or return None on anything they do not know,
# leaving that response to botocore. `S3Store` hooks them in (`install_fast_parsers`).

Timestamp = Callable[[str], datetime]
_LIST_STRINGS = frozenset(
    {
        "Name",
        "Prefix",
        "Delimiter",
        "EncodingType",
        "ContinuationToken",
        "NextContinuationToken",
        "StartAfter",
    }
)
_LIST_INTS = frozenset({"MaxKeys", "KeyCount"})
_CONTENT_STRINGS = frozenset({"Key", "ETag", "StorageClass", "ChecksumType"})


def _local(tag: str) -> str:
    """An element's name without its namespace."""
    return tag.rpartition("}")[2]


def _xml_root(body: bytes, name: str) -> ElementTree.Element | None:
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return None
    return root if _local(root.tag) == name else None


def _text(element: ElementTree.Element) -> str:
    return element.text or ""  # botocore reads an empty element as ""


def _fields(
    element: ElementTree.Element, strings: frozenset[str], bools: frozenset[str] = frozenset()
) -> dict[str, Any] | None:
    """A flat structure of string (and boolean) members; None on any other member."""
    out: dict[str, Any] = {}
    for child in element:
        name = _local(child.tag)
        if name in strings:
            out[name] = _text(child)
        elif name in bools:
            out[name] = child.text == "true"
        else:
            return None
    return out


def _content(element: ElementTree.Element, timestamp: Timestamp) -> dict[str, Any] | None:
    """One `Contents` entry of ListObjectsV2, as botocore shapes it."""
    item: dict[str, Any] = {}
    for child in element:
        name = _local(child.tag)
        if name in _CONTENT_STRINGS:
            item[name] = _text(child)
        elif name == "LastModified":
            item[name] = timestamp(_text(child))
        elif name == "Size":
            item[name] = int(_text(child))
        elif name == "ChecksumAlgorithm":
            item.setdefault(name, []).append(_text(child))
        elif name == "Owner":
            owner = _fields(child, frozenset({"DisplayName", "ID"}))
            if owner is None:
                return None
            item[name] = owner
        elif name == "RestoreStatus":
            status: dict[str, Any] = {}
            for part in child:
                if _local(part.tag) == "IsRestoreInProgress":
                    status["IsRestoreInProgress"] = part.text == "true"
                elif _local(part.tag) == "RestoreExpiryDate":
                    status["RestoreExpiryDate"] = timestamp(_text(part))
                else:
                    return None
            item[name] = status
        else:
            return None
    return item


def parse_list_objects_v2(body: bytes, timestamp: Timestamp) -> dict[str, Any] | None:
    """A ListObjectsV2 response body as botocore would parse it, or None (unknown content).

    Keys stay as sent (URL-encoded when botocore asked for that); botocore's own
    `after-call` handler decodes them, as it does for its parser's output.
    """
    root = _xml_root(body, "ListBucketResult")
    if root is None:
        return None
    out: dict[str, Any] = {}
    contents: list[dict[str, Any]] = []
    prefixes: list[dict[str, Any]] = []
    try:
        for child in root:
            name = _local(child.tag)
            if name == "Contents":
                item = _content(child, timestamp)
                if item is None:
                    return None
                contents.append(item)
            elif name == "CommonPrefixes":
                common = _fields(child, frozenset({"Prefix"}))
                if common is None:
                    return None
                prefixes.append(common)
            elif name in _LIST_STRINGS:
                out[name] = _text(child)
            elif name in _LIST_INTS:
                out[name] = int(_text(child))
            elif name == "IsTruncated":
                out[name] = child.text == "true"
            else:
                return None
    except ValueError:  # a number or timestamp botocore may read differently
        return None
    if contents:
        out["Contents"] = contents
    if prefixes:
        out["CommonPrefixes"] = prefixes
    return out


_DELETED = frozenset({"Key", "VersionId", "DeleteMarkerVersionId"})
_DELETE_ERROR = frozenset({"Key", "VersionId", "Code", "Message"})


def parse_delete_objects(body: bytes) -> dict[str, Any] | None:
    """A DeleteObjects response body as botocore would parse it, or None (unknown content)."""
    root = _xml_root(body, "DeleteResult")
    if root is None:
        return None
    deleted: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for child in root:
        name = _local(child.tag)
        if name == "Deleted":
            entry = _fields(child, _DELETED, frozenset({"DeleteMarker"}))
            target = deleted
        elif name == "Error":
            entry = _fields(child, _DELETE_ERROR)
            target = errors
        else:
            return None
        if entry is None:
            return None
        target.append(entry)
    out: dict[str, Any] = {}
    if deleted:
        out["Deleted"] = deleted
    if errors:
        out["Errors"] = errors
    return out


def install_fast_parsers(client: Any, timestamp: Timestamp) -> None:
    """Parse this client's ListObjectsV2 and DeleteObjects responses with the functions
    above: on a 200 response they understand, their result is handed to botocore as its
    parse and the body it would parse again is emptied (headers are still botocore's).

    botocore first looks into every 200 body for an error (S3 may answer 200 and fail);
    for these two operations that look is ours: a body that is an error or not XML is
    not understood, and botocore's own check then runs on it, marking it for a retry.
    """
    parsers: dict[str, Callable[[bytes], dict[str, Any] | None]] = {
        "ListObjectsV2": lambda body: parse_list_objects_v2(body, timestamp),
        "DeleteObjects": parse_delete_objects,
    }
    error_check = _botocore_200_error_check()
    events = client.meta.events
    if error_check is not None:
        events.unregister("before-parse.s3.*", error_check)

        def other_200_errors(operation_model: Any, **kwargs: Any) -> None:
            if operation_model.name not in parsers:
                error_check(operation_model=operation_model, **kwargs)

        events.register_first("before-parse.s3.*", other_200_errors)

    def hook(parse: Callable[[bytes], dict[str, Any] | None]) -> Callable[..., None]:
        def before_parse(
            response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **kw: Any
        ) -> None:
            body = response_dict.get("body")
            parsed = parse(body) if response_dict.get("status_code") == 200 and body else None
            if parsed is not None:
                customized_response_dict.update(parsed)
                response_dict["body"] = b""
            elif error_check is not None:
                error_check(response_dict=response_dict, **kw)

        return before_parse

    for operation, parse in parsers.items():
        events.register(f"before-parse.s3.{operation}", hook(parse))


def _botocore_200_error_check() -> Callable[..., None] | None:
    """botocore's handler that turns a 200 response carrying an error into a 500 (None
    if this botocore has none by that name: then it simply runs before the fast parsers)."""
    from botocore import handlers

    check: Callable[..., None] | None = getattr(handlers, "_handle_200_error", None)
    return check
