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
from itertools import pairwise
from operator import attrgetter
from typing import Any

from governance.model.detectors import REGISTRY, Context, upload_artifact
from governance.model.detectors.base import Claim, artifact, basename
from governance.model.detectors.residue import TMP_SUFFIXES
from governance.model.dispatch import Dispatch
from governance.model.types import (
    Artifact,
    CatalogObject,
    ClassifyOptions,
    Component,
    Kind,
    MetaReader,
)

_JUDGED = (Kind.CHECKPOINT, Kind.WEIGHTS)


def _outermost_root(folder: str, roots: Mapping[str, int], lengths: list[int]) -> str | None:
    """The shortest prefix of `folder` ending in '/' that is a root, given the roots'
    distinct lengths in increasing order: only prefixes of those lengths can be one (a
    group's units have a length or two; a folder has a prefix per segment)."""
    n = len(folder)
    for length in lengths:
        if length > n:
            return None
        if folder[length - 1] == "/":
            p = folder[:length]
            if p in roots:
                return p
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
    if art.complete:  # the usual case: no empty file, no partial file
        for o in art.objects:
            if not o.size or o.key.endswith(TMP_SUFFIXES):
                break
        else:
            return
    problems = []
    weights = Component.WEIGHTS
    empty: str | None = None
    partial: str | None = None
    # the first zero-byte weight file, the first partial file
    for o, role in zip(art.objects, art.roles, strict=True):
        if empty is None and o.size == 0 and role is weights:
            empty = o.key
        if partial is None and o.key.endswith(TMP_SUFFIXES):
            partial = o.key
    if empty is not None:
        problems.append(f"zero-byte weight file {empty}")
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
    if any(map(_UPLOAD_ID, objs)):  # an incomplete multipart upload is residue of its own
        out += [upload_artifact(o) for o in objs if o.upload_id]
        live = [o for o in objs if not o.upload_id]
    else:
        live = objs if isinstance(objs, list) else list(objs)
    roots: dict[str, int] = {}
    # A key's own (shallow) claim, by its index in `live`, when it made one.
    shallow: dict[int, tuple[CatalogObject, int, Claim]] = {}
    # Live objects come folder by folder: (index in `live` where a folder starts, folder).
    folders: list[tuple[int, str]] = []
    dispatch = _DISPATCH
    folder_mask = dispatch.folder_mask
    name_masks = dispatch._names
    name_mask = dispatch.name_mask
    candidate_sets = dispatch._sets
    of_mask = dispatch.of_mask
    looking_up = dispatch.looking_up
    shallow_only = dispatch.shallow_only
    folder_masks = dispatch._folders
    segment_masks = dispatch._segments
    folder = "\0"
    in_folder = 0
    parent, parent_mask = "\0", 0  # the last folder's parent (not the root) and its mask
    inside = "\0"  # the outermost folder the last fully examined key claimed
    for k, o in enumerate(live):
        key = o.key
        cut = key.rfind("/") + 1
        if key[:cut] != folder:
            folder = key[:cut]
            up = folder.rfind("/", 0, cut - 1) + 1
            seg_mask = None
            if up == len(parent) and folder.startswith(parent):
                # a sibling of the last folder (checkpoint after checkpoint): `folder_mask`
                # is the parent's mask or'ed with the folder's own segment's, both known
                seg_mask = segment_masks.get((folder[up:-1], True))
            if seg_mask is not None:
                in_folder = parent_mask | seg_mask
            else:
                in_folder = folder_mask(folder)
                found = folder_masks.get(folder[:up]) if up else None  # kept by that call
                parent, parent_mask = (folder[:up], found) if found is not None else ("\0", 0)
            folders.append((k, folder))
        name = key[cut:]
        mask = name_masks.get(name)
        if mask is None:
            mask = name_mask(name)
        mask |= in_folder
        if key.startswith(inside):
            # Already owned by a folder: only a detector looking upward can add an outer one.
            if mask & looking_up:
                for i, claim in of_mask(mask & looking_up):
                    c = claim(key)
                    if c is not None and c.deep and (c.unit not in roots or i < roots[c.unit]):
                        roots[c.unit] = i
            continue
        first: tuple[CatalogObject, int, Claim] | None = None
        outer = ""
        owned = False  # a folder holding the key is a root: its shallow claims go unused
        candidates = candidate_sets.get(mask)
        if candidates is None:
            candidates = of_mask(mask)
        for i, claim in candidates:
            if owned and shallow_only >> i & 1:
                continue
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
                if unit[-1:] == "/" and key.startswith(unit):
                    owned = True
            elif first is None:
                first = (o, i, c)
        if outer:
            inside = outer
        if first is not None:
            shallow[k] = first

    units: dict[str, list[CatalogObject]] = {}
    owner: dict[str, int] = dict(roots)
    pending: list[tuple[CatalogObject, int, Claim]] = []
    loose: list[CatalogObject] = []
    # The outermost root holding a key depends only on its folder: decided once per folder.
    folders.append((len(live), ""))
    lengths = sorted({len(u) for u in roots if u})
    for f in range(len(folders) - 1):
        begin, folder = folders[f]
        end = folders[f + 1][0]
        root = _outermost_root(folder, roots, lengths) if roots else None
        if root is not None:
            members = units.get(root)
            if members is None:
                units[root] = live[begin:end]
            else:
                members.extend(live[begin:end])
            continue
        for k in range(begin, end):
            claimed = shallow.get(k)
            if claimed is None:
                loose.append(live[k])
                continue
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

    out += _build_units(units, owner, Context(options, read_meta, _KeyIndex(live), trackers))
    out.extend(_loose(o, options) for o in loose)
    for art in out:
        art.run = run_key
    if not _in_art_order(out):
        out.sort(key=_art_order)
    return out


