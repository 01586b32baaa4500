"""Grouping's short cuts give the answers of the plain versions they replace."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from governance.model.detectors.base import artifact, basename
from governance.model.detectors.deepspeed import (
    DeepSpeedDetector,
    _combined,
    _tag_step,
    ds_component,
    latest_verdict,
    ranks_verdict,
)
from governance.model.grouping import _outermost_root
from governance.model.runs import detected_run_of
from governance.model.types import CatalogObject
from tests.unit.test_model_speed_grouping import TAG_NAMES, tracker_context

SEGMENTS = st.sampled_from(["a", "b", "ab", "", "global_step1", "x.y"])
FOLDERS = st.lists(SEGMENTS, min_size=0, max_size=5).map(lambda s: "".join(p + "/" for p in s))


@settings(max_examples=1000, deadline=None)
@given(folder=FOLDERS, units=st.lists(FOLDERS | SEGMENTS, max_size=6))
def test_outermost_root_by_lengths_is_the_plain_scan(folder: str, units: list[str]) -> None:
    roots = dict.fromkeys(units, 0)
    lengths = sorted({len(u) for u in roots if u})
    assert _outermost_root(folder, roots, lengths) == detected_run_of(
        folder, set(roots)
    )  # the plain scan


AS_OF = datetime(2026, 1, 1, tzinfo=UTC)


def _obj(key: str, size: int = 10) -> CatalogObject:
    return CatalogObject(key, size, AS_OF, "e")


@settings(max_examples=300, deadline=None)
@given(
    unit=st.sampled_from(
        ["r/global_step5/", "r/global_step5_universal/", "global_step7/", "r//", "r/tag//", "/"]
    ),
    names=TAG_NAMES,
    latest=st.sampled_from([None, "global_step5", "global_step9", "global_step2", "tag"]),
)
def test_deepspeed_build_is_the_generic_artifact(
    unit: str, names: list[str], latest: str | None
) -> None:
    """The tag artifact equals `artifact()` with the detector's components and verdicts."""
    members = [_obj(unit + n) for n in names]
    head, sep, _ = unit.rstrip("/").rpartition("/")
    trackers = {}
    if latest is not None:
        for t in ("latest", "latest_universal"):
            trackers[head + sep + t] = _obj(head + sep + t)

    ctx = tracker_context(trackers, latest)
    got = DeepSpeedDetector().build(unit, members, ctx())
    step = _tag_step(basename(unit))
    verdict = _combined(ranks_verdict(names), latest_verdict(unit, step, ctx(), members))
    want = artifact(unit, got.kind, "deepspeed", members, ds_component, step=step, verdict=verdict)
    assert got == want
