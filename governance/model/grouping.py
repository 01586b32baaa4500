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

from collections.abc import Mapping, Sequence

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
    empty = [m.obj.key for m in art.members if m.component is Component.WEIGHTS and m.obj.size == 0]
    if empty:
        problems.append(f"zero-byte weight file {empty[0]}")
    partial = [m.obj.key for m in art.members if m.obj.key.endswith(TMP_SUFFIXES)]
    if partial:
        problems.append(f"partial file {partial[0]}")
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
    for o in objs:
        if o.upload_id:
            out.append(upload_artifact(o))
        else:
            live.append(o)
    roots: dict[str, int] = {}
    shallow: list[tuple[CatalogObject, int, Claim] | None] = []
    registry = REGISTRY
    lookers = [(i, d) for i, d in enumerate(registry) if d.looks_up]
    inside = "\0"  # the outermost folder the last fully examined key claimed
    for o in live:
        key = o.key
        if key.startswith(inside):
            # Already owned by a folder: only a detector looking upward can add an outer one.
            for i, det in lookers:
                c = det.claim(key)
                if c is not None and c.deep and (c.unit not in roots or i < roots[c.unit]):
                    roots[c.unit] = i
            shallow.append(None)
            continue
        first: tuple[CatalogObject, int, Claim] | None = None
        outer = ""
        for i, det in enumerate(registry):
            c = det.claim(key)
            if c is None:
                continue
            if c.deep:
                prev = roots.get(c.unit)
                if prev is None or i < prev:
                    roots[c.unit] = i
                if not outer or len(c.unit) < len(outer):
                    outer = c.unit
            elif first is None:
                first = (o, i, c)
        if outer:
            inside = outer
        shallow.append(first)

    units: dict[str, list[CatalogObject]] = {}
    owner: dict[str, int] = dict(roots)
    pending: list[tuple[CatalogObject, int, Claim]] = []
    loose: list[CatalogObject] = []
    for o, claim in zip(live, shallow, strict=True):
        root = _outermost_root(o.key, roots) if roots else None
        if root is not None:
            units.setdefault(root, []).append(o)
        elif claim is None:
            loose.append(o)
        else:
            pending.append(claim)
            _, i, c = claim
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

    ctx = Context(options, read_meta, {o.key: o for o in live}, trackers)
    for unit, members in units.items():
        members.sort(key=lambda m: m.key)
        art = registry[owner[unit]].build(unit, members, ctx)
        _judge(art, options)
        out.append(art)
    out.extend(_loose(o, options) for o in loose)
    for art in out:
        art.run = run_key
    out.sort(key=lambda a: (a.key, a.layout, a.members[0].obj.upload_id))
    return out
