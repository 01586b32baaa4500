"""Symbolic links protect what they point at (`protect.LinkTargets`): the reasons, the
tiers still counting a protected checkpoint, the per-group shortcut against the plain
per-artifact rule, and no link machinery at all for a root without links."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from governance.model.types import Artifact, Component, Group, Kind, RunStatus
from governance.plan.decide import Decider
from governance.plan.protect import HeldProtector, Protector, protector_for
from tests.unit.plan_factories import (
    AS_OF,
    ROOT,
    actions_for,
    checkpoint,
    group,
    kept_for,
    make_plan,
    obj,
    policy,
    single,
    snapshot,
)

TIERS = policy(
    """
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 2}
    otherwise: delete
safety: {max_delete_fraction: 1}
"""
)
STEPS = tuple(range(100, 1001, 100))


def run_x() -> Group:
    arts = [checkpoint("runs/x/", s, age_days=30 - s / 100) for s in STEPS]
    return group("x", arts, RunStatus.ABANDONED)


def plan_with(links: list[tuple[str, str]], groups: list[Group] | None = None):  # type: ignore[no-untyped-def]
    root = replace(snapshot(groups or [run_x()]), links=tuple(links))
    return make_plan([root], TIERS)


def test_a_link_keeps_its_checkpoint_and_the_other_deletes_stay() -> None:
    plan = plan_with([("runs/x/best", "runs/x/checkpoint-500/")])
    kept = kept_for(plan, "runs/x/checkpoint-500/")
    assert kept is not None
    assert kept.reason == "protected: the symbolic link runs/x/best points at it"
    assert actions_for(plan, "runs/x/checkpoint-500/") == []
    deleted = {a.artifact.uri for a in plan.actions}
    assert deleted == {f"{ROOT}runs/x/checkpoint-{s}/" for s in (100, 200, 300, 400, 600, 700, 800)}
    assert deleted == {a.artifact.uri for a in plan_with([]).actions} - {
        f"{ROOT}runs/x/checkpoint-500/"
    }


def test_a_protected_checkpoint_still_counts_for_the_tiers() -> None:
    plan = plan_with([("runs/x/latest", "runs/x/checkpoint-1000/")])
    kept = kept_for(plan, "runs/x/checkpoint-1000/")
    assert kept is not None
    assert kept.reason == (
        "protected: the symbolic link runs/x/latest points at it; counted by the recent tier"
    )
    assert kept_for(plan, "runs/x/checkpoint-900/") is not None  # the other of keep_last 2
    assert [a.action.value for a in actions_for(plan, "runs/x/checkpoint-800/")] == ["delete"]


def why(links: list[tuple[str, str]], art: Artifact) -> str | None:
    """What the root's protector (as the Decider makes it) says of `art`."""
    protector = protector_for(TIERS.protect, ROOT, AS_OF, links)
    return protector(art, ROOT + art.key, AS_OF - art.last_modified)


def test_reasons_say_where_the_link_points() -> None:
    ckpt = checkpoint("runs/x/", 500)
    lightning = single("runs/pl/epoch=3-step=400.ckpt", Kind.CHECKPOINT)
    cases = [
        ([("runs/pl/last.ckpt", "runs/pl/epoch=3-step=400.ckpt")], lightning,
         "the symbolic link runs/pl/last.ckpt points at it"),
        ([("best.pt", "runs/x/checkpoint-500/model.safetensors")], ckpt,
         "the symbolic link best.pt points at runs/x/checkpoint-500/model.safetensors, inside it"),
        ([("deep", "runs/x/checkpoint-500/sub/")], ckpt,
         "the symbolic link deep points at runs/x/checkpoint-500/sub/, inside it"),
        ([("models/current", "runs/x/")], ckpt,
         "the symbolic link models/current points at runs/x/, which holds it"),
        ([("all", "")], lightning,
         "the symbolic link all points at the root folder, which holds it"),
        # several links to one target: the first by key is named
        ([("z", "runs/x/checkpoint-500/"), ("a", "runs/x/checkpoint-500/")], ckpt,
         "the symbolic link a points at it"),
    ]  # fmt: skip
    for links, art, reason in cases:
        assert why(links, art) == reason, links


