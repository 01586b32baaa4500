"""Carrying out removals by delete mode, and copies (transition, archive), in bulk.

- `quarantine`: copy each object to `<quarantine_url><plan_id>/<root-relative key>`, then
  delete the sources. An action whose copies did not all succeed deletes nothing (its
  stray quarantine copies are removed again). A copy is the object as it was: content,
  metadata, tags and storage class (`restore` copies it back in that class). On an object
  store each copy's own ETag is taken as it is made and comes back as the removal's
  `etag` (the journal keeps it: `restore` refuses a quarantine copy written since).
- `versioned`: a plain delete on a bucket with versioning on; the delete marker's version
  id is the way back.
- `permanent`: a plain delete.

Deletes of many actions go to the Store together (it batches DeleteObjects by 1,000), and
per-key results are mapped back to the objects; copies run in a bounded thread pool.
Quarantine and archive locations are opened for the root they serve (`open_destination`),
so that one in a bucket of its own gets that root's endpoint and credentials.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from governance.apply.types import StoreFactory, open_destination
from governance.errors import GovernanceError
from governance.storage.base import KeyResult, Store

DELETE_MODES = ("quarantine", "versioned", "permanent")


@dataclass(frozen=True, slots=True)
class Item:
    """One object of one action: where it is and, for quarantine, where it goes."""

    action_id: int
    root_url: str
    key: str
    quarantine_root: str | None = None
    quarantine_key: str | None = None
    size: int | None = None  # as the plan saw it and the precondition check confirmed
    storage_class: str | None = None  # the quarantine copy's (`quarantine_class`); None: STANDARD
    etag: str | None = None  # as the plan saw it and the check confirmed: the delete's condition


def run_pool(
    fn: Callable[[Any], KeyResult], items: Sequence[Any], concurrency: int
) -> list[KeyResult]:
    """`fn` over items in a bounded pool; an exception becomes a failed result."""

    def safe(item: Any) -> KeyResult:
        try:
            return fn(item)
        except GovernanceError as exc:
            return KeyResult(getattr(item, "key", ""), False, error=str(exc))

    if not items:
        return []
    with ThreadPoolExecutor(max(1, min(concurrency, len(items)))) as pool:
        return list(pool.map(safe, items))


def delete_keys(
    stores: StoreFactory, items: Iterable[tuple[str, str] | tuple[str, str, str | None]]
) -> dict[tuple[str, str], KeyResult]:
    """(root URL, key) -> result: one `Store.delete` call per root for all its keys.

    An item may name the ETag its object must still have (root URL, key, ETag): on S3 the
    delete is then conditional, and an object written since stays (its result fails)."""
    by_root: dict[str, list[str]] = defaultdict(list)
    etags: dict[str, list[str | None]] = defaultdict(list)
    for root, key, *etag in items:
        by_root[root].append(key)
        etags[root].append(etag[0] if etag else None)
    results: dict[tuple[str, str], KeyResult] = {}
    for root, keys in by_root.items():
        tags = etags[root]
        try:
            answers = stores(root).delete(keys, tags if any(tags) else None)
        except GovernanceError as exc:
            answers = [KeyResult(k, False, error=str(exc)) for k in keys]
        results.update({(root, r.key): r for r in answers})
    return results


def remove(
    items: Sequence[Item],
    mode: str,
    stores: StoreFactory,
    concurrency: int,
    fence: Callable[[], None] = lambda: None,
    on_copied: Callable[[Mapping[tuple[int, str], KeyResult]], None] = lambda _copies: None,
) -> dict[tuple[int, str], KeyResult]:
    """Remove objects the `mode` way; (action id, key) -> result: its `version_id` is a
    delete marker's, and in quarantine mode its `etag` the quarantine copy's own, on an
    object store (`copy_etag`; None on local disk). `fence` is called right before any
    delete is sent (the sources', the quarantine copies of a failed action or of an
    object whose delete failed), and raises when this apply may act no more (`journal.check_lock`): nothing is then deleted.
    `on_copied` is given, before any source is deleted, the quarantine copies whose ETag
    is known (each with the object's encryption): the journal records them then, so that
    an apply killed after its deletes still knows how to check and give them back."""
    if mode not in DELETE_MODES:
        raise ValueError(f"unknown delete mode {mode!r}")
    to_delete = list(items)
    failed: dict[tuple[int, str], KeyResult] = {}
    etags: dict[tuple[int, str], KeyResult] = {}
    if mode == "quarantine":
        to_delete, failed, etags = _quarantine_copy(items, stores, concurrency, fence)
        if etags:
            on_copied(etags)
    fence()
    answers = delete_keys(stores, ((i.root_url, i.key, i.etag) for i in to_delete))
    results = dict(failed)
    for item in to_delete:
        answer = answers.get((item.root_url, item.key))
        if answer is None:
            answer = KeyResult(item.key, False, error="no answer")
        elif mode == "quarantine":
            made = etags.get((item.action_id, item.key))
            answer = replace(
                answer,
                etag=made.etag if made is not None else None,
                encryption=made.encryption if made is not None else None,
            )
        results[(item.action_id, item.key)] = answer
    if mode == "quarantine":
        # An object whose delete failed is still in place: its quarantine copy is not
        # needed; each removed only while it is the copy this apply made (its ETag, when
        # known). Not when the delete's outcome is not known: the copy may be all that is
        # left of the object. Copies of a failed copy step were cleaned up by `_quarantine_copy`; the
        # keys it never wrote are never touched.
        strays = [
            (
                i.quarantine_root or "",
                i.quarantine_key or "",
                _etag(etags.get((i.action_id, i.key))),
            )
            for i in to_delete
            if not (answer := results[(i.action_id, i.key)]).ok and not answer.unknown
        ]
        if strays:
            fence()
            delete_keys(stores, strays)
    return results


def _quarantine_copy(
    items: Sequence[Item], stores: StoreFactory, concurrency: int, fence: Callable[[], None]
) -> tuple[list[Item], dict[tuple[int, str], KeyResult], dict[tuple[int, str], KeyResult]]:
    """Copy into quarantine; returns the items whose whole action was copied, failures,
    and on an object store each copy's own ETag (`copy_etag`) with the object's
    encryption ((action id, key) -> a KeyResult holding both)."""
    etags: dict[tuple[int, str], KeyResult] = {}
    made: set[tuple[int, str]] = set()  # copies written, their ETag known or not

    def copy(item: Item) -> KeyResult:
        source = stores(item.root_url)
        dest = open_destination(stores, item.quarantine_root or "", item.root_url)
        # The copy's class is the item's (see `quarantine_class`), else STANDARD: named,
        # so that the store need not ask the object's own. The way back does not depend
        # on it: restore puts each object back in the class it had.
        result = source.copy(
            item.key,
            dest,
            item.quarantine_key or "",
            storage_class=class_for(source, dest, item.storage_class or "STANDARD"),
            size=item.size,
            moving=True,  # the source is removed right after: a local copy may be a link
        )
        if not result.ok:
            return result
        made.add((item.action_id, item.key))
        if on_local_disk(dest):
            return result
        try:
            etag = copy_etag(dest, item.quarantine_key or "", result)
            etags[(item.action_id, item.key)] = replace(result, etag=etag)
        except GovernanceError as exc:
            return KeyResult(item.key, False, error=f"made, but its ETag not known: {exc}")
        return result

    copied = run_pool(copy, items, concurrency)
    bad_actions: dict[int, str] = {}
    for item, result in zip(items, copied, strict=True):
        if not result.ok and item.action_id not in bad_actions:
            bad_actions[item.action_id] = f"quarantine copy of {item.key} failed: {result.error}"
    ok_items = [i for i in items if i.action_id not in bad_actions]
    failed = {
        (i.action_id, i.key): KeyResult(i.key, False, error=bad_actions[i.action_id])
        for i in items
        if i.action_id in bad_actions
    }
    strays = [  # each only while it is the copy this apply made (its ETag, when known)
        (i.quarantine_root or "", i.quarantine_key or "", _etag(etags.get((i.action_id, i.key))))
        for i in items
        if (i.action_id, i.key) in made and i.action_id in bad_actions
    ]
    if strays:
        # (a stray's key may hold another apply's copy now, of a source it then deleted)
        fence()
        delete_keys(stores, strays)  # best effort: the sources are untouched
    return ok_items, failed, etags


def _etag(result: KeyResult | None) -> str | None:
    return None if result is None else result.etag


def copy_etag(dest: Store, key: str, copied: KeyResult) -> str:
    """The ETag of the quarantine copy just made at `key` in `dest` (an object store), as
    the copy answered it (CopyObject does), else by one HEAD: what `restore` checks the
    copy against. Any content written to the key later has another ETag ("objects with
    different object data will have different entity tags"), whatever its size; the
    original's ETag would not do, as a copy keeps it only for a single-part object
    without SSE-KMS or SSE-C. Raises a GovernanceError when the store tells none."""
    etag = copied.etag
    if not etag:
        state = dest.head([key]).get(key)
        if state is None:
            raise GovernanceError(f"{dest.uri(key)}: no such key right after the copy")
        etag = state.etag
    if not etag:
        raise GovernanceError(f"{dest.uri(key)}: its store gives no ETag")
    return etag


def on_local_disk(store: Store) -> bool:
    """Whether the store is on local disk, where an ETag is an mtime token (a copy there
    is checked by its size and time: a content hash would read every byte removed)."""
    return store.url.startswith("file://")


def copy_in_place(
    items: Sequence[tuple[int, str, str, int]],
    storage_class: Mapping[int, str],
    stores: StoreFactory,
    concurrency: int,
) -> dict[tuple[int, str], KeyResult]:
    """Change storage classes by copying each (action id, root, key, checked size) onto
    itself (an object of another size now is not copied: see `Store.copy`)."""

    def copy(item: tuple[int, str, str, int]) -> KeyResult:
        action_id, root, key, size = item
        store = stores(root)
        return store.copy(key, store, key, storage_class=storage_class[action_id], size=size)

    results = run_pool(copy, items, concurrency)
    return {(a, k): r for (a, _, k, _), r in zip(items, results, strict=True)}


def copy_to(
    items: Sequence[tuple[int, str, str, str, str]], stores: StoreFactory, concurrency: int
) -> dict[tuple[int, str], KeyResult]:
    """Copy (action id, root, key, dest root, dest key) and verify the copy's size. An
    object already at the destination is never overwritten, unless it is this one's copy
    (its size and ETag: an interrupted apply made it)."""

    def copy(item: tuple[int, str, str, str, str]) -> KeyResult:
        _, root, key, dest_root, dest_key = item
        source, dest = stores(root), open_destination(stores, dest_root, root)
        before = source.head([key]).get(key)
        if before is None:
            return KeyResult(key, False, error=f"{source.uri(key)}: no such key")
        there = dest.head([dest_key]).get(dest_key)
        if there is not None and (there.size, there.etag) != (before.size, before.etag):
            return KeyResult(
                key,
                False,
                error=f"{dest.uri(dest_key)} holds another object already: not overwritten",
            )
        # a copy of the object as it is, in its class (and of no other size)
        wanted = class_for(source, dest, before.storage_class)
        result = source.copy(key, dest, dest_key, storage_class=wanted, size=before.size)
        if not result.ok:
            return result
        after = dest.head([dest_key]).get(dest_key)
        if after is None or before.size != after.size:
            return KeyResult(key, False, error=f"copy to {dest.uri(dest_key)} not verified")
        return result

    results = run_pool(copy, items, concurrency)
    return {(i[0], i[2]): r for i, r in zip(items, results, strict=True)}


def quarantine_class(storage_class: str | None, keep_for: timedelta, size: int) -> str:
    """The class to write a quarantine copy of an object of `size` bytes in `storage_class`
    in, to be kept `keep_for` (`apply.quarantine_for`): its own class when that costs
    less there than STANDARD (list prices, with the class's minimum storage duration and
    minimum billed size: STANDARD_IA and ONEZONE_IA bill 30 days, GLACIER_IR 90, each at
    least 128 KiB), else STANDARD, which also reads back without a retrieval fee. For the
    default 14 days that keeps ONEZONE_IA and moves STANDARD_IA, GLACIER_IR and
    INTELLIGENT_TIERING objects to STANDARD; from 17 days on, STANDARD_IA and GLACIER_IR
    objects of 128 KiB or more keep theirs. Restore does not depend on it: it puts each
    object back in the class it had.

        >>> quarantine_class("GLACIER_IR", timedelta(days=14), 2**30)
        'STANDARD'
        >>> quarantine_class("GLACIER_IR", timedelta(days=30), 2**30)
        'GLACIER_IR'
    """
    from governance.plan.costs import MIN_DAYS, MIN_TRANSITION_BYTES
    from governance.policy.fields import DEFAULT_PRICING, StorageClass

    if not storage_class or storage_class not in StorageClass.__members__:
        return "STANDARD"
    if storage_class in ("GLACIER", "DEEP_ARCHIVE"):
        return "STANDARD"  # a copy there could not be copied back without a restore first
    days = keep_for.total_seconds() / 86_400
    own = DEFAULT_PRICING[StorageClass(storage_class)]
    billed_days = max(days, MIN_DAYS.get(storage_class, 0))
    billed_size = max(size, MIN_TRANSITION_BYTES.get(storage_class, 0))
    standard = DEFAULT_PRICING[StorageClass.STANDARD] * days * size
    return storage_class if own * billed_days * billed_size < standard else "STANDARD"


def class_for(source: Store, dest: Store, storage_class: str | None) -> str | None:
    """The storage class to ask a copy from `source` to `dest` for, to keep the object's
    `storage_class`: None (the store's own choice) where either side has no classes."""
    if storage_class and source.supports_storage_classes and dest.supports_storage_classes:
        return storage_class
    return None


# ----------------------------------------------------------------------------- versions


def versioning_enabled(store: Store) -> bool:
    """True only for a bucket whose versioning is Enabled (filesystems: never)."""
    check = getattr(store, "versioning_enabled", None)
    return bool(check()) if check is not None else False


def latest_delete_marker(store: Store, key: str) -> str | None:
    """The version id of the delete marker that hides `key` now (S3 only), if any."""
    client, bucket, prefix = _s3_parts(store)
    full = prefix + key
    response = client.list_object_versions(Bucket=bucket, Prefix=full)
    for marker in response.get("DeleteMarkers", ()):
        if marker.get("Key") == full and marker.get("IsLatest"):
            return str(marker["VersionId"])
    return None


def delete_version(store: Store, key: str, version_id: str) -> KeyResult:
    """Delete one version of a key (S3 only): deleting a delete marker undoes a delete."""
    from governance.storage.errors import translate

    client, bucket, prefix = _s3_parts(store)
    try:
        client.delete_object(Bucket=bucket, Key=prefix + key, VersionId=version_id)
    except Exception as exc:
        return KeyResult(key, False, error=str(translate(store.url, exc)))
    return KeyResult(key, True)


def _s3_parts(store: Store) -> tuple[Any, str, str]:
    """The boto3 client, bucket and prefix of an S3Store.

    The Store protocol has no per-version calls; restore of a versioned delete needs one.
    """
    parts = s3_parts(store)
    if parts is None:
        raise GovernanceError(f"{store.url}: versioned deletes need an S3 store")
    return parts


def s3_parts(store: object) -> tuple[Any, str, str] | None:
    """The boto3 client, bucket and prefix of an S3Store; None for any other store. Apply
    talks to S3 directly where the Store protocol has no call for it (versions, range
    listings, a folder's keys, incomplete uploads)."""
    client = getattr(store, "_client", None)
    if client is None:
        return None
    return client, str(getattr(store, "bucket", "")), str(getattr(store, "prefix", ""))
