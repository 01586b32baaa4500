"""build_plan: protections, rule ownership, expire, transitions, strip, archive, otherwise."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.model.types import Artifact, Component, Kind, RunStatus
from governance.plan.types import ActionType, KeptHow, PlanStatus
from governance.policy.models import Policy
from tests.unit.plan_factories import (
    AS_OF,
    FULL_STATE,
    ROOT,
    KiB,
    MiB,
    actions_for,
    checkpoint,
    example_policy,
    group,
    kept_for,
    kinds,
    make_plan,
    obj,
    policy,
    single,
    snapshot,
    transition_policy,
    upload,
)

R = "runs/a/"

KEEP_LAST_1 = """
protect: {min_age: 1d}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""


# ----------------------------------------------------------------------------- protections


def test_min_age_protects_but_still_counts_for_tiers() -> None:
    """The newest checkpoint is inside the grace period: it takes the keep_last slot."""
    young = checkpoint(R, 300, age_days=0.5)
    older = checkpoint(R, 200, age_days=5)
    plan = make_plan([group("a", [older, young], RunStatus.RUNNING)], policy(KEEP_LAST_1))
    kept = kept_for(plan, young.key)
    assert kept is not None
    assert kept.how is KeptHow.PROTECTED
    assert "min_age" in kept.reason
    assert actions_for(plan, young.key) == []
    assert kinds(plan, older.key) == ["delete"]


@pytest.mark.parametrize(
    ("tags", "protected"),
    [({"retain": "true"}, True), ({"retain": "false"}, False), ({"legal-hold": "case-7"}, True)],
)
def test_protect_tags(tags: dict[str, str], protected: bool) -> None:
    pol = policy(
        """
protect: {min_age: 1d, tags: {retain: "true", legal-hold: "*"}}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""
    )
    target = checkpoint(R, 100, age_days=5, tags=tags)
    newest = checkpoint(R, 200, age_days=4)
    plan = make_plan([group("a", [target, newest])], pol)
    kept = kept_for(plan, target.key)
    if protected:
        assert kept is not None
        assert kept.how is KeptHow.PROTECTED
        assert "tag" in kept.reason
        assert actions_for(plan, target.key) == []
    else:
        assert kinds(plan, target.key) == ["delete"]


def test_protect_paths_double_star_crosses_folders_single_does_not() -> None:
    pol = policy(
        """
protect: {min_age: 1d, paths: ["s3://ml-artifacts/releases/**", "s3://ml-artifacts/pinned/*"]}
rules:
  - name: old
    select: {older_than: 2d}
    expire: {after: 2d}
"""
    )
    deep = single("releases/v1/sub/model.safetensors", Kind.WEIGHTS)
    pinned = single("pinned/model.safetensors", Kind.WEIGHTS)
    nested = single("pinned/x/model.safetensors", Kind.WEIGHTS)
    plan = make_plan([group(None, [deep, pinned, nested])], pol)
    assert kept_for(plan, deep.key) is not None
    assert kept_for(plan, pinned.key) is not None
    assert kinds(plan, nested.key) == ["delete"]


@pytest.mark.parametrize("scheme", ["s3a", "S3"])
def test_protect_paths_written_with_an_alias_scheme_still_protect(scheme: str) -> None:
    """Object URLs are `s3://`: a `protect.paths` glob written `s3a://` or `S3://` means
    the same bucket, and must protect it rather than silently match nothing."""
    pol = policy(
        f"""
protect: {{min_age: 1d, paths: ["{scheme}://ml-artifacts/releases/**"]}}
rules:
  - name: old
    select: {{older_than: 2d}}
    expire: {{after: 2d}}
"""
    )
    assert pol.protect.paths == ("s3://ml-artifacts/releases/**",)
    release = single("releases/v1/model.safetensors", Kind.WEIGHTS)
    other = single("scratch/model.safetensors", Kind.WEIGHTS)
    plan = make_plan([group(None, [release, other])], pol)
    assert kept_for(plan, release.key) is not None
    assert kinds(plan, other.key) == ["delete"]


def test_protect_run_status_skips_expire_but_tiers_still_thin() -> None:
    pol = example_policy()
    stale_tmp = single(R + "tmp-checkpoint-5/x.bin", Kind.RESIDUE, age_days=10, run_key=R)
    log = single(R + "logs/a.log", Kind.LOG, 1 * MiB, age_days=100, run_key=R)
    ckpts = [checkpoint(R, s, age_days=50 - s / 1000) for s in range(1000, 8000, 1000)]
    plan = make_plan([group("a", [stale_tmp, log, *ckpts], RunStatus.RUNNING)], pol)
    assert actions_for(plan, stale_tmp.key) == []
    assert actions_for(plan, log.key) == []
    kept = kept_for(plan, stale_tmp.key)
    assert kept is not None
    assert kept.how is KeptHow.PROTECTED
    assert "protect.run_status" in kept.reason
    assert any(a.rule == "checkpoints" for a in plan.actions)  # tiers still apply


def test_protect_run_status_unknown_shields_what_is_in_no_run_as_selectors_read_it() -> None:
    """An artifact in no run has the status `unknown` for a rule's `run_status` (a rule
    selecting it matches), so `protect.run_status: [unknown]` shields it as well: it was
    expired while the same status inside a run was kept."""
    shielded = policy(
        "protect: {min_age: 1h, run_status: [unknown]}\n"
        "rules:\n  - {name: old-logs, select: {kind: log}, expire: {after: 1d}}\n"
    )
    inside = single(R + "a.log", Kind.LOG, MiB, age_days=10, run_key=R)
    outside = single("misc/b.log", Kind.LOG, MiB, age_days=10)
    groups = [group("a", [inside], RunStatus.UNKNOWN), group(None, [outside])]
    plan = make_plan(groups, shielded)
    assert plan.actions == []
    kept = kept_for(plan, outside.key)
    assert kept is not None
    assert kept.how is KeptHow.PROTECTED
    assert "in no run: its status is unknown" in kept.reason
    selecting = policy(
        "protect: {min_age: 1h}\nrules:\n  - {name: unknown-logs, "
        "select: {kind: log, run_status: [unknown]}, expire: {after: 1d}}\n"
    )
    assert kinds(make_plan(groups, selecting), outside.key) == ["delete"]


def test_incomplete_checkpoint_is_in_flight() -> None:
    pol = policy(KEEP_LAST_1.replace("min_age: 1d", "min_age: 1h"))
    flying = checkpoint(R, 900, age_days=0.5, complete=False)
    done = checkpoint(R, 800, age_days=2)
    plan = make_plan([group("a", [flying, done], RunStatus.RUNNING)], pol)
    kept = kept_for(plan, flying.key)
    assert kept is not None
    assert kept.how is KeptHow.IN_FLIGHT
    done_kept = kept_for(plan, done.key)
    assert done_kept is not None
    assert done_kept.tier == "recent"


# ----------------------------------------------------------------------------- expire


def test_expire_counts_from_run_last_write_when_selecting_by_run_status() -> None:
    pol = example_policy()
    # artifacts written 20 days ago, but the run last wrote 10 days ago: not yet 14d
    a1 = single(R + "events.log", Kind.LOG, age_days=20, run_key=R)
    g = group("a", [a1], RunStatus.FAILED, last_write_days=10)
    assert make_plan([g], pol).actions == []
    g = group("a", [a1], RunStatus.FAILED, last_write_days=15)
    plan = make_plan([g], pol)
    assert kinds(plan, a1.key) == ["delete"]
    reason = actions_for(plan, a1.key)[0].reason
    assert reason.startswith("expired: run a (failed) last written 15 days ago")
    assert "failed-runs expires after 14d" in reason


def test_expire_counts_from_artifact_age_otherwise() -> None:
    pol = example_policy()
    old = single(R + "tmp-checkpoint-1/a.bin", Kind.RESIDUE, age_days=40, run_key=R)
    new = single(R + "tmp-checkpoint-2/a.bin", Kind.RESIDUE, age_days=1.5, run_key=R)
    # the run wrote yesterday; residue age is what counts
    plan = make_plan([group("a", [old, new], RunStatus.COMPLETED, last_write_days=1)], pol)
    assert kinds(plan, old.key) == ["delete"]
    assert actions_for(plan, old.key)[0].reason == (
        "expired: last written 40 days ago, rule residue expires after 2d"
    )
    assert actions_for(plan, new.key) == []


def test_stale_multipart_upload_is_aborted() -> None:
    up = upload(R + "big.bin", age_days=5)
    plan = make_plan([group("a", [up])], example_policy())
    [action] = actions_for(plan, up.key)
    assert action.action is ActionType.ABORT_UPLOAD
    assert action.objects[0].upload_id == up.members[0].obj.upload_id
    assert action.destructive


def test_first_matching_rule_owns_the_artifact() -> None:
    """A failed run's checkpoints expire with it (failed-runs comes before checkpoints)."""
    ckpts = [checkpoint(R, s, age_days=30) for s in (100, 200, 300)]
    plan = make_plan([group("a", ckpts, RunStatus.FAILED, last_write_days=30)], example_policy())
    assert {a.rule for a in plan.actions} == {"failed-runs"}
    assert len(plan.actions) == 3  # invariant 1 does not hold for failed runs


