"""DeepSpeed tag completeness from the ranks the file names prove (see the DeepSpeed
detector's docstring): model-parallel ranks without gaps, ZeRO-3 model states with their
optimizer partitions (for tags with any name). What names cannot prove, the world size, leaves a tag missing only its highest ranks
complete."""

from __future__ import annotations

from datetime import datetime, timedelta

from governance.model.detectors.deepspeed import ranks_verdict
from governance.model.types import Kind
from tests.fixtures import builders as b
from tests.unit.plan_factories import AS_OF, kept_for, make_plan, policy
from tests.unit.test_model_layout_fixes import KEEP_LAST_1, arts, groups

DAY = timedelta(days=1)


def _z3_names(dp: int, *, optim: bool = True) -> list[str]:
    names = [f"zero_pp_rank_{d}_mp_rank_00_model_states.pt" for d in range(dp)]
    if optim:
        names += [f"bf16_zero_pp_rank_{d}_mp_rank_00_optim_states.pt" for d in range(dp)]
    return names


# ------------------------------------------------------------ model-parallel ranks


def test_a_model_parallel_rank_missing_below_the_highest() -> None:
    """mp ranks run 0..mp_world_size-1: mp_rank_01 gone (its model states and every
    partition, as a partial copy leaves it) while mp_rank_02 is there is a missing rank.
    A tag missing only its highest dp rank stays complete: no name tells the world size."""
    t = b.MemoryTree()
    gap = b.deepspeed_tag(
        t,
        "ds/ckpt",
        "global_step200",
        mp=3,
        dp=2,
        drop=(
            "mp_rank_01_model_states.pt",
            "zero_pp_rank_0_mp_rank_01_optim_states.pt",
            "zero_pp_rank_1_mp_rank_01_optim_states.pt",
        ),
    )
    top = b.deepspeed_tag(
        t,
        "ds/ckpt",
        "global_step100",
        mp=3,
        dp=4,
        drop=tuple(f"zero_pp_rank_3_mp_rank_{m:02d}_optim_states.pt" for m in range(3)),
    )
    b.deepspeed_latest(t, "ds/ckpt", "global_step200")
    a = arts(t)
    assert not a[gap].complete
    assert a[gap].kind is Kind.RESIDUE
    assert "mp_rank_01_model_states.pt" in a[gap].completeness_reason
    assert a[top].complete, a[top].completeness_reason
    assert a[top].kind is Kind.CHECKPOINT


def test_ranks_verdict_model_parallel_gap_without_optimizer_partitions() -> None:
    """No ZeRO (the optimizer in the model states): the mp ranks alone show the gap."""
    v = ranks_verdict(["mp_rank_00_model_states.pt", "mp_rank_02_model_states.pt"])
    assert not v.complete
    assert "mp_rank_01_model_states.pt" in v.reason
    assert ranks_verdict(["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt"]).complete


# ---------------------------------------- ZeRO-3 model states without partitions


def test_zero3_custom_tag_with_model_states_only_is_a_save_in_flight() -> None:
    """`save_checkpoint(tag="my-tag")` stopped after the ZeRO-3 model states (written
    before the partitions, which hold the weights), `latest` still naming the tag before:
    incomplete whatever its name. A universal checkpoint (`ds_to_universal` copies the
    model states beside its `zero/` folder, no partitions) stays complete."""
    t = b.MemoryTree()
    b.deepspeed_tag(t, "z3/ckpt", "global_step100", mtime=b.T0, zero3=True, dp=4)
    b.deepspeed_latest(t, "z3/ckpt", "global_step100", b.T0)
    names = _z3_names(4, optim=False)
    mine = "z3/ckpt/my-tag/"
    for name in names:
        t(mine + name, b.BLOB, b.T0 + DAY)
    universal = "z3/ckpt/global_step100_universal/"
    for name in [*names, "zero/embed.weight/fp32.pt", "zero/optimizer_state.pt"]:
        t(universal + name, b.BLOB, b.T0 + DAY)
    t("z3/ckpt/latest_universal", b"global_step100_universal", b.T0 + DAY)
    within = arts(t, as_of=b.T0 + DAY + timedelta(hours=1))
    assert not within[mine].complete
    assert within[mine].kind is Kind.CHECKPOINT  # in flight: kept, not counted
    a = arts(t)
    assert not a[mine].complete
    assert a[mine].kind is Kind.RESIDUE
    assert "optim dp0/mp0" in a[mine].completeness_reason
    assert a[universal].complete, a[universal].completeness_reason
    assert a["z3/ckpt/global_step100/"].complete


