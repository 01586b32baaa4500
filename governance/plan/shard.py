"""One root planned by several processes, each classifying and deciding a key range.

A root's groups (a run and its artifacts) are contiguous stretches of its sorted keys, and
classifying and deciding a group depends on nothing outside it (pass one's index, the one
thing that does, is the whole root's in every process). So a large root is split at run
boundaries into key ranges: this process classifies the first range as the plan's groups
stream, and a forked child classifies and decides each other range and sends back the
decided part (`DecidedPart`) in a compact form, which the build takes as it would the
groups themselves. Python runs one thread at a time: processes are how a plan uses the
machine's other cores.

A child's part is taken only when the split provably cuts no group: what this process's
range left open (`Edge`) and what each range starts with (`Opening`) tell
(`model.classify.continues`). Otherwise, or when a child fails, this process goes on to
classify the rest itself, as one pass would have (the children's work is dropped). Either
way the plan is the one a single process makes, action for action, down to the
fingerprint and the cost sums (the build adds a part's actions in the same order).
"""

from __future__ import annotations

import gc
import logging
import marshal
import os
import pickle
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from multiprocessing.connection import Connection
from typing import Any

from governance.model.classify import Edge, Opening, continues
from governance.model.types import CatalogObject, Group
from governance.plan.build import DecidedPart, decide_part
from governance.plan.decide import Decider
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    PlannedAction,
)
from governance.policy.fields import DESTRUCTIVE_ACTIONS

log = logging.getLogger(__name__)

MIN_OBJECTS_PER_PROCESS = 50_000
"""A root is split only into ranges of at least this many objects: below it, forking and
sending a part back cost more than they save."""
OWN_SHARE = 0.5
"""The share of a root's objects this process classifies itself when it splits it in two
(it also unpacks the other part and renders the fingerprint: `scripts/bench/plan.py`)."""

Classify = Callable[
    [str | None, str | None, Opening | None, Callable[[Edge], Iterable[CatalogObject]] | None],
    Iterator[Group],
]
"""classify(start, stop, opening, then): the groups of the keys in [start, stop)."""


@dataclass(frozen=True)
class RangePlanner:
    """What planning a key range of one root takes, in this process or a forked one."""

    root_url: str
    classify: Classify
    objects: Callable[[str | None, str | None], Iterable[CatalogObject]]
    """The live objects with a key in [start, stop), sorted by key."""
    decider: Callable[[], Decider]
    after_fork: Callable[[], None]
    """Run first in a child: drop connections shared with the parent (`engine.dispose(
    close=False)`)."""


def process_count(setting: str | None = None) -> int:
    """How many processes a large root is planned with: `GOVERN_PLAN_PROCESSES`, else the
    cores this process may run on (at most 4: the parent unpacks every other part)."""
    raw = setting if setting is not None else os.environ.get("GOVERN_PLAN_PROCESSES")
    if raw:
        try:
            return max(int(raw), 1)
        except ValueError:
            log.warning("GOVERN_PLAN_PROCESSES=%r is not a number; planning in one process", raw)
            return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(cores, 4)


