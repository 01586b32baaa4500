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

import re
from bisect import bisect_right
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import islice, pairwise
from operator import attrgetter, itemgetter, le, lt
from typing import Any, cast

from governance.model.detectors import REGISTRY, Context, upload_artifact
from governance.model.detectors.base import Claim, artifact, basename
from governance.model.detectors.residue import TMP_SUFFIXES, ResidueDetector
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
_DISTCP = ".distcp"


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


def _outermost_roots(
    folders: Sequence[tuple[int, str]], roots: Mapping[str, int], lengths: list[int]
) -> list[str | None]:
    """`_outermost_root` of each (start, folder), in one call for a group's folders."""
    if not lengths:
        return [None] * len(folders)
    return [_outermost_root(folder, roots, lengths) for _, folder in folders]


def _loose(obj: CatalogObject, options: ClassifyOptions) -> Artifact:
    """An object no detector claims: an artifact of its own (status markers are metadata)."""
    base = basename(obj.key)
    marker = base in options.completed_markers or base in options.failed_markers
    comp = Component.METADATA if marker else Component.OTHER
    return artifact(obj.key, Kind.OTHER, "marker" if marker else "other", [obj], lambda _n: comp)


_GOVERN_TMP = ".govern"
"""What every temporary name govern writes under holds (`storage.fs._temporary_name`)."""


def _is_govern_tmp(key: str) -> bool:
    """Whether the key is one of govern's own temporary files (`.NAME.govern[-tag].tmp`,
    `.govern-DIGEST[-tag].tmp`), left by a write killed between its link and its unlink."""
    return _GOVERN_TMP_NAME.fullmatch(basename(key)) is not None


_GOVERN_TMP_NAME = re.compile(
    r"\.(?:.+\.govern|govern-[0-9a-f]{32})(?:-[0-9a-f]{12})?\.tmp", re.DOTALL
)


def _debris(obj: CatalogObject) -> Artifact:
    """govern's own temporary file as residue of its own: a second name of a file govern
    wrote (restored, quarantined), never a partial file of the checkpoint holding it (it
    made that checkpoint incomplete, then residue, deleted whole by the next plan)."""
    return artifact(
        obj.key,
        Kind.RESIDUE,
        "residue",
        [obj],
        lambda _n: Component.OTHER,
        note="govern's own temporary file, left by an interrupted write",
    )


