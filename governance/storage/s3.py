"""S3Store: a Store on boto3, with the S3 API limits enforced at this lowest layer.

Listing fans out over prefixes (see `s3_listing`); DeleteObjects goes in batches of at
most 1,000 keys; copies are one CopyObject, or boto3's managed copy (multipart above the
threshold), and keep metadata, tags and storage class (streamed across endpoints).
Retries of throttling and connection errors live in botocore's `standard` mode only.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlencode

import boto3
import botocore.session
import botocore.utils
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    IncompleteReadError,
    ReadTimeoutError,
)

from governance.errors import (
    BadCredentialsError,
    NoSuchRootError,
    StorageError,
    UnreachableError,
)
from governance.storage import WritableStore
from governance.storage.base import (
    Encryption,
    KeyResult,
    ListingRow,
    ObjectInfo,
    ObjectLock,
    ObjectState,
    Store,
    etags_for,
)
from governance.storage.errors import (
    KeyNotFoundError,
    KeyOccupiedError,
    client_error_code,
    translate,
)
from governance.storage.s3_listing import (
    AS_INFO,
    AS_ROWS,
    PAGE_SIZE,
    SPLIT_AFTER_PAGES,
    ParallelListing,
    Rows,
    T,
    install_fast_parsers,
    nearest_entries,
    utc,
)
from governance.storage.s3_parts import PartsCopy, copy_in_parts
from governance.wording import counted

if TYPE_CHECKING:
    from mypy_boto3_s3.type_defs import CopySourceTypeDef, ObjectIdentifierTypeDef

DELETE_BATCH = 1000  # DeleteObjects accepts at most 1,000 keys per request
COPY_OBJECT_MAX_BYTES = 5 * 1024**3  # CopyObject copies at most 5 GiB in one request
_MISSING_KEY_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
_FATAL = (BadCredentialsError, UnreachableError, NoSuchRootError)
_CHANGED_CODE = "PreconditionFailed"
"""A conditional delete's answer when the key holds an object with another ETag."""
_RACED_CODE = "ConditionalRequestConflict"
"""A conditional delete's answer when a write to the key raced it (HTTP 409)."""


def _maybe_carried_out(exc: BaseException) -> bool:
    """Whether a request that raised may have been carried out all the same: its answer
    was lost (a read timeout, a connection closed mid-answer) or was a server error after
    the retries. A 4xx answer, a connection never made, or an error before sending says
    it was not."""
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return not isinstance(status, int) or status >= 500
    return isinstance(exc, (ReadTimeoutError, ConnectionClosedError, IncompleteReadError))


_NO_CONDITIONS_CODES = frozenset({"NotImplemented", "MalformedXML"})
"""A DeleteObjects request's answer from an endpoint that does not know the `ETag` of an
entry (it implements no conditional delete, or its XML parser rejects the element)."""
_GONE_CODE = "NoSuchKey"
"""A conditional delete's answer when the key holds no object: deleted, as an
unconditional delete of a missing key answers (a retry after a lost answer, say)."""
_TRANSFER_THREADS = 8
"""Threads of one multipart transfer (a copy in parts, an upload)."""
_COPY_ONLY_ARGS = frozenset(
    {"MetadataDirective", "TaggingDirective", "CopySourceIfMatch", "IfNoneMatch"}
)
"""CopyObject's arguments that a copy in parts sends otherwise or not at all."""
_KEPT_HEADERS = (
    "CacheControl",
    "ContentDisposition",
    "ContentEncoding",
    "ContentLanguage",
    "ContentType",
    "Expires",
    "WebsiteRedirectLocation",
    "Metadata",
)
"""What a streamed copy takes from GetObject's answer into the upload (as a CopyObject
with MetadataDirective COPY would keep it); encryption, ACLs and locks are the
destination's own."""
_NO_TAGS_CODES = frozenset({"AccessDenied", "403", "NotImplemented", "501"})


def _encryption(head: Mapping[str, Any]) -> Encryption | None:
    """An object's encryption at rest from its HEAD (None: the store says none)."""
    algorithm = head.get("ServerSideEncryption")
    if not algorithm:
        return None
    return Encryption(algorithm, head.get("SSEKMSKeyId"), bool(head.get("BucketKeyEnabled")))


_KMS = ("aws:kms", "aws:kms:dsse")


