"""The planner's fast paths (decide side) give exactly what their plain paths give.

- the fingerprint renders documents in their canonical (UTF-8) form and uses them as
  their own sort keys when a chunk is ASCII without DEL; two-object actions have their
  own format;
- a group whose protection hinges on age alone (`Protector.by_age_alone`) asks the
  protector only about artifacts inside the grace period;
- a tier rule's group looks its unkept reasons up by step before asking `unkept`, and
  whether a tier strips is asked once per tier;
- what an expire rule says (its `after`; by the run's last write: the verdict and its
  reason) is read once per group;
- the last pass of `decide` skips the checkpoints a tier rule owns (each is kept or
  deleted already);
- `keep_every_steps` takes each bucket's first in the tiers' ranking of checkpoints.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model.types import Artifact, CatalogObject, Component, Group, Kind
from governance.plan import decide as decide_module
from governance.plan import fingerprint as fingerprint_module
from governance.plan import tiers as tiering
from governance.plan.costs import action_costs
from governance.plan.decide import Decider, Decision, decide_group
from governance.plan.fingerprint import fingerprint
from governance.plan.protect import Protector, protection
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    PlannedAction,
)
from governance.policy.models import Protect, Tier
from tests.unit.plan_factories import (
    AS_OF,
    OBJECT_ATTRIBUTES,
    ROOT,
    checkpoints_of,
    example_policy,
    root_groups,
)
from tests.unit.test_plan_fingerprint import _canonical

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POLICY = example_policy()

# ----------------------------------------------------------------------------- fingerprint

# DEL and control characters are escaped by one encoder and not the other, or by both
_TEXT = st.sampled_from(["a", "b/", "é", 'q"', "\\", "\x7f", "~", "\x01", "\t", "\u2603", "/"])
_NAMES = st.lists(_TEXT, min_size=1, max_size=3).map("".join)


@st.composite
def _actions(draw: st.DrawFn) -> PlannedAction:
    art = ROOT + draw(_NAMES) + draw(st.sampled_from(["/", ""]))
    objects = []
    for _ in range(draw(st.sampled_from([1, 2, 2, 2, 3]))):  # two: their own format
        uri = (art if draw(st.booleans()) else ROOT) + draw(_NAMES)
        objects.append(
            ObjectRef(
                uri.removeprefix(ROOT),
                draw(st.integers(0, 10**12)),
                AS_OF,
                draw(st.sampled_from(['"e"', '"\x7f"', '"é"', "x\\y"])),
                None,
                draw(st.sampled_from([None, None, "v1", "v\x7f", "v\u00e9"])),
            )
        )
    return PlannedAction(
        0,
        draw(st.sampled_from(["r", "rule é", "r\x7f"])),
        draw(st.sampled_from([None, "t"])),
        draw(st.sampled_from(list(ActionType))),
        True,
        ArtifactRef(art, "checkpoint", None, None, ROOT),
        objects,
        "why",
        draw(st.sampled_from([None, "GLACIER"])),
        draw(st.sampled_from([None, "s3://cold/" + art.removeprefix(ROOT)])),
    )


@st.composite
def _kept(draw: st.DrawFn) -> KeptArtifact:
    ref = ArtifactRef(ROOT + draw(_NAMES), "checkpoint", None, None, ROOT)
    how = draw(st.sampled_from(list(KeptHow)))
    return KeptArtifact(ref, draw(st.sampled_from([None, "r", "r\x7f"])), None, how, "")


@SETTINGS
@given(
    st.lists(_actions(), max_size=12),
    st.lists(_kept(), max_size=6),
    st.integers(1, 5),
    st.booleans(),
)
def test_the_fingerprint_of_any_text_is_the_canonical_text(
    actions: list[PlannedAction], kept: list[KeptArtifact], chunk: int, in_order: bool
) -> None:
    if in_order:  # streamed when canonical
        actions.sort(key=lambda a: (a.artifact.uri, a.objects[0].key))
        kept.sort(key=lambda k: k.artifact.uri)
    with patch.object(fingerprint_module, "_CHUNK", chunk):
        assert fingerprint(actions, kept) == _canonical(actions, kept)


@given(st.lists(st.sampled_from(["a", "\x7f", "é", "\x00", '"', "\\", "~", "\u2603"])))
def test_a_text_is_its_own_sort_key_only_when_both_encoders_agree(chars: list[str]) -> None:
    text = "".join(chars)
    agree = fingerprint_module._ASCII(text) == fingerprint_module._UTF8(text)
    assert fingerprint_module._same_escaped(fingerprint_module._UTF8(text)) == agree


# ----------------------------------------------------------------------------- protection

_KEYS = st.sampled_from(
    ["runs/a/c1/", "runs/a/c2/w.bin", "releases/v1/", "releases/v1/w.bin", "releases", "", "/", "x"]
)
_MEMBER_KEYS = st.sampled_from(["", "", "", "releases/v2/", "runs/b/"])
"""What a member's key starts with instead of its artifact's (mostly: nothing else)."""


_LOCKS = st.sampled_from([{}, {}, {}, *OBJECT_ATTRIBUTES])
"""An object's lock state and what protection lacks of it (mostly: nothing)."""


