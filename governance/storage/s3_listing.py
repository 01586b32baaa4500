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
