"""Apply's batches: whole actions, in plan order, small first to fill the pipeline."""

from __future__ import annotations

from itertools import pairwise
from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from governance.apply import executor
from governance.apply.executor import CHUNK_OBJECTS, FIRST_CHUNK_OBJECTS, _chunks


def _actions(sizes: list[int], artifacts: list[int] | None = None) -> list[Any]:
    """Actions of these sizes, each on an artifact of its own unless `artifacts` gives
    each one's artifact number (consecutive equal numbers: actions of one artifact)."""
    owners = artifacts if artifacts is not None else list(range(len(sizes)))
    return [
        SimpleNamespace(id=i, objects=[None] * n, artifact=SimpleNamespace(uri=f"s3://b/{a}/"))
        for i, (n, a) in enumerate(zip(sizes, owners, strict=True))
    ]


@given(st.lists(st.tuples(st.integers(min_value=1, max_value=1500), st.booleans()), max_size=60))
def test_batches_keep_order_and_whole_actions_and_artifacts_and_ramp_up(
    items: list[tuple[int, bool]],
) -> None:
    """(size, whether the action is on the same artifact as the one before)."""
    sizes = [n for n, _ in items]
    owners: list[int] = []
    for i, (_, same) in enumerate(items):
        owners.append(owners[-1] if same and owners else i)
    actions = _actions(sizes, owners)
    batches = list(_chunks(cast(Any, actions)))
    assert [a for b in batches for a in b] == actions  # nothing lost, split or reordered
    for before, after in pairwise(batches):  # one artifact: one batch
        assert before[-1].artifact.uri != after[0].artifact.uri
    limit = FIRST_CHUNK_OBJECTS
    for i, batch in enumerate(batches):
        objects = sum(len(a.objects) for a in batch)
        # it closed at the first artifact boundary once it reached the limit
        last = batch[-1].artifact.uri
        tail = 0
        for a in reversed(batch):
            if a.artifact.uri != last:
                break
            tail += len(a.objects)
        assert objects - tail < limit or len(batch) - 1 >= executor.CHUNK_ACTIONS
        if i < len(batches) - 1:
            assert objects >= limit or len(batch) >= executor.CHUNK_ACTIONS
        limit = min(limit * 2, CHUNK_OBJECTS)


def test_first_batches_double_up_to_the_chunk_size() -> None:
    sizes = [len(b) for b in _chunks(cast(Any, _actions([1] * 30_000)))]
    assert sizes[:4] == [1000, 2000, 4000, 5000]
    assert set(sizes[3:-1]) == {5000}
    assert sum(sizes) == 30_000
