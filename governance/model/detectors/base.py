"""What every layout detector shares: the claim it makes on a key, the context a unit is
judged in, and small path helpers.

A detector looks at one key at a time (so the run finder can reuse it on a stream) and
says which unit the object belongs to. A *deep* claim names a directory that owns every
object under it (a checkpoint directory); a *shallow* claim puts just this object into a
unit (a single file, or the loose files of one directory). A *companion* claim (configs,
tokenizer files next to exported weights) only counts if some other object made a real
claim on the same unit, so a lone `config.json` does not become "weights".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from governance.model.types import (
    Artifact,
    CatalogObject,
    ClassifyOptions,
    Component,
    Kind,
    MetaReader,
)

WEIGHT_COMPONENTS = frozenset({Component.WEIGHTS})
STATE_COMPONENTS = frozenset({Component.OPTIMIZER, Component.SCHEDULER, Component.RNG})
_STEP_IN_NAME = re.compile(r"(?:global_step|step|iter|iteration|checkpoint|ckpt)[_=-]?(\d+)")


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class Claim:
    """The unit an object belongs to, by its key alone."""

    unit: str
    deep: bool = False
    companion: bool = False
    """Joins `unit` only when another claim of the same detector owns it; else loose, or,
    with `alone`, a unit of its own (`metrics.csv` beside TensorBoard event files or not)."""
    alone: bool = False
    tracker: bool = False
    """A save folder's bookkeeping file (`latest`): metadata, and no evidence of a run."""


class Verdict(NamedTuple):
    """Completeness of one unit with the evidence a person can read.

    A named tuple, not a dataclass: detectors memoise verdicts and their combinations
    (`functools.lru_cache`) unit after unit, and a tuple hashes and compares in C.
    """

    complete: bool
    reason: str


class MetaJson(NamedTuple):
    """A small JSON metadata file as `Context.load_json` found it.

    `read`: its whole content, as listed, was seen (read through the metadata reader, or
    empty by its listed size). False when it could not be read (no reader, the root out
    of reach, over the size limit, a read that failed or gave another size than listed):
    such a file says nothing about completeness. `data`: the parsed JSON (`_NOT_JSON`
    when it does not parse, None when not read); `value()` gives None for both.
    """

    read: bool
    data: Any
    empty: bool = False

    def problem(self, name: str) -> str | None:
        """Why a file that was read is unusable (not a JSON object), or None: fine, or
        not read (what was not read is not judged)."""
        if not self.read or isinstance(self.data, dict):
            return None
        if self.empty:
            return f"{name} is empty (a partial write)"
        if self.data is _NOT_JSON:
            return f"{name} is not valid JSON (cut short?)"
        return f"{name} is not a JSON object"

    def value(self) -> Any:
        """The parsed JSON, or None (not read, or not valid JSON)."""
        return None if self.data is _NOT_JSON else self.data


_NOT_JSON: Any = object()
"""`MetaJson.data` of a file that was read and does not parse."""
UNREAD = MetaJson(False, None)


