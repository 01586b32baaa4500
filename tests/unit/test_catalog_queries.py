"""`iter_live_keys` lists exactly the keys `iter_live_objects` does, in the same order."""

from __future__ import annotations

from pathlib import Path

from governance.catalog.engine import open_engine
from governance.catalog.queries import iter_live_keys, iter_live_objects
from governance.catalog.roots import get_or_create_root, start_scan
from governance.catalog.tables import StoredObject


def test_live_keys_match_live_objects(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'catalog.db'}")
    roots = [get_or_create_root(engine, f"file:///r{i}/", f"r{i}") for i in range(2)]
    scan = start_scan(engine, roots[0], "test")
    rows = []
    for n, root in enumerate(roots):
        for key, upload, gone in [
            ("b/x", "", None),
            ("a/y", "", None),
            ("a/y", "u2", None),
            ("a/y", "u1", None),
            ("a/gone", "", scan),
            ('it\'s/"q"', "", None),
            (f"only-{n}", "", None),
        ]:
            rows.append(
                {
                    "root_id": root,
                    "key": key,
                    "upload_id": upload,
                    "size": 1,
                    "etag": "e",
                    "last_modified": 0,
                    "first_scan_id": scan,
                    "changed_scan_id": scan,
                    "gone_scan_id": gone,
                }
            )
    with engine.begin() as conn:
        conn.execute(StoredObject.__table__.insert(), rows)  # type: ignore[attr-defined]
    for root in roots:
        keys = list(iter_live_keys(engine, root, chunk=2))
        assert keys == [o.key for o in iter_live_objects(engine, root)]
        assert len(keys) == 6
    engine.dispose()