def test_selector_attributes_run_glob_and_sizes() -> None:
    pol = policy(
        """
layout: {runs: ["{team}/runs/{run}/"]}
protect: {min_age: 1d}
rules:
  - name: nlp-big-logs
    select: {team: "nl*", run: "exp-*", kind: log, min_size: 1MiB, max_size: 10MiB}
    expire: {after: 7d}
"""
    )
    a = single("nlp/runs/exp-1/a.log", Kind.LOG, 2 * MiB, 30)
    small = single("nlp/runs/exp-1/b.log", Kind.LOG, 10 * KiB, 30)
    g1 = group("exp-1", [a, small], attributes={"team": "nlp"}, key="nlp/runs/exp-1/")
    other = single("cv/runs/exp-2/a.log", Kind.LOG, 2 * MiB, 30)
    g2 = group("exp-2", [other], attributes={"team": "cv"}, key="cv/runs/exp-2/")
    plan = make_plan([g1, g2], pol)
    assert [a.artifact.uri for a in plan.actions] == ["s3://ml-artifacts/nlp/runs/exp-1/a.log"]


# ----------------------------------------------------------------------------- transitions

LOGS = """
protect: {min_age: 1d}
rules:
  - name: logs
    select: {kind: log}
    transition:
      - {after: 14d, storage_class: STANDARD_IA}
      - {after: 60d, storage_class: GLACIER_IR}
    expire: {after: 365d}
"""


@pytest.mark.parametrize(
    ("age", "current", "expected"),
    [
        (10, None, None),
        (20, None, "STANDARD_IA"),
        (70, None, "GLACIER_IR"),
        (70, "STANDARD_IA", "GLACIER_IR"),
        (70, "GLACIER_IR", None),  # already there
        (70, "DEEP_ARCHIVE", None),  # colder: never up the waterfall
        (20, "INTELLIGENT_TIERING", None),  # colder than STANDARD_IA (S3's waterfall)
    ],
)
def test_transition_ladder(age: int, current: str | None, expected: str | None) -> None:
    log = single("logs/a.log", Kind.LOG, 1 * MiB, age, storage_class=current)
    plan = make_plan([group(None, [log])], policy(LOGS))
    actions = actions_for(plan, log.key)
    if expected is None:
        assert actions == []
    else:
        [a] = actions
        assert a.action is ActionType.TRANSITION
        assert a.storage_class == expected
        assert not a.destructive
        assert a.reason.startswith(f"transition to {expected}: {age} days old")


