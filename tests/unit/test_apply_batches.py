"""Apply's batches: whole actions, in plan order, small first to fill the pipeline."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from governance.apply import executor
from governance.apply.executor import CHUNK_OBJECTS, FIRST_CHUNK_OBJECTS, _chunks


def _actions(sizes: list[int]) -> list[Any]:
    return [SimpleNamespace(id=i, objects=[None] * n) for i, n in enumerate(sizes)]


@given(st.lists(st.integers(min_value=1, max_value=1500), max_size=60))
def test_batches_keep_order_and_whole_actions_and_ramp_up(sizes: list[int]) -> None:
    actions = _actions(sizes)
    batches = list(_chunks(cast(Any, actions)))
    assert [a for b in batches for a in b] == actions  # nothing lost, split or reordered
    limit = FIRST_CHUNK_OBJECTS
    for i, batch in enumerate(batches):
        objects = sum(len(a.objects) for a in batch)
        before_last = objects - len(batch[-1].objects)
        assert before_last < limit  # it closed at the first action that reached the limit
        if i < len(batches) - 1:
            assert objects >= limit or len(batch) >= executor.CHUNK_ACTIONS
        limit = min(limit * 2, CHUNK_OBJECTS)


def test_first_batches_double_up_to_the_chunk_size() -> None:
    sizes = [len(b) for b in _chunks(cast(Any, _actions([1] * 30_000)))]
    assert sizes[:4] == [1000, 2000, 4000, 5000]
    assert set(sizes[3:-1]) == {5000}
    assert sum(sizes) == 30_000
