"""Lightning's `last.ckpt` (`ModelCheckpoint(save_last=True)`) and the retention tiers.

Lightning saves `last.ckpt` in the same hook as the top-k file, right after it: then it is a
copy of the newest `epoch=E-step=S.ckpt`, and it is that checkpoint's alias (it takes no
tier place, and goes where its original goes). Saved when no top-k file was (or after
Lightning removed it), it is the only copy of the newest state: a checkpoint of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from governance.model.detectors.lightning import save_last_name
from governance.model.metrics import name_metrics
from governance.model.types import Artifact, CatalogObject, Component, Group, Kind, RunStatus
from governance.plan import tiers as tiering
from governance.plan.types import KeptHow, Plan
from governance.policy.models import Policy, Tier
from tests.unit import test_plan_invariants as inv
from tests.unit.plan_factories import (
    AS_OF,
    MiB,
    actions_for,
    ago,
    group,
    kept_for,
    make_plan,
    policy,
    single,
)

CK = "runs/pl/lightning_logs/version_0/checkpoints/"
LAST = CK + "last.ckpt"
SIZE = 48 * MiB
S = timedelta(seconds=1)
NOTE = "optimizer state inside the file: cannot be stripped"


def pl(
    name: str,
    age: timedelta | float,
    *,
    folder: str = CK,
    size: int = SIZE,
    etag: str | None = None,
    tags: dict[str, str] | None = None,
    complete: bool = True,
    run: str = "runs/pl/",
) -> Artifact:
    """One Lightning `.ckpt` file `folder + name`, `age` old (days, or a timedelta)."""
    key = folder + name
    when = AS_OF - age if isinstance(age, timedelta) else ago(age)
    tag = etag if etag is not None else hashlib.md5(key.encode()).hexdigest()
    o = CatalogObject(key, size, when, tag, tags=tags)
    step, metrics = name_metrics(name)
    young = AS_OF - when <= timedelta(days=3)
    return Artifact(
        key,
        Kind.CHECKPOINT if complete or young else Kind.RESIDUE,
        "lightning",
        [o],
        (Component.WEIGHTS,),
        run=run,
        step=step,
        complete=complete,
        completeness_reason="" if complete else "checkpoint file is empty",
        metrics=metrics,
        note=NOTE,
    )


def epochs(n: int = 6, newest: timedelta = timedelta(days=5), every: float = 1) -> list[Artifact]:
    """`epoch=E-step=S.ckpt` for E in 0..n-1 (step 100 each), one a day, the last `newest` old."""
    return [
        pl(f"epoch={e}-step={(e + 1) * 100}.ckpt", newest + timedelta(days=every * (n - 1 - e)))
        for e in range(n)
    ]


def tiers_policy(tier: str, *, protect: str = "min_age: 1d") -> Policy:
    return policy(
        f"""
protect: {{{protect}}}
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - {tier}
    otherwise: delete