def test_expire_wins_over_transition_once_due() -> None:
    log = single("logs/a.log", Kind.LOG, 1 * MiB, 400, storage_class="GLACIER_IR")
    plan = make_plan([group(None, [log])], policy(LOGS))
    assert kinds(plan, log.key) == ["delete"]


def test_small_objects_are_not_transitioned_and_the_reason_says_so() -> None:
    small = single("logs/small.log", Kind.LOG, 100 * KiB, 20)
    plan = make_plan([group(None, [small])], policy(LOGS))
    assert plan.actions == []
    files = [
        ("a.log", Component.OTHER, 100 * KiB),
        ("b.log", Component.OTHER, 200 * KiB),
    ]
    art = checkpoint("logs/", None, 20, files=files, name="mixed")
    art.kind = Kind.LOG
    plan = make_plan([group(None, [art])], policy(LOGS))
    [a] = actions_for(plan, art.key)
    assert [o.key for o in a.objects] == ["logs/mixed/b.log"]
    assert "1 object under 128 KiB stay" in a.reason


def test_transitions_not_applicable_on_filesystems() -> None:
    log = single("logs/a.log", Kind.LOG, 1 * MiB, 70)
    root = snapshot([group(None, [log])], url="file:///data/", classes=False)
    plan = make_plan([root], policy(LOGS, storage="/data/"))
    assert plan.actions == []
    assert len(plan.notes) == 1
    assert "file:///data/" in plan.notes[0]
    assert "not applicable" in plan.notes[0]
    assert plan.notes[0].endswith("; 1 artifact left as it is")
    two = [log, single("logs/b.log", Kind.LOG, 1 * MiB, 70)]
    root = snapshot([group(None, two)], url="file:///data/", classes=False)
    plan = make_plan([root], policy(LOGS, storage="/data/"))
    assert plan.notes[0].endswith("; 2 artifacts left as they are")


# ----------------------------------------------------------------------------- tiers: how kept

STRIP_ARCHIVE = """
protect: {min_age: 1d}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - name: recent
        keep_last: 1
      - name: long-term
        keep: [best]
        best_metric: {name: eval_loss, mode: min}
        keep_components: [weights, metadata]
        archive: ARCHIVE
    otherwise: OTHERWISE
"""


def _strip_archive(
    archive: str = "{storage_class: DEEP_ARCHIVE}", otherwise: str = "delete"
) -> str:
    return STRIP_ARCHIVE.replace("ARCHIVE\n", archive + "\n", 1).replace("OTHERWISE", otherwise)


def test_strip_and_archive_by_class() -> None:
    best = checkpoint(R, 100, 20, metrics={"eval_loss": 0.1})
    last = checkpoint(R, 300, 10, metrics={"eval_loss": 0.9})
    plan = make_plan([group("a", [best, last])], policy(_strip_archive()))
    strip, archive = actions_for(plan, best.key)
    assert strip.action is ActionType.STRIP
    assert {o.key.rsplit("/", 1)[1] for o in strip.objects} == {
        "optimizer.pt",
        "scheduler.pt",
        "rng_state.pth",
    }
    assert "optimizer, scheduler, rng dropped" in strip.reason
    assert archive.action is ActionType.ARCHIVE
    assert archive.storage_class == "DEEP_ARCHIVE"
    assert archive.destructive
    assert [o.key.rsplit("/", 1)[1] for o in archive.objects] == ["model.safetensors"]
    kept = kept_for(plan, best.key)
    assert kept is not None
    assert kept.how is KeptHow.ARCHIVED
    assert kept.tier == "long-term"
    assert strip.id < archive.id
    assert plan.status is PlanStatus.PENDING_APPROVAL


def test_archive_by_url_copies_then_removes() -> None:
    best = checkpoint(R, 100, 20, metrics={"eval_loss": 0.1})
    last = checkpoint(R, 300, 10)
    pol = policy(_strip_archive("{url: s3://cold-archive/}"))
    plan = make_plan([group("a", [best, last])], pol)
    _strip, archive = actions_for(plan, best.key)
    assert archive.dest_url == "s3://cold-archive/" + best.key
    assert {o.key.rsplit("/", 1)[1] for o in archive.objects} == {
        "model.safetensors",
        "trainer_state.json",
    }
    assert plan.summary.bytes_archived == archive.bytes


def test_glacier_objects_are_not_moved_without_a_restore() -> None:
    """S3 cannot copy a GLACIER or DEEP_ARCHIVE object before restoring it: a transition
    or archive (both copies) of one would fail at apply, so the plan leaves it and says so."""
    pol = transition_policy("log", "DEEP_ARCHIVE")
    frozen = single("logs/frozen.log", Kind.LOG, MiB, 5, storage_class="GLACIER")
    warm = single("logs/warm.log", Kind.LOG, MiB, 5, storage_class="GLACIER_IR")
    plan = make_plan([group(None, [frozen, warm])], pol)
    assert actions_for(plan, frozen.key) == []
    [moved] = actions_for(plan, warm.key)
    assert moved.storage_class == "DEEP_ARCHIVE"
    best = checkpoint(R, 100, 20, metrics={"eval_loss": 0.1}, storage_class="GLACIER")
    last = checkpoint(R, 300, 10)
    for archive in ("{storage_class: DEEP_ARCHIVE}", "{url: s3://cold-archive/}"):
        # (versioned deletes: a strip of GLACIER objects is then possible, see
        # test_a_frozen_checkpoint_is_kept_whole_not_stripped_or_deleted for quarantine)
        pol_ = _quarantined(_strip_archive(archive), "versioned")
        plan = make_plan([group("a", [best, last])], pol_)
        assert [a.action for a in actions_for(plan, best.key)] == [ActionType.STRIP]
        kept = kept_for(plan, best.key)
        assert kept is not None
        assert kept.how is KeptHow.STRIPPED
        assert "in GLACIER or DEEP_ARCHIVE stay where they are (a copy needs a restore" in (
            kept.reason
        )