def split_points(
    count: int,
    processes: int,
    key_at: Callable[[int], str | None],
    boundary: Callable[[str], str],
    own_share: float = OWN_SHARE,
) -> list[str]:
    """Keys to split a root of about `count` objects at: this process takes `own_share` of
    them (an even share when more than two), the children the rest in equal ranges.

    `key_at(i)` is the i-th key in order (None past the end); `boundary(key)` moves a key
    back to where its group starts (a run's prefix), so that ranges meet between groups.
    """
    processes = min(processes, count // MIN_OBJECTS_PER_PROCESS)
    if processes < 2:
        return []
    own = own_share if processes == 2 else 1 / processes
    first = key_at(0)
    if first is None:
        return []
    splits: list[str] = []
    for i in range(1, processes):
        offset = int(count * (own + (1 - own) * (i - 1) / (processes - 1)))
        key = key_at(offset)
        if key is None:
            break
        split = boundary(key)
        if split > first and (not splits or split > splits[-1]):
            splits.append(split)
    return splits


def planned_groups(planner: RangePlanner, splits: Sequence[str]) -> Iterator[Group | DecidedPart]:
    """The root's groups in key order: the first range's as classified here, then each
    other range's decided part, or, when a part cannot be taken, the rest classified here."""
    if not splits:
        yield from planner.classify(None, None, None, None)
        return
    ranges = list(zip(splits, [*splits[1:], None], strict=True))
    children = [_Child.spawn(planner, start, stop) for start, stop in ranges]
    taken: list[DecidedPart] = []

    def rest(edge: Edge) -> Iterable[CatalogObject]:
        parts = _receive_all(children, edge)
        if parts is None:
            return planner.objects(splits[0], None)
        taken.extend(parts)
        return ()

    try:
        yield from planner.classify(None, splits[0], None, rest)
    finally:
        for child in children:
            child.stop()
    yield from taken


def _receive_all(children: list[_Child], edge: Edge) -> list[DecidedPart] | None:
    """Every child's part, when each split cuts no group and every child succeeded."""
    parts: list[DecidedPart] = []
    for child in children:
        got = child.receive()
        if got is None:
            return None
        opening, end, part = got
        if not continues(edge, opening):
            log.info(
                "%s: the split at %r cuts a group; planning the rest here", child.url, child.start
            )
            return None
        parts.append(part)
        edge = end
    return parts


class _Child:
    """A forked process planning [start, stop) of the root; its answer comes on a pipe."""

    def __init__(self, url: str, start: str, process: Any, conn: Connection) -> None:
        self.url = url
        self.start = start
        self._process = process
        self._conn = conn

    @classmethod
    def spawn(cls, planner: RangePlanner, start: str, stop: str | None) -> _Child:
        ctx = get_context("fork")
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_plan_range, args=(planner, start, stop, sender), daemon=True)
        process.start()
        sender.close()
        return cls(planner.root_url, start, process, receiver)

    def receive(self) -> tuple[Opening, Edge, DecidedPart] | None:
        """The child's (opening, edge, part); None (logged) when it failed."""
        try:
            status, detail = pickle.loads(self._conn.recv_bytes())
            if status != "ok":
                log.warning("%s: the process planning from %r failed (%s); planning the rest here",
                            self.url, self.start, detail)  # fmt: skip
                return None
            opening, edge = detail
            data = self._conn.recv_bytes()
        except (EOFError, OSError) as exc:
            log.warning("%s: the process planning from %r ended early (%s); planning the rest here",
                        self.url, self.start, exc or type(exc).__name__)  # fmt: skip
            return None
        with _no_gc():  # a million new objects, none of them garbage
            return opening, edge, unpack(data, self.url)

    def stop(self) -> None:
        self._conn.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join()


def _plan_range(planner: RangePlanner, start: str, stop: str | None, conn: Connection) -> None:
    """In the child: classify and decide [start, stop), send back what it comes to: a
    pickled (status, detail) header, then the packed part when the status is "ok"."""
    try:
        planner.after_fork()
        opening = Opening()
        edges: list[Edge] = []

        def finish_here(edge: Edge) -> Iterable[CatalogObject]:
            edges.append(edge)
            return ()

        part = decide_part(planner.classify(start, stop, opening, finish_here), planner.decider())
        with _no_gc():  # a million new tuples, none of them garbage
            data = pack(part, planner.root_url)
        header = pickle.dumps(("ok", (opening, edges[0])))
    except BaseException as exc:  # reported to the parent, which plans the range itself
        header, data = pickle.dumps(("error", f"{type(exc).__name__}: {exc}")), b""
    try:
        conn.send_bytes(header)
        if data:
            conn.send_bytes(data)
    finally:
        conn.close()


@contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------- wire form

