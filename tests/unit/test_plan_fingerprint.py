"""The plan fingerprint: stable, order-independent, sensitive to what apply would do."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import timedelta

from governance.model.types import Group, RunStatus
from governance.plan.build import build_plan
from governance.plan.fingerprint import fingerprint
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    PlannedAction,
)
from tests.unit.plan_factories import AS_OF, checkpoint, example_policy, group, make_plan, snapshot


def _groups() -> list[Group]:
    a = [
        checkpoint("runs/a/", s, 40 - s / 1000, metrics={"eval_loss": 1 / s})
        for s in range(1000, 12000, 1000)
    ]
    b = [checkpoint("runs/b/", s, 20) for s in (5, 6, 7, 8)]
    return [group("a", a), group("b", b, RunStatus.RUNNING)]


def test_same_inputs_same_fingerprint_independent_of_plan_id_and_time() -> None:
    pol = example_policy()
    p1 = make_plan(_groups(), pol)
    p2 = build_plan(
        [snapshot(_groups())],
        pol,
        AS_OF,
        plan_id="other",
        created_by="someone-else",
        created_at=AS_OF + timedelta(hours=5),
    )
    assert p1.fingerprint == p2.fingerprint
    assert p1.fingerprint.startswith("sha256:")
    assert len(p1.fingerprint) == 7 + 64
    assert fingerprint(p1.actions, p1.kept) == p1.fingerprint


def test_fingerprint_ignores_order_of_lists() -> None:
    p = make_plan(_groups(), example_policy())
    assert fingerprint(list(reversed(p.actions)), list(reversed(p.kept))) == p.fingerprint


def test_fingerprint_changes_with_an_etag_or_as_of() -> None:
    pol = example_policy()
    p = make_plan(_groups(), pol)
    actions = copy.deepcopy(p.actions)
    o = actions[0].objects[0]
    actions[0].objects[0] = ObjectRef(o.key, o.size, o.last_modified, '"changed"')
    assert fingerprint(actions, p.kept) != p.fingerprint
    later = build_plan(
        [snapshot(_groups())], pol, AS_OF + timedelta(days=30), plan_id="x", created_by="x",
        created_at=AS_OF,
    )  # fmt: skip
    assert later.fingerprint != p.fingerprint


def test_empty_plan_has_a_fingerprint() -> None:
    """The canonical text of no actions and nothing kept, hashed like any other."""
    assert fingerprint([], []) == _canonical([], [])
    p = make_plan(_groups(), example_policy())
    assert fingerprint(p.actions, p.kept) != fingerprint([], [])


def _canonical(actions: list[PlannedAction], kept: list[KeptArtifact]) -> str:
    """The fingerprint as the module docstring defines it, literally (dicts, json.dumps)."""

    def docs(items: list[dict[str, object]]) -> list[dict[str, object]]:
        return sorted(items, key=lambda d: json.dumps(d, sort_keys=True, separators=(",", ":")))

    action_docs = [
        {
            "action": a.action.value,
            "artifact": a.artifact.uri,
            "dest_url": a.dest_url,
            "objects": sorted(
                ([a.uri_of(o), o.size, o.etag, o.version_id] for o in a.objects),
                key=lambda o: (o[0], o[3] or ""),
            ),
            "rule": a.rule,
            "storage_class": a.storage_class,
            "tier": a.tier,
        }
        for a in actions
    ]
    kept_docs = [
        {"artifact": k.artifact.uri, "how": k.how.value, "rule": k.rule, "tier": k.tier}
        for k in kept
    ]
    text = json.dumps(
        {"version": 1, "actions": docs(action_docs), "kept": docs(kept_docs)},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )  # fmt: skip
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _delete(uri: str) -> PlannedAction:
    ref = ArtifactRef(uri, "residue", None, None, "s3://b/")
    obj = ObjectRef(uri.removeprefix("s3://b/"), 1, AS_OF, '"e"')
    return PlannedAction(0, "r", None, ActionType.DELETE, True, ref, [obj], "why")


def test_fingerprint_is_the_canonical_text_in_plan_order_or_not() -> None:
    p = make_plan(_groups(), example_policy())
    assert fingerprint(p.actions, p.kept) == _canonical(p.actions, p.kept)
    # In plan (URI) order "a" comes before "a b", but the canonical text sorts `a b"`
    # before `a"`: the streamed order is found wrong and the documents sorted instead.
    odd = [_delete("s3://b/a"), _delete("s3://b/a b"), _delete("s3://b/é"), *p.actions]
    kept = [
        KeptArtifact(_delete(u).artifact, None, None, KeptHow.NO_RULE, "")
        for u in ("s3://b/k", "s3://b/k z", "s3://b/ü")
    ]
    assert fingerprint(odd, kept) == _canonical(odd, kept)
    assert fingerprint(odd[::-1], kept[::-1]) == _canonical(odd, kept)
