"""What a strip keeps must still be there: its kept files are re-checked before it removes
anything.

A strip removes part of a checkpoint (the optimizer state) and keeps the rest (weights,
metadata) so that the checkpoint still loads: the plan lists it as kept, stripped. Should a
kept file have vanished or changed since the plan was made, removing the rest would leave
what neither loads nor resumes, while the reviewer approved a checkpoint that loads: the
strip is stale (nothing of it is done; a later plan decides on the checkpoint as it is).

The kept files are the objects the catalog held under the checkpoint's folder when the
plan's scan of its root ran, less those the strip names (one range query per folder);
they are compared as the strip's own objects are (`preconditions._changed`), and read in
the same requests. A file added to the folder since changes nothing a strip does and is
not looked at (see `folders`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, null, select
from sqlalchemy.engine import Connection, Engine

from governance.catalog.engine import sorts_as_bytes
from governance.catalog.removals import held_then
from governance.catalog.roots import root_ids
from governance.catalog.tables import StoredObject, datetime_from_us
from governance.model.types import CatalogObject
from governance.plan.types import ActionType, PlannedAction
from governance.storage.base import epoch_micros

_OBJECTS = StoredObject.__table__  # type: ignore[attr-defined]
_O = _OBJECTS.c

KeptFile = tuple[CatalogObject, bool]
"""One file a strip keeps, as the catalog has it; and whether a scan after the plan's
found it written again after the plan was made (its row rewritten, its time later: it is
not what the plan saw; a row rewritten for a class change alone, as S3 lifecycle makes,
keeps its time and is compared as it is now)."""

HeldAtPlan = Callable[[Sequence[tuple[str, str]]], dict[tuple[str, str], list[KeptFile]]]
"""(root URL, folder) pairs -> the objects the catalog held under each folder (root-relative,
ending in '/') when the plan's scan of the root ran."""


def keeps_part(action: PlannedAction) -> bool:
    """A strip of a folder checkpoint: it removes some files and keeps the others."""
    return action.action is ActionType.STRIP and action.artifact.uri.endswith("/")


def kept_files(
    actions: Sequence[PlannedAction],
    held: HeldAtPlan | None,
    started: Collection[int] = (),
    moved: Collection[tuple[str, str]] = (),
) -> dict[int, list[KeptFile]]:
    """action id -> the files each strip of `actions` keeps (none without `held`).

    Left out: a strip an earlier apply of the plan started (`started`: it was checked
    then, and what it removed must be finished and journaled, not called stale), and the
    files the plan's other actions on the same artifact act on (the archive of what the
    strip keeps moves or copies them: their own checks cover them). Apply's batches never
    separate the actions of one artifact, so those are among `actions`, or done by an
    earlier apply: `moved` holds (root URL, key) of what those removed."""
    strips = [a for a in actions if keeps_part(a) and a.id not in started]
    if not strips or held is None:
        return {}
    where = {
        a.id: (a.artifact.root_url, a.artifact.uri[len(a.artifact.root_url) :]) for a in strips
    }
    acted: dict[str, set[str]] = {}  # artifact URI -> keys its actions act on
    uris = {a.artifact.uri for a in strips}
    for a in actions:
        if a.artifact.uri in uris:
            acted.setdefault(a.artifact.uri, set()).update(o.key for o in a.objects)
    under = held(sorted(set(where.values())))
    out: dict[int, list[KeptFile]] = {}
    for a in strips:
        named = acted[a.artifact.uri]
        root = a.artifact.root_url
        kept = [
            f
            for f in under.get(where[a.id], ())
            if f[0].key not in named and (root, f[0].key) not in moved
        ]
        if kept:
            out[a.id] = kept
    return out