safety: {{max_delete_fraction: 1}}
"""
    )


RECENT = tiers_policy("{name: recent, keep_last: 3, max_age: 30d}")


def epoch_key(step: int) -> str:
    return f"{CK}epoch={step // 100 - 1}-step={step}.ckpt"


def fate(plan: Plan, key: str) -> str:
    acts = actions_for(plan, key)
    if acts:
        return "+".join(a.action.value for a in acts)
    kept = kept_for(plan, key)
    assert kept is not None, key
    return f"kept {kept.how.value}"


def steps_kept(plan: Plan, arts: list[Artifact]) -> set[int | None]:
    return {a.step for a in arts if kept_for(plan, a.key) is not None}


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("key", "named"),
    [
        ("ck/last.ckpt", True),
        ("ck/last-v1.ckpt", True),  # the name was taken (an older run's last.ckpt)
        ("ck/epoch=3-last.ckpt", True),  # CHECKPOINT_NAME_LAST = "{epoch}-last"
        ("ck/last.ckpt/", True),  # a sharded save's folder
        ("last.ckpt", True),
        ("ck/blast.ckpt", False),
        ("ck/last.pt", False),
        ("ck/last-epoch.ckpt", False),
        ("ck/epoch=3-step=400.ckpt", False),
        ("ck/last.ckpt/meta.pt", False),
    ],
)
def test_save_last_names(key: str, named: bool) -> None:
    assert save_last_name(key) is named


# ----------------------------------------------------------------------------- tiers


def test_a_save_last_copy_takes_no_keep_last_place() -> None:
    """`keep_last: 3` keeps three distinct states: steps 600, 500 and 400, and last.ckpt
    (saved 5 seconds after step 600, the same size) with step 600, saying why."""
    arts = [*epochs(), pl("last.ckpt", timedelta(days=5) - 5 * S)]
    plan = make_plan([group("pl", arts, RunStatus.COMPLETED, key="runs/pl/")], RECENT)
    assert steps_kept(plan, arts) == {600, 500, 400, None}
    for step in (100, 200, 300):
        assert fate(plan, epoch_key(step)) == "delete"
    kept = kept_for(plan, LAST)
    assert kept is not None
    assert (kept.rule, kept.tier, kept.how) == ("checkpoints", "recent", KeptHow.WHOLE)
    assert kept.reason == (
        "recent tier: last.ckpt is Lightning's save_last copy of step 600 (same size, written "
        "5s after it), selected with it: step 600 is one of the newest 3 complete "
        "checkpoints within 30d; kept whole"
    )
    assert actions_for(plan, LAST) == []


def _copy(age: timedelta = timedelta(days=5) - 5 * S, **kw: Any) -> Artifact:
    return pl(kw.pop("name", "last.ckpt"), age, **kw)


STANDALONE: dict[str, tuple[list[Artifact], Artifact]] = {
    # saved a day after step 600 (no top-k save that epoch): the only copy of that state
    "written a day later": (epochs(), _copy(timedelta(days=4))),
    "written 20 minutes later": (epochs(), _copy(timedelta(days=5) - 20 * 60 * S)),
    "a different size": (epochs(), _copy(size=SIZE + 1)),
    # named otherwise: not Lightning's save_last copy, whatever its size and time
    "another name": (epochs(), _copy(name="export.ckpt")),
    # in another folder (another ModelCheckpoint dirpath, or a later version_N)
    "another folder": (epochs(), _copy(folder="runs/pl/lightning_logs/version_1/checkpoints/")),
}


@pytest.mark.parametrize("case", list(STANDALONE))
def test_a_last_ckpt_that_is_not_a_copy_counts_as_its_own_checkpoint(case: str) -> None:
    """Each case differs from the copy of `test_a_save_last_copy_takes_no_keep_last_place`
    in one thing, and that makes last.ckpt a checkpoint of its own: the newest (it was
    written last), one of the 3, so step 400 is deleted."""
    ckpts, last = STANDALONE[case]
    at = tiering.written([*ckpts, last])
    assert tiering.save_last_aliases([*ckpts, last], at) == []
    copy = _copy()
    assert tiering.save_last_aliases([*ckpts, copy], tiering.written([*ckpts, copy])) == [
        (copy, ckpts[-1])
    ]
    arts = [*ckpts, last]
    plan = make_plan([group("pl", arts, RunStatus.COMPLETED, key="runs/pl/")], RECENT)
    assert steps_kept(plan, arts) == {600, 500, None}
    assert fate(plan, epoch_key(400)) == "delete"
    kept = kept_for(plan, last.key)
    assert kept is not None
    assert kept.tier == "recent"
    assert "save_last copy" not in kept.reason


def test_top_k_removed_the_newest_epoch_file_so_last_ckpt_is_kept_as_the_newest() -> None:
    """`save_top_k=2` by val_loss kept epochs 2 and 5 and removed the others (7 among
    them); last.ckpt holds epoch 7, written two days after epoch 5, the same size. It is
    the newest checkpoint, never an alias: with `keep_last: 1` it is the one kept, and
    invariant 1 keeps it whole while the run goes on."""
    arts = [
        pl("epoch=2-step=300-val_loss=0.50.ckpt", 9),
        pl("epoch=5-step=600-val_loss=0.40.ckpt", 6),
        pl("last.ckpt", 4),
    ]
    assert tiering.save_last_aliases(arts, tiering.written(arts)) == []
    one = tiers_policy("{name: recent, keep_last: 1}")
    for status in (RunStatus.COMPLETED, RunStatus.RUNNING):
        plan = make_plan([group("pl", arts, status, key="runs/pl/")], one)
        assert fate(plan, LAST) == "kept whole"
        assert [fate(plan, a.key) for a in arts[:2]] == ["delete", "delete"]
    # the same files, last.ckpt saved with epoch 5: kept with it
    copy = pl("last.ckpt", 6 - 1 / 86_400)
    plan = make_plan([group("pl", [*arts[:2], copy], RunStatus.RUNNING, key="runs/pl/")], one)
    assert [fate(plan, a.key) for a in (*arts[:2], copy)] == [
        "delete",
        "kept whole",
        "kept whole",
    ]


@pytest.mark.parametrize(
    ("tier", "status"),
    [
        ("{name: t, keep_last: 1}", RunStatus.COMPLETED),
        ("{name: t, keep_daily: 1}", RunStatus.COMPLETED),
        ("{name: t, keep_weekly: 1}", RunStatus.COMPLETED),
        ("{name: t, keep: [final]}", RunStatus.COMPLETED),
        ("{name: t, keep_last: 1, max_age: 30d}", RunStatus.FAILED),
    ],
)
def test_every_tier_selects_the_original_and_its_copy_goes_with_it(
    tier: str, status: RunStatus
) -> None:
    """Not the newest of its day or week, not the final: the copy takes no tier's place
    from the checkpoint it copies (a failed run has no invariant 1 to fall back on)."""
    arts = [*epochs(), pl("last.ckpt", timedelta(days=5) - 5 * S)]
    plan = make_plan([group("pl", arts, status, key="runs/pl/")], tiers_policy(tier))
    assert steps_kept(plan, arts) == {600, None}
    kept = kept_for(plan, LAST)
    assert kept is not None
    assert kept.tier == "t"
    assert "last.ckpt is Lightning's save_last copy of step 600" in kept.reason


def test_the_pair_is_in_a_window_when_either_is() -> None:
    """Step 600 is a minute past the tier's 30 days, its copy a minute inside: the tier
    keeps both (the copy alone did before, and step 600 went)."""
    arts = [
        *epochs(newest=timedelta(days=30, minutes=1)),
        pl("last.ckpt", timedelta(days=30, minutes=-1)),
    ]
    plan = make_plan([group("pl", arts, RunStatus.COMPLETED, key="runs/pl/")], RECENT)
    for key in (epoch_key(600), LAST):
        kept = kept_for(plan, key)
        assert kept is not None
        assert (kept.tier, kept.how) == ("recent", KeptHow.WHOLE), kept.reason
    assert {fate(plan, epoch_key(s)) for s in range(100, 501, 100)} == {"delete"}


def test_a_copy_ranks_its_original_as_the_newer_of_the_two() -> None:
    """A run restarted into version_0 after a version_1 that reached higher steps: the
    version_0 copy, written last, is the run's newest by its order, and so is its pair
    (keep_last: 1 keeps step 200 and the copy, not step 1200)."""
    old = "runs/pl/lightning_logs/version_1/checkpoints/"
    arts = [
        pl("epoch=10-step=1100.ckpt", 20, folder=old),
        pl("epoch=11-step=1200.ckpt", 19, folder=old),
        pl("epoch=0-step=100.ckpt", 6),
        pl("epoch=1-step=200.ckpt", 5),
        pl("last.ckpt", timedelta(days=5) - 5 * S),
    ]
    assert tiering.newest(arts) is arts[-1]
    plan = make_plan(
        [group("pl", arts, RunStatus.COMPLETED, key="runs/pl/")],
        tiers_policy("{name: t, keep_last: 1}"),
    )
    assert [fate(plan, a.key) for a in arts] == [
        "delete",
        "delete",
        "delete",
        "kept whole",
        "kept whole",
    ]


def test_same_etag_is_a_copy_whenever_it_was_written() -> None:
    """`aws s3 sync` rewrote the times (last.ckpt landed 2 hours after step 600): the same
    S3 ETag (an MD5 of the content) still says it is a copy. Different ETags, or a
    filesystem's `mtime:` tokens, say nothing: then the times decide."""
    late = timedelta(days=5) - 2 * 3600 * S
    md5 = hashlib.md5(b"epoch 5").hexdigest()
    ckpts = epochs()
    top = dataclasses.replace(
        ckpts[-1], objects=[dataclasses.replace(ckpts[-1].objects[0], etag=md5)]
    )
    ckpts[-1] = top
    for etag, alias in ((md5, True), (md5[::-1], False), (None, False)):
        last = pl("last.ckpt", late, etag=etag)
        pairs = tiering.save_last_aliases([*ckpts, last], tiering.written([*ckpts, last]))
        assert pairs == ([(last, top)] if alias else []), etag
    mtime = "mtime:1700000000000000000"
    local = [
        dataclasses.replace(a, objects=[dataclasses.replace(a.objects[0], etag=mtime)])
        for a in (top, pl("last.ckpt", late))
    ]
    assert tiering.save_last_aliases(local, tiering.written(local)) == []
    last = pl("last.ckpt", late, etag=md5)
    plan = make_plan([group("pl", [*ckpts, last], RunStatus.COMPLETED, key="runs/pl/")], RECENT)
    assert steps_kept(plan, [*ckpts, last]) == {600, 500, 400, None}
    kept = kept_for(plan, LAST)
    assert kept is not None
    assert "save_last copy of step 600 (same ETag, written 2h after it)" in kept.reason


