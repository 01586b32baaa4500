"""Range listings that answer precondition checks on an S3 bucket without versioning.

There (no versioning, hence no Object Lock, which needs it) a listing tells all a HEAD
would, and one ListObjectsV2 answers up to 1,000 keys: the sorted keys of a batch are split
into `concurrency` runs, and each run lists from just before its next unanswered key
(`StartAfter`), so one request answers every wanted key up to the last key of its page and
never fewer than one (`list_states`).

The same listings tell whether a folder that a delete removes whole holds objects the plan
does not name (`governance.apply.folders`): for such folders a run starts its listing
before the folder's first key and never jumps inside it, and what it saw there is kept
(`Listed`), so the folder needs no listing of its own.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from governance.apply.modes import _s3_parts, s3_parts
from governance.storage.base import ObjectState, Store
from governance.storage.s3_listing import utc

LIST_MIN_OBJECTS = 4  # below this, HEADs are as cheap as a listing
LIST_RUN_KEYS = 1000  # keys per parallel range listing, at least (one full page)

Span = tuple[str, str, str | None]
"""One listing request, root-relative: (its Prefix, its StartAfter, the last key of its
page, or None when the page ended the listing). It saw every key k under the Prefix with
StartAfter < k <= last."""


@dataclass(slots=True)
class Listed:
    """What listings of one root saw, for the folders that deletes remove whole
    (`folders`, root-relative, each ending in '/'): the spans the requests covered, and
    every key they listed under one of those folders."""

    folders: frozenset[str] = frozenset()
    spans: list[Span] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    _sorted: list[str] | None = field(default=None, repr=False)

    def folder_of(self, key: str) -> str | None:
        """The outermost of `folders` that holds `key`, if any."""
        if not self.folders:
            return None
        cut = key.find("/")
        while cut != -1:
            if key[: cut + 1] in self.folders:
                return key[: cut + 1]
            cut = key.find("/", cut + 1)
        return None

    def saw(self, span: Span, keys: Sequence[str]) -> None:
        """Note one request's span and the keys of its page (root-relative)."""
        self.spans.append(span)
        if self.folders:
            self.keys.update(k for k in keys if self.folder_of(k) is not None)
            self._sorted = None

    def merge(self, other: Listed) -> None:
        self.spans += other.spans
        self.keys |= other.keys
        self._sorted = None

    def covers(self, folder: str) -> bool:
        """Whether the spans together saw every key under `folder` (keys sort as UTF-8
        bytes do, as str comparison does: those under it lie in [folder, upper))."""
        upper = folder[:-1] + chr(ord(folder[-1]) + 1)
        # (a span that ended the listing, `last` None, sorts after one from the same start)
        spans = sorted(
            ((a, b) for p, a, b in self.spans if folder.startswith(p)),
            key=lambda span: (span[0], span[1] is None, span[1] or ""),
        )
        edge: str | None = None  # every key from `folder` to `edge` was seen
        for after, last in spans:
            if not (after < folder or (edge is not None and after <= edge)):
                break  # sorted by start: no later span closes the gap
            if last is None:
                return True
            edge = last if edge is None else max(edge, last)
            if edge >= upper:
                return True
        return False

    def keys_under(self, folder: str) -> list[str]:
        """The listed keys under `folder`, sorted."""
        if self._sorted is None:
            self._sorted = sorted(self.keys)
        found = self._sorted
        out = []
        for key in found[bisect_left(found, folder) :]:
            if not key.startswith(folder):
                break
            out.append(key)
        return out


def range_listable(store: Store) -> bool:
    """An S3 store (a boto3 client behind it) on a bucket without versioning."""
    versioned = getattr(store, "versioning_enabled", None)
    return s3_parts(store) is not None and versioned is not None and not versioned()


