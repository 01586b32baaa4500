"""The runs saved plans saw completed (`catalog.completions`), on each catalog backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from governance.catalog.completions import record_completed, seen_completed
from governance.catalog.engine import open_engine
from governance.catalog.roots import get_or_create_root
from governance.model.types import SeenCompleted
from governance.plan.types import CompletedRun
from tests.catalogs import catalog_url  # noqa: F401  (fixture)

ROOT = "file:///data/"
T = datetime(2026, 11, 1, tzinfo=UTC)


def test_the_first_evidence_is_kept_until_a_later_write_or_a_final_is_learnt(
    catalog_url: str,  # noqa: F811
) -> None:
    engine = open_engine(catalog_url)
    root_id = get_or_create_root(engine, ROOT)
    with engine.begin() as conn:
        record_completed(
            conn,
            {
                ROOT: [
                    CompletedRun("runs/a/", "completed marker runs/a/COMPLETED", T, None),
                    CompletedRun("runs/b/", "final weights at runs/b/final/", T, "runs/b/c-9/"),
                ],
                "file:///unknown/": [CompletedRun("runs/x/", "never recorded", T, None)],
            },
            "p-1",
        )
    with engine.begin() as conn:  # a later plan: a's final is known now, b seen again
        record_completed(
            conn,
            {
                ROOT: [
                    CompletedRun("runs/a/", "later words", T, "runs/a/c-3/"),
                    CompletedRun("runs/b/", "completed when plan p-1 was made", T, None),
                ]
            },
            "p-2",
        )
    seen = seen_completed(engine, root_id)
    assert seen == {
        "runs/a/": SeenCompleted("later words", T, "p-2", "runs/a/c-3/"),
        "runs/b/": SeenCompleted("final weights at runs/b/final/", T, "p-1", "runs/b/c-9/"),
    }
    later = T + timedelta(days=2)  # trained on and finished again: the new evidence wins
    with engine.begin() as conn:
        record_completed(conn, {ROOT: [CompletedRun("runs/b/", "again", later, None)]}, "p-3")
    assert seen_completed(engine, root_id)["runs/b/"] == SeenCompleted("again", later, "p-3")
    engine.dispose()
