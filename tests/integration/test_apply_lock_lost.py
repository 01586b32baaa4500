"""An apply paused past its lock's stale time (Ctrl-Z, a frozen VM) whose lock the next
apply took over stops when it wakes, and acts no more.

Before, it carried on beside the apply that took over: both acted on the same objects,
its failed copies' clean-up removed quarantine copies the other had made of sources it
had deleted (gone both ways), and its end set the plan's status over the other's.
`govern apply` runs as a real subprocess with tiny batches and a pause after each one
(`GOVERN_TEST_APPLY_DELAY`); SIGSTOP freezes it, its heartbeat is set back past the
stale time (as ten minutes frozen would leave it), and a second apply takes over.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import update

from governance.apply import journal
from tests.integration.test_apply_resume import PREFIXES, build, count, start_apply, wait_for


def test_an_apply_that_lost_its_lock_stops_and_nothing_is_lost(tmp_path: Path) -> None:
    setup, storage, plan_id = build(tmp_path)
    first = start_apply(setup, plan_id, delay=0.3)
    try:
        wait_for(lambda: count(setup, "SELECT count(*) FROM action_results") >= 6)
        first.send_signal(signal.SIGSTOP)
        engine = setup.engine()
        with engine.begin() as conn:  # as ten minutes frozen would leave it
            conn.execute(
                update(journal.L).values(
                    heartbeat_at=datetime.now(UTC) - journal.LOCK_STALE_AFTER - timedelta(1)
                )
            )
        engine.dispose()

        second = json.loads(setup.apply(plan_id).stdout)
        assert second["plan_status"] == "applied"
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=60)

    assert first.returncode == 3, (out, err)
    assert b"lost its lock" in err, err
    assert setup.status(plan_id) == "applied"  # not set back by the one that woke
    assert not any(p.is_file() for p in storage.rglob("*"))
    quarantine = storage.parent / ".govern-quarantine"
    assert len([p for p in quarantine.rglob("*") if p.is_file()]) == 3 * PREFIXES
    assert count(setup, "SELECT count(*) FROM removed_objects WHERE state = 'removed'") == (
        3 * PREFIXES
    )
    restored = json.loads(setup.restore(plan_id).stdout)  # every object has its way back
    assert restored["restored"] == 3 * PREFIXES, restored
    assert len([p for p in storage.rglob("*") if p.is_file()]) == 3 * PREFIXES