def test_archive_by_class_not_applicable_on_filesystem_but_by_url_is() -> None:
    best = checkpoint(R, 100, 20, metrics={"eval_loss": 0.1})
    last = checkpoint(R, 300, 10)
    root = snapshot([group("a", [best, last])], url="file:///data/", classes=False)
    plan = make_plan([root], policy(_strip_archive(), storage="/data/"))
    assert kinds(plan, best.key, "file:///data/") == ["strip"]
    kept = kept_for(plan, best.key, "file:///data/")
    assert kept is not None
    assert kept.how is KeptHow.STRIPPED
    assert "not applicable" in kept.reason
    assert plan.notes
    pol = policy(_strip_archive("{url: /cold/}"), storage="/data/")
    plan = make_plan(
        [snapshot([group("a", [best, last])], url="file:///data/", classes=False)], pol
    )
    assert kinds(plan, best.key, "file:///data/") == ["strip", "archive"]


def test_not_strippable_is_kept_whole_and_says_so() -> None:
    best = checkpoint(R, 100, 20, metrics={"eval_loss": 0.1}, strippable=False)
    last = checkpoint(R, 300, 10)
    plan = make_plan([group("a", [best, last])], policy(_strip_archive()))
    assert kinds(plan, best.key) == ["archive"]
    kept = kept_for(plan, best.key)
    assert kept is not None
    assert "cannot be stripped" in kept.reason
    [archive] = actions_for(plan, best.key)
    assert len(archive.objects) == 4  # everything but the 2 KiB metadata file


def test_a_checkpoint_stripped_already_says_it_has_no_state_to_drop() -> None:
    """After an applied strip its folder holds weights and metadata: the plans after
    must not claim its optimizer state is inside the files (it is gone)."""
    files = tuple(f for f in FULL_STATE if f[1] in (Component.WEIGHTS, Component.METADATA))
    best = checkpoint(R, 100, 20, metrics={"eval_loss": 0.1}, strippable=False, files=files)
    last = checkpoint(R, 300, 10)
    plan = make_plan([group("a", [best, last])], policy(_strip_archive()))
    kept = kept_for(plan, best.key)
    assert kept is not None
    assert "kept whole: no optimizer, scheduler or RNG state files to drop" in kept.reason
    assert "cannot be stripped" not in kept.reason
    assert kinds(plan, best.key) == ["archive"]


@pytest.mark.parametrize("otherwise", ["delete", "keep"])
def test_otherwise(otherwise: str) -> None:
    middle = checkpoint(R, 200, 15)
    ckpts = [checkpoint(R, 100, 20, metrics={"eval_loss": 0.1}), middle, checkpoint(R, 300, 10)]
    plan = make_plan([group("a", ckpts)], policy(_strip_archive(otherwise=otherwise)))
    if otherwise == "delete":
        [a] = actions_for(plan, middle.key)
        assert a.action is ActionType.DELETE
        assert a.rule == "checkpoints"
        assert a.tier is None
        assert "not kept by any tier" in a.reason
        assert kept_for(plan, middle.key) is None
    else:
        assert actions_for(plan, middle.key) == []
        kept = kept_for(plan, middle.key)
        assert kept is not None
        assert kept.how is KeptHow.RULE_KEEPS


def test_first_selecting_tier_decides_how() -> None:
    """The best is also the newest: `recent` (first) keeps it whole; nothing is stripped."""
    best = checkpoint(R, 300, 10, metrics={"eval_loss": 0.1})
    plan = make_plan([group("a", [checkpoint(R, 100, 20), best])], policy(_strip_archive()))
    assert actions_for(plan, best.key) == []
    kept = kept_for(plan, best.key)
    assert kept is not None
    assert kept.how is KeptHow.WHOLE
    assert kept.tier == "recent"


def test_invariant_1_guard_overrides_policy() -> None:
    pol = policy(
        """
protect: {min_age: 1d}
rules:
  - name: old-checkpoints
    select: {kind: checkpoint}
    expire: {after: 7d}
"""
    )
    ckpts = [checkpoint(R, s, 30) for s in (1, 2, 3)]
    plan = make_plan([group("a", ckpts, RunStatus.COMPLETED)], pol)
    assert kinds(plan, ckpts[2].key) == []
    kept = kept_for(plan, ckpts[2].key)
    assert kept is not None
    assert kept.reason.startswith("invariant 1:")
    assert kinds(plan, ckpts[0].key) == ["delete"]


def test_ids_are_canonical_and_status_approved_without_destructive_actions() -> None:
    logs = [single(f"logs/{c}.log", Kind.LOG, 1 * MiB, 20) for c in "ba"]
    plan = make_plan([group(None, logs)], policy(LOGS))
    assert [a.id for a in plan.actions] == [1, 2]
    assert [a.artifact.uri for a in plan.actions] == sorted(a.artifact.uri for a in plan.actions)
    assert plan.status is PlanStatus.APPROVED
    assert plan.as_of == AS_OF
    assert plan.scans == {"s3://ml-artifacts/": 1}


def test_object_lock_hook() -> None:
    """The catalog has no lock fields yet; the hook reads them when a later version adds them."""
    from types import SimpleNamespace

    from governance.plan.protect import lock_reason

    held = SimpleNamespace(key="k", legal_hold=True)
    locked = SimpleNamespace(key="k", retain_until=AS_OF + timedelta(days=1))
    expired = SimpleNamespace(key="k", retain_until=AS_OF - timedelta(days=1))
    assert lock_reason(held, AS_OF) == "legal hold on k"  # type: ignore[arg-type]
    assert (lock_reason(locked, AS_OF) or "").startswith("object lock on k until")  # type: ignore[arg-type]
    assert lock_reason(expired, AS_OF) is None  # type: ignore[arg-type]
    assert lock_reason(single("a", Kind.LOG).members[0].obj, AS_OF) is None