# ----------------------------------------------------------------------------- guards


@pytest.mark.parametrize("before", [False, True], ids=["copy-after", "copy-before"])
def test_invariant_1_keeps_the_copy_and_its_original_together(before: bool) -> None:
    """A running run 40 days quiet: no tier (30 days) keeps anything. The newest complete
    checkpoint (last.ckpt when written after step 600, step 600 when a copy landed just
    before it) is kept whole by invariant 1, and the other of the pair with it: Lightning
    resumes from last.ckpt (`ckpt_path="last"`)."""
    top_age = timedelta(days=40)
    arts = [*epochs(newest=top_age), pl("last.ckpt", top_age + (3 if before else -3) * S)]
    plan = make_plan([group("pl", arts, RunStatus.RUNNING, key="runs/pl/")], RECENT)
    assert steps_kept(plan, arts) == {600, None}
    assert fate(plan, LAST) == fate(plan, epoch_key(600)) == "kept whole"
    assert actions_for(plan, LAST) == actions_for(plan, epoch_key(600)) == []
    top, other = (epoch_key(600), LAST) if before else (LAST, epoch_key(600))
    top_kept, other_kept = kept_for(plan, top), kept_for(plan, other)
    assert top_kept is not None
    assert other_kept is not None
    head = (
        "invariant 1: {} is the newest complete checkpoint of run pl (running), "
        "which it resumes from,"
    )
    label = "step 600" if before else LAST
    assert top_kept.reason.startswith(head.format(label) + " kept whole instead of: checkpoints:")
    assert other_kept.reason.startswith(
        head.format(label) + " and last.ckpt is Lightning's save_last copy of step 600"
    )
    assert "kept whole with it instead of: checkpoints:" in other_kept.reason


