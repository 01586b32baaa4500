"""Classification of one storage root: sorted objects -> groups of (run, artifacts).

Two streaming passes over the sorted listing, so memory is bounded by the largest run:

1. find run prefixes (template matches, and folders holding checkpoint units) and the few
   tracker files (`latest`, `latest_checkpointed_iteration.txt`) completeness depends on;
2. stream again, buffering one run at a time. A run's keys are contiguous in sorted order
   (they share its prefix), so a run is finished as soon as a key outside its prefix
   arrives. Runs may nest (a detected run holding template runs): open runs form a stack.
   Objects outside every run are grouped by top-level folder (root-level files in chunks),
   but for top-level folders that are checkpoints themselves: those are one group, held
   to the end, as a run's checkpoints are (the root is then one run's output folder).

Pass one matters only to keys no layout template matches and to tracker look-ups outside
a group; given as a keys-only query (`first_pass`), it runs when the first of those comes,
so a root whose templates name every run is read once (see `_Streamer`).

Example::

    for group in classify(lambda: catalog.objects(root), ClassifyOptions(as_of=now)):
        save(group.run, group.artifacts)
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from operator import le, methodcaller
from typing import Any, cast

from governance.model.detectors import TRACKER_NAMES, Context
from governance.model.detectors.base import basename
from governance.model.grouping import classify_group
from governance.model.runs import (
    TemplateMatcher,
    build_run,
    detected_run_of,
    outermost,
    run_for_unit,
    unit_of_checkpoint,
)
from governance.model.types import (
    CatalogObject,
    ClassifyOptions,
    Group,
    MetaReader,
)

ROOT_CHUNK = 1000
"""Root-level files outside runs are yielded in chunks of this many (each is its own unit)."""


@dataclass(slots=True)
class RunIndex:
    """What pass one learns: template runs with attributes, detected runs, tracker files."""

    templates: dict[str, dict[str, str]] = field(default_factory=dict)
    detected: set[str] = field(default_factory=set)
    trackers: dict[str, CatalogObject] = field(default_factory=dict)


def find_runs(objects: Iterable[CatalogObject], options: ClassifyOptions) -> RunIndex:
    """Pass one: run prefixes and tracker files, holding only those in memory."""
    trackers: dict[str, CatalogObject] = {}

    def keys() -> Iterator[str]:
        for obj in objects:
            key = obj.key
            if key.endswith(_TRACKER_ENDINGS) and basename(key) in TRACKER_NAMES:
                trackers[key] = obj
            yield key

    index, _ = _find_runs(keys(), options)
    index.trackers = trackers
    return index


def find_runs_by_keys(
    keys: Iterable[str],
    options: ClassifyOptions,
    fetch: Callable[[list[str]], Iterable[CatalogObject]],
) -> RunIndex:
    """Pass one over keys alone (sorted), then `fetch` the few tracker objects by key.

    The same index as `find_runs` over the objects of those keys, without building an
    object per key: `fetch(keys)` returns the live objects with those keys.
    """
    index, tracker_keys = _find_runs(keys, options)
    if tracker_keys:
        wanted = set(tracker_keys)
        found = {o.key: o for o in fetch(tracker_keys) if o.key in wanted}
        # As `find_runs`: the last object of a key in stream order (key, upload id) wins.
        index.trackers = {k: found[k] for k in tracker_keys if k in found}
    return index


def _find_runs(keys: Iterable[str], options: ClassifyOptions) -> tuple[RunIndex, list[str]]:
    """The run index (without tracker objects) and the tracker keys, in stream order."""
    index = RunIndex()
    matcher = TemplateMatcher(options.run_templates)
    candidates: set[str] = set()
    tracker_keys: list[str] = []
    last_unit = "\0"
    # The template run the previous key matched, when every key under it matches the same
    # way (see `TemplateMatcher.match`): such keys need no other look.
    templated = "\0"
    iterator = iter(keys)
    while chunk := list(islice(iterator, _CHUNK)):
        tracker_keys += [k for k in filter(_TRACKER_ENDING, chunk) if basename(k) in TRACKER_NAMES]
        # Sorted (as the stream is), the keys under `templated` are the ones before the
        # first key not below its upper bound: skipped in one search.
        ordered = all(map(le, chunk, islice(chunk, 1, None)))
        i, n = 0, len(chunk)
        while i < n:
            key = chunk[i]
            i += 1
            if key.startswith(templated):
                if ordered and templated[-1] != _LAST_CHAR:
                    i = bisect_left(chunk, templated[:-1] + chr(ord(templated[-1]) + 1), i)
                continue
            found = matcher.match(key)
            if found is not None:
                index.templates.setdefault(found[0], found[1])
                templated = matcher.stable_prefix() or "\0"
                continue
            unit = unit_of_checkpoint(key, upward_only=key.startswith(last_unit))
            if unit is None:
                continue
            if unit.endswith("/"):
                last_unit = unit
            run = run_for_unit(unit)
            if run is not None:
                candidates.add(run)
    index.detected = outermost(candidates)
    return index, tracker_keys


_TRACKER_ENDINGS = (*TRACKER_NAMES, *(name + "/" for name in TRACKER_NAMES))
"""What a tracker key ends with (`basename` ignores a trailing '/'): a cheap first test."""
_TRACKER_ENDING = methodcaller("endswith", _TRACKER_ENDINGS)
_CHUNK = 4096
_LAST_CHAR = chr(sys.maxunicode)


@dataclass(slots=True)
class _Open:
    key: str
    attributes: Mapping[str, str]
    objs: list[CatalogObject] = field(default_factory=list)
    inner_last: datetime | None = None
    """The newest write of the runs inside this one's folder (a template matched deeper:
    the Trainer's TensorBoard folder `output/runs/<date>_<host>/` under `runs/{run}/`):
    their objects are theirs, but a write there is this run's sign of life too."""


