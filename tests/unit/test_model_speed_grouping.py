"""Grouping's and DeepSpeed's fast paths give exactly what the plain paths they stand for give.

- `_KeyIndex` finds a key by bisection when the group's keys are in order (the plain way:
  a map of every key);
- `_build_units` judges only the incomplete artifacts and those of units that may hold an
  empty or partial object (plain: every artifact), and checks the key order of the units
  shallow claims added to (plain: every unit);
- `_outermost_roots` answers for all of a group's folders at once, and for none when no
  unit is a root (plain: `_outermost_root` per folder);
- `_sort_arts` sorts by key alone when keys are distinct (plain: `_in_art_order`, then
  `sort(key=_art_order)`);
- DeepSpeed's `build_all` looks up what a tag's name and file names decide once
  (`_tag_facts`).

Whole classifications are compared through `repr`, so every field of every run and
artifact counts (order of artifacts and objects included).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model import grouping
from governance.model.classify import classify
from governance.model.detectors import REGISTRY, Context
from governance.model.detectors.base import artifact, basename
from governance.model.detectors.deepspeed import (
    DeepSpeedDetector,
    _combined,
    _tag_step,
    ds_component,
    latest_verdict,
    ranks_verdict,
)
from governance.model.detectors.residue import TMP_SUFFIXES
from governance.model.dispatch import Dispatch
from governance.model.grouping import (
    _art_order,
    _in_art_order,
    _KeyIndex,
    _outermost_root,
    _outermost_roots,
    _positions,
    _sort_arts,
    classify_group,
)
from governance.model.types import Artifact, CatalogObject, ClassifyOptions, Kind
from tests.fixtures import builders as b
from tests.unit.test_model_properties import OPTIONS, trees

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AS_OF = datetime(2026, 1, 1, tzinfo=UTC)

_build_units = grouping._build_units


def _plain_build_units(
    units: dict[str, list[CatalogObject]],
    owner: Mapping[str, int],
    ctx: Context,
    unordered: Collection[str],
    suspects: Collection[str] | None = None,
) -> list[Artifact]:
    plain = Context(ctx.options, ctx.read_meta, _KeyIndex(list(ctx.index.values())), ctx.trackers)
    return _build_units(units, owner, plain, list(units), None)


def _plain_roots(
    folders: Sequence[tuple[int, str]], roots: Mapping[str, int], lengths: list[int]
) -> list[str | None]:
    return [_outermost_root(f, roots, lengths) if roots else None for _, f in folders]


def _plain_sort(arts: list[Artifact]) -> None:
    if not _in_art_order(arts):
        arts.sort(key=_art_order)


@contextmanager
def _plain() -> Iterator[None]:
    """Every fast path of `classify_group` replaced by the plain one."""
    with (
        patch.object(grouping, "_build_units", _plain_build_units),
        patch.object(grouping, "_outermost_roots", _plain_roots),
        patch.object(grouping, "_sort_arts", _plain_sort),
    ):
        yield


def _classified(tree: b.MemoryTree, options: ClassifyOptions) -> str:
    objects = tree.objects()
    return repr(list(classify(lambda: iter(objects), options, tree.read_meta)))


@SETTINGS
@given(tree=trees(), which=st.integers(0, len(OPTIONS) - 1))
def test_classification_is_the_plain_one(tree: b.MemoryTree, which: int) -> None:
    fast = _classified(tree, OPTIONS[which])
    with _plain():
        plain = _classified(tree, OPTIONS[which])
    assert fast == plain


@SETTINGS
@given(tree=trees(), which=st.integers(0, len(OPTIONS) - 1), seed=st.integers(0, 2**32 - 1))
def test_a_group_out_of_order_is_classified_as_plainly(
    tree: b.MemoryTree, which: int, seed: int
) -> None:
    """`classify_group` is given sorted objects, but does not count on it."""
    objects = tree.objects()
    random.Random(seed).shuffle(objects)
    options = OPTIONS[which]
    fast = repr(classify_group(objects, "r/", options, tree.read_meta, {}))
    with _plain():
        plain = repr(classify_group(objects, "r/", options, tree.read_meta, {}))
    assert fast == plain


def _obj(key: str, size: int = 10, etag: str = "e") -> CatalogObject:
    return CatalogObject(key, size, AS_OF, etag)


KEYS = st.sampled_from(["a", "a/b", "a/b/", "ab", "b", "", "a/latest", "\u00e9"])


@settings(max_examples=300, deadline=None)
@given(st.lists(KEYS, max_size=8), st.lists(KEYS, max_size=4))
def test_key_index_by_bisection_is_the_map(keys: list[str], probes: list[str]) -> None:
    keys.sort()
    objs = [_obj(k, etag=str(i)) for i, k in enumerate(keys)]  # equal keys, told apart
    fast, plain = _KeyIndex(objs, keys), _KeyIndex(objs)
    for key in [*probes, *keys]:
        assert fast.get(key) is plain.get(key)
        assert (key in fast) == (key in plain)
    assert dict(fast) == dict(plain)


SEGMENTS = st.sampled_from(["a", "b", "ab", "", "global_step1", "x.y"])
FOLDERS = st.lists(SEGMENTS, min_size=0, max_size=5).map(lambda s: "".join(p + "/" for p in s))


@settings(max_examples=500, deadline=None)
@given(folders=st.lists(FOLDERS, max_size=6), units=st.lists(FOLDERS | SEGMENTS, max_size=6))
def test_outermost_roots_are_each_folders_outermost_root(
    folders: list[str], units: list[str]
) -> None:
    roots = dict.fromkeys(units, 0)
    lengths = sorted({len(u) for u in roots if u})
    entries = list(enumerate(folders))
    assert _outermost_roots(entries, roots, lengths) == _plain_roots(entries, roots, lengths)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "a/", "b", "a/b", "c"]),
            st.sampled_from(["hf", "deepspeed", "other"]),
            st.sampled_from(["", "u1", "u2"]),
        ),
        max_size=7,
    )
)
def test_sorting_artifacts_is_the_plain_sort(rows: list[tuple[str, str, str]]) -> None:
    arts = [
        Artifact(key, Kind.OTHER, layout, [CatalogObject(key, 1, AS_OF, "e", upload_id=up)], ())
        for key, layout, up in rows
    ]
    fast, plain = list(arts), list(arts)
    _sort_arts(fast)
    _plain_sort(plain)
    assert [id(a) for a in fast] == [id(a) for a in plain]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=10), st.integers(0, 2))
def test_positions_are_the_indexes_of_equal_items(values: list[int], value: int) -> None:
    assert _positions(values, value) == [i for i, v in enumerate(values) if v == value]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab./_-", max_size=8), st.sampled_from([*TMP_SUFFIXES, ""]))
def test_a_partial_files_name_has_the_residue_bit(stem: str, suffix: str) -> None:
    """`classify_group` checks only names whose mask has it for a partial-file ending."""
    name = stem + suffix
    if name.endswith(TMP_SUFFIXES) or not name:
        assert Dispatch(REGISTRY).name_mask(name) & grouping._TMP_BIT


TAG_NAMES = st.lists(
    st.sampled_from(
        [
            "mp_rank_00_model_states.pt",
            "mp_rank_01_model_states.pt",
            "zero_pp_rank_0_mp_rank_00_optim_states.pt",
            "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt",
            "layer_01-model_states.pt",
            "notes.txt",
        ]
    ),
    min_size=1,
    max_size=4,
    unique=True,
).map(sorted)
"""File names of a DeepSpeed tag folder (model states, ZeRO partitions, pipeline layers)."""


def tracker_context(
    trackers: Mapping[str, CatalogObject], latest: str | None
) -> Callable[[], Context]:
    """A fresh classification context per call whose every tracker file names `latest`."""

    def read(o: CatalogObject) -> bytes | None:
        return latest.encode() if latest is not None else None

    return lambda: Context(ClassifyOptions(as_of=AS_OF), read, {}, trackers)


UNITS = st.sampled_from(
    [
        "r/global_step5/",
        "r/global_step12/",
        "r/global_step5_universal/",
        "q/global_step9/",
        "global_step7/",
        "r//",
        "r/tag//",
        "/",
        "r/latest",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    units=st.lists(st.tuples(UNITS, TAG_NAMES), min_size=1, max_size=5, unique_by=lambda u: u[0]),
    latest=st.sampled_from([None, "global_step5", "global_step9", "global_step2", "tag"]),
)
def test_deepspeed_builds_all_units_as_the_generic_artifact(
    units: list[tuple[str, list[str]]], latest: str | None
) -> None:
    """Tags of several save folders built in one call, each equal to `artifact()` with
    the detector's components and verdicts (what `build_all` memoises, worked out)."""
    trackers = {}
    if latest is not None:
        for save_dir in ("r/", "q/", ""):
            for t in ("latest", "latest_universal"):
                trackers[save_dir + t] = _obj(save_dir + t)

    ctx = tracker_context(trackers, latest)
    batch = [(unit, [_obj(unit + n) for n in names]) for unit, names in units]
    got = DeepSpeedDetector().build_all(batch, ctx())
    for (unit, members), art in zip(batch, got, strict=True):
        if not unit.endswith("/"):
            assert art.kind is Kind.OTHER
            continue
        names = [o.key[len(unit) :] for o in members]
        step = _tag_step(basename(unit))
        verdict = _combined(ranks_verdict(names), latest_verdict(unit, step, ctx(), members))
        want = artifact(unit, Kind.CHECKPOINT, "deepspeed", members, ds_component, step=step)
        want.complete, want.completeness_reason = verdict
        assert art == want


def test_a_run_of_sibling_tags_is_the_plain_one() -> None:
    """The benchmark's shape: DeepSpeed tags one after another, a marker, `latest`, and
    an empty and a partial file inside tags (judged whole)."""
    tree = b.MemoryTree()
    for i in range(3):
        b.deepspeed_run(tree, f"t/runs/r{i}", steps=(1, 2, 10, 11), latest=10)
        b.marker(tree, f"t/runs/r{i}", "COMPLETED")
    tree("t/runs/r1/global_step2/mp_rank_00_model_states.pt", b"", b.T0)
    tree("t/runs/r2/global_step1/x.tmp", b"x", b.T0)
    options = ClassifyOptions(
        as_of=b.T0 + timedelta(days=90), run_templates=("{team}/runs/{run}/",)
    )
    fast = _classified(tree, options)
    with _plain():
        plain = _classified(tree, options)
    assert fast == plain
    assert "zero-byte weight file t/runs/r1/global_step2/" in fast
    assert "partial file t/runs/r2/global_step1/x.tmp" in fast
