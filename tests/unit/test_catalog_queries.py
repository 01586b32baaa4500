"""The streaming reads agree: `iter_live_keys`, `iter_live_objects` and
`stream_live_objects` list the same live keys in the same order, with or without
excluded prefixes, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from governance.catalog.engine import open_engine
from governance.catalog.queries import iter_live_keys, iter_live_objects, stream_live_objects
from governance.catalog.roots import get_or_create_root, start_scan
from governance.catalog.tables import StoredObject
from tests.catalogs import catalog_url  # noqa: F401

KEYS = [
    ("b/x", "", False),
    ("a/y", "", False),
    ("a/y", "u2", False),
    ("a/y", "u1", False),
    ("a/gone", "", True),
    ('it\'s/"q"', "", False),
    ("q%_/1", "", False),  # LIKE would read % and _ as wildcards
    ("qx_/1", "", False),
    ("Q%_/2", "", False),  # SQLite's LIKE folds case
    ("q%_", "", False),  # the prefix without its slash is not inside it
]


def _engine(url: str) -> tuple[Any, list[int]]:
    engine = open_engine(url)
    roots = [get_or_create_root(engine, f"file:///r{i}/", f"r{i}") for i in range(2)]
    scan = start_scan(engine, roots[0], "test")
    rows = [
        {
            "root_id": root,
            "key": key,
            "upload_id": upload,
            "size": 1,
            "etag": "e",
            "last_modified": 0,
            "first_scan_id": scan,
            "changed_scan_id": scan,
            "gone_scan_id": scan if gone else None,
        }
        for n, root in enumerate(roots)
        for key, upload, gone in [*KEYS, (f"only-{n}", "", False)]
    ]
    with engine.begin() as conn:
        conn.execute(StoredObject.__table__.insert(), rows)  # type: ignore[attr-defined]
    return engine, roots


@pytest.mark.parametrize("exclude", [(), ("q%_/",), ("q%_/", "a/")])
def test_the_readers_list_the_same_live_keys(catalog_url: str, exclude: tuple[str, ...]) -> None:  # noqa: F811
    engine, roots = _engine(catalog_url)
    try:
        for n, root in enumerate(roots):
            keys = list(iter_live_keys(engine, root, chunk=2, exclude=exclude))
            expected = sorted(
                (k, u)
                for k, u, gone in [*KEYS, (f"only-{n}", "", False)]
                if not gone and not k.startswith(exclude)
            )
            assert keys == [k for k, _ in expected]
            assert [
                (o.key, o.upload_id) for o in iter_live_objects(engine, root, exclude=exclude)
            ] == (expected)
            for tags in (False, True):
                streamed = stream_live_objects(engine, root, chunk=3, tags=tags, exclude=exclude)
                assert [(o.key, o.upload_id) for o in streamed] == expected
    finally:
        engine.dispose()