def _judge(art: Artifact, options: ClassifyOptions) -> None:
    """Zero-byte weights (but DCP shards) and partial files make a unit incomplete; an
    incomplete unit past the grace period is residue (the reason stays), inside it an
    in-flight checkpoint."""
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
    # the first zero-byte weight file, the first partial file; an empty `.distcp` shard is
    # what torch.distributed.checkpoint leaves for a rank with nothing to write (its
    # `.metadata` says where every tensor is: the detectors judge shard sets whole)
    for o, role in zip(art.objects, art.roles, strict=True):
        if empty is None and o.size == 0 and role is weights and not o.key.endswith(_DISTCP):
            empty = o.key
        if partial is None and o.key.endswith(TMP_SUFFIXES):
            partial = o.key
    if empty is not None and not (empty == art.key and not art.complete):
        # (a one-file unit its detector found empty already says so)
        problems.append(f"zero-byte weight file {empty}")
    if partial is not None:
        problems.append(f"partial file {partial}")
    if problems:
        reason = "; ".join(problems)
        art.completeness_reason = reason if art.complete else f"{art.completeness_reason}; {reason}"
        art.complete = False
    if art.complete:
        return
    if art.unjudged:  # not known to be incomplete: kept, never residue
        art.note = (art.note + "; " if art.note else "") + "in flight (commit not known)"
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
    unread: list[str] | None = None,
) -> list[Artifact]:
    """Artifacts of one group, sorted by key; `objs` sorted by key (`unread`: where the
    metadata files that could not be read are noted, see `Context.unread`).

    What one look at the whole group settles is not asked unit by unit: whether the
    objects are in key order (a unit's objects then need no check), which units may hold
    an empty or partial file (only those and the incomplete ones are judged), and where
    a tracker file is (by bisection, without a map of every key)."""
    out: list[Artifact] = []
    uploads = [o.upload_id for o in objs]  # (a list comprehension: quicker than a map)
    if any(uploads):  # an incomplete multipart upload is residue of its own
        out += [upload_artifact(o) for o in objs if o.upload_id]
        live = [o for o in objs if not o.upload_id]
    else:
        live = objs if isinstance(objs, list) else list(objs)
    if any(_GOVERN_TMP in o.key for o in live):  # (one scan in C-speed `in` per key)
        out += [_debris(o) for o in live if _is_govern_tmp(o.key)]
        live = [o for o in live if not _is_govern_tmp(o.key)]
    keys = [o.key for o in live]
    # In key order (as the stream gives them: checked in C), a unit made of slices of
    # `live` is in key order too, and a key is found by bisection (see `_KeyIndex`).
    ordered = all(map(le, keys, islice(keys, 1, None)))
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
    maybe_partial: list[int] = []
    for k, key in enumerate(keys):
        cut = key.rfind("/") + 1
        if (f := key[:cut]) != folder:
            folder = f
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
        if mask & _TMP_BIT:  # the name may end like a partial file
            maybe_partial.append(k)
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
                if roots.setdefault(unit, i) > i:  # the earliest detector's claim
                    roots[unit] = i
                if not outer or len(unit) < len(outer):
                    outer = unit
                if unit[-1:] == "/" and key.startswith(unit):
                    owned = True
            elif first is None:
                first = (live[k], i, c)
        if outer:
            inside = outer
        if first is not None:
            shallow[k] = first

    units: dict[str, list[CatalogObject]] = {}
    owner: dict[str, int] = dict(roots)
    pending: list[tuple[CatalogObject, int, Claim]] = []
    loose: list[CatalogObject] = []
    folders.append((len(live), ""))
    lengths = sorted(set(map(len, roots)) - {0})  # of the roots but ''
    # The outermost root holding a key depends only on its folder: decided once per folder.
    held = _outermost_roots(folders, roots, lengths)  # (and the end marker's: None)
    for ((begin, _), (end, _)), root in zip(pairwise(folders), held, strict=False):
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
    # The units shallow claims add to: with `live` in order, the only ones that may not be.
    added: set[str] = set()
    for o, i, c in pending:
        if owner.get(c.unit) == i:
            units.setdefault(c.unit, []).append(o)
            added.add(c.unit)
        elif c.companion and not c.alone:
            loose.append(o)
        else:
            units.setdefault(o.key, []).append(o)
            owner[o.key] = i
            added.add(o.key)
    # The units that may hold an empty or partial object (see `_build_units`): those
    # shallow claims add to, and the roots holding the folder of such an object.
    suspects = set(added)
    bad = [k for k in maybe_partial if keys[k].endswith(TMP_SUFFIXES)]
    bad += _positions([not o.size for o in live], True)  # empty
    for k in bad:
        root = held[bisect_right(folders, k, key=_BEGIN) - 1]
        if root is not None:
            suspects.add(root)

    ctx = Context(options, read_meta, _KeyIndex(live, keys if ordered else None), trackers)
    ctx.unread = unread
    built = _build_units(units, owner, ctx, units if not ordered else added, suspects)
    if run_key is not None and run_key in units:
        built = _files_of_run_folder_logs(built, run_key)
    out += built
    out.extend(_loose(o, options) for o in loose)
    if unread:
        # an artifact whose commit could not be judged is kept in flight already: what
        # could not be read in it needs no more care (see `Group.unread`)
        unjudged = tuple(a.key for a in built if a.unjudged)
        if unjudged:
            unread[:] = [u for u in unread if not u.startswith(unjudged)]
    for art in out:
        art.run = run_key
    _sort_arts(out)
    return out


_EVENTS = "events.out.tfevents."


def _files_of_run_folder_logs(arts: list[Artifact], run_key: str) -> list[Artifact]:
    """A log stream whose folder is the run's own (Lightning's `version_0/` holds its
    TensorBoard event files) as one artifact per file: named by its folder, the log
    read as the whole run in reports ("delete runs/r1/") and explanations."""
    out: list[Artifact] = []
    for art in arts:
        if art.key != run_key or art.kind is not Kind.LOG:
            out.append(art)
            continue
        for obj, role in zip(art.objects, art.roles, strict=True):
            # the logger's other files (`hparams.yaml`, `metrics.csv`) are plain logs
            layout = art.layout if _EVENTS in obj.key else "log"
            one = Artifact(obj.key, art.kind, layout, [obj], (role,), note=art.note)
            one.complete, one.completeness_reason = art.complete, art.completeness_reason
            out.append(one)
    return out


