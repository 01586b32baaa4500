"""Classification's fast paths give exactly what the plain paths give.

Pass one (the run index) runs only when it is needed (`classify` with `first_pass`), in
chunks searched in C (`find_runs_by_keys`); a folder beside the last one is masked from
its parent's mask and its own segment's; DeepSpeed claims a plain tag folder without
`digit_segment`. Each is checked against the plain path over generated input.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model import classify as classify_module
from governance.model.classify import RunIndex, classify, find_runs, find_runs_by_keys
from governance.model.detectors import REGISTRY
from governance.model.detectors.base import Claim, basename, digit_segment, parent
from governance.model.detectors.deepspeed import TRACKERS, DeepSpeedDetector
from governance.model.dispatch import Dispatch
from governance.model.types import CatalogObject, ClassifyOptions
from tests.fixtures import builders as b
from tests.unit.test_model_properties import canonical, trees

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEMPLATED = [
    ClassifyOptions(
        as_of=b.T0 + timedelta(days=90), run_templates=("runs/{run}/", "{team}/runs/{run}/")
    ),
    ClassifyOptions(as_of=b.T0 + timedelta(days=90), run_templates=("{team}/{run}/",)),
    ClassifyOptions(as_of=b.T0 + timedelta(days=2)),
]


def _lazy(
    objects: list[CatalogObject], options: ClassifyOptions, calls: list[int]
) -> Callable[[], RunIndex]:
    def first_pass() -> RunIndex:
        calls.append(1)
        return find_runs(iter(objects), options)

    return first_pass


def _both(tree: b.MemoryTree, options: ClassifyOptions) -> tuple[Any, Any, int]:
    """(eager classification, lazy classification, how often the lazy one ran pass one)."""
    objects = tree.objects()
    eager = list(classify(lambda: iter(objects), options, tree.read_meta))
    calls: list[int] = []
    first_pass = _lazy(objects, options, calls)
    lazy = list(classify(lambda: iter(objects), options, tree.read_meta, first_pass=first_pass))
    return eager, lazy, len(calls)


@SETTINGS
@given(tree=trees(), which=st.integers(0, len(TEMPLATED) - 1))
def test_pass_one_when_needed_classifies_as_pass_one_first(tree: b.MemoryTree, which: int) -> None:
    eager, lazy, calls = _both(tree, TEMPLATED[which])
    assert canonical(lazy) == canonical(eager)
    assert [g.run for g in lazy] == [g.run for g in eager]
    assert calls <= 1


def _templated_tree() -> b.MemoryTree:
    tree = b.MemoryTree()
    for i in range(3):
        b.deepspeed_run(tree, f"nlp/runs/r{i}/checkpoints", steps=(1, 2, 3), latest=2)
        b.hf_run(tree, f"cv/runs/h{i}", steps=(5, 10), best_step=5)
        b.marker(tree, f"nlp/runs/r{i}", "COMPLETED")
    return tree


def test_a_root_whose_templates_name_every_run_is_read_once() -> None:
    options = ClassifyOptions(
        as_of=b.T0 + timedelta(days=90), run_templates=("{team}/runs/{run}/",)
    )
    eager, lazy, calls = _both(_templated_tree(), options)
    assert calls == 0
    assert canonical(lazy) == canonical(eager)
    assert any(a.complete and a.layout == "deepspeed" for g in lazy for a in g.artifacts)


def test_a_tracker_outside_its_group_runs_pass_one() -> None:
    """A tag that is a run of its own (a deeper template) reads `latest` in the run
    around it: a tracker outside the group, which only pass one has."""
    tree = b.MemoryTree()
    b.deepspeed_run(tree, "x/y", steps=(1, 2), latest=2)
    options = ClassifyOptions(
        as_of=b.T0 + timedelta(days=90), run_templates=("{a}/{b}/{run}/", "{a}/{run}/")
    )
    eager, lazy, calls = _both(tree, options)
    assert calls == 1
    assert canonical(lazy) == canonical(eager)
    tags = [a for g in eager for a in g.artifacts if a.layout == "deepspeed" and a.step]
    assert tags
    assert all(a.complete for a in tags)  # `latest` was found (it names the last tag)


@SETTINGS
@given(tree=trees(), which=st.integers(0, len(TEMPLATED) - 1), chunk=st.integers(1, 7))
def test_pass_one_over_keys_in_chunks_matches_pass_one_over_objects(
    tree: b.MemoryTree, which: int, chunk: int
) -> None:
    options = TEMPLATED[which]
    objects = tree.objects()
    with patch.object(classify_module, "_CHUNK", chunk):
        by_keys = find_runs_by_keys(
            [o.key for o in objects], options, lambda keys: [o for o in objects if o.key in keys]
        )
    by_objects = find_runs(iter(objects), options)
    assert by_keys.templates == by_objects.templates
    assert by_keys.detected == by_objects.detected
    assert by_keys.trackers == by_objects.trackers


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 4096])
def test_pass_one_skips_exactly_the_keys_under_a_template_run(chunk: int) -> None:
    """Keys just past a run's prefix (`runs/r10/` after `runs/r1/`, `runs/r1x`) are looked
    at, whatever the chunks."""
    tree = b.MemoryTree()
    for key in (
        "runs/r1/a",
        "runs/r1/b/latest",
        "runs/r10/c",
        "runs/r1x",
        "runs/r1\u00e9/d",
        "runs0/exp/global_step1/mp_rank_00_model_states.pt",
        "runs0/exp/latest",
        "runs0/exp/global_step2/mp_rank_00_model_states.pt",
        "zz/runs/q/e",
    ):
        tree(key, b"x", b.T0)
    options = TEMPLATED[0]
    objects = tree.objects()
    with patch.object(classify_module, "_CHUNK", chunk):
        by_keys = find_runs_by_keys(
            [o.key for o in objects], options, lambda keys: [o for o in objects if o.key in keys]
        )
    by_objects = find_runs(iter(objects), options)
    assert by_keys == by_objects
    assert set(by_keys.templates) == {"runs/r1/", "runs/r10/", "runs/r1\u00e9/", "zz/runs/q/"}
    assert by_keys.detected == {"runs0/exp/"}


_KEY_PARTS = st.sampled_from(
    [
        "a",
        "runs",
        "global_step",
        "global_step12",
        "global_step007",
        "global_step3_universal",
        "global_step_universal",
        "global_step4_universal_universal",
        "xglobal_step5",
        "global_step\u0661\u0662",  # Arabic-Indic digits: digits to `str.isdigit`
        "global_step\u00b2",  # a superscript two: a digit too
        "mp_rank_00_model_states.pt",
        "latest",
    ]
)


_SEGMENT = st.sampled_from(["a", "runs", "global_step3", "checkpoint-7", "iter_0000001", "x.ckpt"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_SEGMENT, min_size=1, max_size=4), _SEGMENT)
def test_a_folders_mask_is_its_parents_and_its_segments(parents: list[str], seg: str) -> None:
    """What `classify_group` uses to mask a folder beside the last one without asking
    `Dispatch.folder_mask`: the parent's mask or'ed with the segment's (as kept)."""
    dispatch = Dispatch(REGISTRY)
    parent = "/".join(parents) + "/"
    folder = parent + seg + "/"
    mask = dispatch.folder_mask(folder)
    assert dispatch._folders[parent] == dispatch.folder_mask(parent)
    assert mask == dispatch._folders[parent] | dispatch._segments[(seg, True)]


def _claim_before(key: str) -> Claim | None:
    """`DeepSpeedDetector.claim` as it was, every tag folder through `digit_segment`."""
    if "global_step" in key:
        unit = digit_segment(key, "global_step", "_universal")
        if unit:
            return Claim(unit, True)
    if key.endswith("_states.pt") and ("mp_rank_" in key or "/layer_" in key):
        unit = parent(key)
        return Claim(unit, True) if unit else None
    if basename(key) in TRACKERS:
        return Claim(key, tracker=True)
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEY_PARTS, min_size=1, max_size=5).map("/".join), st.booleans())
def test_deepspeed_claims_tag_folders_as_digit_segment_does(key: str, folder: bool) -> None:
    key = key + "/" if folder else key
    detector = next(d for d in REGISTRY if isinstance(d, DeepSpeedDetector))
    assert detector.claim(key) == _claim_before(key)
