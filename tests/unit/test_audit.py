"""The hash-chained audit log: it verifies, shows edits and deletions, and never forks."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import Engine

from governance import audit
from governance.apply.types import Outcome
from governance.audit import GENESIS, NewEvent, event_hash, record, record_many, record_now
from governance.catalog.engine import open_engine
from governance.errors import CatalogError
from tests.catalogs import catalog_url  # noqa: F401

T = datetime(2026, 11, 30, 2, 15, 0, 123456, tzinfo=UTC)


@pytest.fixture
def engine(catalog_url: str) -> Engine:  # noqa: F811
    return open_engine(catalog_url)


def _fill(engine: Engine, n: int) -> None:
    for i in range(n):
        record_now(
            engine,
            "action",
            actor="apply",
            plan_id=f"p-{i % 2}",
            payload={"i": i, "uri": f"s3://b/ключ-{i}", "bytes": 10**12 + i, "ratio": 0.1},
            at=T + timedelta(seconds=i),
        )


def test_chain_verifies_and_reads_back(engine: Engine) -> None:
    assert audit.verify(engine).ok
    assert audit.verify(engine).checked == 0
    first = record_now(engine, "plan", actor="alice", plan_id="p-0", payload={"when": T}, at=T)
    assert first == 1
    _fill(engine, 5)
    result = audit.verify(engine)
    assert result.ok, result.problems
    assert result.checked == 6

    got = audit.events(engine)
    assert [e.id for e in got] == [1, 2, 3, 4, 5, 6]
    assert got[0].prev_hash == GENESIS
    assert got[0].payload == {"when": "2026-11-30T02:15:00.123456+00:00"}  # stored form
    assert got[0].at == T
    for before, after in itertools.pairwise(got):
        assert after.prev_hash == before.hash
    e = got[3]
    assert e.hash == event_hash(e.id, e.at, e.event, e.actor, e.plan_id, e.payload, e.prev_hash)
    assert [e.id for e in audit.events(engine, "p-1")] == [3, 5]


def test_edited_payload_is_detected(engine: Engine) -> None:
    _fill(engine, 5)
    with engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET payload = :p WHERE id = 3"), {"p": '{"i": 99}'})
    result = audit.verify(engine)
    assert not result.ok
    assert result.problems == ["event 3: hash does not match its content (edited?)"]


def test_edit_with_a_recomputed_hash_breaks_the_next_link(engine: Engine) -> None:
    _fill(engine, 5)
    [ev] = [e for e in audit.events(engine) if e.id == 3]
    forged = event_hash(3, ev.at, ev.event, "mallory", ev.plan_id, ev.payload, ev.prev_hash)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE audit_events SET actor = 'mallory', hash = :h WHERE id = 3"), {"h": forged}
        )
    assert audit.verify(engine).problems == [
        "event 4: previous hash does not match event 3 (edited?)"
    ]


def test_deleted_event_is_detected(engine: Engine) -> None:
    _fill(engine, 5)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE id = 3"))
    assert audit.verify(engine).problems == [
        "event 4: previous hash does not match event 2 (deleted?)"
    ]


def test_deleted_first_event_is_detected(engine: Engine) -> None:
    _fill(engine, 3)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE id = 1"))
    assert audit.verify(engine).problems == [
        "event 2: previous hash does not match the start of the log (deleted?)"
    ]


def test_deleted_newest_events_are_detected(engine: Engine) -> None:
    _fill(engine, 5)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE id >= 4"))
    assert audit.verify(engine).problems == [
        "the log ends at event 3 but its head records event 5 (newest events deleted?)"
    ]


def test_an_append_after_a_truncation_still_shows_the_gap(engine: Engine) -> None:
    _fill(engine, 5)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE id >= 4"))
    _fill(engine, 1)  # chains from the head (event 5), not from the surviving event 3
    assert audit.verify(engine).problems == [
        "event 6: previous hash does not match event 3 (deleted?)"
    ]


def test_a_rewound_head_does_not_hide_the_events_after_it(engine: Engine) -> None:
    """Set the head back to event 1 and whatever is edited, deleted or inserted after it
    is still walked and reported (before, the walk stopped at the head: "OK: 1 event")."""
    _fill(engine, 6)
    with engine.begin() as conn:
        first = conn.execute(text("SELECT hash FROM audit_events WHERE id = 1")).scalar()
        conn.execute(text("UPDATE audit_head SET last_id = 1, last_hash = :h"), {"h": first})
        conn.execute(text("UPDATE audit_events SET actor = 'mallory' WHERE id = 3"))
        conn.execute(text("DELETE FROM audit_events WHERE id = 5"))
    result = audit.verify(engine)
    assert result.checked == 5
    assert result.problems == [
        "event 3: hash does not match its content (edited?)",
        "event 6: previous hash does not match event 4 (deleted?)",
        "events 2 to 6 lie past the log's head, which records event 1 (inserted, or the "
        "head rewound?)",
    ]


def test_an_append_onto_an_event_past_the_head_names_the_edit(engine: Engine) -> None:
    """With the head rewound, the next id is taken: the append is refused with one line
    that says why (a CatalogError, exit 2), not a database traceback."""
    _fill(engine, 3)
    with engine.begin() as conn:
        first = conn.execute(text("SELECT hash FROM audit_events WHERE id = 1")).scalar()
        conn.execute(text("UPDATE audit_head SET last_id = 1, last_hash = :h"), {"h": first})
    with pytest.raises(CatalogError, match=r"event past its head \(event 2 exists"):
        _fill(engine, 1)
    assert audit.verify(engine).checked == 3  # nothing half-written


def test_deleted_head_or_whole_log_is_detected(engine: Engine) -> None:
    assert audit.verify(engine).ok  # an empty log without a head is simply new
    _fill(engine, 2)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_head"))
    assert audit.verify(engine).problems == ["the log's head record is missing (deleted?)"]
    _fill(engine, 1)  # the head is written again from the newest event
    assert audit.verify(engine).ok
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events"))
    assert audit.verify(engine).problems == [
        "the log is empty but its head records event 3 (deleted?)"
    ]


def test_record_joins_the_callers_transaction(engine: Engine) -> None:
    def failing_work() -> None:
        with engine.begin() as conn:
            record(conn, "approve", actor="bob", plan_id="p-1")
            raise RuntimeError("the caller's work failed")

    with pytest.raises(RuntimeError):
        failing_work()
    assert audit.events(engine) == []
    with engine.begin() as conn:
        assert record(conn, "approve", actor="bob") == 1
        assert record(conn, "reject", actor="carol") == 2  # sees its own uncommitted event
    assert audit.verify(engine).checked == 2


def test_unknown_event_names_and_bad_payloads_are_refused(engine: Engine) -> None:
    with pytest.raises(ValueError, match="unknown audit event 'aprove'"):
        record_now(engine, "aprove", actor="bob")
    with pytest.raises(ValueError, match="Out of range float"):
        record_now(engine, "action", actor="bob", payload={"x": float("nan")})
    with pytest.raises(ValueError, match="naive"):
        record_now(engine, "action", actor="bob", at=datetime(2026, 1, 1))
    assert audit.events(engine) == []


def test_record_many_chains_a_batch(engine: Engine) -> None:
    record_now(engine, "apply_start", actor="apply", plan_id="p-1")
    rows = [
        NewEvent("action", "apply", "p-1", {"action_id": i, "outcome": "ok"}) for i in range(12_345)
    ]
    with engine.begin() as conn:
        ids = record_many(conn, rows)
        assert record_many(conn, []) == range(12_347, 12_347)
    assert ids == range(2, 12_347)
    record_now(engine, "apply_end", actor="apply", plan_id="p-1")
    result = audit.verify(engine)
    assert result.ok, result.problems[:3]
    assert result.checked == 12_347


def test_concurrent_appends_keep_one_chain(catalog_url: str) -> None:  # noqa: F811
    engine = open_engine(catalog_url)
    threads_n, each = 4, 25
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        barrier.wait()
        try:
            for i in range(each):
                if i % 5 == 4:
                    with engine.begin() as conn:
                        record_many(
                            conn, [NewEvent("action", f"w{k}", payload={"i": j}) for j in range(3)]
                        )
                else:
                    record_now(engine, "action", actor=f"w{k}", payload={"i": i})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    expected = threads_n * (each // 5 * 3 + each - each // 5)
    result = audit.verify(engine)
    assert result.ok, result.problems
    assert result.checked == expected
    assert [e.id for e in audit.events(engine)] == list(range(1, expected + 1))


_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_payload_values = st.recursive(
    _json_scalars | st.datetimes(timezones=st.just(UTC)) | st.sampled_from(list(Outcome)),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=5), _payload_values, max_size=4))
def test_normalized_payload_is_what_json_gives_back(payload: dict[str, object]) -> None:
    # The fast path skips the JSON round trip for plain payloads: it must give exactly
    # what the round trip gives (values and their types), or stored hashes would differ.
    import json

    expected = json.loads(json.dumps(payload, default=audit._json_default)) if payload else {}
    got = audit.normalize_payload(payload)
    assert got == expected
    assert _types(got) == _types(expected)


def _types(value: object) -> object:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)


def test_events_appended_while_verifying_are_not_taken_for_tampering(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An apply may append while `audit --verify` walks the log: events past the head read
    # before the walk are judged against the head read after it, which moved with them.
    _fill(engine, 3)
    walk = audit.iter_events

    def walk_while_appending(eng: Engine, plan_id: str | None = None) -> Any:
        for i, ev in enumerate(walk(eng, plan_id)):
            if i == 0:
                record_now(eng, "action", actor="apply", plan_id="p-9", payload={"n": i})
            yield ev

    monkeypatch.setattr(audit, "iter_events", walk_while_appending)
    result = audit.verify(engine)
    assert result.ok, result.problems
    assert result.checked == 3
    monkeypatch.undo()
    assert audit.verify(engine).checked == 4  # the next verify sees the new event


def test_a_decision_without_its_audit_event_is_reported(engine: Engine) -> None:
    """`approve` writes its row and its event in one transaction: an approval row with no
    event was written outside govern (by hand, to get a plan applied), and so is every
    decision left once the whole log and its head were deleted, which read "OK: 0 events"."""
    from dataclasses import replace

    from governance.approval import approve
    from governance.catalog.plans import save_plan
    from tests.unit.plan_samples import sample_plan

    plan = sample_plan()
    save_plan(engine, plan)
    approve(engine, plan.plan_id, actor="bob", comment=None, now=plan.created_at)
    assert audit.verify(engine).ok
    other = replace(sample_plan("p-20261130-021500-0000"), fingerprint="sha256:" + "cd" * 32)
    save_plan(engine, other)
    with engine.begin() as conn:  # an approval no one gave
        conn.execute(
            text(
                "INSERT INTO approvals (plan_id, decision, actor, fingerprint, at) "
                "VALUES (:p, 'approve', 'mallory', :f, :at)"
            ),
            {"p": other.plan_id, "f": other.fingerprint, "at": T},
        )
    [problem] = audit.verify(engine).problems
    assert problem.startswith(f"decision 2 (approve of plan {other.plan_id} by mallory) has no")
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events"))
        conn.execute(text("DELETE FROM audit_head"))
    assert [p.split(")")[0] for p in audit.verify(engine).problems] == [
        f"decision 1 (approve of plan {plan.plan_id} by bob",
        f"decision 2 (approve of plan {other.plan_id} by mallory",
    ]