class _Streamer:
    """Pass two: assign each object to its run and yield groups as runs close.

    Pass one's index matters to a key only when no layout template matches it (detected
    runs), or when a unit looks up a tracker file outside its group. While every key so far
    is templated, the stack holds template runs alone and the groups are the same with
    any index (a template run's attributes come from its prefix: the index's copy is the
    same; detected runs are only ever opened by untemplated keys): so pass one, when it
    is given as `pending`, runs at the first untemplated key or the first such look-up,
    and never for a root whose templates name every run.
    """

    def __init__(
        self,
        index: RunIndex,
        options: ClassifyOptions,
        read_meta: MetaReader | None,
        pending: Callable[[], RunIndex] | None = None,
    ) -> None:
        self.index = index
        # Pass one, when it has not run yet (see `classify`): `index` is empty until then.
        self._pending = pending
        self.trackers: Mapping[str, CatalogObject] = (
            index.trackers if pending is None else _Trackers(self)
        )
        self.options = options
        self.read_meta = read_meta
        self.matcher = TemplateMatcher(options.run_templates)
        self.stack: list[_Open] = []
        self.outside: list[CatalogObject] = []
        self.outside_top = ""
        self.top_is_unit = False  # `outside_top` is itself a checkpoint folder
        self.root_units: list[CatalogObject] = []  # the objects of such top-level folders
        self.root_files: list[CatalogObject] = []
        self._last_found: str | None = None

    def run_pass_one(self) -> RunIndex:
        """The whole index, running pass one now if it has not run."""
        if self._pending is not None:
            self.index = self._pending()
            self._pending = None
        return self.index

    def _run_of(self, key: str) -> tuple[str, Mapping[str, str]] | None:
        found = self.matcher.match(key)
        if found is not None:
            return found[0], self.index.templates.get(found[0], found[1])
        run = detected_run_of(key, self.run_pass_one().detected)
        return (run, {}) if run is not None else None

    def _group(self, objs: list[CatalogObject], run: _Open | None) -> Group:
        unread: list[str] = []
        arts = classify_group(
            objs, run.key if run else None, self.options, self.read_meta, self.trackers, unread
        )
        built = None
        if run is not None:
            ctx = Context(self.options, self.read_meta, {}, self.trackers)
            ctx.unread = unread
            built = build_run(run.key, run.attributes, objs, arts, ctx, run.inner_last)
        return Group(built, arts, tuple(dict.fromkeys(unread)))

    def _close(self) -> Group:
        """Pop the innermost open run into its group; the run holding it (still open)
        learns of its last write."""
        done = self.stack.pop()
        group = self._group(done.objs, done)
        if self.stack and group.run is not None:
            outer, last = self.stack[-1], group.run.last_write
            if outer.inner_last is None or last > outer.inner_last:
                outer.inner_last = last
        return group

    def _flush_outside(self) -> Iterator[Group]:
        if self.outside:
            objs, self.outside = self.outside, []
            yield self._group(objs, None)

    def feed(self, obj: CatalogObject) -> Iterator[Group]:
        key = obj.key
        stack = self.stack
        while stack and not key.startswith(stack[-1].key):
            yield self._close()
        found = self._run_of(key)
        if stack and (found is None or not found[0].startswith(stack[-1].key)):
            stack[-1].objs.append(obj)  # cannot happen with consistent runs; never lose one
            return
        if found is None:
            yield from self._outside(obj)
            return
        if not stack or stack[-1].key != found[0]:
            stack.append(_Open(found[0], found[1]))
        stack[-1].objs.append(obj)
        self._last_found = found[0]

    def fast_prefix(self) -> str:
        """A prefix whose keys `feed` would put straight into the innermost open run, as
        the last key fed was, yielding nothing: what the last key's run lookup answered
        holds for every key under the run's prefix ("\\0", matching no key, otherwise).

        Keys under the run close no open run (they share the innermost one's prefix), and
        their lookup gives the same run: a template run the matcher remembers answers the
        same for every key under it; a detected run too when no template could match
        first (detected runs never nest).
        """
        found, self._last_found = self._last_found, None
        if found is None or not self.stack or self.stack[-1].key != found:
            return "\0"
        if self.matcher.templates:
            return found if self.matcher.stable_prefix() == found else "\0"
        return found

    def _outside(self, obj: CatalogObject) -> Iterator[Group]:
        key = obj.key
        slash = key.find("/")
        if slash == -1:
            self.root_files.append(obj)
            if len(self.root_files) >= ROOT_CHUNK:
                files, self.root_files = self.root_files, []
                yield self._group(files, None)
            return
        top = key[: slash + 1]
        if top != self.outside_top:
            yield from self._flush_outside()
            self.outside_top = top
            self.top_is_unit = unit_of_checkpoint(key) == top
        if self.top_is_unit:
            # A checkpoint folder at the root (the root is one run's output folder): the
            # root's checkpoints are one group, as a run's are, so that tiers see them all.
            self.root_units.append(obj)
            return
        self.outside.append(obj)

    def finish(self) -> Iterator[Group]:
        while self.stack:
            yield self._close()
        yield from self._flush_outside()
        if self.root_units:
            units, self.root_units = self.root_units, []
            yield self._group(units, None)
        if self.root_files:
            files, self.root_files = self.root_files, []
            yield self._group(files, None)


