"""The plan store writes each action's object list as JSON text itself (SQLite); the text
must be exactly what the column's serializer, `json.dumps`, would write."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from governance.catalog.plans import _objects_json

text = st.text()  # any code point: quotes, backslashes, control characters, non-ASCII
maybe_text = st.none() | text
numbers = st.integers(min_value=-(2**70), max_value=2**70)
rows = st.lists(
    st.tuples(text, numbers, text, numbers, maybe_text, maybe_text, text, maybe_text).map(list),
    max_size=4,
)


@given(rows)
def test_objects_json_is_json_dumps(objects: list[list[Any]]) -> None:
    assert _objects_json(objects) == json.dumps(objects)


@given(rows, st.sampled_from([True, 1.5, "7"]))
def test_other_value_types_fall_back_to_json_dumps(objects: list[list[Any]], odd: Any) -> None:
    objects = [*objects, ["k", odd, "e", 1, None, None, "", None]]
    assert _objects_json(objects) == json.dumps(objects)