@st.composite
def _artifacts(draw: st.DrawFn) -> list[tuple[Artifact, timedelta]]:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(_KEYS)
        objs = [
            CatalogObject(
                (draw(_MEMBER_KEYS) or key) + f"f{i}",
                1,
                AS_OF,
                '"e"',
                tags=draw(st.sampled_from([None, None, {}, {"retain": "true"}, {"other": "1"}])),
                **draw(_LOCKS),
            )
            for i in range(draw(st.integers(0, 2)))
        ]
        roles = tuple(Component.OTHER for _ in objs)
        age = timedelta(days=draw(st.sampled_from([0, 2, 3, 10])))
        out.append((Artifact(key, Kind.OTHER, "file", objs, roles), age))
    return out


@SETTINGS
@given(
    _artifacts(),
    st.sampled_from([ROOT, "s3://other/", "s3://ml-artifacts", "file:///data/"]),
    st.sampled_from(
        [
            [],
            ["s3://ml-artifacts/releases/**"],
            ["s3://elsewhere/**"],
            ["s3://ml-artifacts/runs/*/c?/**", "s3://ml-artifacts/rel*"],
            ["s3://ml-artifacts/releases/v1"],
            ["s3://ml-artifacts/[r]uns/**"],
        ]
    ),
    st.sampled_from([{}, {"retain": "true"}, {"legal-hold": "*"}]),
)
def test_a_group_protected_by_age_alone_is_as_protection_says(
    arts: list[tuple[Artifact, timedelta]], root: str, paths: list[str], tags: dict[str, str]
) -> None:
    protect = Protect(min_age=timedelta(days=3), paths=paths, tags=tags)
    protector = Protector(protect, root, AS_OF)
    by_age = protector.by_age_alone([a for a, _ in arts])
    for art, age in arts:
        uri = root + art.key
        plain = protection(protect, art, uri, age, AS_OF)
        assert protector(art, uri, age) == plain
        if by_age and age >= protector.min_age:
            assert plain is None


def test_a_member_under_a_protected_path_protects_an_artifact_keyed_elsewhere() -> None:
    # The quick look at an artifact's own URI must not miss a member outside its key.
    protect = Protect(min_age=timedelta(days=3), paths=[f"{ROOT}releases/**"])
    member = CatalogObject("releases/v2/w.bin", 1, AS_OF, '"e"')
    art = Artifact("runs/a/c1/", Kind.OTHER, "file", [member], (Component.OTHER,))
    protector = Protector(protect, ROOT, AS_OF)
    age = timedelta(days=10)
    assert protection(protect, art, ROOT + art.key, age, AS_OF) is not None
    assert protector(art, ROOT + art.key, age) == protection(
        protect, art, ROOT + art.key, age, AS_OF
    )
    assert not protector.by_age_alone([art])


# ----------------------------------------------------------------------------- decisions


def _decided(d: Decision) -> tuple[object, ...]:
    actions = [
        (
            (a.action, a.rule, a.tier, a.reason, a.objects, a.storage_class, a.dest_url),
            (a.early_deletion_usd, a.request_cost_usd),
            (a.monthly_cost_before_usd, a.monthly_cost_after_usd),
        )
        for a in d.actions
    ]
    return (d.ref, d.protected_by, d.rule, d.kept, d.reason, actions)


def _plain_protector(self: Protector, artifacts: object) -> bool:
    return False  # ask `protection`'s answer of every artifact


def _fresh_texts(self: Decider, rule: object, otherwise: str) -> dict[int, str]:
    return {}  # every unkept reason written again by `unkept`


def _strips(self: Decider, tier: Tier) -> bool:
    return tier.strips  # the property itself, every time


_EXPIRY_FACTS = decide_module._expiry_facts


def _fresh_expiry_facts(ctx: Any, rule: Any, run: Any) -> Any:
    facts = _EXPIRY_FACTS(ctx, rule, run)
    ctx.expiry.clear()  # read the rule again for the next artifact
    return facts