def _encryption_args(encryption: Encryption | None, *, exactly: bool = False) -> dict[str, Any]:
    """What a copy names to be encrypted as the object is: its KMS key (a key of its own,
    which the destination's default would lose). SSE-S3 (AES256, which S3 reports of
    every object without a KMS key) is named only `exactly` (into the object's own
    bucket, or a restore giving back what was recorded): elsewhere the destination
    bucket's default applies, which is never weaker and may be a KMS key that a
    quarantine or archive bucket was set up with. A store that says nothing gets nothing
    named either."""
    if encryption is None or (encryption.algorithm not in _KMS and not exactly):
        return {}
    args: dict[str, Any] = {"ServerSideEncryption": encryption.algorithm}
    if encryption.kms_key_id:
        args["SSEKMSKeyId"] = encryption.kms_key_id
    if encryption.bucket_key:
        args["BucketKeyEnabled"] = True
    return args


def parse_timestamp(value: Any) -> datetime:
    """botocore's timestamp parser, with the ISO 8601 form of listings parsed fast.

    Every listed object carries `LastModified` as ISO 8601; botocore's default hands each
    to dateutil (tens of microseconds apiece). `datetime.fromisoformat` reads that form
    in about one; anything else (HTTP dates in headers, epoch numbers) goes to botocore.
    """
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    fallback: datetime = botocore.utils.parse_timestamp(value)
    return fallback


def _botocore_session() -> botocore.session.Session:
    """A botocore session (one per store) whose response parser uses `parse_timestamp`."""
    core = botocore.session.get_session()
    factory = core.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)
    return core


