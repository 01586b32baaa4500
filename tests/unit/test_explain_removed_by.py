"""What `govern explain` says of an artifact an apply removed, per way it went."""

from __future__ import annotations

from datetime import UTC, datetime

from governance.plan.service import removed_by

URI = "s3://b/runs/a/checkpoint-10/"
WHEN = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def removal(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "plan_id": "p-1",
        "action_id": 4,
        "mode": "quarantine",
        "state": "removed",
        "removed_at": WHEN,
        "purge_after": datetime(2026, 12, 15, tzinfo=UTC),
        "purged_at": None,
    }
    return row | over


def test_each_way_out_names_its_way_back_or_that_there_is_none() -> None:
    done = "plan p-1 (action 4) removed it on 2026-12-01 09:30 UTC"
    assert removed_by(URI, removal()) == (
        f"{done}, into quarantine until 2026-12-15: `govern restore p-1 --uri {URI}` brings it back"
    )
    assert removed_by(URI, removal(mode="versioned", purge_after=None)) == (
        f"{done}, behind a delete marker: `govern restore p-1 --uri {URI}` brings it back"
    )
    assert removed_by(URI, removal(mode="permanent")) == (
        f"{done}, deleted for good (apply.delete_mode permanent): there is no way back"
    )
    purged = removal(state="purged", purged_at=datetime(2026, 12, 16, tzinfo=UTC))
    assert removed_by(URI, purged) == (
        f"{done}; its quarantine copy was purged on 2026-12-16: there is no way back"
    )
    assert removed_by(URI, removal(state="pending")) == (
        f"{done} in an apply that did not finish; `govern apply p-1` finishes it"
    )