def test_a_copy_stays_while_its_protected_original_stays() -> None:
    """A failed run (no invariant 1), 40 days old: no tier keeps anything. Step 600 is
    tagged retain: protected, kept; its copy is kept with it (deleting it frees no tier
    place). Tagged the other way round, the copy is kept and step 600 is deleted: the
    state stays in last.ckpt."""
    top_age = timedelta(days=40)
    retain = {"retain": "true"}
    pol = tiers_policy(
        "{name: recent, keep_last: 3, max_age: 30d}",
        protect='min_age: 1d, tags: {retain: "true"}',
    )
    ckpts = epochs(newest=top_age)
    ckpts[-1] = pl("epoch=5-step=600.ckpt", top_age, tags=retain)
    arts = [*ckpts, pl("last.ckpt", top_age - 5 * S)]
    plan = make_plan([group("pl", arts, RunStatus.FAILED, key="runs/pl/")], pol)
    assert fate(plan, epoch_key(600)) == "kept protected"
    kept = kept_for(plan, LAST)
    assert kept is not None
    assert (kept.how, actions_for(plan, LAST)) == (KeptHow.WHOLE, [])
    assert kept.reason == (
        "kept with step 600: last.ckpt is Lightning's save_last copy of step 600 (same size, "
        "written 5s after it), and step 600 stays; kept whole instead of: checkpoints: "
        "last.ckpt is Lightning's save_last copy of step 600 (same size, written 5s after "
        "it), which no tier keeps (recent); otherwise: delete"
    )
    # the copy protected instead: it stays, the original goes
    arts = [*epochs(newest=top_age), pl("last.ckpt", top_age - 5 * S, tags=retain)]
    plan = make_plan([group("pl", arts, RunStatus.FAILED, key="runs/pl/")], pol)
    assert fate(plan, LAST) == "kept protected"
    assert fate(plan, epoch_key(600)) == "delete"


