"""The line `govern apply` prints after stale actions says what this run applied besides
them, as it happened: never "the rest was applied" when nothing was."""

from __future__ import annotations

from governance.apply.types import ActionOutcome, ExecutionReport, Outcome
from governance.cli.apply_cmd import _stale_line

PID = "p-20261201-093000-ab12"


def _outcome(i: int, outcome: Outcome, reason: str = "") -> ActionOutcome:
    return ActionOutcome(i, "delete", f"file:///s/a{i}/", outcome, reason, 1, 10, False)


def _report(*outcomes: ActionOutcome, status: str = "partially_applied") -> ExecutionReport:
    report = ExecutionReport(PID, 7, False, "quarantine", status)
    report.add(list(outcomes))
    return report


STALE = "stale: size changed since the plan was made"


def test_when_every_action_is_stale_it_says_nothing_was_applied() -> None:
    report = _report(*(_outcome(i, Outcome.SKIPPED, STALE) for i in range(3)), status="approved")
    assert _stale_line(report) == (
        f"all 3 actions were skipped as stale: their objects changed since plan {PID} was "
        "made; nothing was applied (plan status: approved); plan again (govern plan) to act "
        "on them"
    )
    one = _report(_outcome(1, Outcome.SKIPPED, STALE), status="approved")
    assert _stale_line(one) == (
        f"the only action was skipped as stale: its objects changed since plan {PID} was "
        "made; nothing was applied (plan status: approved); plan again (govern plan) to act "
        "on it"
    )


def test_an_earlier_run_having_done_the_rest_is_not_this_runs_doing() -> None:
    report = _report(_outcome(4, Outcome.SKIPPED, STALE))
    report.done_before = [1, 2, 3]
    assert "; nothing was applied in this run (plan status: partially_applied); " in _stale_line(
        report
    )


def test_the_rest_was_applied_only_when_it_was() -> None:
    report = _report(_outcome(1, Outcome.SKIPPED, STALE), _outcome(2, Outcome.OK))
    assert _stale_line(report).startswith("1 action was skipped as stale: its objects ")
    assert "; the rest was applied (plan status: partially_applied); " in _stale_line(report)
    mixed = _report(
        _outcome(1, Outcome.SKIPPED, STALE),
        _outcome(2, Outcome.OK),
        _outcome(3, Outcome.FAILED, "permission denied"),
        _outcome(4, Outcome.FAILED, "permission denied"),
    )
    assert "; 1 of the other 3 actions applied (plan status: partially_applied); " in _stale_line(
        mixed
    )
    nothing = _report(_outcome(1, Outcome.SKIPPED, STALE), _outcome(2, Outcome.FAILED, "denied"))
    assert _stale_line(nothing).startswith("1 action was skipped as stale: ")
    assert "; nothing was applied (plan status: partially_applied); " in _stale_line(nothing)