def held_at_plan(
    engine: Engine,
    scans: Mapping[str, int],
    folders: Sequence[tuple[str, str]],
    made_at: datetime | None = None,
) -> dict[tuple[str, str], list[KeptFile]]:
    """`HeldAtPlan` from the catalog: rows under each folder that were live at the plan's
    scan of their root (`scans`: root URL -> scan id; a root without one: the live rows)
    and not removed by an apply before the plan was made (`made_at`). Incomplete uploads
    are not files a checkpoint keeps."""
    out: dict[tuple[str, str], list[KeptFile]] = {}
    if not folders:
        return out
    with engine.connect() as conn:
        key = _byte_ordered_key(conn)
        ids = root_ids(conn, (r for r, _ in folders))
        for root, folder in folders:
            root_id = ids.get(root)
            if root_id is None:
                continue
            upper = folder[:-1] + chr(ord(folder[-1]) + 1)  # the keys under it sort below
            out[(root, folder)] = _held_rows(
                conn, root_id, scans.get(root), made_at, and_(key >= folder, key < upper), key
            )
    return out


def files_held_at_plan(
    engine: Engine,
    scans: Mapping[str, int],
    keys: Sequence[tuple[str, str]],
    made_at: datetime | None = None,
) -> dict[tuple[str, str], KeptFile]:
    """(root URL, key) -> the object the catalog held at that key when the plan's scan of
    its root ran (as `held_at_plan`), for those of `keys` that it held."""
    by_root: dict[str, list[str]] = {}
    for root, k in keys:
        by_root.setdefault(root, []).append(k)
    out: dict[tuple[str, str], KeptFile] = {}
    if not by_root:
        return out
    with engine.connect() as conn:
        ids = root_ids(conn, by_root)
        for root, wanted in by_root.items():
            root_id = ids.get(root)
            if root_id is None:
                continue
            for start in range(0, len(wanted), 500):  # bounded IN lists
                part = wanted[start : start + 500]
                rows = _held_rows(conn, root_id, scans.get(root), made_at, _O.key.in_(part))
                out.update(((root, f[0].key), f) for f in rows)
    return out


def _held_rows(
    conn: Connection,
    root_id: int,
    scan: int | None,
    made_at: datetime | None,
    which: Any,
    order: Any = None,
) -> list[KeptFile]:
    """The root's rows `which` selects that were live at `scan` (None: live now), each
    with whether a scan after it saw it written again after `made_at`."""
    held = [_O.root_id == root_id, _O.upload_id == ""]
    written = func.coalesce(_O.content_modified_us, _O.last_modified)
    if scan is not None:
        held += held_then(_OBJECTS, root_id, scan, made_at)
        changed = _O.changed_scan_id > scan
        if made_at is not None:  # and written since: a class change keeps the time
            changed = and_(changed, written > epoch_micros(made_at))
    else:
        held.append(_O.gone_scan_id.is_(None))
        changed = None
    query = select(
        _O.key,
        _O.size,
        written,
        _O.etag,
        _O.storage_class,
        _O.version_id,
        case((_O.content_modified_us.is_not(None), _O.last_modified), else_=null()),
        changed if changed is not None else null(),
    ).where(and_(*held, which))
    if order is not None:
        query = query.order_by(order)
    found: list[KeptFile] = []
    for k, size, when, etag, sc, vid, since, after in conn.execute(query):
        obj = CatalogObject(str(k), int(size), datetime_from_us(when), etag, sc, vid)
        if since is not None:
            obj.class_since = datetime_from_us(since)
        found.append((obj, bool(after)))
    return found


def _byte_ordered_key(conn: Connection) -> Any:
    """`objects.key` for a range query in byte order (the keys under a folder lie between
    it and its successor there): as it is on SQLite and on a PostgreSQL database whose
    collation is byte order already; else with `COLLATE "C"`, which the index
    `ix_objects_root_key_bytes` answers there (`engine.byte_order_index`)."""
    return _O.key if sorts_as_bytes(conn) else _O.key.collate("C")


NEXT_ACTIONS = 4
"""How many actions after a strip may be others of its artifact (plans order one
artifact's actions together, strip first: a transition, an archive)."""


def after_strips(actions: Sequence[PlannedAction]) -> tuple[list[int], set[str]]:
    """The ids that may be the other actions of the strips' artifacts and are not among
    `actions` (done by an earlier apply), and those artifacts' URIs."""
    strips = [a for a in actions if keeps_part(a)]
    here = {a.id for a in actions}
    ids = sorted({s.id + k for s in strips for k in range(1, NEXT_ACTIONS + 1)} - here)
    return ids, {s.artifact.uri for s in strips}
