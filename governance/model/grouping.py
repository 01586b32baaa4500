"""Objects of one group (a run, or one top-level folder outside runs) -> artifacts.

Every object lands in exactly one artifact:
1. an incomplete multipart upload is residue of its own;
2. else the outermost folder some detector claimed deeply (a checkpoint folder) owns it;
3. else its own shallow claim (a file, or the loose files of a folder), the earliest
   detector in the registry winning a contested folder; a companion claim (a config next
   to weights) counts only if that folder is a real unit of the same detector;
4. else it is an artifact of its own, kind `other`.
Then incomplete checkpoints older than the grace period become residue.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any

from governance.model.detectors import REGISTRY, Context, upload_artifact
from governance.model.detectors.base import Claim, artifact, basename
from governance.model.detectors.residue import TMP_SUFFIXES
from governance.model.types import (
    Artifact,
    CatalogObject,
    ClassifyOptions,
    Component,
    Kind,
    MetaReader,
)

_JUDGED = (Kind.CHECKPOINT, Kind.WEIGHTS)


def _outermost_root(key: str, roots: Mapping[str, int]) -> str | None:
    i = key.find("/")
    while i != -1:
        p = key[: i + 1]
        if p in roots:
            return p
        i = key.find("/", i + 1)
    return None


def _loose(obj: CatalogObject, options: ClassifyOptions) -> Artifact:
    """An object no detector claims: an artifact of its own (status markers are metadata)."""
    base = basename(obj.key)
    marker = base in options.completed_markers or base in options.failed_markers
    comp = Component.METADATA if marker else Component.OTHER
    return artifact(obj.key, Kind.OTHER, "marker" if marker else "other", [obj], lambda _n: comp)


def _judge(art: Artifact, options: ClassifyOptions) -> None:
    """Zero-byte weights and partial files make a unit incomplete; an incomplete unit past the
    grace period is residue (the reason stays), inside it an in-flight checkpoint."""
    if art.kind not in _JUDGED:
        return
    problems = []
    weights = Component.WEIGHTS
    empty = next(
        (m.obj.key for m in art.members if m.obj.size == 0 and m.component is weights), None
    )
    if empty is not None:
        problems.append(f"zero-byte weight file {empty}")
    partial = next((m.obj.key for m in art.members if m.obj.key.endswith(TMP_SUFFIXES)), None)
    if partial is not None:
        problems.append(f"partial file {partial}")
    if problems:
        reason = "; ".join(problems)
        art.completeness_reason = reason if art.complete else f"{art.completeness_reason}; {reason}"
        art.complete = False
    if art.complete:
        return
    if options.as_of - art.last_modified <= options.grace:
        art.note = (art.note + "; " if art.note else "") + "in flight (within grace period)"
    else:
        art.note = (
            art.note + "; " if art.note else ""
        ) + f"incomplete {art.kind.value} past grace period"
        art.kind = Kind.RESIDUE


def classify_group(
    objs: Sequence[CatalogObject],
    run_key: str | None,
    options: ClassifyOptions,
    read_meta: MetaReader | None,
    trackers: Mapping[str, CatalogObject],
) -> list[Artifact]:
    """Artifacts of one group, sorted by key; `objs` sorted by key."""
    out: list[Artifact] = []
    live: list[CatalogObject] = []
    roots: dict[str, int] = {}
    shallow: list[tuple[CatalogObject, int, Claim] | None] = []
    claims = _CLAIMS
    lookers = _LOOKERS
    inside = "\0"  # the outermost folder the last fully examined key claimed
    for o in objs:
        if o.upload_id:
            out.append(upload_artifact(o))
            continue
        live.append(o)
        key = o.key
        if key.startswith(inside):
            # Already owned by a folder: only a detector looking upward can add an outer one.
            for i, claim in lookers:
                c = claim(key)
                if c is not None and c.deep and (c.unit not in roots or i < roots[c.unit]):
                    roots[c.unit] = i
            shallow.append(None)
            continue
        first: tuple[CatalogObject, int, Claim] | None = None
        outer = ""
        for i, claim in claims:
            c = claim(key)
            if c is None:
                continue
            if c.deep:
                unit = c.unit
                prev = roots.get(unit)
                if prev is None or i < prev:
                    roots[unit] = i
                if not outer or len(unit) < len(outer):
                    outer = unit
            elif first is None:
                first = (o, i, c)
        if outer:
            inside = outer
        shallow.append(first)

    units: dict[str, list[CatalogObject]] = {}
    owner: dict[str, int] = dict(roots)
    pending: list[tuple[CatalogObject, int, Claim]] = []
    loose: list[CatalogObject] = []
    # The outermost root holding a key depends only on its folder, and sorted keys come
    # folder by folder: remember the last folder's answer.
    last_dir = "\0"
    root: str | None = None
    for o, claimed in zip(live, shallow, strict=True):
        if roots:
            key = o.key
            folder = key[: key.rfind("/") + 1]
            if folder != last_dir:
                last_dir = folder
                root = _outermost_root(folder, roots)
        if root is not None:
            members = units.get(root)
            if members is None:
                units[root] = [o]
            else:
                members.append(o)
        elif claimed is None:
            loose.append(o)
        else:
            pending.append(claimed)
            _, i, c = claimed
            if not c.companion and (c.unit not in owner or i < owner[c.unit]):
                owner[c.unit] = i
    for o, i, c in pending:
        if owner.get(c.unit) == i:
            units.setdefault(c.unit, []).append(o)
        elif c.companion:
            loose.append(o)
        else:
            units.setdefault(o.key, []).append(o)
            owner[o.key] = i

    ctx = Context(options, read_meta, _KeyIndex(live), trackers)
    registry = REGISTRY
    for unit, members in units.items():
        members.sort(key=_KEY)
        art = registry[owner[unit]].build(unit, members, ctx)
        _judge(art, options)
        out.append(art)
    out.extend(_loose(o, options) for o in loose)
    for art in out:
        art.run = run_key
    out.sort(key=_art_order)
    return out


def _art_order(a: Artifact) -> tuple[str, str, str]:
    return (a.key, a.layout, a.members[0].obj.upload_id)


_KEY = attrgetter("key")
_CLAIMS = tuple((i, d.claim) for i, d in enumerate(REGISTRY))
_LOOKERS = tuple((i, d.claim) for i, d in enumerate(REGISTRY) if d.looks_up)


class _KeyIndex(Mapping[str, CatalogObject]):
    """The group's objects by key, built on first use (most groups never look one up)."""

    __slots__ = ("_map", "_objs")

    def __init__(self, objs: list[CatalogObject]) -> None:
        self._objs = objs
        self._map: dict[str, CatalogObject] | None = None

    def _get_map(self) -> dict[str, CatalogObject]:
        if self._map is None:
            self._map = {o.key: o for o in self._objs}
        return self._map

    def __getitem__(self, key: str) -> CatalogObject:
        return self._get_map()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._get_map().get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._get_map())

    def __len__(self) -> int:
        return len(self._get_map())