def _build_units(
    units: dict[str, list[CatalogObject]],
    owner: Mapping[str, int],
    ctx: Context,
    unordered: Collection[str],
    suspects: Collection[str] | None = None,
) -> list[Artifact]:
    """The judged artifacts of `units` (unit -> its objects), in the same order: each
    detector builds all of its units in one call (`Detector.build_all`).

    `unordered`: the units whose objects may be out of key order (the others are in key
    order already). `suspects`: the units that may hold an empty or partial object. Only
    their artifacts and the incomplete ones are judged: `_judge` leaves a complete
    artifact without such an object as it is."""
    for unit in unordered:
        members = units[unit]
        if not _in_key_order(members):  # they come in key order from `objs`: almost always
            members.sort(key=_KEY)
    indexes = set(map(owner.__getitem__, units))
    if len(indexes) == 1:  # one detector (checkpoint after checkpoint): no batches to form
        arts = REGISTRY[indexes.pop()].build_all(list(units.items()), ctx)
    else:  # back into the order of `units`
        batches: dict[int, list[tuple[str, list[CatalogObject]]]] = {}
        for unit, members in units.items():
            found = batches.get(owner[unit])
            if found is None:
                found = batches[owner[unit]] = []
            found.append((unit, members))
        built: dict[str, Artifact] = {}
        for index, batch in batches.items():
            made = REGISTRY[index].build_all(batch, ctx)
            built.update(zip([unit for unit, _ in batch], made, strict=True))
        arts = [built[unit] for unit in units]
    if suspects is None:  # the plain way: judge every one
        judged = arts
    else:
        judged = [a for a in arts if not a.complete]
        if suspects:
            judged += [a for u, a in zip(units, arts, strict=True) if a.complete and u in suspects]
    options = ctx.options
    for art in judged:
        if art.kind in _JUDGED:
            _judge(art, options)
    return arts


def _sort_arts(arts: list[Artifact]) -> None:
    """`arts.sort(key=_art_order)` unless `_in_art_order(arts)`: checked in C when keys
    increase (the usual case), and sorted by key alone when no two keys are equal."""
    keys = [a.key for a in arts]
    if all(map(lt, keys, islice(keys, 1, None))):
        return  # strictly increasing keys: in order
    if len(set(keys)) == len(keys):  # no tie: the key alone decides the order
        arts.sort(key=_KEY)
    elif not _in_art_order(arts):
        arts.sort(key=_art_order)


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
_BEGIN = itemgetter(0)


def _positions(values: list[Any], value: Any) -> list[int]:
    """The indexes of the items equal to `value` (searched in C: they are few)."""
    found: list[int] = []
    try:
        i = values.index(value)
        while True:
            found.append(i)
            i = values.index(value, i + 1)
    except ValueError:
        return found


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
_RESIDUE = next(i for i, d in enumerate(REGISTRY) if isinstance(d, ResidueDetector))
_TMP_BIT = 1 << _RESIDUE
"""In the file-name mask of every key ending like a partial file (`TMP_SUFFIXES`, the
residue detector's suffixes): a key whose name lacks it is not one."""
if not set(TMP_SUFFIXES) <= set(REGISTRY[_RESIDUE].suffixes):
    raise AssertionError("the residue detector must have every partial-file suffix")


class _KeyIndex(Mapping[str, CatalogObject]):
    """The group's objects by key: found by bisection in `keys` (the objects' keys, given
    when in order), else in a map built on first use (most groups never look one up)."""

    __slots__ = ("_keys", "_map", "_objs")

    def __init__(self, objs: list[CatalogObject], keys: list[str] | None = None) -> None:
        self._objs = objs
        self._keys = keys
        self._map: dict[str, CatalogObject] | None = None

    def _get_map(self) -> dict[str, CatalogObject]:
        if self._map is None:
            self._map = {o.key: o for o in self._objs}
        return self._map

    def __getitem__(self, key: str) -> CatalogObject:
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return cast(CatalogObject, found)

    def get(self, key: str, default: Any = None) -> Any:
        keys = self._keys
        if keys is None:
            return self._get_map().get(key, default)
        i = bisect_right(keys, key)  # the last of equal keys, as the map keeps
        return self._objs[i - 1] if i and keys[i - 1] == key else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._get_map())

    def __len__(self) -> int:
        return len(self._get_map())


_MISSING = object()
