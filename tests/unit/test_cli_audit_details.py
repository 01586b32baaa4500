"""How `govern audit` shows an event on one line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from governance.cli.approval_cmd import NOTABLE_SHOWN, _details
from governance.cli.main import cli


def test_a_batch_of_results_shows_counts_and_only_what_did_not_go_through() -> None:
    payload = {
        "execution_id": 3,
        "counts": {"ok": 1498, "skipped": 1, "failed": 1},
        "results": [[i, "ok", ""] for i in range(1, 1499)]
        + [[1499, "skipped", "stale: size changed"], [1500, "failed", "AccessDenied"]],
    }
    line = _details(payload)
    assert line == (
        "execution 3: 1,500 actions (1,498 ok, 1 skipped, 1 failed); "
        "#1499 skipped: stale: size changed; #1500 failed: AccessDenied"
    )


def test_a_long_batch_lists_the_first_results_whole_then_counts_the_rest() -> None:
    """Never a reason or an id cut short with `…`: the first NOTABLE_SHOWN results that
    did not go through are shown whole, the others counted."""
    reason = (
        "stale: unplanned object runs/a/checkpoint-1000/NOTES.md in the artifact since the plan"
    )
    results = [[i, "skipped", reason] for i in range(50)]
    line = _details({"execution_id": 1, "counts": {"skipped": 50}, "results": results})
    assert "…" not in line
    assert line.startswith(f"execution 1: 50 actions (50 skipped); #0 skipped: {reason}; #1 ")
    assert line.count(reason) == NOTABLE_SHOWN
    assert line.endswith(f"#{NOTABLE_SHOWN - 1} skipped: {reason}; and 30 more not ok "
                         "(--format json lists them)")  # fmt: skip


def test_long_values_are_shown_whole() -> None:
    counts = {"ok": 5, "skipped": 1, "done_before": 2, "not_run": 0}
    line = _details({"execution_id": 1, "status": "partially_applied", "counts": counts})
    assert line == (
        'execution_id=1 status=partially_applied counts={"ok": 5, "skipped": 1, '
        '"done_before": 2, "not_run": 0}'
    )


def test_the_audit_table_never_cuts_details_at_80_columns(tmp_path: Path) -> None:
    """Below 140 columns each event's details go under it, folded, never ending in `…`."""
    from governance import audit
    from governance.catalog.engine import open_engine

    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    engine = open_engine(catalog)
    config = {"policy": "policies/a-rather-long-folder-name/retention-for-team-nlp.yaml"}
    counts = {"ok": 5, "skipped": 1, "done_before": 2, "not_run": 0, "failed": 0}
    audit.record_now(engine, "apply_end", actor="alice", plan_id="p-1",
                     payload={"config": config, "counts": counts})  # fmt: skip
    engine.dispose()
    result = CliRunner().invoke(cli, ["--catalog", catalog, "audit"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert "…" not in result.stdout
    flat = "".join(line.strip() for line in result.stdout.splitlines())
    assert "retention-for-team-nlp.yaml" in flat
    assert '"not_run":0,"failed":0}' in flat.replace(" ", "")


def test_other_events_show_key_values_without_hashes() -> None:
    line = _details({"comment": "looks right", "fingerprint": "ab" * 32, "approvals": 1})
    assert line == "comment=looks right approvals=1"