class S3Store:
    """One `s3://bucket/prefix/` root. `url` must be normalized (see `normalize_url`).

    The timeouts and `max_attempts` exist so that tests and impatient callers can fail fast
    on an unreachable endpoint; the defaults suit a nightly job.
    """

    supports_storage_classes: bool = True
    copy_object_max_bytes: int = COPY_OBJECT_MAX_BYTES
    """Larger objects are copied by the managed multipart copy (tests lower it)."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        profile: str | None = None,
        region: str | None = None,
        concurrency: int = 16,
        max_attempts: int = 5,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        multipart_threshold: int = 256 * 1024 * 1024,
        list_page_size: int = PAGE_SIZE,
        split_after_pages: int = SPLIT_AFTER_PAGES,
    ) -> None:
        self.url = url
        self.bucket, _, self.prefix = url.split("://", 1)[1].partition("/")
        self.endpoint_url = endpoint_url
        self._concurrency = concurrency
        self._list_page_size = list_page_size
        self._split_after_pages = split_after_pages
        self._versioning: bool | None = None
        self._list_versions: bool | None = None
        self._versioning_lock = threading.Lock()
        self._conditional_deletes = True  # False once the endpoint said it has none
        self._conditional_lock = threading.Lock()
        transfer_threads = _TRANSFER_THREADS
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=max(multipart_threshold // 4, 5 * 1024 * 1024),
            max_concurrency=transfer_threads,
        )
        config = Config(
            # total_max_attempts counts the first request; botocore's "max_attempts" does not
            # (it made max_attempts 1 send twice)
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            max_pool_connections=concurrency + transfer_threads,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        try:
            session = boto3.session.Session(
                profile_name=profile, region_name=region, botocore_session=_botocore_session()
            )
            self._client = session.client("s3", endpoint_url=endpoint_url, config=config)
        except Exception as exc:
            raise translate(url, exc) from exc
        install_fast_parsers(self._client, parse_timestamp)
        self._max_attempts = max_attempts
        self._client.meta.events.register("needs-retry.s3", self._say_retry)

    def _say_retry(
        self, attempts: int = 0, caught_exception: BaseException | None = None, **_: Any
    ) -> None:
        """Say on stderr that the endpoint cannot be reached and is being tried again: a
        wrong `endpoint_url` otherwise looked like a hang (5 attempts with backoff take
        about 15 s). Says nothing of throttling, which retries are for. Decides nothing
        (botocore's retry handler does)."""
        if attempts < self._max_attempts and isinstance(
            caught_exception, EndpointConnectionError | ConnectTimeoutError
        ):
            where = self.endpoint_url or "S3"
            logging.getLogger(__name__).warning(
                "%s: cannot reach %s (%s); trying again (attempt %d of %d)",
                self.url,
                where,
                type(caught_exception).__name__,
                attempts + 1,
                self._max_attempts,
            )

    def __repr__(self) -> str:
        return f"S3Store({self.url!r}, endpoint_url={self.endpoint_url!r})"

    def uri(self, key: str) -> str:
        """The full URL of a key under this root."""
        return self.url + key

    # -- listing -------------------------------------------------------------------------

    def list(self, exclude_prefixes: Sequence[str] = ()) -> Iterator[ObjectInfo]:
        """Objects then incomplete multipart uploads, streamed from parallel listings."""
        return self._listing(exclude_prefixes, AS_INFO)

    def list_rows(self, exclude_prefixes: Sequence[str] = ()) -> ParallelListing[ListingRow]:
        """The listing as the scanner's staging rows, already started: its first pages
        arrive while the scanner prepares the catalog. Close it if it is not consumed."""
        return self._listing(exclude_prefixes, AS_ROWS).start()

    def list_checked_rows(
        self, exclude_prefixes: Sequence[str] = ()
    ) -> ParallelListing[ListingRow]:
        """`list_rows`, returned once its first answer has come: that first listing
        request proves the root readable as `check()` would, without a request of its own
        (a StorageError, the listing stopped, if it cannot be read)."""
        listing = self.list_rows(exclude_prefixes)
        try:
            listing.check()
        except BaseException:
            listing.close()
            raise
        return listing

    def nearest_entries(self, limit: int = 5) -> tuple[str, builtins.list[str], bool] | None:
        """For a root under a prefix that listed nothing: the URL of the nearest folder
        above it that holds anything, up to `limit` of its entries and whether there are
        more (`s3_listing.nearest_entries`), so a warning can ask whether the prefix is
        spelled right. None for a bucket root, when the prefix itself is there, or when
        this cannot be listed: a failure here only loses a hint."""
        if not self.prefix:
            return None
        try:
            found = nearest_entries(self._client, self.bucket, self.prefix, limit)
        except Exception as exc:
            logging.getLogger(__name__).debug("%s: no listing for a hint (%s)", self.url, exc)
            return None
        if found is None:
            return None
        level, names, more = found
        return f"s3://{self.bucket}/{level}", names, more

    def _listing(self, exclude_prefixes: Sequence[str], rows: Rows[T]) -> ParallelListing[T]:
        excludes = tuple(self.prefix + p for p in exclude_prefixes if p)
        return ParallelListing(
            self._client,
            self.bucket,
            self.prefix,
            excludes,
            self._concurrency,
            rows,
            translate=self._translate,
            page_size=self._list_page_size,
            split_after_pages=self._split_after_pages,
            versions=self._lists_versions(),
        )

    def _lists_versions(self) -> bool:
        """Whether listings read each key's current version with its id (a plan's
        preconditions then name the version it saw): on a bucket with versioning, when
        ListObjectVersions is allowed (s3:ListBucketVersions). Asked once."""
        if self._list_versions is None:
            allowed = self.versioning_enabled()
            if allowed:
                try:
                    self._client.list_object_versions(
                        Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1
                    )
                except Exception as exc:
                    coded = client_error_code(exc)
                    if coded is None or coded[0] not in ("AccessDenied", "403"):
                        raise translate(self.url, exc) from exc
                    logging.getLogger(__name__).warning(
                        "%s: versioned, but listing versions is denied "
                        "(s3:ListBucketVersions): objects are listed without version ids",
                        self.url,
                    )
                    allowed = False
            self._list_versions = allowed
        return self._list_versions

    def _translate(self, exc: Exception) -> Exception:
        return exc if isinstance(exc, StorageError) else translate(self.url, exc)

    def check(self) -> None:
        """One 1-key listing: proves the bucket exists and that we may list it."""
        try:
            self._client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
        except Exception as exc:
            raise translate(self.url, exc) from exc

    @property
    def supports_versioning(self) -> bool:
        """Whether deletes are recoverable (versioning Enabled): asked once, then cached."""
        return self.versioning_enabled()

    @supports_versioning.setter
    def supports_versioning(self, value: bool) -> None:
        self._versioning = value

    def versioning_enabled(self) -> bool:
        """True when the bucket's versioning is Enabled (not Suspended, not unknown).

        Without permission to ask, assume not: treating deletes as permanent is the safe
        mistake.
        """
        with self._versioning_lock:
            if self._versioning is None:
                try:
                    status = self._client.get_bucket_versioning(Bucket=self.bucket)
                    self._versioning = status.get("Status") == "Enabled"
                except Exception as exc:
                    coded = client_error_code(exc)
                    if coded is None or coded[0] not in ("AccessDenied", "403"):
                        raise translate(self.url, exc) from exc
                    self._versioning = False
            return self._versioning

    def read_bytes(self, key: str, max_bytes: int) -> bytes:
        """At most `max_bytes` from the start of an object (one ranged GET)."""
        if max_bytes <= 0:
            return b""
        try:
            response = self._client.get_object(
                Bucket=self.bucket, Key=self.prefix + key, Range=f"bytes=0-{max_bytes - 1}"
            )
            with response["Body"] as body:
                data: bytes = body.read()
            return data[:max_bytes]
        except Exception as exc:
            code = (client_error_code(exc) or ("", ""))[0]
            if code == "InvalidRange":  # a zero-byte object has no byte 0
                return b""
            if code in _MISSING_KEY_CODES:
                raise KeyNotFoundError(self.url, f"{key}: no such key") from exc
            raise translate(self.url, exc) from exc

    def head(self, keys: Sequence[str]) -> dict[str, ObjectState]:
        """HEAD each key in parallel; missing keys (and delete markers) are left out."""
        if not keys:
            return {}
        with ThreadPoolExecutor(min(self._concurrency, len(keys))) as pool:
            states = list(pool.map(self._head_one, keys))
        return {s.key: s for s in states if s is not None}

    def _head_one(self, key: str) -> ObjectState | None:
        try:
            r = self._client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        except Exception as exc:
            coded = client_error_code(exc)
            if coded is not None and coded[0] in _MISSING_KEY_CODES:
                return None
            raise translate(self.url, exc) from exc
        until = r.get("ObjectLockRetainUntilDate")
        return ObjectState(
            key=key,
            size=r["ContentLength"],
            etag=r.get("ETag", "").strip('"'),
            last_modified=utc(r["LastModified"]),
            version_id=r.get("VersionId"),
            storage_class=r.get("StorageClass") or "STANDARD",
            lock_mode=r.get("ObjectLockMode"),
            lock_until=utc(until) if until else None,
            legal_hold=r.get("ObjectLockLegalHoldStatus") == "ON",
            metadata=dict(r.get("Metadata") or {}),
            encryption=_encryption(r),
        )

    # -- tags and object lock (read before planning) ---------------------------------------

    def object_lock_enabled(self) -> bool:
        """Whether the bucket has Object Lock enabled (GetObjectLockConfiguration).

        A bucket never configured answers ObjectLockConfigurationNotFoundError: False.
        Any other failure (no permission to ask, say) is a StorageError: not known.
        """
        try:
            response = self._client.get_object_lock_configuration(Bucket=self.bucket)
        except Exception as exc:
            coded = client_error_code(exc)
            if coded is not None and coded[0] == "ObjectLockConfigurationNotFoundError":
                return False
            raise translate(self.url, exc) from exc
        config = response.get("ObjectLockConfiguration") or {}
        return config.get("ObjectLockEnabled") == "Enabled"

    def object_tags(self, key: str) -> dict[str, str]:
        """The object's tags (GetObjectTagging); {} when it has none."""
        try:
            return self._tag_set(key)
        except Exception as exc:
            raise self._key_error(key, exc) from exc

    def _tag_set(self, key: str) -> dict[str, str]:
        """GetObjectTagging of `key`, its errors as botocore raised them."""
        response = self._client.get_object_tagging(Bucket=self.bucket, Key=self.prefix + key)
        return {t["Key"]: t["Value"] for t in response.get("TagSet", ())}

    def object_lock(self, key: str) -> ObjectLock:
        """The object's lock state from a HEAD (ObjectLockMode, ObjectLockRetainUntilDate,
        ObjectLockLegalHoldStatus: S3 returns them to callers allowed to read them)."""
        try:
            r = self._client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        except Exception as exc:
            raise self._key_error(key, exc) from exc
        until = r.get("ObjectLockRetainUntilDate")
        return ObjectLock(
            mode=r.get("ObjectLockMode"),
            retain_until=utc(until) if until else None,
            legal_hold=r.get("ObjectLockLegalHoldStatus") == "ON",
        )

    def _key_error(self, key: str, exc: Exception) -> StorageError:
        coded = client_error_code(exc)
        if coded is not None and coded[0] in _MISSING_KEY_CODES:
            return KeyNotFoundError(self.url, f"{key}: no such key")
        return translate(self.url, exc)

    # -- mutations -----------------------------------------------------------------------

    def delete(
        self, keys: Sequence[str], etags: Sequence[str | None] | None = None
    ) -> builtins.list[KeyResult]:
        """DeleteObjects in batches of <= 1,000; one KeyResult per key, in order.

        `etags` (parallel to `keys`): each key is deleted only while its ETag is that one
        (S3's conditional delete, the `ETag` of each entry: an object written since its
        ETag was checked stays, and its result fails saying so); None or "" for a key:
        unconditional. An endpoint that does not implement conditional deletes
        (`NotImplemented`, or `MalformedXML` for the element) is asked again without them,
        once per store, with a warning:
        the caller's check right before is then the only guard, as it was before S3 had
        them. Per-key `Errors` of a 200 response become failed results ("Code: Message").
        A failed request fails its batch; after a credentials, endpoint or bucket failure
        the remaining batches are not attempted, and a request that raised may have been
        carried out all the same: its keys' results are `unknown`. On a versioned bucket the response is not
        quiet, so each result carries the delete marker's version id (undo = delete that
        marker).
        """
        try:
            quiet = not self.versioning_enabled()
        except StorageError as exc:
            return [KeyResult(k, False, error=str(exc)) for k in keys]
        tags = etags_for(keys, etags)
        entries = [
            {"Key": self.prefix + k, "ETag": f'"{e}"'} if e else {"Key": self.prefix + k}
            for k, e in zip(keys, tags, strict=True)
        ]
        batches = [
            (keys[i : i + DELETE_BATCH], entries[i : i + DELETE_BATCH], tags[i : i + DELETE_BATCH])
            for i in range(0, len(keys), DELETE_BATCH)
        ]
        fatal: list[StorageError] = []  # set by the first credentials/endpoint/bucket failure

        def run(
            batch: tuple[Sequence[str], Sequence[Any], Sequence[str | None]],
        ) -> builtins.list[KeyResult]:
            names, objects, expected = batch
            if fatal:
                return [KeyResult(k, False, error=f"not attempted: {fatal[0]}") for k in names]
            try:
                response = self._delete_objects(objects, quiet)
            except Exception as exc:
                error = translate(self.url, exc)
                if isinstance(error, _FATAL):
                    fatal.append(error)
                # S3 may have carried the request out and lost only its answer
                # (botocore gave up retrying): what became of each key is not known.
                unknown = _maybe_carried_out(exc)
                return [KeyResult(k, False, error=str(error), unknown=unknown) for k in names]
            return self._delete_results(names, expected, response)

        if len(batches) <= 1:
            return [r for batch in batches for r in run(batch)]
        # Batches in flight together, as the best S3 tools do; results stay in key order.
        with ThreadPoolExecutor(max_workers=min(len(batches), self._concurrency, 8)) as pool:
            return [r for chunk in pool.map(run, batches) for r in chunk]

    def _delete_objects(self, objects: Sequence[Any], quiet: bool) -> Mapping[str, Any]:
        """One DeleteObjects request; again without ETags when the endpoint does not
        implement conditional deletes (remembered: later batches go without them)."""
        if self._conditional_deletes and any("ETag" in o for o in objects):
            try:
                return self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": objects, "Quiet": quiet}
                )
            except Exception as exc:
                coded = client_error_code(exc)
                if coded is None or coded[0] not in _NO_CONDITIONS_CODES:
                    raise
            with self._conditional_lock:
                if self._conditional_deletes:
                    self._conditional_deletes = False
                    logging.getLogger(__name__).warning(
                        "%s: the endpoint does not implement conditional deletes; objects "
                        "are deleted as the check right before found them, without S3 "
                        "re-checking their ETag",
                        self.url,
                    )
        plain: builtins.list[ObjectIdentifierTypeDef] = [{"Key": o["Key"]} for o in objects]
        return self._client.delete_objects(
            Bucket=self.bucket, Delete={"Objects": plain, "Quiet": quiet}
        )

    def _delete_results(
        self,
        batch: Sequence[str],
        expected: Sequence[str | None],
        response: Mapping[str, Any],
    ) -> builtins.list[KeyResult]:
        """Per-key outcomes of one DeleteObjects response."""
        errors = {e.get("Key", ""): e for e in response.get("Errors", ())}
        markers = {
            d.get("Key", ""): d.get("DeleteMarkerVersionId") for d in response.get("Deleted", ())
        }
        results: list[KeyResult] = []
        for k, etag in zip(batch, expected, strict=True):
            full = self.prefix + k
            error = errors.get(full)
            code = None if error is None else error.get("Code", "Error")
            if error is None or (etag and code == _GONE_CODE):
                results.append(KeyResult(k, True, version_id=markers.get(full)))
                continue
            text = f"{code}: {error.get('Message', '')}".rstrip(": ")
            if etag and code == _CHANGED_CODE:
                text = (
                    f"{self.uri(k)} changed since it was checked (its ETag is not {etag} "
                    f"any more: {code}): not deleted"
                )
            elif etag and code == _RACED_CODE:
                text = (
                    f"{self.uri(k)}: a write to it raced the delete ({code}): not deleted; "
                    "plan again to decide on what is there now"
                )
            elif etag and code == "AccessDenied":
                text += (
                    " (check that s3:DeleteObject is allowed on it; a delete conditional on "
                    "the object's ETag needs s3:GetObject as well)"
                )
            results.append(KeyResult(k, False, error=text))
        return results

    def copy(
        self,
        key: str,
        dest: Store,
        dest_key: str,
        storage_class: str | None = None,
        size: int | None = None,
        *,
        moving: bool = False,  # (an object store's copy is a new object either way)
        encryption: Encryption | None = None,
        if_absent: bool = False,
    ) -> KeyResult:
        """Copy one object, keeping its metadata (user metadata and Content-Type,
        Content-Encoding, Cache-Control, Content-Disposition, Content-Language, Expires),
        its tags, its encryption and, unless `storage_class` names another, its storage
        class.

        On one endpoint the copy is server-side, of the object one HEAD just saw: its
        KMS key named (S3 encrypts a copy that does not name one as the destination
        bucket's default: an object under a KMS key of its own would lose it, a
        transition in place included; SSE-S3 is left to that default), its class kept when none is asked for (S3 would
        make the copy STANDARD), and the copy made only if its ETag still is the one
        seen (CopySourceIfMatch); an object whose size is not `size` any more is not
        copied (it changed since the caller checked it). One CopyObject within the 5 GiB
        limit, else boto3's managed copy (in parts above the multipart threshold).
        Across endpoints, or to a store of another kind, the bytes are streamed through
        this process, with the same metadata, tags (S3 destinations) and class (a KMS key
        means nothing at another endpoint: the destination's default encrypts it); a
        filesystem keeps only the bytes.
        `if_absent` (see `Store.copy`): a HEAD of the key first, then one CopyObject sends
        `If-None-Match: *`, which S3 answers PreconditionFailed when the key holds an
        object by then (an endpoint that ignores the header is left with the HEAD); the
        managed copy and an upload cannot send it: the HEAD alone.
        """
        source: CopySourceTypeDef = {"Bucket": self.bucket, "Key": self.prefix + key}
        try:
            if isinstance(dest, S3Store) and dest.endpoint_url == self.endpoint_url:
                state = self._head_one(key)
                if state is None:
                    return KeyResult(key, False, error=f"{self.uri(key)}: no such key")
                if size is not None and state.size != size:
                    return KeyResult(
                        key,
                        False,
                        error=f"{self.uri(key)} changed since it was checked: "
                        f"{counted(state.size, 'byte')} now, not {size:,}",
                    )
                if storage_class is None and state.storage_class != "STANDARD":
                    storage_class = state.storage_class  # (STANDARD, the default: not named)
                return self._copy_server_side(
                    source, key, dest, dest_key, storage_class, state, encryption, if_absent
                )
            if isinstance(dest, WritableStore):
                self._copy_streamed(key, dest, dest_key, storage_class, if_absent)
            else:
                return KeyResult(key, False, error=f"cannot write to {dest.url}")
        except KeyOccupiedError as exc:
            return KeyResult(key, False, error=str(exc))
        except Exception as exc:
            coded = client_error_code(exc)
            if coded is not None and coded[0] in _MISSING_KEY_CODES:
                return KeyResult(key, False, error=f"{self.uri(key)}: no such key")
            return KeyResult(key, False, error=str(translate(self.url, exc)))
        return KeyResult(key, True)

    def _copy_server_side(
        self,
        source: CopySourceTypeDef,
        key: str,
        dest: S3Store,
        dest_key: str,
        storage_class: str | None,
        seen: ObjectState,
        encryption: Encryption | None = None,
        if_absent: bool = False,
    ) -> KeyResult:
        """CopyObject or the managed copy, on one endpoint, of the object as `seen` (see
        `copy`). MetadataDirective COPY keeps the user and system metadata,
        TaggingDirective COPY the tags (the managed copy's multipart path copies the
        metadata itself; the tags are read before it and put back after)."""
        extra: dict[str, Any] = {"MetadataDirective": "COPY", "TaggingDirective": "COPY"}
        if storage_class:
            extra["StorageClass"] = storage_class
        if seen.etag:
            extra["CopySourceIfMatch"] = f'"{seen.etag}"'
        if encryption is not None:  # as recorded (restore): exactly that
            extra.update(_encryption_args(encryption, exactly=True))
        else:
            extra.update(_encryption_args(seen.encryption, exactly=dest.bucket == self.bucket))
        if if_absent and dest._holds(dest_key):  # (also before the header: an endpoint
            raise KeyOccupiedError(dest.uri(dest_key))  # may ignore it, as moto does)
        if seen.size <= self.copy_object_max_bytes:
            if if_absent:
                extra["IfNoneMatch"] = "*"
            try:
                answer = dest._client.copy_object(
                    CopySource=source,
                    Bucket=dest.bucket,
                    Key=dest.prefix + dest_key,
                    **extra,
                )
            except Exception as exc:
                if if_absent:
                    taken = dest._taken(dest_key, exc)
                    if taken is not None:
                        raise taken from exc
                raise
            made = answer.get("CopyObjectResult") or {}
            when = made.get("LastModified")
            return KeyResult(
                key,
                True,
                version_id=answer.get("VersionId"),
                etag=str(made.get("ETag", "")).strip('"') or None,
                last_modified=utc(when) if when is not None else None,
                encryption=seen.encryption,
            )
        # In parts (`s3_parts`): the new object is made with the source's headers and
        # metadata (one HEAD), its tags (read first: onto its own key, a transition, they
        # could not be read after), class and encryption, Bucket Key included.
        head: Mapping[str, Any] = self._client.head_object(**source)
        args: dict[str, Any] = {name: head[name] for name in _KEPT_HEADERS if head.get(name)}
        args.update((name, value) for name, value in extra.items() if name not in _COPY_ONLY_ARGS)
        tags = self._client.get_object_tagging(**source).get("TagSet") or []
        if tags:
            args["Tagging"] = urlencode([(t["Key"], t["Value"]) for t in tags], quote_via=quote)
        job = PartsCopy(
            seen.size,
            seen.etag,
            dest.bucket,
            dest.prefix + dest_key,
            args,
            dest._transfer.multipart_chunksize,
            _TRANSFER_THREADS,
            if_absent,
            # onto itself (a transition in place): only while it is still the object seen
            seen.etag
            if (dest.bucket, dest.prefix + dest_key) == (self.bucket, source["Key"])
            else None,
        )
        try:
            done = copy_in_parts(dest._client, source, job)
        except Exception as exc:
            if if_absent:
                taken = dest._taken(dest_key, exc)
                if taken is not None:
                    raise taken from exc
            raise
        # the completion names no time: what it wrote is asked (one HEAD; the copy is done
        # either way, so a failed HEAD only leaves it unrecorded)
        try:
            state = dest._head_one(dest_key)
        except StorageError:
            state = None
        if state is None:
            return KeyResult(
                key,
                True,
                version_id=done.get("VersionId"),
                etag=str(done.get("ETag", "")).strip('"') or None,
                encryption=seen.encryption,
            )
        return KeyResult(
            key,
            True,
            version_id=state.version_id,
            etag=state.etag,
            last_modified=state.last_modified,
            encryption=seen.encryption,
        )

    def _copy_streamed(
        self,
        key: str,
        dest: WritableStore,
        dest_key: str,
        storage_class: str | None,
        if_absent: bool = False,
    ) -> None:
        """GetObject, and upload its body to `dest` with what its headers say (and, to
        S3, the tags: one GetObjectTagging when the object has any)."""
        response = self._client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        with response["Body"] as body:
            wanted = storage_class or response.get("StorageClass")
            if not isinstance(dest, S3Store):
                dest.put_stream(
                    dest_key,
                    cast(IO[bytes], body),
                    wanted,
                    response.get("Metadata"),
                    if_absent=if_absent,
                )
                return
            headers = cast(Mapping[str, Any], response)
            extra: dict[str, Any] = {
                name: headers[name] for name in _KEPT_HEADERS if headers.get(name)
            }
            if wanted:
                extra["StorageClass"] = wanted
            tags = self._tags_to_copy(key, response.get("TagCount"))
            if tags:
                extra["Tagging"] = urlencode(tags, quote_via=quote)
            if if_absent and dest._holds(dest_key):
                raise KeyOccupiedError(dest.uri(dest_key))
            dest._upload(dest_key, cast(IO[bytes], body), extra)

    def _tags_to_copy(self, key: str, count: int | None) -> dict[str, str]:
        """The object's tags for a streamed copy: none when GetObject counted none, else
        asked. Where S3 gave no count (it gives none to a caller who may not read tags,
        and some stores never do), a refused or unsupported GetObjectTagging means none
        can be copied: the copy goes on without them, as it did before."""
        if count == 0:
            return {}
        try:
            return self._tag_set(key)
        except Exception as exc:
            coded = client_error_code(exc)
            if count is None and coded is not None and coded[0] in _NO_TAGS_CODES:
                return {}
            raise

    def put_stream(
        self,
        key: str,
        stream: IO[bytes],
        storage_class: str | None = None,
        metadata: Mapping[str, str] | None = None,
        *,
        if_absent: bool = False,
    ) -> None:
        """Upload a stream to `key` (the cross-backend end of `copy`). `if_absent`: a HEAD
        right before (the managed upload cannot send `If-None-Match`)."""
        if if_absent and self._holds(key):
            raise KeyOccupiedError(self.uri(key))
        extra: dict[str, Any] = {}
        if storage_class:
            extra["StorageClass"] = storage_class
        if metadata:
            extra["Metadata"] = dict(metadata)
        self._upload(key, stream, extra)

    def _taken(self, key: str, exc: BaseException) -> KeyOccupiedError | None:
        """What a refused write to `key` that was to create it (`if_absent`) means, when it
        means the key is taken: PreconditionFailed answers both conditions a copy sends
        (the source's ETag, the key taken), so only an object at the key now says which;
        ConditionalRequestConflict is another conditional write racing this one."""
        code = (client_error_code(exc) or ("",))[0]
        if code == _RACED_CODE:
            return KeyOccupiedError(
                self.uri(key), "was being written by another writer as the copy ran"
            )
        if code == _CHANGED_CODE and self._holds(key):
            return KeyOccupiedError(self.uri(key))
        return None

    def _holds(self, key: str) -> bool:
        """Whether an object is at `key` now (one HEAD)."""
        return self._head_one(key) is not None

    def _upload(self, key: str, stream: IO[bytes], extra: Mapping[str, Any]) -> None:
        """upload_fileobj with `extra` as its ExtraArgs (multipart above the threshold)."""
        try:
            self._client.upload_fileobj(
                stream, self.bucket, self.prefix + key, ExtraArgs=dict(extra), Config=self._transfer
            )
        except Exception as exc:
            raise translate(self.url, exc) from exc

    def abort_upload(self, key: str, upload_id: str) -> KeyResult:
        """Abort one multipart upload; one already gone (NoSuchUpload) counts as done."""
        try:
            self._client.abort_multipart_upload(
                Bucket=self.bucket, Key=self.prefix + key, UploadId=upload_id
            )
        except Exception as exc:
            coded = client_error_code(exc)
            if coded is not None and coded[0] == "NoSuchUpload":
                return KeyResult(key, True)
            return KeyResult(key, False, error=str(translate(self.url, exc)))
        return KeyResult(key, True)
