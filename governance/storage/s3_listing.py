"""Parallel, memory-bounded listing of one S3 prefix (and its incomplete uploads).

Pages of one prefix are sequential in ListObjectsV2 (each needs the previous continuation
token), so parallelism needs split points: list the root level with Delimiter='/', go one
or two levels deeper while there are fewer prefixes than workers, then list each split
point flat (no delimiter) in a thread pool. Pages travel to the consumer through a bounded
queue, so memory stays bounded however large the bucket; when the consumer stops early
or a worker fails, the other workers stop at their next page.

A listing may be started before it is consumed: its first requests then overlap whatever
the caller does meanwhile (the scanner opens its catalog transaction).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from xml.etree import ElementTree

from governance.storage.base import ListingRow, ObjectInfo, epoch_micros

MAX_SPLITS_PER_WORKER = 4
SPLIT_LEVELS = 3  # the root plus at most two deeper levels of split-point discovery
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
        checksum_algorithm=algorithms[0] if algorithms else None,
    )


def _info_upload(key: str, upload: Mapping[str, Any]) -> ObjectInfo:
    return ObjectInfo(
        key=key,
        size=0,
        last_modified=utc(upload["Initiated"]),
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
        None,
        algorithms[0] if algorithms else None,
    )


def _row_upload(key: str, upload: Mapping[str, Any]) -> ListingRow:
    micros = epoch_micros(utc(upload["Initiated"]))
    storage_class = upload.get("StorageClass") or "STANDARD"
    return (key, upload["UploadId"], 0, "", micros, storage_class, None, None)


AS_INFO: Rows[ObjectInfo] = Rows(_info_object, _info_upload)
AS_ROWS: Rows[ListingRow] = Rows(_row_object, _row_upload)
"""ObjectInfo for callers, or the scanner's staging rows straight from the page (no
ObjectInfo or second datetime per object on the scanner's hot path)."""


class ParallelListing(Generic[T]):
    """Iterate once over every object and incomplete upload under `prefix`.

    Keys are made relative to `prefix`; keys starting with any of `excludes` (absolute
    key prefixes) are left out, and excluded common prefixes are never listed. A worker's
    error is raised to the consumer through `translate` (the store's error mapping).
    `start()` sends the first requests before iteration begins; `close()` stops the
    workers whether or not anything was consumed.
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
    ) -> None:
        self._client = client
        self._rows = rows
        self._translate = translate
        self._bucket = bucket
        self._prefix = prefix
        self._excludes = excludes
        self._concurrency = concurrency
        self._results: queue.Queue[Any] = queue.Queue(maxsize=concurrency * 4)
        self._abort = threading.Event()  # workers stop producing
        self._consumer_gone = threading.Event()
        self._coordinator: threading.Thread | None = None
        self._pages: Generator[T, None, None] | None = None

    def start(self) -> ParallelListing[T]:
        """Send the first requests now (idempotent); pages wait in the bounded queue."""
        if self._coordinator is None:
            self._coordinator = threading.Thread(
                target=self._produce, name=f"govern-list-{self._bucket}", daemon=True
            )
            self._coordinator.start()
        return self

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
        """Coordinator thread: run the fan-out, then hand over DONE or the first error."""
        final: object = _DONE
        with ThreadPoolExecutor(self._concurrency, thread_name_prefix="govern-s3") as pool:
            try:
                self._fan_out(pool)
            except _Cancelled:
                return
            except Exception as exc:
                self._abort.set()  # stop the other workers before the pool waits for them
                final = exc
        while not self._consumer_gone.is_set():
            try:
                self._results.put(final, timeout=0.1)
                return
            except queue.Full:
                continue

    def _fan_out(self, pool: ThreadPoolExecutor) -> None:
        """Expand split points level by level while they are fewer than the workers.

        A level that yields a swarm of small prefixes (more than MAX_SPLITS_PER_WORKER per
        worker: one per run, say) is not used: a request per tiny prefix costs more than it
        saves, so the previous level is listed flat instead, skipping the keys that the
        delimiter listing already produced.
        """
        frontier = [self._prefix]
        emitted_direct = False  # keys directly under the frontier already emitted
        for _level in range(SPLIT_LEVELS):
            if not frontier or len(frontier) >= self._concurrency:
                break
            deeper: list[str] = []
            for found in pool.map(self._list_level, frontier):
                deeper.extend(found)
            emitted_direct = True
            if len(deeper) > MAX_SPLITS_PER_WORKER * self._concurrency:
                break
            frontier = deeper
            emitted_direct = False
        futures = [pool.submit(self._list_flat, p, emitted_direct) for p in frontier]
        futures.append(pool.submit(self._list_uploads))
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in done:
            error = future.exception()
            if error is not None:
                raise error

    def _list_level(self, prefix: str) -> list[str]:
        """List one level under `prefix` (Delimiter='/'): emit its keys, return sub-prefixes."""
        found: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix, Delimiter="/"):
            self._emit(self._objects(page.get("Contents", ())))
            for common in page.get("CommonPrefixes", ()):
                sub = common["Prefix"]
                if not (self._excludes and sub.startswith(self._excludes)):
                    found.append(sub)
        return found

    def _list_flat(self, prefix: str, skip_direct: bool = False) -> None:
        """Every key under `prefix`; with `skip_direct`, not those right under it (a
        delimiter listing of `prefix` already produced them)."""
        paginator = self._client.get_paginator("list_objects_v2")
        start = len(prefix)
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            contents = page.get("Contents", ())
            if skip_direct:
                contents = [c for c in contents if "/" in c["Key"][start:]]
            self._emit(self._objects(contents))

    def _list_uploads(self) -> None:
        """Incomplete multipart uploads: residue that costs storage but lists as no object."""
        paginator = self._client.get_paginator("list_multipart_uploads")
        cut, excludes, make = len(self._prefix), self._excludes, self._rows.upload
        for page in paginator.paginate(Bucket=self._bucket, Prefix=self._prefix):
            self._emit(
                [
                    make(upload["Key"][cut:], upload)
                    for upload in page.get("Uploads", ())
                    if not (excludes and upload["Key"].startswith(excludes))
                ]
            )

    def _objects(self, contents: Sequence[Mapping[str, Any]]) -> list[T]:
        cut, excludes, make = len(self._prefix), self._excludes, self._rows.obj
        out: list[T] = []
        for item in contents:
            key = item["Key"]
            if len(key) == cut or (excludes and key.startswith(excludes)):
                continue  # the root's own folder marker, or excluded
            out.append(make(key[cut:], item))
        return out


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
