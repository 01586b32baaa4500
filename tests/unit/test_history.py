"""`PlanHistory.lines`: what `govern show` prints of a plan's history."""

from __future__ import annotations

from datetime import UTC, datetime

from governance.history import DecisionEntry, ExecutionEntry, PlanHistory, RestoreEntry

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def test_an_approval_of_other_content_is_shown_as_not_counting() -> None:
    """Approvals bind to the fingerprint: one recorded for other content (a row edited in
    the catalog) counts for nothing, and an auditor reading `show` must see that."""
    history = PlanHistory(
        "approved by bob (1 of 1)",
        [
            DecisionEntry("approve", "bob", AT, "fine", current=True),
            DecisionEntry("approve", "eve", AT, None, current=False),
            DecisionEntry("reject", "carol", AT, "keep beta", current=True),
        ],
    )
    assert history.lines() == [
        "approval: approved by bob (1 of 1)",
        "2026-12-01 09:30Z  approved by bob: fine",
        "2026-12-01 09:30Z  approved by eve (of other content: does not count)",
        "2026-12-01 09:30Z  rejected by carol: keep beta",
    ]


def test_an_apply_run_says_what_it_did_and_why_it_stopped() -> None:
    run = ExecutionEntry(
        3, "ana", AT, None, "failed", "permanent", True, 2, 1, 4, "storage unreachable"
    )
    history = PlanHistory("approved by bob (1 of 1)", executions=[run], removed={"purged": 2})
    assert history.lines()[1:] == [
        "2026-12-01 09:30Z  apply (non-destructive only) #3 by ana: failed (2 ok, 1 skipped, "
        "4 failed; deletes permanent); storage unreachable",
        "removed objects: 2 purged",
    ]
    doc = history.document()
    assert doc["executions"][0]["finished_at"] is None  # type: ignore[index]
    assert doc["executions"][0]["error"] == "storage unreachable"  # type: ignore[index]


def test_events_are_told_in_time_order() -> None:
    """An apply, a restore, then another apply: the lines follow the clock, not the kind."""
    later = AT.replace(hour=11)
    run1 = ExecutionEntry(1, "ana", AT, AT, "applied", "quarantine", False, 3, 0, 0, None)
    run2 = ExecutionEntry(2, "ana", later, later, "applied", "quarantine", False, 1, 0, 0, None)
    back = RestoreEntry("bob", AT.replace(hour=10), 5, 0)
    history = PlanHistory("applied", executions=[run1, run2], restores=[back])
    assert [line[19:30] for line in history.lines()[1:]] == [
        "apply #1 by",
        "restore by ",
        "apply #2 by",
    ]
