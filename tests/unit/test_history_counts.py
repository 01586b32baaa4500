"""`govern show`'s history lines write every count with thousands separators, as the
rest of the report does ("11,520 restored" beside "1,920 ok", never "1920 ok")."""

from __future__ import annotations

from datetime import UTC, datetime

from governance.history import ExecutionEntry, PlanHistory, RestoreEntry

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def test_apply_restore_and_removed_counts_have_thousands_separators() -> None:
    run = ExecutionEntry(
        2, "ana", AT, AT, "partially_applied", "quarantine", False, 1920, 1500, 1200, None
    )
    back = RestoreEntry("bob", AT.replace(hour=10), 11520, 1001)
    history = PlanHistory(
        "approved by bob (1 of 1)",
        executions=[run],
        restores=[back],
        removed={"restored": 11520, "removed": 2048},
    )
    assert history.lines()[1:] == [
        "2026-12-01 09:30Z  apply #2 by ana: partially_applied (1,920 ok, 1,500 skipped, "
        "1,200 failed; deletes quarantine)",
        "2026-12-01 10:30Z  restore by bob: 11,520 restored, 1,001 failed",
        "removed objects: 2,048 removed, 11,520 restored",
    ]
