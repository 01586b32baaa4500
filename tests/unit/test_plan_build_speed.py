"""What the planner does to build large plans quickly changes nothing in the plan.

The collector's freezing is undone, reasons are shared without changing their text, sorted
inputs are left as they are and unsorted ones are still sorted, and the catalog stream's
shared datetimes equal `datetime_from_us`.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from governance.catalog.engine import open_engine
from governance.catalog.queries import iter_live_objects, stream_live_objects
from governance.catalog.roots import get_or_create_root, start_scan
from governance.catalog.tables import StoredObject, datetime_from_us
from governance.heap import settled_collections
from governance.model.grouping import classify_group
from governance.model.types import ClassifyOptions, Component, RunStatus
from governance.plan.fingerprint import action_text
from tests.unit.plan_factories import (
    AS_OF,
    actions_for,
    checkpoint,
    example_policy,
    group,
    make_plan,
    obj,
)


def test_collections_are_restored_after_a_build_and_after_a_failure() -> None:
    before = gc.get_threshold()
    make_plan(
        [group("a", [checkpoint("runs/a/", s, 40 - s / 100) for s in (100, 200)])], example_policy()
    )
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError):
        _fail_while_settled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def _fail_while_settled() -> None:
    with settled_collections() as settle:
        settle()
        raise RuntimeError("boom")


def test_settling_leaves_objects_frozen_by_the_caller_alone() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with settled_collections() as settle:
            held = [[i] for i in range(1000)]  # new objects: settling must not freeze them
            settle()
            assert gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen  # theirs stay frozen (objects may die)
        assert held
    finally:
        gc.unfreeze()


def test_reasons_for_the_same_step_are_shared_across_runs_and_read_as_before() -> None:
    runs = [
        group(
            name,
            [checkpoint(f"runs/{name}/", step, 60 - step / 100) for step in range(100, 900, 100)],
            RunStatus.COMPLETED,
        )
        for name in ("a", "b")
    ]
    plan = make_plan(runs, example_policy())
    [a] = actions_for(plan, "runs/a/checkpoint-100/")
    [b] = actions_for(plan, "runs/b/checkpoint-100/")
    assert a.reason == (
        "checkpoints: step 100 is not kept by any tier (recent, mid-term, long-term); "
        "otherwise: delete"
    )
    assert a.reason is b.reason


def test_unsorted_members_are_still_sorted() -> None:
    unit = "runs/a/global_step100/"
    objs = [
        obj(unit + "zero_pp_rank_0_mp_rank_00_optim_states.pt"),
        obj(unit + "mp_rank_00_model_states.pt"),
    ]
    [art] = classify_group(list(reversed(objs)), "runs/a/", ClassifyOptions(as_of=AS_OF), None, {})
    assert [m.obj.key for m in art.members] == sorted(o.key for o in objs)
    assert [m.component for m in art.members] == [Component.WEIGHTS, Component.OPTIMIZER]
    plan = make_plan([group("a", [checkpoint("runs/a/", 100, 40)])], example_policy())
    several = [a for a in plan.actions if len(a.objects) > 1]
    assert several
    for action in several:
        text = action_text(action)
        action.objects.reverse()
        assert action_text(action) == text  # the canonical document sorts the objects


def test_streamed_objects_share_times_equal_to_the_catalog_conversion(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'catalog.db'}")
    root = get_or_create_root(engine, "file:///r/", "r")
    scan = start_scan(engine, root, "test")
    times = [0, 1_700_000_000_123_456, 1_700_000_000_123_456, -5, 1_700_000_000_123_457]
    rows = [
        {
            "root_id": root,
            "key": f"k{i}",
            "upload_id": "",
            "size": 1,
            "etag": "e",
            "last_modified": us,
            "first_scan_id": scan,
            "changed_scan_id": scan,
        }
        for i, us in enumerate(times)
    ]
    with engine.begin() as conn:
        conn.execute(StoredObject.__table__.insert(), rows)  # type: ignore[attr-defined]
    streamed = list(stream_live_objects(engine, root))
    assert streamed == list(iter_live_objects(engine, root))
    assert [o.last_modified for o in streamed] == [datetime_from_us(us) for us in times]
    assert streamed[1].last_modified is streamed[2].last_modified
    engine.dispose()