@dataclass(slots=True)
class Context:
    """What a detector may consult when it judges a unit: the other objects of the same
    group (a run, or one top-level folder), tracker files found in pass one, and
    `read_meta` for small metadata objects."""

    options: ClassifyOptions
    read_meta: MetaReader | None
    index: Mapping[str, CatalogObject]
    trackers: Mapping[str, CatalogObject]
    _texts: dict[int, tuple[CatalogObject, str]] = field(default_factory=dict, repr=False)
    """`read_text` answers by object (many checkpoints consult one `latest`); misses are
    not kept, so a passing read failure is retried as before."""
    unread: list[str] | None = None
    """Where a metadata file that could not be read is noted (`key (why)`), when given:
    the group's decisions rest on what it says (see `Group.unread`)."""
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    """What a detector derives from a file the group's units share (DeepSpeed's `latest`
    as a step), keyed by the detector; like `_texts`, only answers from a read are kept."""

    def lookup(self, key: str) -> CatalogObject | None:
        """An object by key: from this group, else from the trackers seen in pass one."""
        obj = self.index.get(key)
        return obj if obj is not None else self.trackers.get(key)

    def read(self, obj: CatalogObject | None) -> bytes | None:
        """The bytes of a small metadata object, or None (no reader, too big, unreadable)."""
        if obj is None or self.read_meta is None or obj.upload_id:
            return None
        limit = self.options.metadata_max_bytes
        if obj.size > limit:
            self._unread(obj, f"{obj.size:,} bytes, over the {limit:,}-byte metadata limit")
            return None
        try:
            data = self.read_meta(obj)
        except OSError as exc:
            self._unread(obj, exc.strerror or str(exc) or type(exc).__name__)
            return None
        if data is None:
            self._unread(obj, "it could not be read")
        return data

    def _unread(self, obj: CatalogObject, why: str) -> None:
        if self.unread is not None:
            self.unread.append(f"{obj.key} ({why})")

    def read_json(self, obj: CatalogObject | None) -> Any:
        """Parsed JSON of a metadata object, or None."""
        data = self.read(obj)
        if data is None:
            return None
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return None

    def load_json(self, obj: CatalogObject | None) -> MetaJson:
        """A JSON metadata object with whether it was read (see `MetaJson`): what
        `read_json` gives, told apart from "could not be read". An empty object (by its
        listed size) needs no read. Bytes of another length than the listing says (a
        read cut at the size limit, a file rewritten since it was listed) count as not
        read: they are not the file that was listed."""
        if obj is None or obj.upload_id:
            return UNREAD
        if obj.size == 0:
            return MetaJson(True, _NOT_JSON, empty=True)
        data = self.read(obj)
        if data is None:
            return UNREAD
        if len(data) != obj.size:
            self._unread(obj, f"{len(data):,} bytes read, {obj.size:,} listed")
            return UNREAD
        try:
            return MetaJson(True, json.loads(data))
        except (ValueError, UnicodeDecodeError):
            return MetaJson(True, _NOT_JSON)

    def read_text(self, obj: CatalogObject | None) -> str | None:
        """Stripped text of a small object (`latest`, tracker files), or None."""
        if obj is None:
            return None
        hit = self._texts.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        data = self.read(obj)
        if data is None:
            return None
        try:
            text = data.decode("utf-8").strip()
        except UnicodeDecodeError:
            return None
        self._texts[id(obj)] = (obj, text)
        return text


class Detector:
    """One layout. Subclasses set `layout`, `kind`, and implement `claim` and `build`."""

    layout: str = ""
    kind: Kind = Kind.OTHER
    defines_runs: bool = False
    """True for checkpoint layouts: the folder holding their units is where a run lives."""
    looks_up: bool = False
    """True when a key may claim a folder *above* its own path's first telling segment
    (Orbax: an item file names its step folder). Keys inside a folder already claimed are
    only shown to these detectors: for the others the answer is already known."""
    claims_deep: bool = True
    """False when `claim` never answers a deep claim: such a detector is not asked about a
    key once a folder holding it is claimed deeply (its shallow claim could not count)."""
    needles: tuple[str, ...] | None = None
    """Substrings one of which is in every key `claim` answers for ('/' only as a needle's
    first or last character), or None: ask about every key (see `model.dispatch`)."""
    suffixes: tuple[str, ...] = ()
    """Endings that also make a key worth asking about ('/' only as the first character)."""

    def claim(self, key: str) -> Claim | None:
        """The unit this key belongs to, or None when it is not this layout's."""
        raise NotImplementedError

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        """The artifact for one unit; default: every member `other`, complete."""
        return artifact(unit, self.kind, self.layout, members, lambda _r: Component.OTHER)

    def build_all(
        self, units: Sequence[tuple[str, list[CatalogObject]]], ctx: Context
    ) -> list[Artifact]:
        """`build` of each unit, in order. Classification hands a detector all of a group's
        units at once: a layout with many units per run may share work between them."""
        build = self.build
        return [build(unit, members, ctx) for unit, members in units]


def basename(key: str) -> str:
    """Last path segment of a key (a trailing '/' is ignored)."""
    if key.endswith("/"):
        key = key[:-1]
    return key[key.rfind("/") + 1 :]