def test_keep_last_keeps_the_whole_tag_not_the_half_written_custom_one() -> None:
    """The half-written custom tag is the newest: judged complete, keep_last 1 kept it
    and deleted the tag `latest` names, the only one that loads."""
    t = b.MemoryTree()
    whole = b.deepspeed_tag(t, "z3/ckpt", "global_step100", mtime=b.T0, zero3=True, dp=2)
    b.deepspeed_latest(t, "z3/ckpt", "global_step100", b.T0)
    half = "z3/ckpt/my-tag/"
    for name in _z3_names(2, optim=False):
        t(half + name, b.BLOB, b.T0 + DAY)
    plan = make_plan(groups(t, AS_OF), policy(KEEP_LAST_1))
    assert kept_for(plan, whole) is not None
    assert kept_for(plan, half) is None


def test_lightning_deepspeed_zero3_folder_without_partitions() -> None:
    """Lightning's `DeepSpeedStrategy` folder is judged by the same ranks."""
    t = b.MemoryTree()
    unit = b.lightning_deepspeed_run(t, "ds_run", steps=(100,), dp=2, zero3=True)[0]
    for d in range(2):
        del t.objects_by_key[unit + f"checkpoint/zero_pp_rank_{d}_mp_rank_00_optim_states.pt"]
    a = arts(t)[unit]
    assert not a.complete
    assert "optim dp0/mp0" in a.completeness_reason


# ------------------------------------------------ universal tags converted out of order


def _universal(t: b.MemoryTree, tag: str, mtime: datetime) -> str:
    unit = f"u/ckpt/{tag}_universal/"
    for name in [*_z3_names(2, optim=False), "zero/embed.weight/fp32.pt"]:
        t(unit + name, b.BLOB, mtime)
    return unit


def test_universal_tag_converted_before_an_older_one_stays_complete() -> None:
    """`ds_to_universal` writes `latest_universal` last, for whichever step a person
    converts: step 200 converted, then step 100, leaves `latest_universal` naming step
    100. Step 200's conversion finished before that write: complete (it read as a
    conversion in flight, residue past the grace period, and was deleted)."""
    t = b.MemoryTree()
    for step in (100, 200):
        b.deepspeed_tag(t, "u/ckpt", f"global_step{step}", mtime=b.T0, zero3=True, dp=2)
    b.deepspeed_latest(t, "u/ckpt", "global_step200", b.T0)
    newer = _universal(t, "global_step200", b.T0 + DAY)
    older = _universal(t, "global_step100", b.T0 + 2 * DAY)
    t("u/ckpt/latest_universal", b"global_step100_universal", b.T0 + 2 * DAY)
    a = arts(t)
    assert a[older].complete, a[older].completeness_reason
    assert a[newer].complete, a[newer].completeness_reason
    assert a[newer].kind is Kind.CHECKPOINT
    assert "written after this tag's files" in a[newer].completeness_reason


def test_universal_tag_written_after_latest_universal_is_a_conversion_in_flight() -> None:
    """Step 100 converted, step 200's conversion still writing (or crashed): newer than
    `latest_universal` and written after it, incomplete, residue past the grace period."""
    t = b.MemoryTree()
    b.deepspeed_tag(t, "u/ckpt", "global_step200", mtime=b.T0, zero3=True, dp=2)
    b.deepspeed_latest(t, "u/ckpt", "global_step200", b.T0)
    _universal(t, "global_step100", b.T0 + DAY)
    t("u/ckpt/latest_universal", b"global_step100_universal", b.T0 + DAY)
    flight = _universal(t, "global_step200", b.T0 + 2 * DAY)
    a = arts(t)
    assert not a[flight].complete
    assert a[flight].kind is Kind.RESIDUE
    assert "save not finished" in a[flight].completeness_reason