def list_states(
    store: Store, keys: Sequence[str], concurrency: int, folders: Collection[str] = ()
) -> tuple[dict[str, ObjectState], Listed]:
    """key -> state of each of the sorted `keys` that exists, from range listings; and
    what they saw of `folders` (see `Listed`).

    The keys are split into contiguous runs of at least LIST_RUN_KEYS keys (at most
    `concurrency` runs, listed in parallel). Where the wanted keys turn out to be sparse
    (a page answers fewer than LIST_MIN_OBJECTS of them), the rest of that run is asked
    with HEADs instead, so scattered keys cost no more requests than HEADs would.
    """
    from governance.storage.errors import translate

    client, bucket, prefix = _s3_parts(store)
    wanted = frozenset(folders)

    def run(part: Sequence[str]) -> tuple[dict[str, ObjectState], Sequence[str], Listed]:
        listed = Listed(wanted)
        try:
            found, left = list_run(client, bucket, prefix, part, listed)
        except Exception as exc:
            raise translate(store.url, exc) from exc
        return found, left, listed

    runs = max(1, min(concurrency, len(keys) // LIST_RUN_KEYS))
    parts = split_runs(keys, runs, Listed(wanted).folder_of)
    found: dict[str, ObjectState] = {}
    rest: list[str] = []
    listed = Listed(wanted)
    with ThreadPoolExecutor(len(parts)) as pool:
        for states, left, seen in pool.map(run, parts):
            found.update(states)
            rest += left
            listed.merge(seen)
    if rest:
        found.update(store.head(rest))
    return found, listed


def split_runs(
    keys: Sequence[str], runs: int, folder_of: Callable[[str], str | None]
) -> list[Sequence[str]]:
    """`keys` in `runs` contiguous runs of about equal size, none starting inside a folder
    that a delete removes whole (`folder_of`) when the run before holds keys of it: a run
    lists such a folder from its start, so one starting halfway would list the run
    before's keys, find few of its own there and ask the rest by HEADs, one per key."""
    size = -(-len(keys) // runs) if keys else 0
    parts: list[Sequence[str]] = []
    start = 0
    while start < len(keys):
        end = min(start + size, len(keys))
        folder = folder_of(keys[end]) if end < len(keys) else None
        if folder is not None and keys[end - 1].startswith(folder):
            while end < len(keys) and keys[end].startswith(folder):
                end += 1
        parts.append(keys[start:end])
        start = end
    return parts


def list_run(
    client: Any, bucket: str, prefix: str, keys: Sequence[str], listed: Listed | None = None
) -> tuple[dict[str, ObjectState], Sequence[str]]:
    """States of the sorted `keys` (relative to `prefix`) that exist, listing forward;
    and the keys left for HEADs once the listing proves sparse. `listed` collects what
    the requests saw (see `Listed`).

    Each ListObjectsV2 starts just before the next unanswered key (`StartAfter` = that key
    less its last character: smaller than it, and only keys sharing all of it but the last
    character can fall in between), or, for a key in one of `listed.folders`, just before
    the folder (its name without the '/', smaller than every key in it). A page answers
    every key up to its last one (absent there = gone), or every key left when it is the
    last page; a page that ends before the next key moves the start past its last key.
    S3 orders keys by UTF-8 bytes, the same order as Python's str comparison. The
    listing's Prefix is the longest one that every key of the run (and each such folder)
    has (on moto, as on a store that filters before it sorts, a listing then costs the
    run's keys rather than the root's).
    """
    listed = listed if listed is not None else Listed()

    def start(key: str) -> str:
        return listed.folder_of(key) or key

    def relative(key: str) -> str:
        return key[len(prefix) :] if key.startswith(prefix) else ""

    found: dict[str, ObjectState] = {}
    i, n = 0, len(keys)
    after = ""
    # Every key of the run shares its first and last keys' common prefix: listing only
    # under it answers the same, and spares the store every key outside the run's range.
    # Character by character on purpose: keys, not paths.
    shared = os.path.commonprefix([start(keys[0]), start(keys[-1])]) if keys else ""  # noqa: RUF071
    narrowed = prefix + shared
    while i < n:
        after = max(after, (prefix + start(keys[i]))[:-1])
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": narrowed}
        if after:
            request["StartAfter"] = after
        response = client.list_objects_v2(**request)
        contents = response.get("Contents") or []
        truncated = bool(response.get("IsTruncated")) and bool(contents)
        last = contents[-1]["Key"] if contents else ""
        listed.saw(
            (shared, relative(after), relative(last) if truncated else None),
            [relative(o["Key"]) for o in contents] if listed.folders else (),
        )
        page = {o["Key"]: o for o in contents}
        first = i
        while i < n and (not truncated or prefix + keys[i] <= last):
            o = page.get(prefix + keys[i])
            if o is not None:
                found[keys[i]] = ObjectState(
                    key=keys[i],
                    size=int(o.get("Size", 0)),
                    etag=str(o.get("ETag", "")).strip('"'),
                    last_modified=utc(o["LastModified"]),
                    storage_class=o.get("StorageClass") or "STANDARD",
                )
            i += 1
        if i < n and i - first < LIST_MIN_OBJECTS:
            return found, keys[i:]  # sparse here: HEADs are cheaper
        after = last
    return found, ()
