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

from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import and_, case, func, null, or_, select
from sqlalchemy.engine import Engine

from governance.catalog.tables import Root, StoredObject, datetime_from_us
from governance.model.types import CatalogObject
from governance.plan.types import ActionType, PlannedAction

_O = StoredObject.__table__.c  # type: ignore[attr-defined]
_R = Root.__table__.c  # type: ignore[attr-defined]

KeptFile = tuple[CatalogObject, bool]
"""One file a strip keeps, as the plan's scan saw it; and whether the catalog saw it
change after that scan (a later scan rewrote its row: it is not as the plan saw it)."""

HeldAtPlan = Callable[[Sequence[tuple[str, str]]], dict[tuple[str, str], list[KeptFile]]]
"""(root URL, folder) pairs -> the objects the catalog held under each folder (root-relative,
ending in '/') when the plan's scan of the root ran."""


def keeps_part(action: PlannedAction) -> bool:
    """A strip of a folder checkpoint: it removes some files and keeps the others."""
    return action.action is ActionType.STRIP and action.artifact.uri.endswith("/")


def kept_files(
    actions: Sequence[PlannedAction], held: HeldAtPlan | None
) -> dict[int, list[KeptFile]]:
    """action id -> the files each strip of `actions` keeps (none without `held`)."""
    strips = [a for a in actions if keeps_part(a)]
    if not strips or held is None:
        return {}
    where = {
        a.id: (a.artifact.root_url, a.artifact.uri[len(a.artifact.root_url) :]) for a in strips
    }
    under = held(sorted(set(where.values())))
    out: dict[int, list[KeptFile]] = {}
    for a in strips:
        named = {o.key for o in a.objects}
        kept = [f for f in under.get(where[a.id], ()) if f[0].key not in named]
        if kept:
            out[a.id] = kept
    return out


def held_at_plan(
    engine: Engine, scans: Mapping[str, int], folders: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], list[KeptFile]]:
    """`HeldAtPlan` from the catalog: rows under each folder that were live at the plan's
    scan of their root (`scans`: root URL -> scan id; a root without one: the live rows).
    Incomplete uploads are not files a checkpoint keeps."""
    out: dict[tuple[str, str], list[KeptFile]] = {}
    if not folders:
        return out
    postgres = engine.dialect.name == "postgresql"
    key = _O.key.collate("C") if postgres else _O.key  # byte order on every backend
    with engine.connect() as conn:
        ids = {
            str(url): int(i)
            for i, url in conn.execute(
                select(_R.id, _R.url).where(_R.url.in_({r for r, _ in folders}))
            )
        }
        for root, folder in folders:
            root_id = ids.get(root)
            if root_id is None:
                continue
            scan = scans.get(root)
            held = [_O.root_id == root_id, _O.upload_id == ""]
            if scan is not None:
                held += [
                    _O.first_scan_id <= scan,
                    or_(_O.gone_scan_id.is_(None), _O.gone_scan_id > scan),
                ]
                changed = _O.changed_scan_id > scan
            else:
                held.append(_O.gone_scan_id.is_(None))
                changed = None
            upper = folder[:-1] + chr(ord(folder[-1]) + 1)  # the keys under it sort below
            rows = conn.execute(
                select(
                    _O.key,
                    _O.size,
                    func.coalesce(_O.content_modified_us, _O.last_modified),
                    _O.etag,
                    _O.storage_class,
                    _O.version_id,
                    case((_O.content_modified_us.is_not(None), _O.last_modified), else_=null()),
                    changed if changed is not None else null(),
                )
                .where(and_(*held, key >= folder, key < upper))
                .order_by(key)
            )
            found: list[KeptFile] = []
            for k, size, written, etag, sc, vid, since, after in rows:
                obj = CatalogObject(str(k), int(size), datetime_from_us(written), etag, sc, vid)
                if since is not None:
                    obj.class_since = datetime_from_us(since)
                found.append((obj, bool(after)))
            out[(root, folder)] = found
    return out