def test_a_link_inside_a_checkpoint_that_points_within_it_does_not_keep_it() -> None:
    ckpt = checkpoint("runs/x/", 500)
    inner = [
        ("runs/x/checkpoint-500/self", "runs/x/checkpoint-500/"),
        ("runs/x/checkpoint-500/pytorch_model.bin", "runs/x/checkpoint-500/model.safetensors"),
    ]
    assert why(inner, ckpt) is None
    # ... but one from outside to the same target does, and so does one pointing out of it
    assert why([*inner, ("runs/x/best", "runs/x/checkpoint-500/")], ckpt) == (
        "the symbolic link runs/x/best points at it"
    )
    assert why([("runs/x/checkpoint-500/run", "runs/x/")], ckpt) == (
        "the symbolic link runs/x/checkpoint-500/run points at runs/x/, which holds it"
    )
    other = checkpoint("runs/x/", 600)
    assert why(inner, other) is None


def test_links_elsewhere_protect_nothing() -> None:
    """A target whose key only starts like the artifact's is not in it."""
    near = [("runs/x/best", "runs/x/checkpoint-50/"), ("a", "runs/x/checkpoint-500.bak")]
    at = [*near, ("b", "runs/x/checkpoint-500/")]
    ckpt = checkpoint("runs/x/", 500)
    assert why(near, ckpt) is None
    assert why(at, ckpt) == "the symbolic link b points at it"
    far = group("y", [checkpoint("runs/y/", 1)])
    near_group = group("x", [ckpt])
    for links, g, alone in ((at, far, True), (at, near_group, False), (near, near_group, True)):
        assert protector_for(TIERS.protect, ROOT, AS_OF, links).by_age_alone(g.artifacts) is alone


def test_a_root_without_links_gets_the_plain_protector() -> None:
    decider = Decider(TIERS, AS_OF, ROOT, True)
    assert type(decider.protector) is Protector
    linked = Decider(TIERS, AS_OF, ROOT, True, [("best", "runs/x/checkpoint-500/")])
    assert isinstance(linked.protector, HeldProtector)


# ----------------------------------------------------------------------------- property

SEGMENTS = st.sampled_from(["a", "b", "ab", "a.b", "c"])
PATHS = st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join)


@st.composite
def artifacts(draw: st.DrawFn) -> list[Artifact]:
    """Folder artifacts with files under them, and file artifacts; keys all distinct."""
    found: dict[str, Artifact] = {}
    for _ in range(draw(st.integers(1, 5))):
        base = draw(PATHS)
        if draw(st.booleans()):
            key = base + "/"
            names = draw(st.lists(PATHS, min_size=1, max_size=3, unique=True))
            objects = [obj(key + n, 1) for n in names]
        else:
            key, objects = base, [obj(base, 1)]
        if not any(k.startswith(key) or key.startswith(k) for k in found):
            found[key] = Artifact(key, Kind.OTHER, "t", objects, (Component.OTHER,) * len(objects))
    return list(found.values())


TARGETS = st.one_of(st.just(""), PATHS, PATHS.map(lambda p: p + "/"))
LINKS = st.lists(st.tuples(PATHS, TARGETS), max_size=5)


def plainly(links: list[tuple[str, str]], art: Artifact) -> bool:
    """The rule of `LinkTargets`, link by link, as docs/policy.md states it."""
    key = art.key
    folder = not key or key.endswith("/")
    names = [o.key for o in art.objects]
    for name, target in links:
        is_dir = not target or target.endswith("/")
        holds = target == key or (not is_dir and target in names)
        holds = holds or (folder and target.startswith(key))
        if holds and folder and name.startswith(key):
            continue  # inside the artifact, pointing within it: the two go together
        under = is_dir and any(k.startswith(target) for k in [key, *names]) and target != key
        if holds or under:
            return True
    return False


@given(artifacts(), LINKS)
def test_link_protection_is_the_plain_rule_and_the_group_check_never_misses(
    arts: list[Artifact], links: list[tuple[str, str]]
) -> None:
    for art in arts:
        assert (why(links, art) is not None) == plainly(links, art), art.key
    protector = protector_for(TIERS.protect, ROOT, AS_OF, links)
    if protector.by_age_alone(arts):  # then the Decider asks about none of them
        assert all(why(links, a) is None for a in arts)
