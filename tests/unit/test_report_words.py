"""What the plan reports say, and that every format says it alike: the saving is the
difference of the costs printed beside it, the table's header keeps "made by NAME"
together, every format has the per-run checkpoint timeline and the by-run objects, and a
checkpoint both stripped and archived is counted (and named) as both."""

from __future__ import annotations

import html
import re
from dataclasses import replace

from rich.console import Console

from governance.catalog.plans import PlanHeader
from governance.plan.types import ActionType, Plan, PlannedAction
from governance.report import render
from governance.report.table import print_table
from tests.unit.plan_samples import ROOT, sample_plan


def _at(width: int, plan: Plan) -> str:
    console = Console(record=True, width=width, color_system=None)
    print_table(plan, console)
    return console.export_text()


def _costly(plan: Plan) -> Plan:
    """Costs whose unrounded difference ($5.312) rounds a cent below the printed one."""
    plan.summary = replace(
        plan.summary,
        monthly_cost_before_usd=8.096,
        monthly_cost_after_usd=2.784,
        early_deletion_usd=0.004,
        request_cost_usd=0.004,
    )
    return plan


def test_the_saving_is_the_difference_of_the_printed_costs_in_every_format() -> None:
    plan = _costly(sample_plan())
    assert "$8.10 -> $2.78 (saves $5.32/month)" in render(plan, "table")
    assert "$8.10 → $2.78 (saves $5.32/month)" in render(plan, "md")
    doc = render(plan, "html")
    assert '<div class="n">$5.32</div><div class="l">saved per month</div>' in doc
    assert "$5.31" not in doc
    # one-off charges under a cent are "< $0.01", as each action's row says them, never
    # $0.00; the total of two of them is their sum to the cent ($0.008)
    assert (
        '<div class="n">$0.01</div><div class="l">one-off: early deletion &lt; $0.01, '
        "requests &lt; $0.01" in doc
    )
    plan.summary = replace(plan.summary, early_deletion_usd=0.0, request_cost_usd=0.00006)
    assert '<div class="n">&lt; $0.01</div><div class="l">one-off: early deletion $0.00, ' in (
        render(plan, "html")
    )
    plan = _costly(sample_plan())
    assert "one-off: < $0.01 early deletion, < $0.01 requests" in render(plan, "table")
    assert "**One-off costs:** < $0.01 early deletion, < $0.01 requests." in render(plan, "md")
    plan.summary = replace(plan.summary, early_deletion_usd=0.30, request_cost_usd=0.004)
    doc = render(plan, "html")
    assert '<div class="n">$0.30</div><div class="l">one-off: early deletion $0.30, ' in doc
    assert "one-off: $0.30 early deletion, < $0.01 requests" in render(plan, "table")


def test_a_plan_that_raises_the_bill_says_so_in_every_format() -> None:
    """An archive copy lands in STANDARD: moving IA objects out may cost more a month.
    No format may show that as a saving (before: "saves $-0.12", in green)."""
    plan = sample_plan()
    plan.summary = replace(plan.summary, monthly_cost_before_usd=0.60, monthly_cost_after_usd=0.72)
    assert "$0.60 -> $0.72 (costs $0.12/month more)" in render(plan, "table")
    assert "$0.60 → $0.72 (costs $0.12/month more)" in render(plan, "md")
    doc = render(plan, "html")
    assert '<div class="card cost"><div class="n">$0.12</div><div class="l">more per month' in doc
    assert "saved per month" not in doc
    for fmt in ("table", "md", "html"):
        assert "$-" not in render(plan, fmt)
    plan.summary = replace(plan.summary, monthly_cost_after_usd=0.60)
    assert "(no change to the monthly bill)" in render(plan, "md")


def test_a_change_under_a_cent_is_never_called_no_change() -> None:
    """A small bucket's monthly costs both print $0.00: a plan that cuts its bill by three
    quarters said "no change to the monthly bill" (table, Markdown) and "$0.00 saved per
    month" (HTML). Every format now says "< $0.01", and "no change" only when none."""
    plan = sample_plan()
    plan.summary = replace(
        plan.summary, monthly_cost_before_usd=0.00319, monthly_cost_after_usd=0.00076
    )
    assert "$0.00 -> $0.00 (saves < $0.01/month)" in render(plan, "table")
    assert "$0.00 → $0.00 (saves < $0.01/month)" in render(plan, "md")
    doc = render(plan, "html")
    assert (
        '<div class="card save"><div class="n">&lt; $0.01</div><div class="l">saved per month'
        in doc
    )
    for fmt in ("table", "md", "html"):
        assert "no change" not in render(plan, fmt)
    plan.summary = replace(plan.summary, monthly_cost_after_usd=0.004)
    assert "(costs < $0.01/month more)" in render(plan, "md")
    assert '<div class="n">&lt; $0.01</div><div class="l">more per month' in render(plan, "html")
    plan.summary = replace(plan.summary, monthly_cost_after_usd=0.00319)
    assert "(no change to the monthly bill)" in render(plan, "table")
    assert '<div class="n">$0.00</div><div class="l">no change per month' in render(plan, "html")


