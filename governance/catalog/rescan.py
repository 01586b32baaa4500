"""A re-scan on SQLite that compares as it lists, so little is left to do when the listing ends.

`bulk.merge_stage` folds a whole staged listing into `objects` after the listing: an
upsert probe and an anti-join probe per listed object, all of it after the last row
arrives. On SQLite the scanner's process has time to spare while the listing runs (a
local walk runs in its own process, S3 pages arrive over the network), so `RescanDiff`
does the probing then: each batch is staged, and the rows that are new, changed or
revived are set aside in `scan_changes`, with whether they matched a live object. When
the listing is complete, only the set-aside rows are written, and the vanished objects
are found by counting: the live objects the listing matched, against the live objects
there were. The anti-join runs only when the two differ.

The counts are only as good as the snapshot they were taken from: if another connection
committed to the catalog while the listing ran (`PRAGMA data_version` moved), `finish`
falls back to `bulk.merge_stage` over the full stage, which is right whatever happened.
A listing holds each key once (a directory walk, an S3 listing of disjoint prefixes), as
the upsert in `merge_stage` needs too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from governance.catalog import bulk
from governance.storage.base import AnyRow

_COLUMNS = ", ".join(bulk.STAGE_COLUMNS)
_FROM_BATCH = ", ".join(f"b.{c}" for c in bulk.STAGE_COLUMNS)
_DIFFERS = (
    "o.size <> b.size OR o.etag <> b.etag OR o.last_modified <> b.last_modified "
    "OR o.storage_class IS NOT b.storage_class OR o.version_id IS NOT b.version_id "
    "OR o.gone_scan_id IS NOT NULL"
)


def applies_to(conn: Connection) -> bool:
    """Comparing while listing is for SQLite; PostgreSQL merges the COPY-staged listing."""
    return conn.dialect.name == "sqlite"


class RescanDiff:
    """Stage a re-scan's listing batch by batch and set aside what differs (see module doc).

    Use: `start()`, `add(batch)` per batch, `conn.commit()`, then `finish(scan_id)` in
    the transaction that completes the scan, then `drop()`.
    """

    def __init__(self, conn: Connection, root_id: int) -> None:
        self.conn = conn
        self.root_id = root_id
        self.listed = 0
        self._live_before = 0
        self._version: int | None = None

    def _exec(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        return self.conn.exec_driver_sql(sql, params or {})

    def start(self) -> None:
        """Create the temporary tables and count the live objects the listing will meet."""
        self._version = self._data_version()
        bulk.create_stage(self.conn)
        self._exec("DROP TABLE IF EXISTS scan_batch")
        self._exec("CREATE TEMPORARY TABLE scan_batch AS SELECT * FROM scan_stage WHERE 0")
        self._exec("DROP TABLE IF EXISTS scan_changes")
        self._exec(
            "CREATE TEMPORARY TABLE scan_changes AS "
            "SELECT *, 0 AS existed, 0 AS was_live FROM scan_stage WHERE 0"
        )
        self._live_before = self.conn.execute(
            text("SELECT count(*) FROM objects WHERE root_id = :root AND gone_scan_id IS NULL"),
            {"root": self.root_id},
        ).scalar_one()

    def _data_version(self) -> int:
        return int(self._exec("PRAGMA data_version").scalar_one())

    def add(self, rows: Sequence[AnyRow]) -> None:
        """Stage one batch and set aside its new, changed and revived rows."""
        if not rows:
            return
        columns, values = bulk.sqlite_values(rows)
        cursor: Any = self.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(f"INSERT INTO scan_batch ({columns}) VALUES ({values})", rows)
        finally:
            cursor.close()
        self._exec(f"INSERT INTO scan_stage ({_COLUMNS}) SELECT {_COLUMNS} FROM scan_batch")
        self._exec(
            f"INSERT INTO scan_changes ({_COLUMNS}, existed, was_live) "
            f"SELECT {_FROM_BATCH}, o.id IS NOT NULL, "
            "o.id IS NOT NULL AND o.gone_scan_id IS NULL "
            "FROM scan_batch AS b LEFT JOIN objects AS o "
            "ON o.root_id = :root AND o.key = b.key AND o.upload_id = b.upload_id "
            f"WHERE o.id IS NULL OR {_DIFFERS}",
            {"root": self.root_id},
        )
        self._exec("DELETE FROM scan_batch")
        self.listed += len(rows)

    def finish(self, scan_id: int) -> tuple[int, int, int]:
        """Fold the listing into `objects`; returns (new, changed, gone) like `merge_stage`.

        Call in a fresh transaction: its first statement takes the write lock, so no
        other connection can commit between the check of `data_version` and the writes.
        """
        params = {"root": self.root_id, "scan": scan_id}
        self.conn.execute(
            text("UPDATE scans SET status = status WHERE id = :scan"), params
        )  # the write lock
        if self._data_version() != self._version:
            bulk.index_stage(self.conn)
            return bulk.merge_stage(self.conn, self.root_id, scan_id)
        new, changed, unmatched = self._exec(
            "SELECT coalesce(sum(existed = 0), 0), coalesce(sum(existed), 0), "
            "coalesce(sum(was_live = 0), 0) FROM scan_changes"
        ).one()
        if changed:  # (what an apply removed since the listing began stays gone)
            changed -= self.conn.execute(
                text(
                    "SELECT count(*) FROM scan_changes AS c JOIN objects ON "
                    "objects.root_id = :root AND objects.key = c.key AND "
                    f"objects.upload_id = c.upload_id WHERE NOT {bulk.NOT_REMOVED_SINCE}"
                ),
                params,
            ).scalar_one()
        if new or changed:
            bulk.upsert_objects(
                self.conn, self.root_id, scan_id, "scan_changes", only_if=bulk.NOT_REMOVED_SINCE
            )
        matched_live = self.listed - unmatched
        gone = 0
        if matched_live != self._live_before:
            bulk.index_stage(self.conn)
            gone = bulk.mark_gone(self.conn, self.root_id, scan_id)
        return int(new), int(changed), gone

    def drop(self) -> None:
        for table in ("scan_batch", "scan_changes"):
            self._exec(f"DROP TABLE IF EXISTS {table}")
        bulk.drop_stage(self.conn)