class _Trackers(Mapping[str, CatalogObject]):
    """A streamer's tracker files (`RunIndex.trackers`), running pass one when one is
    looked up before it ran: only keys named like a tracker can be one."""

    __slots__ = ("_streamer",)

    def __init__(self, streamer: _Streamer) -> None:
        self._streamer = streamer

    def _index(self) -> dict[str, CatalogObject]:
        return self._streamer.run_pass_one().trackers

    def get(self, key: str, default: Any = None) -> Any:
        if self._streamer._pending is not None and basename(key) not in TRACKER_NAMES:
            return default
        return self._index().get(key, default)

    def __getitem__(self, key: str) -> CatalogObject:
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return cast(CatalogObject, found)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


_MISSING = object()


def classify(
    objects: Callable[[], Iterable[CatalogObject]],
    options: ClassifyOptions,
    read_meta: MetaReader | None = None,
    *,
    first_pass: Callable[[], RunIndex] | None = None,
) -> Iterator[Group]:
    """Classify one root's objects (keys relative to the root, sorted by key).

    `objects()` must return a fresh, sorted iterator each call; it is called twice.
    `read_meta` reads small metadata objects (index files, trainer state, `latest`); the
    caller caches it per ETag. Without it, completeness falls back to what names show and
    metrics come only from names.

    `first_pass`, when given, returns pass one's index instead of `find_runs(objects())`
    (e.g. `find_runs_by_keys` over a keys-only query); `objects` is then called once, and
    `first_pass` only when the index is needed (see `_Streamer`): not at all when layout
    templates name the run of every key and no unit looks up a tracker outside its group.
    """
    if first_pass is None:
        streamer = _Streamer(find_runs(objects(), options), options, read_meta)
    else:
        streamer = _Streamer(RunIndex(), options, read_meta, pending=first_pass)
    feed = streamer.feed
    stack = streamer.stack
    fast = "\0"  # keys under this prefix go to the innermost open run as they are
    add: Callable[[CatalogObject], None] = _unreachable  # the innermost run's `objs.append`
    for obj in objects():
        if obj.key.startswith(fast):
            add(obj)
            continue
        yield from feed(obj)
        fast = streamer.fast_prefix()
        if fast != "\0":
            add = stack[-1].objs.append
    yield from streamer.finish()


def _unreachable(obj: CatalogObject) -> None:
    raise AssertionError(f"{obj.key}: no run to add it to")