def _build_units(
    units: dict[str, list[CatalogObject]], owner: Mapping[str, int], ctx: Context
) -> list[Artifact]:
    """The judged artifacts of `units` (unit -> its objects), in the same order: each
    detector builds all of its units in one call (`Detector.build_all`)."""
    batches: dict[int, list[tuple[str, list[CatalogObject]]]] = {}
    for unit, members in units.items():
        if not _in_key_order(members):  # they come in key order from `objs`: almost always
            members.sort(key=_KEY)
        found = batches.get(owner[unit])
        if found is None:
            found = batches[owner[unit]] = []
        found.append((unit, members))
    if len(batches) == 1:
        [(index, batch)] = batches.items()
        arts = REGISTRY[index].build_all(batch, ctx)
    else:  # back into the order of `units`
        built: dict[str, Artifact] = {}
        for index, batch in batches.items():
            made = REGISTRY[index].build_all(batch, ctx)
            built.update(zip([unit for unit, _ in batch], made, strict=True))
        arts = [built[unit] for unit in units]
    options = ctx.options
    for art in arts:
        if art.kind in _JUDGED:
            _judge(art, options)
    return arts


def _art_order(a: Artifact) -> tuple[str, str, str]:
    return (a.key, a.layout, a.objects[0].upload_id)


def _in_art_order(arts: list[Artifact]) -> bool:
    """Whether `arts.sort(key=_art_order)` (stable) would leave them as they are: keys
    strictly increasing almost always settle it without building the sort keys."""
    for a, b in pairwise(arts):
        if a.key < b.key:
            continue
        if a.key > b.key or _art_order(a) > _art_order(b):
            return False
    return True


_KEY = attrgetter("key")
_UPLOAD_ID = attrgetter("upload_id")


def _in_key_order(objs: list[CatalogObject]) -> bool:
    """Whether `objs.sort(key=_KEY)` (stable) would leave them as they are."""
    prev = objs[0].key
    for o in objs[1:]:
        key = o.key
        if key < prev:
            return False
        prev = key
    return True


_DISPATCH = Dispatch(REGISTRY)


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
