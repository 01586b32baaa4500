"""Saved plans round-trip through the catalog exactly, list oldest first, and unknown ids fail."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from governance.catalog.engine import open_engine
from governance.catalog.plans import (
    OBJECT_FIELDS,
    list_plans,
    load_plan,
    load_plan_header,
    new_plan_id,
    save_plan,
    set_plan_status,
)
from governance.errors import EXIT_BAD_INPUT, CatalogError, UnknownPlanError
from governance.plan.types import Plan, PlanStatus
from tests.catalogs import catalog_url  # noqa: F401
from tests.unit.plan_samples import AS_OF, ROOT, sample_plan


def test_plan_round_trips_every_field(catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    plan = sample_plan(refusal="deletes 10 GiB, over safety.max_delete_bytes 5 GiB")
    save_plan(engine, plan)
    loaded = load_plan(engine, plan.plan_id)
    assert loaded == plan  # dataclass equality: every field, every action, object and kept row
    assert loaded.as_of.tzinfo is not None
    assert loaded.actions[1].objects[0].last_modified == plan.actions[1].objects[0].last_modified
    assert loaded.actions[5].uri_of(loaded.actions[5].objects[0]) == ROOT + "copies/w.bin"
    engine.dispose()


def _store_object_uri(engine: Engine, plan_id: str, action_id: int, uri: str) -> None:
    """Write `uri` into the stored URL field of the action's first object (as an older
    version could: the field is null now, the URL being the root's plus the key)."""
    with engine.begin() as conn:
        stored = conn.execute(
            text("SELECT objects FROM plan_actions WHERE plan_id = :p AND action_id = :a"),
            {"p": plan_id, "a": action_id},
        ).scalar_one()
        objects = json.loads(stored) if isinstance(stored, str) else stored
        objects[0][OBJECT_FIELDS.index("uri")] = uri
        conn.execute(
            text("UPDATE plan_actions SET objects = :o WHERE plan_id = :p AND action_id = :a"),
            {"o": json.dumps(objects), "p": plan_id, "a": action_id},
        )


def test_a_stored_object_url_is_its_roots_plus_its_key(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    plan = sample_plan()
    save_plan(engine, plan)
    action = plan.actions[0]
    _store_object_uri(engine, plan.plan_id, action.id, action.uri_of(action.objects[0]))
    assert load_plan(engine, plan.plan_id) == plan  # the same URL, written out: as before
    _store_object_uri(engine, plan.plan_id, action.id, "s3://elsewhere/" + action.objects[0].key)
    with pytest.raises(CatalogError, match=rf"plan {plan.plan_id} action {action.id}: object "
                       r"s3://elsewhere/.* is not under the action's root"):  # fmt: skip
        load_plan(engine, plan.plan_id)
    engine.dispose()


def test_an_objects_class_time_round_trips_and_older_plans_load(tmp_path: Path) -> None:
    """Apply compares storage's modification time with the time govern's own copy put an
    object in its class (`class_since`): a plan must keep it, or every object copied in
    place (transitioned, restored) reads as re-uploaded. Plans saved before it (8 fields
    an object) load with none."""
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    plan = sample_plan()
    copied = plan.actions[0].objects[0]
    copied.class_since = copied.last_modified + timedelta(days=40, microseconds=7)
    save_plan(engine, plan)
    loaded = load_plan(engine, plan.plan_id)
    assert loaded.actions[0].objects[0].class_since == copied.class_since
    assert loaded == plan
    with engine.begin() as conn:  # as an older release saved it: no ninth field
        for action_id, stored in conn.execute(
            text("SELECT action_id, objects FROM plan_actions WHERE plan_id = :p"),
            {"p": plan.plan_id},
        ).all():
            objects = [o[:8] for o in json.loads(stored)]
            conn.execute(
                text("UPDATE plan_actions SET objects = :o WHERE plan_id = :p AND action_id = :a"),
                {"o": json.dumps(objects), "p": plan.plan_id, "a": action_id},
            )
    older = load_plan(engine, plan.plan_id)
    assert older.actions[0].objects[0].class_since is None
    assert [o.key for a in older.actions for o in a.objects] == [
        o.key for a in plan.actions for o in a.objects
    ]
    engine.dispose()


def test_empty_plan_round_trips(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    plan = sample_plan()
    empty = Plan(
        **{
            **{f: getattr(plan, f) for f in Plan.__dataclass_fields__},
            "actions": [],
            "kept": [],
            "notes": [],
        }
    )
    save_plan(engine, empty)
    assert load_plan(engine, empty.plan_id) == empty


def test_large_plan_is_written_in_chunks(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    plan = sample_plan()
    base = plan.actions[0]
    from dataclasses import replace

    plan.actions = [replace(base, id=i + 1) for i in range(12_001)]
    save_plan(engine, plan)
    with engine.connect() as conn:
        n = conn.execute(text("SELECT COUNT(*) FROM plan_actions")).scalar()
    assert n == 12_001
    assert [a.id for a in load_plan(engine, plan.plan_id).actions][-3:] == [11_999, 12_000, 12_001]


def test_list_is_oldest_first_and_status_changes(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    newer = sample_plan("p-b", created_at=AS_OF + timedelta(hours=2))
    older = sample_plan("p-z", created_at=AS_OF + timedelta(hours=1))
    save_plan(engine, newer)
    save_plan(engine, older)
    headers = list_plans(engine)
    assert [h.plan_id for h in headers] == ["p-z", "p-b"]
    assert headers[0].summary == older.summary
    assert headers[0].scans == older.scans
    set_plan_status(engine, "p-b", PlanStatus.APPROVED)
    assert load_plan_header(engine, "p-b").status is PlanStatus.APPROVED
    assert load_plan(engine, "p-z").status is PlanStatus.PENDING_APPROVAL


def test_unknown_plan_id_is_named(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(UnknownPlanError, match="p-nope") as info:
        load_plan(engine, "p-nope")
    assert info.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(UnknownPlanError, match="p-nope"):
        set_plan_status(engine, "p-nope", PlanStatus.APPROVED)


def test_plan_ids_sort_by_time_and_differ() -> None:
    now = datetime(2026, 11, 30, 2, 15, 0, tzinfo=UTC)
    plan_id = new_plan_id(now)
    assert re.fullmatch(r"p-20261130-021500-[0-9a-f]{4}", plan_id)
    assert len({new_plan_id(now) for _ in range(50)}) > 1
    assert new_plan_id(now + timedelta(seconds=1)) > "p-20261130-021500-ffff"