def test_explain_traces_the_copy_tier_by_tier() -> None:
    arts = [*epochs(newest=timedelta(days=40)), pl("last.ckpt", timedelta(days=40) - 5 * S)]
    tiers = [
        Tier(name="recent", keep_last=3, max_age=timedelta(days=30)),
        Tier(name="everything", keep_last=2),
    ]
    outcome = tiering.select(tiers, arts, None, AS_OF, trace=True)
    why = "last.ckpt is Lightning's save_last copy of step 600 (same size, written 5s after it)"
    assert outcome.aliases == {LAST: (epoch_key(600), why)}
    assert outcome.trace[LAST] == [
        ("recent", f"not selected: {why}, which this tier does not select"),
        ("everything", f"selected: {why}, selected with it: step 600 is one of the newest 2 "
                       "complete checkpoints"),
    ]  # fmt: skip
    assert set(outcome.picks) == {LAST, epoch_key(600), epoch_key(500)}


# ----------------------------------------------------------------------------- properties

ALIAS_WINDOW = timedelta(minutes=10)


@st.composite
def lightning_groups(draw: st.DrawFn) -> list[Group]:
    """1-3 Lightning runs: `epoch=E-step=S.ckpt` files (some in flight, some tagged, some
    with eval_loss in the name), in one or two `version_N/checkpoints/` folders, and a
    `last.ckpt` beside them that is a copy of the newest (the same size, written within
    10 minutes of it, before or after), or not (later, another size), or none; any
    status. Plus the protected release folder of `root_groups`."""
    out: list[Group] = []
    for i in range(draw(st.integers(1, 3))):
        run_key = f"runs/pl{i}/"
        arts: list[Artifact] = []
        for v in range(draw(st.integers(1, 2))):
            folder = f"{run_key}lightning_logs/version_{v}/checkpoints/"
            n = draw(st.integers(0, 7))
            steps = sorted(draw(st.lists(st.integers(1, 40_000), min_size=n, max_size=n,
                                         unique=True)))  # fmt: skip
            start = draw(st.integers(0, 100 * 24 * 60))  # minutes ago of the newest
            gaps = draw(st.lists(st.integers(0, 3 * 24 * 60), min_size=n, max_size=n))
            ages = [start + sum(gaps[j + 1 :]) for j in range(n)]
            if draw(st.booleans()):  # a copy (`aws s3 sync`) that rewrote the times
                ages = draw(st.permutations(ages))
            folder_arts: list[Artifact] = []
            for e, (step, minutes) in enumerate(zip(steps, ages, strict=True)):
                loss = draw(st.sampled_from([None, 0.5, 0.7, 1.0]))
                name = f"epoch={e}-step={step}" + (f"-eval_loss={loss}" if loss else "")
                folder_arts.append(
                    pl(f"{name}.ckpt", timedelta(minutes=minutes), folder=folder, run=run_key,
                       complete=draw(st.sampled_from([True, True, True, False])),
                       tags=draw(st.sampled_from([None, None, None, {"retain": "true"}])))
                )  # fmt: skip
            arts += folder_arts
            what = draw(st.sampled_from(["copy", "copy", "later", "size", "none"]))
            if what == "none" or not folder_arts:
                continue
            top = max(folder_arts, key=lambda a: a.step or 0)
            top_age = AS_OF - top.last_modified
            if what == "copy":
                age = top_age + timedelta(seconds=draw(st.integers(-600, 600)))
            elif what == "later":
                age = top_age - timedelta(minutes=draw(st.integers(11, 3 * 24 * 60)))
            else:
                age = top_age - timedelta(seconds=draw(st.integers(0, 600)))
            arts.append(
                pl("last.ckpt", max(age, timedelta(0)), folder=folder, run=run_key,
                   size=SIZE if what != "size" else SIZE + 7,
                   tags=draw(st.sampled_from([None, None, None, {"retain": "true"}])))
            )  # fmt: skip
        if not arts:
            arts.append(single(f"{run_key}hparams.yaml", Kind.OTHER, 1024, 5, run_key=run_key))
        status = draw(st.sampled_from(list(RunStatus)))
        out.append(group(f"pl{i}", sorted(arts, key=lambda a: a.key), status, key=run_key))
    out.append(group(None, [single("releases/v1/model.safetensors", Kind.WEIGHTS, 3 * MiB, 200)]))
    return out