def test_artifacts_no_rule_matches_are_not_listed_unless_checkpoints() -> None:
    pol = policy(LOGS)
    data = single("data/x.bin", Kind.DATASET, 1 * MiB, 100)
    ckpt = checkpoint("runs/a/", 1, 100)
    log = single("logs/a.log", Kind.LOG, 2 * MiB, 5)  # the logs rule moves it after 14 days
    later = single("logs/b.log", Kind.LOG, 3 * MiB, 6)
    plan = make_plan([group(None, [data, later, log]), group("a", [ckpt])], pol)
    assert plan.actions == []
    assert kept_for(plan, data.key) is None
    # not listed one by one, but counted by rule and kind, the first by URI as an example
    assert [
        (x.rule, x.kind, x.artifacts, x.bytes, x.example_uri, x.example_reason)
        for x in plan.summary.left
    ] == [
        ("logs", "log", 2, 5 * MiB, ROOT + log.key,
         "no transition due: 5 days old, rule logs moves it after 14d; not expired yet: "
         "last written 5 days ago, rule logs expires after 365d"),
        (None, "dataset", 1, MiB, ROOT + data.key, "no rule matches"),
    ]  # fmt: skip
    kept = kept_for(plan, ckpt.key)
    assert kept is not None
    assert kept.how is KeptHow.NO_RULE
    assert kept.reason == "no rule matches"


@pytest.mark.parametrize(
    "target",
    ["INTELLIGENT_TIERING", "STANDARD_IA", "ONEZONE_IA", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"],
)
def test_objects_under_128_kib_are_not_transitioned_to_a_class_with_a_minimum(target: str) -> None:
    body = f"""
rules:
  - name: logs
    select: {{kind: log}}
    transition: [{{after: 14d, storage_class: {target}}}]
"""
    small = single("runs/a/logs/small.log", Kind.LOG, 100 * KiB, 30, run_key=R)
    large = single("runs/a/logs/large.log", Kind.LOG, 128 * KiB, 30, run_key=R)
    plan = make_plan([group("a", [small, large])], policy(body))
    assert kinds(plan, small.key) == []
    assert [a.storage_class for a in actions_for(plan, large.key)] == [target]


def test_the_path_selector_names_a_checkpoint_folder_without_its_slash() -> None:
    # As protect.paths does: `.../checkpoint-*` names the folder `.../checkpoint-100/`.
    body = """
rules:
  - name: ours
    select: {kind: checkpoint, path: "s3://ml-artifacts/runs/*/checkpoint-*"}
    tiers:
      - {name: all, keep_last: 1000}
    otherwise: keep
  - name: old-stuff
    select: {older_than: 5d}
    expire: {after: 5d}
"""
    cks = [checkpoint(R, s, 10) for s in (100, 200)]
    plan = make_plan([group("a", cks)], policy(body))
    for ck in cks:
        assert kinds(plan, ck.key) == []
        found = kept_for(plan, ck.key)
        assert found is not None
        assert found.rule == "ours"


def test_the_path_selector_does_not_match_an_artifact_by_a_member_file() -> None:
    # A rule acts on whole artifacts: a glob on *.log must not select a checkpoint folder
    # because one of its files is a log.
    body = """
rules:
  - name: logs
    select: {path: "s3://ml-artifacts/**/*.log"}
    expire: {after: 1d}
"""
    ck = checkpoint(R, 100, 10)
    ck.objects.append(single(R + "checkpoint-100/train.log", Kind.LOG, 10, 10).objects[0])
    ck.roles = (*ck.roles, Component.OTHER)
    plan = make_plan([group("a", [ck])], policy(body))
    assert kinds(plan, ck.key) == []


THIN_ALL = """
rules:
  - name: ck
    select: {kind: checkpoint}
    tiers:
      - {name: thin, keep_last: 10, keep_components: [weights, metadata]}
    otherwise: delete
"""
MOVE_ALL = """
rules:
  - name: ck
    select: {kind: checkpoint}
    tiers:
      - {name: away, keep_last: 10, archive: {url: "s3://cold/"}}
    otherwise: delete
"""


@pytest.mark.parametrize("body", [THIN_ALL, MOVE_ALL], ids=["strip", "archive by copy"])
@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.UNKNOWN])
def test_a_run_still_writing_keeps_the_checkpoint_it_resumes_from_whole_in_place(
    body: str, status: RunStatus
) -> None:
    cks = [checkpoint(R, s, 10 - s / 100) for s in (100, 200, 300)]
    plan = make_plan([group("a", cks, status)], policy(body))
    newest = cks[-1]
    assert kinds(plan, newest.key) == []
    found = kept_for(plan, newest.key)
    assert found is not None
    assert found.how is KeptHow.WHOLE
    assert found.reason.startswith("invariant 1: step 300 is the newest complete checkpoint")
    assert "resumes from" in found.reason
    assert kinds(plan, cks[0].key) in (["strip"], ["archive"])  # the older ones as the tier says


@pytest.mark.parametrize("body", [THIN_ALL, MOVE_ALL], ids=["strip", "archive by copy"])
def test_a_completed_runs_final_checkpoint_may_be_stripped_or_archived(body: str) -> None:
    cks = [checkpoint(R, s, 10 - s / 100) for s in (100, 200, 300)]
    plan = make_plan([group("a", cks, RunStatus.COMPLETED)], policy(body))
    assert kinds(plan, cks[-1].key) in (["strip"], ["archive"])


@pytest.mark.parametrize(
    ("ahead", "status"),
    [
        (timedelta(minutes=4), PlanStatus.PENDING_APPROVAL),  # clock skew
        (timedelta(minutes=6), PlanStatus.WHAT_IF),
        (timedelta(days=30), PlanStatus.WHAT_IF),
    ],
)
def test_a_plan_made_as_of_a_time_after_its_creation_is_a_what_if(
    ahead: timedelta, status: PlanStatus
) -> None:
    from governance.plan.build import build_plan

    cks = [checkpoint(R, s, 40) for s in (100, 200, 300)]
    plan = build_plan(
        [snapshot([group("a", cks)])],
        policy(KEEP_LAST_1 + "safety: {max_delete_fraction: 1}\n"),
        AS_OF + ahead,
        plan_id="p-test",
        created_by="tester",
        created_at=AS_OF,
    )
    assert plan.actions  # deletes, which need approval
    assert plan.status is status
    # and its notes say so in words, for every report (JSON readers see the status)
    what_if = [n for n in plan.notes if n.startswith("what-if: made as of ")]
    assert len(what_if) == (1 if status is PlanStatus.WHAT_IF else 0)