@SETTINGS
@given(root_groups(), st.booleans())
def test_decisions_are_those_of_the_plain_paths(groups: list[Group], files: bool) -> None:
    root, classes = ("file:///data/", False) if files else (ROOT, True)
    fast = Decider(POLICY, AS_OF, root, classes)
    with (
        patch.object(Protector, "by_age_alone", _plain_protector),
        patch.object(Decider, "unkept_texts", _fresh_texts),
        patch.object(Decider, "strips", _strips),
        patch.object(decide_module, "_expiry_facts", _fresh_expiry_facts),
    ):
        plain = [decide_group(g, root, classes, POLICY, AS_OF) for g in groups]
    for g, p in zip(groups, plain, strict=True):
        got = fast.decide(g)
        assert [_decided(d) for d in got.decisions] == [_decided(d) for d in p.decisions]
        assert got.not_applicable == p.not_applicable


_OBJ_KEYS = st.sampled_from(["c/a.bin", "c/b.bin", "c/b.bin", "c/z"])


@SETTINGS
@given(
    st.lists(
        st.tuples(
            _OBJ_KEYS,
            st.sampled_from(["", "u1", "u0"]),
            st.sampled_from([None, "STANDARD", "GLACIER"]),
            st.sampled_from([None, "v1"]),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([ActionType.DELETE, ActionType.STRIP, ActionType.ARCHIVE]),
)
def test_an_actions_objects_are_copies_of_its_objects_in_key_order(
    rows: list[tuple[str, str, str | None, str | None]], kind: ActionType
) -> None:
    objs = [
        CatalogObject(key, 10 + i, AS_OF - timedelta(days=i), f'"e{i}"', sc, v, upload)
        for i, (key, upload, sc, v) in enumerate(rows)
    ]
    art = Artifact("c/", Kind.CHECKPOINT, "hf", objs, tuple(Component.OTHER for _ in objs))
    decider = Decider(POLICY, AS_OF, ROOT, True)
    ctx = decide_module._Ctx(
        POLICY, AS_OF, ROOT, True, False, [], [], decider.rates, decider, None, []
    )
    d = Decision(art, ArtifactRef(ROOT + "c/", "checkpoint", None, None, ROOT), timedelta(0))
    action = decide_module._action(ctx, d, "r", None, kind, list(objs), "why")
    in_order = sorted(objs, key=lambda o: (o.key, o.upload_id))
    assert action.objects == in_order
    assert [o.etag for o in action.objects] == [o.etag for o in in_order]  # stable for ties
    costs = action_costs(in_order, kind, None, None, AS_OF, decider.rates)
    assert (
        action.early_deletion_usd,
        action.request_cost_usd,
        action.monthly_cost_before_usd,
        action.monthly_cost_after_usd,
    ) == costs


@SETTINGS
@given(
    checkpoints_of("runs/a/"),
    st.sampled_from([1000, 5000, 20_000]),
    st.randoms(use_true_random=False),
)
def test_every_steps_keeps_the_newest_of_each_bucket(
    ckpts: list[Artifact], k: int, rnd: random.Random
) -> None:
    ckpts = ckpts + [dataclasses.replace(c) for c in ckpts if rnd.random() < 0.3]
    rnd.shuffle(ckpts)
    at = tiering.written(ckpts)
    held: dict[int, Artifact] = {}  # the plain definition: a max per bucket, first of equals
    for c in ckpts:
        if c.step is None:
            continue
        h = held.get(c.step // k)
        if h is None or (c.step, at[id(c)], c.key) > (h.step, at[id(h)], h.key):
            held[c.step // k] = c
    tier = Tier(name="b", keep_every_steps=k)
    chosen = tiering._tier_select(tier, ckpts, None, at)
    want = {c.key: [f"step {c.step} is kept as the newest in bucket"] for c in held.values()}
    assert {
        key: [w[: w.index(" bucket") + 7] for w in whys] for key, whys in chosen.items()
    } == want


@SETTINGS
@given(root_groups(), st.booleans())
def test_a_tier_rule_keeps_or_deletes_every_checkpoint_it_owns(
    groups: list[Group], files: bool
) -> None:
    root, classes = ("file:///data/", False) if files else (ROOT, True)
    tiered = {r.name for r in POLICY.rules if r.tiers is not None}
    decider = Decider(POLICY, AS_OF, root, classes)
    for g in groups:
        for d in decider.decide(g).decisions:
            if d.artifact.kind is Kind.CHECKPOINT and d.rule in tiered:
                deletes = any(a.action is ActionType.DELETE for a in d.actions)
                assert (d.kept is not None) != deletes