def _copies(g: Group) -> dict[str, Artifact]:
    """The oracle: last.ckpt key -> the checkpoint it copies (the highest-step complete one
    of its folder, the same size, written within 10 minutes of it)."""
    complete = inv._complete(g)
    out: dict[str, Artifact] = {}
    for a in complete:
        if not a.key.endswith("/last.ckpt"):
            continue
        folder = a.key.removesuffix("last.ckpt")
        mates = [b for b in complete if b is not a and b.key.rsplit("/", 1)[0] + "/" == folder]
        if not mates:
            continue
        top = max(mates, key=lambda b: (b.step, b.last_modified, b.key))
        near = abs(a.last_modified - top.last_modified) <= ALIAS_WINDOW
        if near and a.bytes == top.bytes:
            out[a.key] = top
    return out


def _a_copy_and_its_original(top_after: bool) -> list[Group]:
    arts = [*epochs(), pl("last.ckpt", timedelta(days=5) + (-5 if top_after else 5) * S)]
    return [group("pl", arts, RunStatus.RUNNING, key="runs/pl/")]


def _restarted() -> list[Group]:
    """A running run restarted into version_0 after version_1 reached higher steps: the
    version_0 copy, written last, is the newest by the run's order, and its pair with it."""
    old = "runs/pl/lightning_logs/version_1/checkpoints/"
    arts = [
        *(pl(f"epoch={s // 100}-step={s}.ckpt", age, folder=old)
          for s, age in ((1000, 21), (1100, 20), (1200, 19))),
        pl("epoch=0-step=100.ckpt", 6),
        pl("epoch=1-step=200.ckpt", 5),
        pl("last.ckpt", timedelta(days=5) - 5 * S),
    ]  # fmt: skip
    return [group("pl", arts, RunStatus.RUNNING, key="runs/pl/")]


PROPERTY_SETTINGS = inv.SETTINGS


def _inner(test: Any) -> Any:
    """A hypothesis test's own body, to call with given arguments."""
    return test.hypothesis.inner_test


@PROPERTY_SETTINGS
@example(groups=_a_copy_and_its_original(True), rnd=random.Random(1), which="example")
@example(groups=_a_copy_and_its_original(False), rnd=random.Random(2), which="thin everything")
@example(groups=_restarted(), rnd=random.Random(3), which="example")
@given(
    lightning_groups(),
    st.randoms(use_true_random=False),
    st.sampled_from(["example", "thin everything", "windowed best"]),
)
def test_lightning_runs_keep_every_invariant_and_count_distinct_states(
    groups: list[Group], rnd: random.Random, which: str
) -> None:
    """The invariant properties of test_plan_invariants, over Lightning runs whose
    last.ckpt is a copy of their newest checkpoint, or not; and, under the example policy
    (`recent`: keep_last 3 within 30 days), in every run that is not failed or abandoned,
    the 3 newest complete checkpoints within 30 days that are not a copy (a pair is as new
    as the newer of the two) are not deleted, and a copy is not deleted while its original
    stays."""
    thin = which if which != "windowed best" else "example"
    best = which if which != "thin everything" else "example"
    _inner(inv.test_invariant_1_newest_complete_checkpoint_is_kept)(groups, thin)
    _inner(inv.test_invariant_2_nothing_protected_is_in_the_plan)(groups)
    _inner(inv.test_invariant_5_every_action_and_kept_checkpoint_has_a_reason)(groups)
    _inner(inv.test_invariant_6_determinism_under_shuffled_input)(groups, rnd)
    _inner(inv.test_invariant_7_best_checkpoint_is_never_deleted)(groups, best)
    _inner(inv.test_invariant_8_incomplete_never_counted_as_keep_last)(groups)
    plan = make_plan(groups, inv.POLICY)
    for g in inv._live_groups(groups):
        complete = inv._complete(g)
        copies = _copies(g)
        for a in _newest_distinct(complete, copies, 3, timedelta(days=30)):
            assert not inv._deleted(plan, a), (a.key, [x.reason for x in plan.actions])
        for a in complete:
            original = copies.get(a.key)
            if original is not None and not inv._deleted(plan, original):
                assert not inv._deleted(plan, a), (a.key, [x.reason for x in plan.actions])
                assert kept_for(plan, a.key) is not None, a.key


