"""Orbax staging folders under both namings, and `_CHECKPOINT_METADATA` on object stores.

Current Orbax (`orbax/checkpoint/_src/path/atomicity.py`, `_get_tmp_directory`) stages a
save in `<name>.orbax-checkpoint-tmp/`, with no `-<timestamp>` tail; older Orbax used
`<name>.orbax-checkpoint-tmp-<timestamp>/`. Both are staging folders: residue, never a
complete checkpoint. Taken for a complete step (its step number in its name, its
`_CHECKPOINT_METADATA` and items inside), a crashed `checkpoint_300.orbax-checkpoint-tmp/`
was kept by `keep_last: 1` as the newest checkpoint and the committed `checkpoint_200/`
deleted.

On an object store (no rename) Orbax writes `_CHECKPOINT_METADATA` when a save starts and
adds `commit_timestamp_nsecs` when it commits: whether a step committed is in that file.
It is read before classification like the other small metadata files (so `govern plan
--no-scan` judges from the cache); a step whose file could not be read is not counted
where counting it would let a step known to be committed be deleted.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from governance.model.classify import classify
from governance.model.detectors.orbax import OrbaxDetector
from governance.model.detectors.residue import ResidueDetector
from governance.model.types import (
    Artifact,
    CatalogObject,
    ClassifyOptions,
    Group,
    Kind,
    MetaReader,
)
from governance.plan.types import KeptHow, Plan
from governance.scan.metadata import is_metadata_key
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
DAY = timedelta(days=1)
LATE = b.T0 + 30 * DAY  # far outside the 3-day grace period of the writes at T0
CKPT = "runs/jx/ckpt/"


def tier_of(plan: Plan, key: str) -> str | None:
    """The tier that keeps `key` whole, or None (not kept by a tier)."""
    kept = kept_for(plan, key)
    return kept.tier if kept is not None else None


def groups(
    tree: b.MemoryTree, as_of: datetime, reader: MetaReader | str | None = "tree"
) -> list[Group]:
    read = tree.read_meta if reader == "tree" else reader
    assert not isinstance(read, str)
    return list(classify(tree.objects, ClassifyOptions(as_of=as_of), read))


def arts(
    tree: b.MemoryTree, as_of: datetime, reader: MetaReader | str | None = "tree"
) -> dict[str, Artifact]:
    return {a.key: a for g in groups(tree, as_of, reader) for a in g.artifacts}


def staging(tree: b.MemoryTree, name: str, mtime: datetime, *, commit: bool = False) -> str:
    """A save left in its staging folder: items, and `_CHECKPOINT_METADATA` as Orbax writes
    it when it creates the folder (`init_timestamp_nsecs`; with `commit`, also the commit
    time Orbax adds just before the rename that never came)."""
    return b.orbax_step(tree, CKPT, name, mtime=mtime, commit_timestamp=commit)


# ------------------------------------------------------------------ staging folder names


@pytest.mark.parametrize(
    "folder",
    [
        "checkpoint_300.orbax-checkpoint-tmp",  # current Orbax: no timestamp
        "300.orbax-checkpoint-tmp",
        "checkpoint_300.orbax-checkpoint-tmp-1704070800",  # older Orbax
        "300.orbax-checkpoint-tmp-1704070800",
    ],
)
@pytest.mark.parametrize(
    "name", ["_CHECKPOINT_METADATA", "commit_success.txt", "default/_METADATA",
             "default/manifest.ocdbt", "default/ocdbt.process_0/d/2a8e1c4b9f"],
)  # fmt: skip
def test_both_staging_namings_are_claimed_as_residue_never_as_a_step(
    folder: str, name: str
) -> None:
    key = f"{CKPT}{folder}/{name}"
    assert OrbaxDetector().claim(key) is None
    claim = ResidueDetector().claim(key)
    assert claim is not None
    assert (claim.unit, claim.deep) == (f"{CKPT}{folder}/", True)


def test_a_name_that_only_begins_like_the_suffix_is_not_a_staging_folder() -> None:
    key = f"{CKPT}300.orbax-checkpoint-tmpfiles/_CHECKPOINT_METADATA"
    assert ResidueDetector().claim(key) is None
    assert OrbaxDetector().claim(key) is not None


@pytest.mark.parametrize("tree_type", [b.FilesystemTree, b.MemoryTree])
@pytest.mark.parametrize("commit", [False, True])
def test_current_orbax_staging_folder_is_residue(
    tree_type: type[b.MemoryTree], commit: bool
) -> None:
    """On a filesystem (the final name would say complete) and on an object store, with
    or without a commit time in its `_CHECKPOINT_METADATA`: a staging folder is residue,
    whatever its age."""
    t = tree_type()
    s100 = b.orbax_step(t, CKPT, "checkpoint_100", mtime=b.T0)
    s200 = b.orbax_step(t, CKPT, "checkpoint_200", mtime=b.T0 + H)
    tmp = staging(t, "checkpoint_300.orbax-checkpoint-tmp", b.T0 + 2 * H, commit=commit)
    for as_of in (b.T0 + 3 * H, LATE):  # inside the grace period and past it
        a = arts(t, as_of)
        assert a[tmp].kind is Kind.RESIDUE
        assert not a[tmp].complete
        assert "Orbax staging folder" in a[tmp].completeness_reason
        assert a[tmp].layout == "orbax"
        assert a[tmp].step is None
        assert a[tmp].object_count == len([k for k in t.objects_by_key if k.startswith(tmp)])
        for s in (s100, s200):
            assert a[s].kind is Kind.CHECKPOINT
            assert a[s].complete, a[s].completeness_reason
        # the staging folder is in the steps' run, not a run of its own
        assert a[tmp].run == a[s200].run == "runs/jx/"


def test_keep_last_keeps_the_committed_step_not_the_staging_folder() -> None:
    """The confirmed bug: `checkpoint_300.orbax-checkpoint-tmp/` counted as the newest
    complete checkpoint, `keep_last: 1` kept it and deleted `checkpoint_200/`."""
    t = b.FilesystemTree()
    old = AS_OF - 10 * DAY
    s100 = b.orbax_step(t, CKPT, "checkpoint_100", mtime=old)
    s200 = b.orbax_step(t, CKPT, "checkpoint_200", mtime=old + H)
    tmp = staging(t, "checkpoint_300.orbax-checkpoint-tmp", old + 2 * H)
    plan = make_plan(groups(t, AS_OF), policy(KEEP_LAST_1_RESIDUE))
    assert tier_of(plan, s200) == "recent"
    assert actions_for(plan, s200) == []
    assert [a.action.value for a in actions_for(plan, s100)] == ["delete"]
    (gone,) = actions_for(plan, tmp)
    assert (gone.action.value, gone.rule) == ("delete", "residue")
    assert kept_for(plan, tmp) is None


def test_the_older_naming_is_residue_as_before() -> None:
    t = b.FilesystemTree()
    units = b.orbax_run(t, "runs/old/ckpt", steps=(1000, 2000), tmp=True)
    a = arts(t, LATE)
    tmp = [k for k in a if ".orbax-checkpoint-tmp-" in k]
    assert tmp == ["runs/old/ckpt/3000.orbax-checkpoint-tmp-1704070800/"]
    assert a[tmp[0]].kind is Kind.RESIDUE
    assert all(a[u].complete for u in units)


# ------------------------------------------------------- _CHECKPOINT_METADATA on stores


def test_checkpoint_metadata_is_read_before_classification() -> None:
    """`govern plan --no-scan` judges from the cache: the file must be among the names
    read into it (a listing of small files, by name)."""
    assert is_metadata_key(CKPT + "checkpoint_100/_CHECKPOINT_METADATA")
    assert is_metadata_key("100/_CHECKPOINT_METADATA")
    assert not is_metadata_key(CKPT + "checkpoint_100/default/_METADATA")
    assert not is_metadata_key(CKPT + "checkpoint_100/my_CHECKPOINT_METADATA")


def _store_run(tree: b.MemoryTree, start: datetime) -> tuple[str, str, str]:
    """Steps 100 and 200 committed (a commit time in `_CHECKPOINT_METADATA`), 300 started
    and never committed, an hour apart from `start`, on an object store."""
    return (
        b.orbax_step(tree, CKPT, "100", mtime=start),
        b.orbax_step(tree, CKPT, "200", mtime=start + H),
        b.orbax_step(tree, CKPT, "300", mtime=start + 2 * H, commit_timestamp=False),
    )


def _without(tree: b.MemoryTree, *units: str) -> MetaReader:
    """A reader that cannot read the `_CHECKPOINT_METADATA` of `units` (a read failure,
    the root out of reach when they were new), and reads everything else."""
    unread = {u + "_CHECKPOINT_METADATA" for u in units}

    def read(obj: CatalogObject) -> bytes | None:
        return None if obj.key in unread else tree.read_meta(obj)

    return read


def test_an_unread_step_newer_than_a_committed_one_is_not_counted() -> None:
    """Taken as committed, an unread step newer than the steps known to be committed
    would be the newest complete checkpoint, and `keep_last` would delete one that is."""
    t = b.MemoryTree()
    s100, s200, s300 = _store_run(t, b.T0)
    read = _without(t, s300)
    for as_of in (b.T0 + 3 * H, LATE):
        a = arts(t, as_of, read)
        assert a[s200].complete
        assert a[s100].complete
        assert not a[s300].complete
        assert "_CHECKPOINT_METADATA not read" in a[s300].completeness_reason
    # in flight at any age: whether it committed is not known, so it is never residue
    for as_of in (b.T0 + 3 * H, LATE):
        unread = arts(t, as_of, read)[s300]
        assert unread.kind is Kind.CHECKPOINT
        assert "in flight" in unread.note


def test_keep_last_keeps_the_committed_step_when_the_newest_was_not_read() -> None:
    t = b.MemoryTree()
    s100, s200, s300 = _store_run(t, AS_OF - 10 * DAY)
    plan = make_plan(groups(t, AS_OF, _without(t, s300)), policy(KEEP_LAST_1_RESIDUE))
    assert tier_of(plan, s200) == "recent"
    assert actions_for(plan, s200) == []
    assert [a.action.value for a in actions_for(plan, s100)] == ["delete"]
    # past the grace period too: kept in flight, not deleted (its commit is not known)
    assert actions_for(plan, s300) == []
    kept = kept_for(plan, s300)
    assert kept is not None
    assert kept.how is KeptHow.IN_FLIGHT


def test_a_recent_unread_step_is_in_flight_not_counted() -> None:
    """Inside the grace period a step whose commit is not known is kept and not counted,
    even when no step of its folder was read (no reader at all)."""
    t = b.MemoryTree()
    _s100, s200, _s300 = _store_run(t, AS_OF - 10 * DAY)
    s400 = b.orbax_step(t, CKPT, "400", mtime=AS_OF - 2 * H)  # committed, but unread
    for reader in (None, _without(t, s400)):
        a = arts(t, AS_OF, reader)
        assert not a[s400].complete
        assert a[s400].kind is Kind.CHECKPOINT
        assert "in flight" in a[s400].note
        plan = make_plan(groups(t, AS_OF, reader), policy(KEEP_LAST_1_RESIDUE))
        kept = kept_for(plan, s400)
        assert kept is not None
        assert kept.how is KeptHow.IN_FLIGHT, kept
        assert actions_for(plan, s400) == []
    plan = make_plan(groups(t, AS_OF, _without(t, s400)), policy(KEEP_LAST_1_RESIDUE))
    assert tier_of(plan, s200) == "recent"


def test_unread_steps_are_not_judged_where_no_step_of_the_folder_is_known() -> None:
    """No reader (a root whose files cannot be read, out of reach): past the grace period
    every step stays complete as before. Judged incomplete they would all be residue, and
    deleted."""
    t = b.MemoryTree()
    units = _store_run(t, b.T0)
    a = arts(t, LATE, None)
    for u in units:
        assert a[u].kind is Kind.CHECKPOINT
        assert a[u].complete
        assert "(unread)" in a[u].completeness_reason


def test_an_unread_step_older_than_a_committed_one_is_not_judged() -> None:
    t = b.MemoryTree()
    s100, s200, _s300 = _store_run(t, b.T0)
    a = arts(t, LATE, _without(t, s100))
    assert a[s100].complete
    assert "(unread)" in a[s100].completeness_reason
    assert a[s200].complete
    # what was read is judged as before: the save started at 300 never committed
    assert a[_s300].kind is Kind.RESIDUE
    assert "commit_timestamp_nsecs" in a[_s300].completeness_reason


def test_commit_success_needs_no_read() -> None:
    t = b.MemoryTree()
    u = b.orbax_step(t, CKPT, "100", mtime=b.T0, commit_timestamp=False, commit_success=True)
    b.orbax_step(t, CKPT, "50", mtime=b.T0 - H)
    for as_of in (b.T0 + H, LATE):
        assert arts(t, as_of, None)[u].complete


def test_a_staging_folder_does_not_count_as_a_committed_step_of_its_folder() -> None:
    """An unread step is judged against the steps of its folder known to be committed;
    a staging folder with a commit time inside is not one of them."""
    t = b.MemoryTree()
    s100 = b.orbax_step(t, CKPT, "100", mtime=b.T0)
    staging(t, "200.orbax-checkpoint-tmp", b.T0 + H, commit=True)
    a = arts(t, LATE, _without(t, s100))
    assert a[s100].complete, a[s100].completeness_reason