def parent(key: str) -> str:
    """The directory prefix holding a key ('' at the root), ending in '/' when not empty."""
    head, sep, _ = key.rstrip("/").rpartition("/")
    return head + sep


def rel(unit: str, key: str) -> str:
    """Key relative to a directory unit (a file unit gives its basename)."""
    if unit.endswith("/") and key.startswith(unit):
        return key[len(unit) :]
    return basename(key)


def segment_unit(key: str, start: int) -> str:
    """The directory prefix ending with the segment that begins at `start`."""
    end = key.find("/", start)
    return key if end == -1 else key[: end + 1]


def find_segment(key: str, prefix: str) -> int:
    """Index of the first path segment starting with `prefix`, or -1 (cheap: no regex)."""
    i = key.find(prefix)
    while i != -1:
        if i == 0 or key[i - 1] == "/":
            return i
        i = key.find(prefix, i + 1)
    return -1


def step_from_name(name: str) -> int | None:
    """A step number from a unit name: `step_100`, `global_step100`, `iter_0000100`, `100`."""
    name = basename(name)
    if name.isdigit():
        return int(name)
    m = _STEP_IN_NAME.search(name)
    if m:
        return int(m.group(1))
    tail = name.rpartition("_")[2]
    return int(tail) if tail.isdigit() else None


def artifact(
    unit: str,
    kind: Kind,
    layout: str,
    members: list[CatalogObject],
    component_of: Any,
    *,
    step: int | None = None,
    verdict: Verdict | None = None,
    strippable: bool | None = None,
    metrics: dict[str, float] | None = None,
    note: str = "",
    names: Sequence[str] | None = None,
) -> Artifact:
    """Build an artifact, giving each member the component `component_of(relative key)`.

    `strippable` defaults to: some optimizer/scheduler/rng state is in files of its own.
    `names`: the members' relative keys, when the caller has them already. The artifact
    takes the `members` list itself as its objects.
    """
    if names is not None:
        roles = tuple([component_of(name) for name in names])
        if len(roles) != len(members):
            raise ValueError(f"{unit}: {len(names)} names for {len(members)} objects")
    elif unit.endswith("/"):
        n = len(unit)
        roles = tuple([component_of(o.key[n:]) for o in members])
    else:
        roles = tuple([component_of(basename(o.key)) for o in members])
    if strippable is None:
        strippable = not STATE_COMPONENTS.isdisjoint(roles)
    v = verdict or _COMPLETE
    return Artifact(
        unit,
        kind,
        layout,
        members,
        roles,
        None,
        step,
        v.complete,
        v.reason,
        metrics or {},
        strippable,
        note,
    )


_COMPLETE = Verdict(True, "")


FILESYSTEM_ETAG = "mtime:"
"""How a filesystem's listing marks its stand-in ETag (`mtime:<ns>`, see
`governance.storage.base`): object stores give real ETags."""


def on_filesystem(members: Sequence[CatalogObject]) -> bool:
    """True when the objects come from a filesystem (their ETags are `mtime:` tokens), where
    a rename is atomic; False for object stores (S3, GCS: no rename, only copies)."""
    return bool(members) and all(o.etag.startswith(FILESYSTEM_ETAG) for o in members)


def non_empty_file(members: list[CatalogObject], what: str) -> Verdict:
    """Completeness of a single-file unit: it exists and is not empty."""
    if all(o.size > 0 for o in members):
        return Verdict(True, f"{what} present and non-empty")
    return Verdict(False, f"{what} is empty (a partial write)")


def digit_segment(key: str, prefix: str, allowed_tail: str = "") -> str | None:
    """The directory prefix of the first folder named `<prefix><digits>[allowed_tail]`.

    A cheap scan with `str.find` (no regex per object): `checkpoint-500/`, `iter_0000100/`,
    `global_step100_universal/`.
    """
    n = len(prefix)
    i = key.find(prefix)
    while i != -1:
        if i == 0 or key[i - 1] == "/":
            end = key.find("/", i)
            if end != -1:
                digits = key[i + n : end]
                if allowed_tail and digits.endswith(allowed_tail):
                    digits = digits[: -len(allowed_tail)]
                if digits.isdigit():
                    return key[: end + 1]
        i = key.find(prefix, i + 1)
    return None
