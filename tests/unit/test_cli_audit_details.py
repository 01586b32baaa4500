"""How `govern audit` shows an event on one line."""

from __future__ import annotations

from governance.cli.approval_cmd import _details


def test_a_batch_of_results_shows_counts_and_only_what_did_not_go_through() -> None:
    payload = {
        "execution_id": 3,
        "counts": {"ok": 1498, "skipped": 1, "failed": 1},
        "results": [[i, "ok", ""] for i in range(1, 1499)]
        + [[1499, "skipped", "stale: size changed"], [1500, "failed", "AccessDenied"]],
    }
    line = _details(payload, width=200)
    assert line == (
        "execution 3: 1,500 actions (1,498 ok, 1 skipped, 1 failed); "
        "#1499 skipped: stale: size changed; #1500 failed: AccessDenied"
    )


def test_a_long_batch_line_is_cut_to_the_width() -> None:
    results = [[i, "skipped", "stale: the object vanished"] for i in range(50)]
    line = _details({"execution_id": 1, "counts": {"skipped": 50}, "results": results}, 80)
    assert len(line) == 80
    assert line.startswith("execution 1: 50 actions (50 skipped); #0 skipped: stale")
    assert line.endswith("…")


def test_other_events_show_key_values_without_hashes() -> None:
    line = _details({"comment": "looks right", "fingerprint": "ab" * 32, "approvals": 1})
    assert line == "comment=looks right approvals=1"