def test_every_format_shows_the_one_off_totals_even_when_nothing() -> None:
    """policy.md: every report shows the one-off early-deletion and request totals; the
    Markdown and HTML reports left them out when both were $0.00."""
    plan = sample_plan()
    plan.summary = replace(plan.summary, early_deletion_usd=0.0, request_cost_usd=0.0)
    assert "one-off: $0.00 early deletion, $0.00 requests" in render(plan, "table")
    assert "**One-off costs:** $0.00 early deletion, $0.00 requests." in render(plan, "md")
    doc = render(plan, "html")
    assert "one-off: early deletion $0.00, requests $0.00" in doc


def test_each_action_shows_the_dollars_it_puts_at_stake() -> None:
    """Bytes and dollars for every action, not only the plan's totals: what it saves a
    month (or adds) and what it costs once, in the Markdown and HTML action lists."""
    from governance.report.common import action_dollars

    plan = sample_plan()
    first, second = plan.actions[0], plan.actions[1]
    first.monthly_cost_before_usd, first.monthly_cost_after_usd = 4.2, 0.0
    first.early_deletion_usd, first.request_cost_usd = 0.3, 0.004
    second.monthly_cost_before_usd, second.monthly_cost_after_usd = 0.5, 0.72
    second.early_deletion_usd = second.request_cost_usd = 0.0
    assert action_dollars(first) == "saves $4.20/mo; $0.30 once"
    assert action_dollars(second) == "costs $0.22/mo more"
    # one-off charges under a cent (a few requests) are shown as such, not dropped
    second.request_cost_usd = 0.004
    assert action_dollars(second) == "costs $0.22/mo more; < $0.01 once"
    second.request_cost_usd = 0.0
    md = render(plan, "md")
    assert "| saves $4.20/mo; $0.30 once |" in md
    assert "| costs $0.22/mo more |" in md
    page = render(plan, "html")
    assert '<td class="r">saves $4.20/mo; $0.30 once</td>' in page


def test_govern_plans_saves_column_matches_the_reports() -> None:
    from governance.cli.plan_cmd import _headers_table

    plan = _costly(sample_plan())
    header = PlanHeader(
        plan.plan_id, plan.fingerprint, plan.status, plan.as_of, plan.created_at,
        plan.created_by, plan.policy_path, plan.policy_sha256, plan.scans, plan.summary,
    )  # fmt: skip

    def saves(before: float, after: float) -> str:
        """The row's last cell (`saves/mo`), from its last two spaces apart."""
        summary = replace(
            plan.summary, monthly_cost_before_usd=before, monthly_cost_after_usd=after
        )
        console = Console(record=True, width=120, color_system=None)
        console.print(_headers_table([replace(header, summary=summary)], wide=True, gap=2))
        return console.export_text().splitlines()[-1].rstrip().rsplit("  ", 1)[-1].strip()

    assert saves(8.096, 2.784) == "$5.32"
    assert saves(0.60, 0.72) == "-$0.12"
    # under a cent: as the reports word it ("saves < $0.01/month"), never $0.00
    assert saves(0.00319, 0.00076) == "< $0.01"
    assert saves(0.00076, 0.00319) == "> -$0.01"
    assert saves(0.5, 0.5) == "$0.00"


def test_the_table_header_keeps_made_by_with_its_name_at_80_columns() -> None:
    """At 80 columns "by root" once sat alone on the header's second line, where it read
    like a section heading."""
    plan = replace(sample_plan(), created_by="root")
    lines = _at(80, plan).splitlines()
    assert lines[0] == f"plan {plan.plan_id}  status pending_approval"
    assert lines[1] == "as of 2026-11-30T02:15:00Z  made by root"
    header = lines[: next(i for i, line in enumerate(lines) if line.startswith("root "))]
    assert not any(line.startswith("by ") for line in header)
    long = replace(sample_plan(), created_by="a-rather-long-operator-name@example.com")
    text = _at(80, long)
    assert text.splitlines()[1] == (
        "as of 2026-11-30T02:15:00Z  made by a-rather-long-operator-name@example.com"
    )
    # too long for one line: each part whole on a line of its own
    later = replace(long, as_of=long.as_of.replace(microsecond=670567))
    assert _at(80, later).splitlines()[1:3] == [
        "as of 2026-11-30T02:15:00.670567Z",
        "made by a-rather-long-operator-name@example.com",
    ]
    assert _at(160, plan).splitlines()[:2] == lines[:2]