@pytest.mark.parametrize("ahead", [timedelta(minutes=4), timedelta(days=30)])
def test_a_what_if_plan_over_a_limit_is_refused_and_says_it_is_a_what_if(
    ahead: timedelta,
) -> None:
    """Over a safety limit a plan is `refused` (the issue's status), made as of the
    future or not; a future one also says it is a what-if, so nothing reads it as a plan
    that was merely too big."""
    from governance.plan.build import build_plan

    cks = [checkpoint(R, s, 40) for s in (100, 200, 300)]
    plan = build_plan(
        [snapshot([group("a", cks)])],
        policy(KEEP_LAST_1 + "safety: {max_delete_fraction: 0.1}\n"),
        AS_OF + ahead,
        plan_id="p-test",
        created_by="tester",
        created_at=AS_OF,
    )
    assert plan.status is PlanStatus.REFUSED
    assert plan.refusal is not None
    what_if = [n for n in plan.notes if n.startswith("what-if: made as of ")]
    assert len(what_if) == (1 if ahead > timedelta(minutes=5) else 0)


EARLIER_RULE_THEN_TIERS = """
protect: {min_age: 1d}
rules:
  - name: early
    select: {kind: checkpoint, path: "s3://ml-artifacts/runs/*/checkpoint-1*"}
    expire: {after: 2d}
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: best, keep: [best], best_metric: {name: eval_loss, mode: min}}
    otherwise: delete
"""


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.COMPLETED])
def test_an_earlier_rule_cannot_take_a_live_runs_newest_complete_checkpoint(
    status: RunStatus,
) -> None:
    """Invariant 1 holds whichever rule gets the checkpoint (docs/policy.md)."""
    older = checkpoint(R, 100, 5)
    newest = checkpoint(R, 150, 4)  # the early rule's glob matches both
    plan = make_plan([group("a", [older, newest], status)], policy(EARLIER_RULE_THEN_TIERS))
    assert kinds(plan, older.key) == ["delete"]
    assert actions_for(plan, newest.key) == []
    kept = kept_for(plan, newest.key)
    assert kept is not None
    assert (kept.rule, kept.how) == ("early", KeptHow.WHOLE)
    assert kept.reason.startswith("invariant 1: step 150 is the newest complete checkpoint")


def test_best_is_chosen_among_the_checkpoints_the_tiered_rule_gets() -> None:
    """Invariant 7's scope (docs/policy.md): an earlier rule acts on what it matches, the
    best checkpoint included, and the best tier picks the best of the rest."""
    taken = checkpoint(R, 100, 5, metrics={"eval_loss": 0.1})
    runner_up = checkpoint(R, 200, 4, metrics={"eval_loss": 0.5})
    newest = checkpoint(R, 300, 3, metrics={"eval_loss": 0.9})
    plan = make_plan(
        [group("a", [taken, runner_up, newest], RunStatus.COMPLETED)],
        policy(EARLIER_RULE_THEN_TIERS),
    )
    [gone] = actions_for(plan, taken.key)
    assert (gone.rule, gone.action) == ("early", ActionType.DELETE)
    best = kept_for(plan, runner_up.key)
    assert best is not None
    assert (best.rule, best.tier) == ("checkpoints", "best")


# ----------------------------------------------------------------------------- tracker files


def _tracker(key: str, layout: str = "deepspeed", age_days: float = 30) -> Artifact:
    o = obj(key, 16, age_days)
    return Artifact(key, Kind.OTHER, layout, [o], (Component.METADATA,), run=R)


EXPIRE_DEAD = """
protect: {min_age: 1d, tags: {retain: "true"}}
rules:
  - name: failed-runs
    select: {run_status: [failed, abandoned]}
    expire: {after: 14d}
"""


@pytest.mark.parametrize(
    ("tracker_key", "layout"),
    [(f"{R}latest", "deepspeed"), (f"{R}latest_checkpointed_iteration.txt", "megatron")],
)
def test_a_tracker_file_stays_while_a_checkpoint_of_its_folder_stays(
    tracker_key: str, layout: str
) -> None:
    """A dead run's files expire, but a tag protects one checkpoint: DeepSpeed's `latest`
    (Megatron's tracker) is what makes that checkpoint complete, so it stays with it."""
    kept_ckpt = checkpoint(R, 100, age_days=30, name="global_step100", tags={"retain": "true"})
    gone_ckpt = checkpoint(R, 200, age_days=30, name="global_step200")
    tracker = _tracker(tracker_key, layout)
    plan = make_plan(
        [group("a", [kept_ckpt, gone_ckpt, tracker], RunStatus.FAILED)], policy(EXPIRE_DEAD)
    )
    assert kinds(plan, gone_ckpt.key) == ["delete"]
    assert kinds(plan, kept_ckpt.key) == []
    assert kinds(plan, tracker.key) == []
    kept = kept_for(plan, tracker.key)
    assert kept is not None
    assert kept.rule == "failed-runs"
    assert "step 100" in kept.reason
    assert "kept instead of: expired" in kept.reason