def _newest_distinct(
    complete: list[Artifact], copies: dict[str, Artifact], n: int, within: timedelta
) -> list[Artifact]:
    """The oracle of keep_last over distinct states: the `n` newest of `complete` that are
    not copies, within `within`, each original as new as the newer of it and its copy (by
    policy.md's order of the whole run, and by write)."""
    order = inv._order(complete)
    copy_of = {id(o): a for a in complete if (o := copies.get(a.key)) is not None}

    def rank(a: Artifact) -> Any:
        mate = copy_of.get(id(a))
        return order(a) if mate is None else max(order(a), order(mate))

    def written(a: Artifact) -> Any:
        mate = copy_of.get(id(a))
        return a.last_modified if mate is None else max(a.last_modified, mate.last_modified)

    distinct = [a for a in complete if a.key not in copies]
    recent = [a for a in distinct if AS_OF - written(a) <= within]
    return sorted(recent, key=rank, reverse=True)[:n]


def test_the_planner_finds_the_copies_the_oracle_finds() -> None:
    """On generated runs, `tiers.save_last_aliases` pairs exactly the copies `_copies` finds
    (no more: a checkpoint of its own is never taken for a copy), and the generator draws
    both kinds of last.ckpt (the property above tests both)."""
    seen: set[bool] = set()

    @PROPERTY_SETTINGS
    @given(lightning_groups())
    def look(groups: list[Group]) -> None:
        for g in groups:
            complete = inv._complete(g)
            want = {k: o.key for k, o in _copies(g).items()}
            found = tiering.save_last_aliases(complete, tiering.written(complete))
            assert {a.key: o.key for a, o in found} == want
            seen.update(a.key in want for a in complete if a.key.endswith("/last.ckpt"))

    look()
    assert seen == {True, False}


# ----------------------------------------------------------------------------- expire rules

EXPIRE_OLD = """
protect: {min_age: 1d}
rules:
  - name: old-small
    select: {kind: checkpoint, older_than: 15d}
    expire: {after: 1d}
"""


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.RUNNING])
def test_under_an_expire_rule_last_ckpt_and_its_original_stay_together(
    status: RunStatus,
) -> None:
    """Each decided by its own age, the original (16 days old) expired while its copy,
    written 4 seconds later, was kept by invariant 1: the pair split, though a copy and its
    original are kept, archived or deleted together."""
    older = pl("epoch=2-step=300.ckpt", timedelta(days=17))
    original = pl("epoch=3-step=400.ckpt", timedelta(days=16))
    last = pl("last.ckpt", timedelta(days=16) - 4 * S)
    plan = make_plan([group("pl", [older, original, last], status)], policy(EXPIRE_OLD))
    assert [a.action.value for a in actions_for(plan, older.key)] == ["delete"]
    for art in (original, last):
        assert actions_for(plan, art.key) == [], art.key
        kept = kept_for(plan, art.key)
        assert kept is not None
        assert kept.how is KeptHow.WHOLE
    reason = kept_for(plan, original.key).reason  # type: ignore[union-attr]
    assert "last.ckpt is Lightning's save_last copy of" in reason


def test_an_expired_original_stays_while_its_copy_is_not_expired_yet() -> None:
    """A dead run (no invariant 1): the original is past `expire.after`, its copy, written
    a minute later, not yet. The original stays with its copy; both go on a later plan."""
    pol = policy(
        """
protect: {min_age: 1d}
rules:
  - name: failed
    select: {kind: checkpoint, run_status: failed}
    expire: {after: 10d}
  - name: ckpts
    select: {kind: checkpoint}
    expire: {after: 10d}
"""
    )
    original = pl("epoch=3-step=400.ckpt", timedelta(days=10, seconds=30))
    last = pl("last.ckpt", timedelta(days=10) - 30 * S)
    plan = make_plan([group("pl", [original, last], RunStatus.ABANDONED)], pol)
    assert actions_for(plan, last.key) == []
    assert actions_for(plan, original.key) == []
    kept = kept_for(plan, original.key)
    assert kept is not None
    assert kept.reason.startswith(f"kept with {LAST}: last.ckpt is Lightning's save_last")
    # a day later both are past expire.after, and go together
    both = make_plan(
        [
            group(
                "pl",
                [pl(original.key[len(CK) :], timedelta(days=11)), pl("last.ckpt", 11.0)],
                RunStatus.ABANDONED,
            )
        ],
        pol,
    )
    assert len(both.actions) == 2
    assert {a.action.value for a in both.actions} == {"delete"}
