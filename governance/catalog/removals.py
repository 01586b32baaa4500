"""Objects an apply removed, marked gone in the catalog as they are removed.

Until the next scan the catalog otherwise held them live: `govern plan --no-scan` planned
the same removals again (each then stale at apply: "vanished"), and `govern ls` listed
what was gone. Each execution that removes objects of a root gets a `scans` row of its own
(`source` "apply", `status` "applied": never a complete scan, so no plan is made from it
and a scan still folds its listing in against the live rows), and the rows of the objects
it removed point at it as their `gone_scan_id`; its `objects_gone` counts them, and the
root's runs and artifacts are derived again on the next read (`ensure_classified`). Scan ids
only grow, so a plan made before the apply still finds them held at its scan
(`journal.known_at_plan`), and one made after finds them gone. A restore revives them
(`journal.record_copies_in_place`); a scan that lists one again rewrites its row (it was
written since, or brought back).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from governance.catalog.bulk import execute_rows
from governance.catalog.tables import Root, Scan

_S = Scan.__table__  # type: ignore[attr-defined]
_R = Root.__table__  # type: ignore[attr-defined]

APPLY_SOURCE = "apply"
APPLY_STATUS = "applied"

Removed = tuple[str, str, str, int]
"""One object an apply removed: (root URL, key, upload id: '' but for an aborted upload,
size as the plan saw it and the check confirmed)."""


def mark_removed_gone(
    conn: Connection,
    removed: Sequence[Removed],
    records: dict[str, int],
    *,
    actor: str,
    now: datetime,
) -> int:
    """Mark the catalog rows of `removed` gone; returns how many rows it marked.

    `records`: root URL -> the execution's own `scans` row, added to as roots come (the
    caller keeps it for the execution's next batches). A row no longer showing the object
    (a scan since listed another one, of another size, under the key) is left as it is."""
    if not removed:
        return 0
    for root in sorted({r[0] for r in removed} - records.keys()):
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
        records[root] = int(conn.execute(adding.returning(_S.c.id)).scalar_one())
    marked = 0
    for root, record in records.items():
        rows = [(record, root, k, u, s) for r, k, u, s in removed if r == root]
        if not rows:
            continue
        n = execute_rows(
            conn,
            "UPDATE objects SET gone_scan_id = {p} "
            "WHERE root_id = (SELECT id FROM roots WHERE url = {p}) AND key = {p} "
            "AND upload_id = {p} AND gone_scan_id IS NULL AND size = {p}",
            rows,
        )
        conn.execute(
            update(_S)
            .where(_S.c.id == record)
            .values(objects_gone=_S.c.objects_gone + n, finished_at=now)
        )
        if n:  # its runs and artifacts (`ls runs`, `ls artifacts`) are derived anew
            conn.execute(update(_R).where(_R.c.url == root).values(classified_scan_id=None))
        marked += n
    return marked
