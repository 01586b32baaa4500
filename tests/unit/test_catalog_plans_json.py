"""The plan store writes each action's object list as JSON text itself; the text must be
exactly what the column's serializer, `json.dumps`, would write for the object arrays."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.catalog.plans import _object_lists, _objects_text
from governance.plan.types import ObjectRef

T0 = datetime(2026, 6, 1, tzinfo=UTC)

text = st.text()  # any code point: quotes, backslashes, control characters, non-ASCII
maybe_text = st.none() | text
sizes = st.integers(min_value=-(2**70), max_value=2**70)
times = st.integers(min_value=-(10**15), max_value=10**15).map(
    lambda us: T0 + timedelta(microseconds=us)
)
common = st.sampled_from(["", "STANDARD", "GLACIER"])  # the strings looked up, not encoded


@st.composite
def object_refs(draw: st.DrawFn) -> ObjectRef:
    return ObjectRef(
        key=draw(text),
        size=draw(sizes),
        etag=draw(text),
        last_modified=draw(times),
        storage_class=draw(st.none() | common | text),
        version_id=draw(maybe_text),
        upload_id=draw(common | text),
    )


def _shared_times(refs: list[ObjectRef]) -> list[ObjectRef]:
    """The same refs all at one time object (the planner's objects often share theirs)."""
    return [
        ObjectRef(
            key=r.key,
            size=r.size,
            etag=r.etag,
            last_modified=refs[0].last_modified,
            storage_class=r.storage_class,
            version_id=r.version_id,
            upload_id=r.upload_id,
        )
        for r in refs
    ]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(object_refs(), max_size=4))
def test_objects_text_is_json_dumps(refs: list[ObjectRef]) -> None:
    for objects in (refs, _shared_times(refs)):
        written, size = _objects_text(objects)
        assert written == json.dumps(_object_lists(objects))
        assert size == sum(o.size for o in objects)
        assert json.loads(written) == _object_lists(objects)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(object_refs(), max_size=3), st.sampled_from([True, 1.5]))
def test_other_value_types_fall_back_to_json_dumps(refs: list[ObjectRef], odd: Any) -> None:
    objects = [*refs, ObjectRef("k", odd, T0, "e")]
    written, size = _objects_text(objects)
    assert written == json.dumps(_object_lists(objects))
    assert size == sum(o.size for o in objects)