def test_a_tracker_file_goes_with_the_last_checkpoint_of_its_folder() -> None:
    """Nothing of the folder stays: the tracker expires with the run. A file named `latest`
    that no layout reads is an ordinary file, and a checkpoint in another folder does not
    hold a tracker."""
    elsewhere = checkpoint(f"{R}other/", 100, age_days=30, tags={"retain": "true"})
    gone = checkpoint(R, 200, age_days=30, name="global_step200")
    tracker = _tracker(f"{R}latest")
    plain = _tracker(f"{R}notes/latest", layout="file")
    group_ = group("a", [elsewhere, gone, tracker, plain], RunStatus.FAILED)
    plan = make_plan([group_], policy(EXPIRE_DEAD))
    assert kinds(plan, tracker.key) == ["delete"]
    assert kinds(plan, plain.key) == ["delete"]
    assert kinds(plan, elsewhere.key) == []


# ----------------------------------------------------------------------------- best metric


BEST_BY_EVAL_LOSS = """
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: long-term, keep: [best], best_metric: {name: eval_loss, mode: min}}
    otherwise: delete
"""


def test_a_best_metric_no_checkpoint_reports_is_named_in_a_note() -> None:
    """A Lightning run logs `val_loss`; a tier keeping best by `eval_loss` keeps nothing
    there, and its best checkpoint is rotated away: the plan says so, with what the run
    does report, once per tier for all such runs."""
    lightning = [
        checkpoint("runs/pl/", s, age_days=10 - s / 100, metrics={"val_loss": 1.0 - s / 1000})
        for s in (100, 200, 300)
    ]
    bare = [checkpoint("runs/ds/", s, age_days=10 - s / 100) for s in (100, 200)]
    measured = [
        checkpoint("runs/hf/", s, age_days=10 - s / 100, metrics={"eval_loss": 2.0 - s / 1000})
        for s in (100, 200)
    ]
    plan = make_plan(
        [group("pl", lightning), group("ds", bare), group("hf", measured)],
        policy(BEST_BY_EVAL_LOSS),
    )
    assert plan.notes == [
        f"root {ROOT}: tier long-term (rule checkpoints) keeps the best checkpoint by "
        "eval_loss, but no checkpoint of 2 runs reports eval_loss (e.g. run pl: its "
        "checkpoints report val_loss); best keeps nothing there"
    ]
    assert kinds(plan, "runs/pl/checkpoint-100/") == ["delete"]
    assert kinds(plan, "runs/hf/checkpoint-200/") == []  # best by eval_loss, and newest


def test_a_trainers_recorded_best_stands_in_and_no_note_says_best_keeps_nothing() -> None:
    """No checkpoint reports eval_loss, but the Trainer recorded its best checkpoint (by
    its own metric_for_best_model): the tier keeps that one, says why, and no note says
    that best keeps nothing there (the note contradicted the plan)."""
    arts = [
        checkpoint("runs/hf/", s, age_days=10 - s / 100, metrics={"eval_accuracy": s / 1000})
        for s in (100, 200, 300, 400)
    ]
    g = group("hf", arts)
    assert g.run is not None
    g.run.best_checkpoint = "runs/hf/checkpoint-200/"
    plan = make_plan([g], policy(BEST_BY_EVAL_LOSS))
    assert plan.notes == []
    kept = kept_for(plan, "runs/hf/checkpoint-200/")
    assert kept is not None
    assert kept.tier == "long-term"
    assert "is the run's recorded best checkpoint (no eval_loss values)" in kept.reason
    assert kinds(plan, "runs/hf/checkpoint-100/") == ["delete"]
    assert kinds(plan, "runs/hf/checkpoint-300/") == ["delete"]


# ----------------------------------------------------------------------------- quarantine


def _quarantined(body: str, mode: str = "quarantine") -> Policy:
    extra = (
        "\n  quarantine_url: s3://ml-artifacts/.govern-quarantine/" if mode == "quarantine" else ""
    )
    return policy(f"{body}\napply:\n  delete_mode: {mode}{extra}\n")


EXPIRE_DATA = """
rules:
  - name: old-data
    select: {kind: dataset}
    expire: {after: 30d}
"""


@pytest.mark.parametrize("frozen", ["GLACIER", "DEEP_ARCHIVE"])
def test_quarantine_cannot_take_objects_that_need_a_restore_first(frozen: str) -> None:
    """A quarantine copy of a GLACIER or DEEP_ARCHIVE object needs a restore first: apply
    failed such deletes every night. They stay, and say why."""
    cold = single("data/cold.bin", Kind.DATASET, 10 * MiB, 200, storage_class=frozen)
    warm = single("data/warm.bin", Kind.DATASET, 10 * MiB, 200, storage_class="GLACIER_IR")
    plan = make_plan([group(None, [cold, warm])], _quarantined(EXPIRE_DATA))
    assert kinds(plan, warm.key) == ["delete"]  # instant retrieval: copied like any other
    assert kinds(plan, cold.key) == []
    [left] = plan.summary.left
    assert left.example_uri == ROOT + cold.key
    assert "cannot be moved to quarantine without a restore first" in left.example_reason
    assert "instead of: expired" in left.example_reason
    # versioned deletes leave the object where it is (a delete marker): planned
    versioned = make_plan([group(None, [cold])], _quarantined(EXPIRE_DATA, "versioned"))
    assert kinds(versioned, cold.key) == ["delete"]


def test_a_frozen_checkpoint_is_kept_whole_not_stripped_or_deleted() -> None:
    body = """
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: thin, keep_every_steps: 1000, keep_components: [weights, metadata]}
    otherwise: delete
"""
    newest = checkpoint(R, 3000, age_days=5)
    thinned = checkpoint(R, 2500, age_days=8, storage_class="DEEP_ARCHIVE")
    dropped = checkpoint(R, 2000, age_days=9, storage_class="GLACIER")
    plan = make_plan([group("a", [dropped, thinned, newest])], _quarantined(body))
    assert kinds(plan, thinned.key) == []
    kept = kept_for(plan, thinned.key)
    assert kept is not None
    assert kept.how is KeptHow.WHOLE
    assert "kept whole, not stripped: 3 objects in GLACIER or DEEP_ARCHIVE" in kept.reason
    assert "dropped" not in kept.reason
    assert kinds(plan, dropped.key) == []
    gone = kept_for(plan, dropped.key)
    assert gone is not None
    assert gone.how is KeptHow.WHOLE
    assert gone.reason.startswith("kept whole: 5 objects in GLACIER or DEEP_ARCHIVE")
    assert "instead of: checkpoints: step 2000 is not kept by any tier" in gone.reason