def _stripped_and_archived() -> Plan:
    """r1's checkpoint-4000 is stripped (action 2) and then archived (action 7)."""
    plan = sample_plan()
    strip = plan.actions[1]
    assert strip.action is ActionType.STRIP
    archive = PlannedAction(
        id=7,
        rule="checkpoints",
        tier="mid-term",
        action=ActionType.ARCHIVE,
        destructive=True,
        artifact=strip.artifact,
        objects=[replace(strip.objects[0], key=strip.objects[0].key.replace("optimizer.pt", "w"))],
        reason="archived after stripping",
        storage_class="GLACIER_IR",
    )
    plan.actions.append(archive)
    return plan


def test_a_checkpoint_stripped_and_archived_counts_as_both_in_every_format() -> None:
    plan = _stripped_and_archived()
    doc = html.unescape(render(plan, "html"))
    # r1: 1000 deleted, 4000 stripped and archived, 5000 kept
    assert "3 checkpoints: 1 kept, 1 stripped, 1 archived, 1 deleted" in doc
    md = render(plan, "md")
    assert "1000 deleted, 4000 stripped and archived, 5000 kept as it is" in md
    table = _at(160, plan)
    assert "3 checkpoints: 1 kept, 1 stripped, 1 archived, 1 deleted" in table


def test_the_table_has_the_per_run_timeline_md_and_html_have() -> None:
    """docs/cli.md: the table, md and html reports' per-run timeline covers the whole
    plan; the table once had none."""
    plan = sample_plan()
    del plan.scans["file:///data/scratch/"]
    text = _at(80, plan)
    assert "checkpoints per run" in text
    timeline = text[text.index("checkpoints per run") : text.index("actions  ")]
    # r1: 1000 deleted, 4000 stripped, 5000 kept; r2: 9000 archived, 9500 in flight
    assert re.search(r"r1\|x<&é +│ 1000 DSK 5000", timeline)
    assert "3 checkpoints: 1 kept, 1 stripped, 0 archived, 1 deleted" in timeline
    assert re.search(r"r2\[x\] +│ 9000 AI 9500", timeline)
    assert "one letter a checkpoint, in step order: K kept as it is, S stripped" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    for fmt in ("md", "html"):
        assert "Checkpoints per run" in render(plan, fmt)


def test_by_run_counts_objects_in_every_format() -> None:
    plan = sample_plan()
    text = _at(160, plan)
    runs = text[text.index("by run") : text.index("checkpoints per run")]
    assert "objects" in runs
    assert re.search(r"r1\|x<&é +│ \[2\] +│ +2 │ +3 │", runs)  # 2 actions on 3 objects
    md = render(plan, "md")
    assert "| run | root | actions | objects | deleted | moved | kept artifacts |" in md
    assert f"| r1\\|x&lt;&amp;é | {ROOT} | 2 | 3 |" in md
    assert '<th class="r">objects</th>' in render(plan, "html")


def test_a_run_the_plan_only_keeps_is_in_the_by_run_table_of_every_format() -> None:
    """cli.md's by-run section counts each run's kept artifacts: a run whose checkpoints
    are all kept (a failed run not yet expired, say) was left out of it, so a reviewer
    could not see from it that the run is untouched."""
    from governance.plan.types import KeptArtifact, KeptHow
    from tests.unit.plan_samples import _ckpt

    plan = sample_plan()
    plan.kept.append(
        KeptArtifact(_ckpt("quiet", 100), "failed-runs", None, KeptHow.RULE_KEEPS, "not yet")
    )
    text = _at(160, plan)
    runs = text[text.index("by run") : text.index("checkpoints per run")]
    assert re.search(r"quiet +│ \[2\] +│ +0 │ +0 │ +0 B │ +0 B │ +1 │", runs), runs
    assert f"| quiet | {ROOT} | 0 | 0 | 0 B | 0 B | 1 |" in render(plan, "md")
    page = render(plan, "html")
    by_run = page[page.index("By run") :]
    assert re.search(r"<td>quiet</td>", by_run), by_run[:2000]
