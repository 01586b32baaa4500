"""Metadata files that were read and are not JSON objects (empty, cut short) make their
checkpoint incomplete; files that could not be read are not judged.

A Trainer checkpoint whose `trainer_state.json` is cut short cannot be resumed from: once
it counted as complete, `keep_last: 1` kept it as the newest and deleted the two before
it, the only ones the live run could resume from (invariants 1 and 8).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from governance.model.classify import classify
from governance.model.types import Artifact, CatalogObject, ClassifyOptions, Kind, MetaReader
from governance.plan.types import KeptHow
from tests.fixtures import builders as b
from tests.unit.plan_factories import (
    AS_OF,
    KEEP_LAST_1_RESIDUE,
    actions_for,
    kept_for,
    make_plan,
    policy,
)

H = timedelta(hours=1)
CUT = b'{"global_step": 300, "max_st'
RUN = "runs/live/"
STATE = "trainer_state.json"


def arts(
    tree: b.MemoryTree,
    as_of: datetime,
    reader: MetaReader | str | None = "tree",
    *,
    max_bytes: int = 4 * 1024 * 1024,
) -> dict[str, Artifact]:
    options = ClassifyOptions(as_of=as_of, metadata_max_bytes=max_bytes)
    read = tree.read_meta if reader == "tree" else reader
    assert not isinstance(read, str)
    return {a.key: a for g in classify(tree.objects, options, read) for a in g.artifacts}


def live_run(tree: b.MemoryTree, newest: datetime, state: bytes = CUT) -> list[str]:
    """Trainer checkpoints 100, 200, 300 a day apart, the newest written at `newest`, and
    its `trainer_state.json` replaced by `state`."""
    units = b.hf_run(tree, RUN.rstrip("/"), steps=(100, 200, 300), start=newest - 4 * 24 * H,
                     every=24 * H)  # fmt: skip
    tree(units[-1] + STATE, state, newest)
    return units


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (CUT, "trainer_state.json is not valid JSON (cut short?)"),
        (b"", "trainer_state.json is empty (a partial write)"),
        (b'{"global_step": 300, "log_history": [', "trainer_state.json is not valid JSON"),
        (b"\xff\xfe{", "trainer_state.json is not valid JSON"),
        (b"[300]", "trainer_state.json is not a JSON object"),
        (b"null", "trainer_state.json is not a JSON object"),
    ],
)
def test_a_trainer_state_read_and_not_a_json_object_is_incomplete(
    content: bytes, reason: str
) -> None:
    t = b.MemoryTree()
    new = b.T0 + 10 * 24 * H
    u100, u200, u300 = live_run(t, new, content)
    soon = arts(t, new + H)
    bad = soon[u300]
    assert not bad.complete
    assert reason in bad.completeness_reason
    assert bad.metrics == {}  # nothing read from it
    # inside the grace period it is a checkpoint in flight; past it, residue
    assert bad.kind is Kind.CHECKPOINT
    assert "in flight" in bad.note
    late = arts(t, new + 4 * 24 * H)[u300]
    assert late.kind is Kind.RESIDUE
    assert reason in late.completeness_reason
    assert "past grace period" in late.note
    for u in (u100, u200):
        assert soon[u].complete, soon[u].completeness_reason
        assert soon[u].metrics["eval_loss"] > 0  # read as before


def test_a_trainer_state_that_could_not_be_read_is_not_judged() -> None:
    """No reader, a read that fails, a file over the size limit, bytes of another length
    than listed (cut at the reader's limit, or rewritten since the listing): nothing is
    known of the content, so the checkpoint stays complete as before."""
    t = b.MemoryTree()
    new = b.T0 + 10 * 24 * H
    *_, u300 = live_run(t, new)
    as_of = new + 4 * 24 * H
    assert arts(t, as_of)[u300].kind is Kind.RESIDUE  # read: judged

    def failing(obj: CatalogObject) -> bytes | None:
        raise OSError("connection reset")

    def short(obj: CatalogObject) -> bytes | None:
        data = t.read_meta(obj)
        return None if data is None else data[:10]  # as a read cut at a limit gives

    unread: list[tuple[Callable[[CatalogObject], bytes | None] | None, int]] = [
        (None, 4 * 1024 * 1024),
        (failing, 4 * 1024 * 1024),
        (short, 4 * 1024 * 1024),
        (t.read_meta, len(CUT) - 1),  # over metadata_max_bytes
    ]
    for reader, limit in unread:
        a = arts(t, as_of, reader, max_bytes=limit)[u300]
        assert (a.kind, a.complete) == (Kind.CHECKPOINT, True), (reader, a.completeness_reason)
        assert "trainer_state.json" in a.completeness_reason

    # a well-formed state cut at the reader's limit is not read as "cut short"
    t2 = b.MemoryTree()
    *_, good = live_run(t2, new, b'{"global_step": 300, "log_history": []}')
    whole = arts(t2, as_of)[good]
    assert whole.complete
    cut_by_reader = arts(t2, as_of, lambda o: (t2.read_meta(o) or b"")[:12])[good]
    assert cut_by_reader.complete, cut_by_reader.completeness_reason


def test_an_empty_trainer_state_needs_no_read() -> None:
    """Zero bytes, as listed, is known without reading: not a JSON object, whatever reader."""
    t = b.MemoryTree()
    new = b.T0 + 10 * 24 * H
    *_, u300 = live_run(t, new, b"")
    a = arts(t, new + 4 * 24 * H, None)[u300]
    assert a.kind is Kind.RESIDUE
    assert "trainer_state.json is empty" in a.completeness_reason


def test_a_cut_short_index_makes_sharded_weights_incomplete() -> None:
    t = b.MemoryTree()
    units = b.hf_run(t, "runs/sh", steps=(100, 200), sharded=True)
    index = units[-1] + "model.safetensors.index.json"
    t(index, b'{"metadata": {"total_size": 64}, "weight_map": {"lm_he', b.T0 + 2 * H)
    late = b.T0 + 30 * 24 * H
    a = arts(t, late)
    assert a[units[0]].complete
    bad = a[units[-1]]
    assert not bad.complete
    assert "model.safetensors.index.json is not valid JSON (cut short?)" in (
        bad.completeness_reason
    )
    assert bad.kind is Kind.RESIDUE
    # unread, the shards' own names say they are all there, as before
    unread = arts(t, late, None)[units[-1]]
    assert unread.complete, unread.completeness_reason
    assert "2/2 shards by name" in unread.completeness_reason
    # exported weights share the verdict
    w = b.MemoryTree()
    w("models/x/model-00001-of-00002.safetensors", b.BLOB, b.T0)
    w("models/x/model-00002-of-00002.safetensors", b.BLOB, b.T0)
    w("models/x/config.json", b"{}", b.T0)
    w("models/x/model.safetensors.index.json", b"", b.T0)
    exported = arts(w, late)["models/x/"]
    assert not exported.complete
    assert "model.safetensors.index.json is empty" in exported.completeness_reason
    assert arts(w, late, None)["models/x/"].complete is False  # empty: known unread too


def test_keep_last_keeps_what_a_live_run_resumes_from_within_the_grace_period() -> None:
    """checkpoint-300 (cut short, 1h old) is in flight; checkpoint-200 is the newest
    complete one, kept by `keep_last: 1` (invariants 1 and 8); only checkpoint-100 goes."""
    pol = policy(KEEP_LAST_1_RESIDUE)
    t = b.MemoryTree()
    u100, u200, u300 = live_run(t, AS_OF - H)
    groups = list(classify(t.objects, pol.classify_options(AS_OF), t.read_meta))
    [run] = [g.run for g in groups if g.run is not None]
    assert run.status.value == "running"
    plan = make_plan(groups, pol)
    assert actions_for(plan, u300) == []
    in_flight = kept_for(plan, u300)
    assert in_flight is not None
    assert in_flight.how is KeptHow.IN_FLIGHT
    kept = kept_for(plan, u200)
    assert kept is not None
    assert kept.tier == "recent"
    assert actions_for(plan, u200) == []
    assert [a.action.value for a in actions_for(plan, u100)] == ["delete"]


def test_past_the_grace_period_the_cut_short_checkpoint_is_residue() -> None:
    """A day later the broken checkpoint-300 is residue and the residue rule deletes it;
    checkpoint-200 is still the one `keep_last: 1` keeps."""
    pol = policy(KEEP_LAST_1_RESIDUE)
    t = b.MemoryTree()
    u100, u200, u300 = live_run(t, AS_OF - 24 * H)
    groups = list(classify(t.objects, pol.classify_options(AS_OF), t.read_meta))
    [run] = [g.run for g in groups if g.run is not None]
    assert run.status.value == "running"
    plan = make_plan(groups, pol)
    [gone] = actions_for(plan, u300)
    assert (gone.action.value, gone.rule, gone.artifact.kind) == ("delete", "residue", "residue")
    kept = kept_for(plan, u200)
    assert kept is not None
    assert kept.tier == "recent"
    assert actions_for(plan, u200) == []
    assert [a.action.value for a in actions_for(plan, u100)] == ["delete"]


# ---------------------------------------------------------------------------- Orbax


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"init_timestamp_nsecs": 1, "commit_ti', "is not valid JSON (cut short?)"),
        (b"", "is empty (a partial write)"),
    ],
)
def test_orbax_checkpoint_metadata_read_and_broken_is_not_committed(
    content: bytes, reason: str
) -> None:
    """On an object store `_CHECKPOINT_METADATA` says whether the save committed: read
    and not a JSON object, it does not; unread, the step is taken as committed."""
    late = b.T0 + 30 * 24 * H
    t = b.MemoryTree()  # object store ETags
    u = b.orbax_step(t, "ox/ckpt", "100")
    t(u + "_CHECKPOINT_METADATA", content, b.T0)
    a = arts(t, late)[u]
    assert not a.complete
    assert f"_CHECKPOINT_METADATA {reason}" in a.completeness_reason
    assert a.kind is Kind.RESIDUE
    if content:
        unread = arts(t, late, None)[u]
        assert unread.complete
        assert "(unread)" in unread.completeness_reason
    # with commit_success.txt it committed, whatever _CHECKPOINT_METADATA says
    t(u + "commit_success.txt", b"Checkpoint commit was successful.", b.T0)
    assert arts(t, late)[u].complete
    # on a filesystem the final name says it (atomic rename): the file is not read
    fs = b.FilesystemTree()
    v = b.orbax_step(fs, "ox/ckpt", "100")
    fs(v + "_CHECKPOINT_METADATA", content, b.T0)
    assert arts(fs, late)[v].complete