def _marker(key: str, age_days: float = 60) -> Artifact:
    return Artifact(key, Kind.OTHER, "marker", [obj(key, 0, age_days)], (Component.METADATA,))


OLD_FILES = """
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
  - name: old-files
    select: {kind: other}
    expire: {after: 30d}
"""


def test_a_runs_status_marker_stays_while_a_checkpoint_of_the_run_stays() -> None:
    """`old-files` would expire the COMPLETED marker: without it the run reads as abandoned
    once idle, and a rule for dead runs would expire the checkpoints the tiers keep."""
    newest = checkpoint(R, 300, age_days=40)
    older = checkpoint(R, 200, age_days=50)
    done = _marker(f"{R}COMPLETED")
    loose = _marker("notes/COMPLETED")  # outside any run: evidence of nothing
    plan = make_plan([group("a", [older, newest, done]), group(None, [loose])], policy(OLD_FILES))
    assert kinds(plan, older.key) == ["delete"]
    assert kinds(plan, done.key) == []
    kept = kept_for(plan, done.key)
    assert kept is not None
    assert kept.rule == "old-files"
    assert "artifacts of the run stay (step 300) and COMPLETED is the run's status" in (kept.reason)
    assert kinds(plan, loose.key) == ["delete"]


def test_a_status_marker_goes_with_the_last_checkpoint_of_its_run() -> None:
    gone = checkpoint(R, 200, age_days=50)
    failed = _marker(f"{R}FAILED")
    plan = make_plan([group("a", [gone, failed], RunStatus.FAILED)], policy(EXPIRE_DEAD))
    assert kinds(plan, gone.key) == ["delete"]
    assert kinds(plan, failed.key) == ["delete"]


def test_only_a_marker_in_the_runs_own_folder_is_kept_and_while_anything_of_it_stays() -> None:
    """Run status reads markers in the run's own folder only: `eval/FAILED` is an ordinary
    file. And a run's marker stays while any artifact of the run stays (logs a rule keeps
    select by run_status too), not only its checkpoints."""
    nested = _marker(f"{R}eval/FAILED")
    done = _marker(f"{R}COMPLETED")
    log = single(f"{R}logs/train.log", Kind.LOG, age_days=10, run_key=R)
    body = (
        OLD_FILES
        + """
  - name: logs
    select: {kind: log}
    expire: {after: 365d}
"""
    )
    plan = make_plan([group("a", [done, nested, log])], policy(body))
    assert kinds(plan, nested.key) == ["delete"]
    assert kinds(plan, done.key) == []
    kept = kept_for(plan, done.key)
    assert kept is not None
    assert f"artifacts of the run stay ({R}logs/train.log)" in kept.reason


@pytest.mark.parametrize(
    ("note", "said"),
    [
        (
            "ZeRO-3: the weights are in the optimizer partitions: cannot be stripped",
            "kept whole: ZeRO-3: the weights are in the optimizer partitions",
        ),
        (
            "optimizer state inside the file: cannot be stripped",
            "kept whole: optimizer state inside the file",
        ),
    ],
)
def test_a_checkpoint_that_cannot_be_stripped_is_kept_whole_in_its_detectors_words(
    note: str, said: str
) -> None:
    """A ZeRO-3 tag keeps its optimizer state in separate files, but its weights live
    there too: the reason says that, not that the state is inside one file."""
    cks = [checkpoint(R, s, 10 - s / 100, strippable=False) for s in (100, 200)]
    for c in cks:
        c.note = note
    plan = make_plan([group("a", cks, RunStatus.COMPLETED)], policy(THIN_ALL))
    kept = kept_for(plan, cks[0].key)
    assert kept is not None
    assert said in kept.reason
    assert kinds(plan, cks[0].key) == []


def test_a_notice_mode_plan_says_that_no_one_is_notified() -> None:
    """`approval.mode: notice` announces plans through `notify`, which sends nothing yet:
    every report of such a plan says its actions become applicable unannounced."""
    cks = [checkpoint(R, s, 40) for s in (100, 200, 300)]
    body = KEEP_LAST_1 + "safety: {max_delete_fraction: 1}\n"
    notice = make_plan(
        [group("a", cks)], policy(body + "approval: {mode: notice, notice_period: 90m}\n")
    )
    [said] = [n for n in notice.notes if n.startswith("approval.mode notice")]
    assert "can be applied 1h30m after it was made, with no approval" in said
    plain = make_plan([group("a", cks)], policy(body))
    assert not [n for n in plain.notes if n.startswith("approval.mode notice")]


def test_final_is_the_runs_highest_step_even_when_another_rule_owns_it() -> None:
    """An earlier rule owns checkpoint-400: the tier keeping `final` kept checkpoint-300
    in its place, stripped and named "the final checkpoint of the completed run"."""
    pol = policy(
        f"""
rules:
  - name: pinned
    select: {{kind: checkpoint, path: "{ROOT}runs/a/checkpoint-400/**"}}
    expire: {{after: 1000d}}
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - {{name: long-term, keep: [final], keep_components: [weights]}}
    otherwise: delete
"""
    )
    arts = [checkpoint(R, s, age_days=10 - s / 100) for s in (100, 200, 300, 400)]
    plan = make_plan([group("a", arts, RunStatus.COMPLETED)], pol)
    kept = kept_for(plan, f"{R}checkpoint-400/")
    assert kept is not None
    assert kept.rule == "pinned"
    for step in (100, 200, 300):
        assert kinds(plan, f"{R}checkpoint-{step}/") == ["delete"], step
    assert not any("final checkpoint" in a.reason for a in plan.actions)
