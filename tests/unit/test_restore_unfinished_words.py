"""What restore says of the removals an unfinished apply left `pending`."""

from __future__ import annotations

from governance.apply.restore import _unfinished_words

PID = "p-20261201-093000-ab12"


def _row(mode: str, qroot: str | None) -> dict[str, object]:
    return {"mode": mode, "quarantine_root": qroot, "key": "runs/a/x.pt"}


def test_it_names_the_quarantine_and_the_apply_that_finishes_them() -> None:
    rows = [_row("quarantine", "s3://b/.govern-quarantine/"), _row("versioned", None)]
    said = _unfinished_words(PID, rows)
    assert "2 objects it was removing are not recorded as removed" in said
    assert f"their quarantine copies are under s3://b/.govern-quarantine/{PID}/" in said
    assert said.endswith(f"then `govern restore {PID}` brings them back")
    assert "1 object it was removing is not recorded" in _unfinished_words(PID, rows[:1])
    assert "quarantine copies" not in _unfinished_words(PID, rows[1:])
