"""Object Lock, legal hold and unread tags / lock state protect their whole artifact.

The catalog marks an object `unread` when protection needs its tags (the policy uses
tags, the root has them) or its lock state (the bucket has Object Lock) and they were not
read; the planner cannot prove such an artifact unprotected, so it is kept.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from governance.model.types import Artifact, CatalogObject, Component, Kind
from governance.plan.protect import Protector, lock_reason, protection
from governance.policy.models import Protect
from tests.unit.plan_factories import (
    AS_OF,
    ROOT,
    actions_for,
    checkpoint,
    group,
    kept_for,
    make_plan,
    policy,
    single,
)

LOGS = """\
protect: {min_age: 3d}
rules:
  - name: logs
    select: {kind: log}
    expire: {after: 30d}
"""


def _with(art: Artifact, index: int = 0, **fields: object) -> Artifact:
    """`art` with its object `index` given `fields` (lock state, unread)."""
    objects = list(art.objects)
    objects[index] = dataclasses.replace(objects[index], **fields)  # type: ignore[arg-type]
    return dataclasses.replace(art, objects=objects)


def test_lock_reasons_name_the_object() -> None:
    o = CatalogObject("runs/a/x.log", 1, AS_OF, '"e"')
    assert lock_reason(o, AS_OF) is None
    held = dataclasses.replace(o, legal_hold=True)
    assert lock_reason(held, AS_OF) == "legal hold on runs/a/x.log"
    until = AS_OF + timedelta(days=2)
    locked = dataclasses.replace(o, lock_mode="COMPLIANCE", retain_until=until)
    assert lock_reason(locked, AS_OF) == (
        f"object lock on runs/a/x.log until {until.isoformat()} (compliance mode)"
    )
    lapsed = dataclasses.replace(locked, retain_until=AS_OF - timedelta(seconds=1))
    assert lock_reason(lapsed, AS_OF) is None
    for unread in ("tags", "tags lock"):
        assert lock_reason(dataclasses.replace(o, unread=unread), AS_OF) == (
            "tags of runs/a/x.log not read (the policy's protect.tags/select.tags need them)"
        )
    assert lock_reason(dataclasses.replace(o, unread="lock"), AS_OF) == (
        "object lock state of runs/a/x.log not read (its bucket has Object Lock enabled)"
    )


def test_locked_and_unread_objects_keep_their_artifacts_out_of_the_plan() -> None:
    pol = policy(LOGS)
    old = 100
    free = single("logs/free.log", Kind.LOG, age_days=old)
    held = _with(single("logs/held.log", Kind.LOG, age_days=old), legal_hold=True)
    locked = _with(
        single("logs/locked.log", Kind.LOG, age_days=old),
        lock_mode="GOVERNANCE",
        retain_until=AS_OF + timedelta(days=1),
    )
    lapsed = _with(
        single("logs/lapsed.log", Kind.LOG, age_days=old),
        lock_mode="GOVERNANCE",
        retain_until=AS_OF - timedelta(days=1),
    )
    no_tags = _with(single("logs/no-tags.log", Kind.LOG, age_days=old), unread="tags")
    no_lock = _with(single("logs/no-lock.log", Kind.LOG, age_days=old), unread="lock")
    arts = sorted([free, held, locked, lapsed, no_tags, no_lock], key=lambda a: a.key)
    plan = make_plan([group(None, arts)], pol)
    assert {a.artifact.uri for a in plan.actions} == {ROOT + free.key, ROOT + lapsed.key}
    for art, words in (
        (held, "legal hold on logs/held.log"),
        (locked, "object lock on logs/locked.log until"),
        (no_tags, "tags of logs/no-tags.log not read"),
        (no_lock, "object lock state of logs/no-lock.log not read"),
    ):
        kept = kept_for(plan, art.key)
        assert kept is not None
        assert kept.how.value == "protected"
        assert words in kept.reason


def test_one_locked_member_protects_a_whole_checkpoint() -> None:
    pol = policy(
        "protect: {min_age: 3d}\nrules:\n  - name: all\n    select: {kind: checkpoint}\n"
        "    expire: {after: 1d}\n"
    )
    ckpt = checkpoint("runs/a/", 100, 50)
    newest = checkpoint("runs/a/", 200, 40)
    held = _with(ckpt, 2, legal_hold=True)
    plan = make_plan([group("a", [held, newest])], pol)
    assert actions_for(plan, held.key) == []
    kept = kept_for(plan, held.key)
    assert kept is not None
    assert f"legal hold on {held.objects[2].key}" in kept.reason


def test_unread_or_locked_objects_are_never_judged_by_age_alone() -> None:
    protect = Protect(min_age=timedelta(days=3))
    protector = Protector(protect, ROOT, AS_OF)
    o = CatalogObject("runs/a/f", 1, AS_OF, '"e"')
    plain = Artifact("runs/a/f", Kind.OTHER, "file", [o], (Component.OTHER,))
    assert protector.by_age_alone([plain])
    age = timedelta(days=10)
    for fields in (
        {"unread": "tags"},
        {"unread": "lock"},
        {"legal_hold": True},
        {"retain_until": AS_OF + timedelta(days=1)},
    ):
        art = _with(plain, **fields)
        assert not protector.by_age_alone([plain, art])
        assert protector(art, ROOT + art.key, age) == protection(
            protect, art, ROOT + art.key, age, AS_OF
        )
        assert protector(art, ROOT + art.key, age) is not None
    lapsed = _with(plain, retain_until=AS_OF - timedelta(days=1))
    assert protector(lapsed, ROOT + lapsed.key, age) is None
