"""Apply walks a plan in memory flat in its size: the fingerprint is verified without holding
the actions' texts, what it keeps per action is a few bytes in one bytearray, and its
catalog connections use a small page cache. The verification still equals the planner's
fingerprint on every plan, in canonical order or not."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from governance.apply import stream
from governance.apply.stream import IdSet, IdTable, scan_plan
from governance.catalog.engine import CACHE_KIB, open_engine, page_cache
from governance.catalog.plans import load_plan_header, save_plan
from governance.errors import ApprovalError
from governance.plan.fingerprint import fingerprint
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    Plan,
    PlannedAction,
)
from tests.unit.plan_samples import sample_plan

ROOT = "s3://bench/"
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def residue_action(i: int, key: str | None = None) -> PlannedAction:
    key = key or f"residue/run-{i // 100:04d}/part-{i % 100:04d}.tmp"
    return PlannedAction(
        id=i + 1,
        rule="residue",
        tier=None,
        action=ActionType.DELETE,
        destructive=True,
        artifact=ArtifactRef(ROOT + key, "residue", None, None, ROOT),
        objects=[ObjectRef(key, 16, T0, "0123456789abcdef0123456789abcdef")],
        reason="residue older than 1d",
    )


def with_actions(
    actions: list[PlannedAction], kept: list[KeptArtifact] | None = None, plan_id: str = "p-1"
) -> Plan:
    """The sample plan's header around these actions, with their true fingerprint."""
    kept = sample_plan().kept if kept is None else kept
    return replace(
        sample_plan(plan_id),
        actions=actions,
        kept=kept,
        fingerprint=fingerprint(actions, kept),
    )


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def sorting_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the scans that fell back to hashing the sorting way (holding every text)."""
    calls: list[int] = []
    real: Callable[..., str] = stream.fingerprint_streaming

    def counted(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stream, "fingerprint_streaming", counted)
    return calls


def scanned(engine: Engine, plan: Plan, only_non_destructive: bool = False) -> stream.PlanScan:
    save_plan(engine, plan)
    header = load_plan_header(engine, plan.plan_id)
    return scan_plan(engine, header, only_non_destructive=only_non_destructive)


def test_every_action_type_non_ascii_and_kept_verify_in_one_ordered_pass(
    engine: Engine, sorting_calls: list[int]
) -> None:
    kept = sorted(sample_plan().kept, key=lambda k: k.artifact.uri)  # as the planner saves it
    plan = with_actions(sample_plan().actions, kept)  # six types; non-ASCII run names
    scan = scanned(engine, plan, only_non_destructive=True)
    assert not sorting_calls
    assert scan.total == 6
    assert scan.not_run == [1, 2, 3, 5, 6]  # in id order, although read type by type
    for action in plan.actions:
        scan.verify(action)


def test_a_plan_out_of_canonical_order_is_verified_the_sorting_way(
    engine: Engine, sorting_calls: list[int]
) -> None:
    # "a b" sorts after "a" by string, but its document sorts first ('"' > ' '); a kept
    # list out of order likewise: both are found out and hashed correctly.
    actions = [residue_action(0, "a"), residue_action(1, "a b"), residue_action(2, "caf\u00e9")]
    kept = [
        KeptArtifact(
            ArtifactRef(f"{ROOT}z/", "checkpoint", "r", 1, ROOT), "c", None, KeptHow.WHOLE, "x"
        ),
        KeptArtifact(
            ArtifactRef(f"{ROOT}\u00e9/", "checkpoint", "r", 2, ROOT),
            None,
            "t",
            KeptHow.PROTECTED,
            "y",
        ),
    ]
    scanned(engine, with_actions(actions[:1] + actions[2:], kept[::-1]))
    assert not sorting_calls  # "\u00e9" sorts before "z": both lists in canonical order

    scan = scanned(engine, with_actions(actions, kept[::-1], "p-2"))
    assert sorting_calls == [1]
    assert scan.total == 3
    assert scan.removing_roots == {ROOT}

    scanned(engine, with_actions(actions[:1] + actions[2:], kept, "p-3"))
    assert sorting_calls == [1, 1]  # the kept list alone out of order


def test_an_edited_action_fails_the_fingerprint(engine: Engine) -> None:
    plan = with_actions([residue_action(i) for i in range(3)])
    save_plan(engine, plan)
    with engine.begin() as conn:
        conn.execute(text("UPDATE plan_actions SET rule = 'edited' WHERE action_id = 2"))
    header = load_plan_header(engine, plan.plan_id)
    with pytest.raises(ApprovalError, match="do not match its fingerprint"):
        scan_plan(engine, header, only_non_destructive=False)


def peak_of_scan(engine: Engine, n: int) -> int:
    """Traced peak bytes of `scan_plan` over a saved plan of n one-object deletes (the
    scan's result kept alive, as apply keeps it)."""
    plan = with_actions([residue_action(i) for i in range(n)], [], plan_id=f"p-{n}")
    save_plan(engine, plan)
    header = load_plan_header(engine, plan.plan_id)
    del plan
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        scan = scan_plan(engine, header, only_non_destructive=False)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert scan.total == n
    return peak


def test_verifying_a_plan_takes_memory_flat_in_its_size(engine: Engine) -> None:
    small, large = peak_of_scan(engine, 2_000), peak_of_scan(engine, 8_000)
    # Holding each action's text (as sorting them would) costs about 500 bytes an action,
    # a dict of digests about 130; the digests' bytearray costs 16.
    assert large - small < 6_000 * 60, (small, large)


def test_id_tables_hold_dense_ids_in_a_bytearray_and_the_rest_aside() -> None:
    table = IdTable(expected=10)
    table[3] = b"\x07" * 16
    table[10**9] = b"\x08" * 16  # far past the expected count: not a gigabyte of slots
    assert table.get(3) == b"\x07" * 16
    assert [table.get(i) for i in (4, 99, -1)] == [None, None, None]
    assert 10**9 in table
    assert 5 not in table
    assert list(table) == [3, 10**9]
    assert len(table._slots) == 4 * 16

    done = IdSet(expected=5)
    done.update([4, 1, 2_000_000])
    assert list(done) == [1, 4, 2_000_000]
    assert 4 in done
    assert 3 not in done


def cache_size(conn: Any) -> int:
    return int(conn.exec_driver_sql("PRAGMA cache_size").scalar_one())


def test_page_cache_is_small_inside_and_back_to_the_default_after(engine: Engine) -> None:
    with engine.connect() as conn:
        assert cache_size(conn) == -CACHE_KIB
    with page_cache(engine, 1024), engine.connect() as conn:
        assert cache_size(conn) == -1024
    with engine.connect() as conn:
        assert cache_size(conn) == -CACHE_KIB
