"""explain(): the planner's own decision for one artifact, with the rules and tiers considered."""

from __future__ import annotations

import pytest

from governance.errors import ArgumentError
from governance.model.types import Group, Kind, RunStatus
from governance.plan.explain import explain
from tests.unit.plan_factories import (
    AS_OF,
    ROOT,
    checkpoint,
    example_policy,
    group,
    make_plan,
    single,
    snapshot,
)

R = "runs/a/"


def _groups() -> list[Group]:
    ckpts = [checkpoint(R, s, 40 - s / 1000) for s in range(1000, 21000, 1000)]
    ckpts[3].metrics["eval_loss"] = 0.1
    log = single(R + "logs/x.log", Kind.LOG, age_days=70, run_key=R)
    return [group("a", [*ckpts, log], RunStatus.COMPLETED)]


def test_explain_deleted_checkpoint_by_object_uri() -> None:
    e = explain(
        [snapshot(_groups())], example_policy(), AS_OF, ROOT + R + "checkpoint-2000/optimizer.pt"
    )
    assert e.uri == ROOT + R + "checkpoint-2000/"
    assert (e.kind, e.run, e.run_status, e.step, e.complete) == (
        "checkpoint",
        "a",
        "completed",
        2000,
        True,
    )
    assert e.rule == "checkpoints"
    assert e.decision == "delete"
    assert e.rules_considered[0] == (
        "failed-runs",
        "not matched: run status is completed, not failed/abandoned",
    )
    assert e.rules_considered[2][1].startswith("matched")
    assert e.rules_considered[3] == ("logs", "not reached: an earlier rule owns it")
    assert [t for t, _ in e.tiers] == ["recent", "mid-term", "long-term"]
    assert all(why.startswith("not selected") for _, why in e.tiers)
    assert "not kept by any tier" in e.reason


def test_explain_agrees_with_the_plan() -> None:
    pol = example_policy()
    plan = make_plan(_groups(), pol)
    by_uri: dict[str, list[str]] = {}
    for a in plan.actions:
        by_uri.setdefault(a.artifact.uri, []).append(a.reason)
        e = explain([snapshot(_groups())], pol, AS_OF, a.artifact.uri)
        assert a.action.value in e.decision
        assert e.reason == by_uri[a.artifact.uri][0]  # the artifact's first action's reason
    stripped_or_archived = 0
    for k in plan.kept:
        e = explain([snapshot(_groups())], pol, AS_OF, k.artifact.uri)
        # kept stripped or archived (its actions' reason) or as it is: the plan's words
        assert e.reason == k.reason, (k.artifact.uri, e.decision)
        stripped_or_archived += e.decision.startswith(("strip", "archive"))
    assert stripped_or_archived > 0  # (the example policy thins and archives some)


def test_explain_kept_best_and_artifact_uri_without_slash() -> None:
    e = explain([snapshot(_groups())], example_policy(), AS_OF, ROOT + R + "checkpoint-4000")
    assert e.decision == "strip + archive"
    assert ("long-term", "selected: step 4000 has the best eval_loss (0.1, min)") in e.tiers
    assert e.reason.startswith("long-term tier: step 4000 has the best eval_loss (0.1, min)")


def test_explain_unknown_uri() -> None:
    with pytest.raises(ArgumentError, match="no artifact"):
        explain([snapshot(_groups())], example_policy(), AS_OF, ROOT + "nope/")
    with pytest.raises(ArgumentError):
        explain([snapshot(_groups())], example_policy(), AS_OF, "s3://elsewhere/x")


@pytest.mark.parametrize("uri", [ROOT + "runs/a/", ROOT + "runs/a", ROOT + "runs/", ROOT])
def test_explain_of_a_folder_holding_runs_names_them(uri: str) -> None:
    """A run folder is not one artifact: the error says which runs it holds and how to
    list their artifacts, instead of only "no artifact"."""
    with pytest.raises(ArgumentError) as info:
        explain([snapshot(_groups())], example_policy(), AS_OF, uri)
    assert str(info.value).endswith(
        "it holds run a: explain one of their artifacts or objects "
        "(`govern ls artifacts --run a` lists them)"
    )


def test_explain_protected() -> None:
    rel = single("releases/v1/model.safetensors", Kind.WEIGHTS, age_days=100)
    e = explain([snapshot([group(None, [rel])])], example_policy(), AS_OF, ROOT + rel.key)
    assert e.protected_by == "under protected path s3://ml-artifacts/releases/**"
    assert e.decision == "kept (protected)"
    assert e.run is None
    assert e.run_status is None


def test_explain_names_the_run_status_protection() -> None:
    """The example policy protects running runs from expiry (`protect.run_status`): an
    artifact kept that way says so in `protected_by`, not only in its reason."""
    log = single(R + "logs/x.log", Kind.LOG, age_days=400, run_key=R)
    groups = [group("a", [log], RunStatus.RUNNING)]
    e = explain([snapshot(groups)], example_policy(), AS_OF, ROOT + log.key)
    assert e.decision == "kept (protected)"
    assert e.protected_by is not None
    assert "running" in e.protected_by
    assert e.reason == f"protected: {e.protected_by}"


def test_explain_of_one_object_says_what_becomes_of_that_object() -> None:
    """A strip removes some objects of a checkpoint and keeps the rest: `explain` of one
    of them said only "strip", the same for the optimizer it removes and the weights it
    keeps. It now names the object and its own fate; the artifact's URL names none."""
    pol, groups = example_policy(), _groups()
    plan = make_plan(groups, pol)
    strip = next(a for a in plan.actions if a.action == "strip")
    art = strip.artifact.uri
    removed = {o.key for o in strip.objects}
    [ckpt] = [c for c in groups[0].artifacts if ROOT + c.key == art]
    kept = sorted(o.key for o in ckpt.objects if o.key not in removed)
    assert removed
    assert kept
    gone = explain([snapshot(groups)], pol, AS_OF, ROOT + sorted(removed)[0])
    stays = explain([snapshot(groups)], pol, AS_OF, ROOT + kept[0])
    assert gone.decision == stays.decision == "strip"
    assert (gone.uri, stays.uri) == (art, art)
    assert (gone.object, stays.object) == (ROOT + sorted(removed)[0], ROOT + kept[0])
    assert gone.object_fate == "removed by the strip (the checkpoint's other objects stay)"
    assert stays.object_fate == "stays: not one of the objects the strip acts on"
    whole = explain([snapshot(groups)], pol, AS_OF, art)
    assert (whole.object, whole.object_fate) == (None, None)
    deleted = explain([snapshot(groups)], pol, AS_OF, ROOT + R + "checkpoint-2000/optimizer.pt")
    assert deleted.object_fate == "deleted"
