"""Objects an apply removed, marked gone in the catalog as they are removed.

Until the next scan the catalog otherwise held them live: `govern plan --no-scan` planned
the same removals again (each then stale at apply: "vanished"), and `govern ls` listed
what was gone. Each batch of an apply that removes objects of a root gets a `scans` row of
its own, made as it commits (`source` "apply", `status` "applied": never a complete scan,
so no plan is made from it and a scan still folds its listing in against the live rows);
the rows of the objects it removed point at it as their `gone_scan_id`, its
`objects_gone` counts them, and the root's runs and artifacts are derived again on the
next read (`ensure_classified`). A plan made before the batch still finds them
held at its scan (ids only grow), and one made after, even without scanning again, finds
them gone (the record is older than the plan: `held_then`). A restore revives them
(`journal.record_copies_in_place`); a scan that lists one again rewrites its row (it was
written since, or brought back).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.engine import Connection

from governance.catalog.bulk import execute_rows
from governance.catalog.execution_tables import RemovedObjectRow
from governance.catalog.tables import Root, Scan

_S = Scan.__table__  # type: ignore[attr-defined]
_RO = RemovedObjectRow.__table__  # type: ignore[attr-defined]
_R = Root.__table__  # type: ignore[attr-defined]

APPLY_SOURCE = "apply"
APPLY_STATUS = "applied"

Removed = tuple[str, str, str, int]
"""One object an apply removed: (root URL, key, upload id: '' but for an aborted upload,
size as the plan saw it and the check confirmed)."""


def mark_removed_gone(
    conn: Connection, removed: Sequence[Removed], *, actor: str, now: datetime
) -> int:
    """Mark the catalog rows of `removed` gone, under a `scans` row per root made now (one
    per batch: its time says when they went, `apply_records_before`); returns how many
    rows it marked. A row no longer showing the object (a scan since listed another one,
    of another size, under the key) is left as it is."""
    marked = 0
    for root in sorted({r[0] for r in removed}):
        root_id = conn.execute(select(_R.c.id).where(_R.c.url == root)).scalar()
        if root_id is None:
            continue  # a root the catalog does not know: no rows of it to mark
        adding = insert(_S).values(
            root_id=root_id,
            actor=actor,
            started_at=now,
            finished_at=now,
            status=APPLY_STATUS,
            source=APPLY_SOURCE,
            objects_listed=0,
            bytes_listed=0,
            objects_new=0,
            objects_changed=0,
            objects_gone=0,
        )
        record = int(conn.execute(adding.returning(_S.c.id)).scalar_one())
        rows = [(record, root_id, k, u, s) for r, k, u, s in removed if r == root]
        n = execute_rows(
            conn,
            "UPDATE objects SET gone_scan_id = {p} WHERE root_id = {p} AND key = {p} "
            "AND upload_id = {p} AND gone_scan_id IS NULL AND size = {p}",
            rows,
        )
        conn.execute(update(_S).where(_S.c.id == record).values(objects_gone=n))
        if n:
            derive_again(conn, [root])
        marked += n
    return marked


def apply_records_before(root_id: Any, moment: datetime) -> Any:
    """The ids of the root's apply records made before `moment` (a subquery): a row one of
    them marked gone was gone then, although its `gone_scan_id` is above every complete
    scan of the time (a plan made then, without scanning again, did not see it)."""
    return select(_S.c.id).where(
        _S.c.root_id == root_id, _S.c.source == APPLY_SOURCE, _S.c.started_at < moment
    )


def held_then(objects: Any, root_id: Any, scan: int, made_at: datetime | None) -> list[Any]:
    """Conditions on `objects` rows: live at the plan's scan of the root (`scan`), and
    not removed by an apply before the plan was made (`made_at`; None: not known)."""
    after = objects.c.gone_scan_id > scan
    if made_at is not None:
        after = and_(after, objects.c.gone_scan_id.not_in(apply_records_before(root_id, made_at)))
    return [objects.c.first_scan_id <= scan, or_(objects.c.gone_scan_id.is_(None), after)]


def revive(conn: Connection, restored: Sequence[tuple[str, str, int, str]]) -> int:
    """Mark live again the rows of objects a restore brought back as they were (a
    versioned delete undone: the old version is current again, with its ETag and time):
    (root URL, key, size, ETag). Returns how many rows it revived."""
    if not restored:
        return 0
    n = execute_rows(
        conn,
        "UPDATE objects SET gone_scan_id = NULL "
        "WHERE root_id = (SELECT id FROM roots WHERE url = {p}) AND key = {p} "
        "AND upload_id = '' AND gone_scan_id IS NOT NULL AND size = {p} AND etag = {p}",
        list(restored),
    )
    if n:
        derive_again(conn, {r[0] for r in restored})
    return n


def derive_again(conn: Connection, root_urls: Iterable[str]) -> None:
    """Have these roots' runs and artifacts (`ls runs`, `ls artifacts`) derived anew on
    the next read (`ensure_classified`): objects of theirs went or came back."""
    urls = sorted(set(root_urls))
    conn.execute(update(_R).where(_R.c.url.in_(urls)).values(classified_scan_id=None))


def recently_restored(
    conn: Connection, root_url: str, since: datetime
) -> list[tuple[str, datetime, str]]:
    """(key, when, plan id) of each object of the root that `govern restore` brought back
    after `since`, newest restore first: what the planner protects for
    `protect.restored_for` (`protect.RestoredKeys`). Restored rows are few: the purge
    index's `state` narrows the read to them."""
    rows = _RO.c
    query = (
        select(rows.key, rows.restored_at, rows.plan_id)
        .where(
            rows.state == "restored",
            rows.root_url == root_url,
            rows.restored_at > since,
        )
        .order_by(rows.restored_at.desc(), rows.key)
    )
    return [(key, when, plan) for key, when, plan in conn.execute(query)]


def last_removal(conn: Connection, root_url: str, key: str) -> dict[str, Any] | None:
    """The newest record of an apply removing the artifact or object at `key` of the root
    (a folder artifact's key ends in '/'), or None: what `govern explain` says of an
    artifact the catalog no longer holds."""
    rows = _RO.c
    uri = root_url + key
    query = (
        select(
            rows.plan_id,
            rows.action_id,
            rows.mode,
            rows.state,
            rows.removed_at,
            rows.purge_after,
            rows.purged_at,
        )
        .where(
            rows.root_url == root_url,
            or_(rows.key == key, rows.artifact_uri.in_([uri, uri.rstrip("/") + "/"])),
            rows.state != "restored",
        )
        .order_by(rows.id.desc())
        .limit(1)
    )
    row = conn.execute(query).mappings().first()
    return dict(row) if row is not None else None