_ACTION_TYPES = {t.value: t for t in ActionType}
_HOWS = {h.value: h for h in KeptHow}
_DESTRUCTIVE = frozenset(t for t in ActionType if t.value in DESTRUCTIVE_ACTIONS)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_MARSHAL_VERSION = 2
"""Without back-references: writing them costs more than sending a repeated text again."""


def pack(part: DecidedPart, root_url: str) -> bytes:
    """`part` as `marshal` bytes: tuples of plain values, written and read in C several
    times faster than pickled objects (or datetimes: times go as microseconds).

    URIs are the root URL and a key (`decide._action`) and are rebuilt; an action's
    artifact is sent as None when it is the one before's (an artifact's strip and archive,
    which share one `ArtifactRef` in the build, and go on sharing it).
    """
    skip = len(root_url)
    epoch, us = _EPOCH, _US
    times: dict[datetime, int] = {}
    previous: ArtifactRef | None = None
    actions: list[tuple[Any, ...]] = []
    append = actions.append
    for a in part.actions:
        ref = a.artifact
        if ref is previous:
            ref_row = None
        else:
            ref_row = (ref.uri[skip:], ref.kind, ref.run, ref.step)
            previous = ref
        objects = [
            (
                o.key,
                o.size,
                o.etag,
                times[lm] if (lm := o.last_modified) in times
                else times.setdefault(lm, (lm - epoch) // us),
                o.storage_class,
                o.version_id,
                o.upload_id,
            )
            for o in a.objects
        ]  # fmt: skip
        append((
            a.rule, a.tier, a.action._value_, ref_row, objects, a.reason, a.storage_class,
            a.dest_url, a.early_deletion_usd, a.request_cost_usd, a.monthly_cost_before_usd,
            a.monthly_cost_after_usd,
        ))  # fmt: skip
    kept = [
        (k.artifact.uri[skip:], k.artifact.kind, k.artifact.run, k.artifact.step, k.rule,
         k.tier, k.how._value_, k.reason)
        for k in part.kept
    ]  # fmt: skip
    return marshal.dumps(
        (
            actions,
            kept,
            part.live_bytes,
            part.class_bytes,
            list(part.not_applicable.items()),
        ),
        _MARSHAL_VERSION,
    )


def unpack(data: bytes, root_url: str) -> DecidedPart:
    """The `DecidedPart` that `pack` was given (action ids are the build's to assign).
    Times and texts that repeat become one object each again, as in the build."""
    action_rows, kept_rows, live, class_bytes, skipped = marshal.loads(data)
    types, destructive = _ACTION_TYPES, _DESTRUCTIVE
    epoch, us = _EPOCH, _US
    times: dict[int, datetime] = {}
    texts: dict[str, str] = {}
    actions: list[PlannedAction] = []
    append = actions.append
    ref = None
    for (
        rule, tier, name, ref_row, objects, reason, storage_class, dest_url,
        early, request, before, after,
    ) in action_rows:  # fmt: skip
        if ref_row is not None:
            key, kind, run, step = ref_row
            ref = ArtifactRef(root_url + key, kind, run, step, root_url)
        action = types[name]
        append(
            PlannedAction(
                0,
                rule,
                tier,
                action,
                action in destructive,
                ref,  # type: ignore[arg-type]  # the first row always has one
                [
                    ObjectRef(
                        root_url + key, key, size, etag,
                        times[t] if t in times else times.setdefault(t, epoch + us * t),
                        cls, version, upload,
                    )
                    for key, size, etag, t, cls, version, upload in objects
                ],
                texts.setdefault(reason, reason),
                storage_class,
                dest_url,
                early,
                request,
                before,
                after,
            )
        )  # fmt: skip
    hows = _HOWS
    kept = [
        KeptArtifact(
            ArtifactRef(root_url + key, kind, run, step, root_url), rule, tier, hows[how],
            texts.setdefault(reason, reason),
        )
        for key, kind, run, step, rule, tier, how, reason in kept_rows
    ]  # fmt: skip
    return DecidedPart(actions, kept, live, class_bytes, Counter(dict(skipped)))
