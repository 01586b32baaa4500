"""Re-checking a plan's preconditions against storage, just before acting.

Every object of an action is compared with what the plan saw: size, ETag (or mtime
token) and version id. One changed, vanished or re-uploaded object makes the whole
artifact's action `stale` (never half-processed). Object Lock retention in the future or
a legal hold skips the artifact too, for good: locks are never bypassed.

Requests are batched. On an S3 bucket without versioning (hence without Object Lock,
which needs versioning, so a listing tells all a HEAD would) the keys of every action of
the batch are answered by range listings: the sorted keys are split into `concurrency`
runs, and each run lists from just before its next unanswered key (`StartAfter`), so one
request answers every wanted key up to the last key of its page (up to 1,000 keys) and
never fewer than one (`_list_states`). Elsewhere: one `head` call per root for many
actions (S3Store runs HEADs in its thread pool), and for directory artifacts on a store
that can say it is unversioned one listing of the artifact's prefix.

An object that is gone but has a `pending` removal row was removed by an apply that was
killed before it could record so: it counts as removed, not as stale (for quarantine,
only when its quarantine copy is there).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from governance.apply.types import StoreFactory
from governance.errors import GovernanceError
from governance.plan.selectors import tags_match
from governance.plan.types import ActionType, ObjectRef, PlannedAction, removes_objects
from governance.storage.base import ObjectState, Store
from governance.storage.errors import KeyNotFoundError
from governance.storage.s3_listing import utc

LIST_MIN_OBJECTS = 4  # below this, HEADs are as cheap as a listing
LIST_RUN_KEYS = 1000  # keys per parallel range listing, at least (one full page)
COPY_IN_PLACE = (ActionType.TRANSITION,)


@dataclass(slots=True)
class Check:
    """What is left to do for one action, or why it is skipped."""

    action: PlannedAction
    todo: list[ObjectRef] = field(default_factory=list)
    already: list[ObjectRef] = field(default_factory=list)  # done by an interrupted apply
    copied_before: list[tuple[ObjectRef, ObjectState]] = field(default_factory=list)
    """Of `already`, the objects an interrupted apply copied in place, as they are now."""
    skip: str | None = None  # the reason, when the action is skipped
    final: bool = False  # a skip that is for good (lock, not applicable)


def in_place_class(action: PlannedAction) -> str | None:
    """The target storage class when the action changes classes by copying onto itself."""
    if action.action is ActionType.TRANSITION or (
        action.action is ActionType.ARCHIVE and action.dest_url is None
    ):
        return action.storage_class
    return None


def check_actions(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    *,
    now: datetime,
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
    concurrency: int = 16,
    protected_tags: Mapping[str, str] | None = None,
    restored: Collection[tuple[str, str]] = (),
) -> list[Check]:
    """One Check per action, in order, with storage asked in as few requests as it can.

    `protected_tags`: the plan's `protect.tags`. S3 changes neither an object's ETag nor
    its LastModified when its tags change, so a tag put on an object after its tags were
    read is seen only here: each object's tags are read again (one GetObjectTagging each,
    in parallel) and a protected one skips the artifact for good, as a lock does.

    `restored`: (root URL, key) of objects `govern restore` brought back since the plan
    was made; an action that would remove one again is skipped (see
    `journal.restored_since`)."""
    states = _current_states(actions, stores, concurrency)
    quarantined = _quarantine_copies(actions, states, stores, pending)
    tagged = _protected_now(actions, stores, protected_tags or {}, concurrency)
    rest = _rest_protected(actions, stores, protected_tags or {}, now, concurrency)
    checks = [
        _check_one(a, states, quarantined, pending, stores, now, tagged, rest.get(a.id))
        for a in actions
    ]
    if restored:
        for check in checks:
            _skip_restored(check, restored)
    return checks


def _skip_restored(check: Check, restored: Collection[tuple[str, str]]) -> None:
    """Skip an action that would remove an object restored since the plan was made."""
    action = check.action
    if check.skip is not None or not removes_objects(action):
        return
    root = action.artifact.root_url
    back = [o.key for o in check.todo if (root, o.key) in restored]
    if back:
        more = f" and {len(back) - 1} more" if len(back) > 1 else ""
        check.skip = (
            f"restored since the plan was made: {back[0]}{more} (govern restore); "
            "not removed again, plan again to decide on it"
        )
        check.todo, check.already, check.copied_before = [], [], []


_LEAVES_PART = (ActionType.STRIP, ActionType.TRANSITION, ActionType.ARCHIVE)
"""Actions that may act on only some of a folder artifact's objects."""


def _rest_protected(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    protected: Mapping[str, str],
    now: datetime,
    concurrency: int,
) -> dict[int, tuple[str, bool]]:
    """action id -> (why, for good), for an action on part of a folder artifact (a strip,
    a move of some of its files) while another of the artifact's objects now carries a
    protected tag or a lock: protection covers the whole artifact, as at plan time, and
    those objects are not the action's own, so they are looked up here (the artifact is
    listed, then each other object's tags and lock state read, where they can matter)."""
    partial = [a for a in actions if a.action in _LEAVES_PART and a.artifact.uri.endswith("/")]
    lockable = {
        root: _lock_enabled(stores(root)) for root in {a.artifact.root_url for a in partial}
    }
    partial = [a for a in partial if protected or lockable[a.artifact.root_url]]
    out: dict[int, tuple[str, bool]] = {}
    wanted: list[tuple[int, str, str]] = []  # (action id, root URL, key)
    for a in partial:
        root = a.artifact.root_url
        prefix = a.artifact.uri[len(root) :]
        acted = {o.key for o in a.objects}
        try:
            listed = [prefix + o.key for o in stores(a.artifact.uri).list() if not o.upload_id]
        except GovernanceError as exc:
            out[a.id] = (f"{a.artifact.uri} cannot be listed ({exc}): not acted on", False)
            continue
        wanted += [(a.id, root, key) for key in listed if key not in acted]

    def why(item: tuple[int, str, str]) -> tuple[str, bool] | None:
        _, root, key = item
        store = stores(root)
        try:
            if lockable[root]:
                lock = store.object_lock(key)
                state = ObjectState(key, 0, "", now, legal_hold=lock.legal_hold,
                                    lock_until=lock.retain_until, lock_mode=lock.mode)  # fmt: skip
                locked = _lock_reason(key, state, now)
                if locked is not None:
                    return f"{locked} (an object of the artifact the action leaves)", True
            if protected:
                return _tag_reason(key, store.object_tags(key), protected)
        except KeyNotFoundError:
            return None
        except GovernanceError as exc:
            return f"{key} cannot be read ({exc}): not acted on", False
        return None

    with ThreadPoolExecutor(max(1, min(concurrency, len(wanted) or 1))) as pool:
        answers = list(pool.map(why, wanted))
    for (action_id, _, _), answer in zip(wanted, answers, strict=True):
        if answer is not None and action_id not in out:
            out[action_id] = answer
    return out


def _lock_enabled(store: Store) -> bool:
    """Whether objects of the store's bucket may be locked (not known: they may)."""
    try:
        return bool(store.object_lock_enabled())
    except GovernanceError:
        return True


def _tag_reason(
    key: str, tags: Mapping[str, str], protected: Mapping[str, str]
) -> tuple[str, bool] | None:
    for name, value in sorted(protected.items()):
        if tags_match({name: value}, dict(tags)):
            return f"protected: {key} has protected tag {name}={tags[name]} now", True
    return None


def _protected_now(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    protected: Mapping[str, str],
    concurrency: int,
) -> dict[tuple[str, str], tuple[str, bool]]:
    """(root URL, key) -> why, for each object of the actions that carries a protected
    tag now (a skip for good, as a lock), or whose tags cannot be read now (what is not
    known is not acted on; a later apply may try again)."""
    if not protected:
        return {}
    wanted = [
        (a.artifact.root_url, o.key)
        for a in actions
        if a.action is not ActionType.ABORT_UPLOAD  # an unfinished upload has no tags
        for o in a.objects
    ]

    def why(item: tuple[str, str]) -> tuple[str, bool] | None:
        root, key = item
        try:
            tags = stores(root).object_tags(key)
        except KeyNotFoundError:
            return None  # vanished: the precondition check says so
        except GovernanceError as exc:
            return f"tags of {key} cannot be read ({exc}): not acted on", False
        return _tag_reason(key, tags, protected)

    with ThreadPoolExecutor(max(1, min(concurrency, len(wanted) or 1))) as pool:
        answers = list(pool.map(why, wanted))
    return {item: reason for item, reason in zip(wanted, answers, strict=True) if reason}


def _current_states(
    actions: Sequence[PlannedAction], stores: StoreFactory, concurrency: int = 16
) -> dict[tuple[str, str], ObjectState]:
    """(root URL, key) -> state now, for every object of the actions that has one."""
    by_root: dict[str, list[PlannedAction]] = defaultdict(list)
    for action in actions:
        if action.action is not ActionType.ABORT_UPLOAD:
            by_root[action.artifact.root_url].append(action)
    to_head: dict[str, set[str]] = defaultdict(set)
    found: dict[tuple[str, str], ObjectState] = {}
    for root, root_actions in by_root.items():
        store = stores(root)
        keys = {o.key for a in root_actions for o in a.objects}
        if len(keys) >= LIST_MIN_OBJECTS and _range_listable(store):
            states = _list_states(store, sorted(keys), concurrency)
            found.update({(root, k): st for k, st in states.items()})
            continue
        for action in root_actions:
            if _listable(action, store):
                found.update(_list_artifact(action, stores))
            else:
                to_head[root].update(o.key for o in action.objects)
    for root, head_keys in to_head.items():
        for key, state in stores(root).head(sorted(head_keys)).items():
            found[(root, key)] = state
    return found


def _range_listable(store: Store) -> bool:
    """An S3 store (a boto3 client behind it) on a bucket without versioning."""
    versioned = getattr(store, "versioning_enabled", None)
    return getattr(store, "_client", None) is not None and versioned is not None and not versioned()


def _list_states(store: Store, keys: Sequence[str], concurrency: int) -> dict[str, ObjectState]:
    """key -> state of each of the sorted `keys` that exists, from range listings.

    The keys are split into contiguous runs of at least LIST_RUN_KEYS keys (at most
    `concurrency` runs, listed in parallel). Where the wanted keys turn out to be sparse
    (a page answers fewer than LIST_MIN_OBJECTS of them), the rest of that run is asked
    with HEADs instead, so scattered keys cost no more requests than HEADs would.
    """
    from governance.apply.modes import _s3_parts
    from governance.storage.errors import translate

    client, bucket, prefix = _s3_parts(store)

    def run(part: Sequence[str]) -> tuple[dict[str, ObjectState], Sequence[str]]:
        try:
            return _list_run(client, bucket, prefix, part)
        except Exception as exc:
            raise translate(store.url, exc) from exc

    runs = max(1, min(concurrency, len(keys) // LIST_RUN_KEYS))
    size = -(-len(keys) // runs)
    parts = [keys[i : i + size] for i in range(0, len(keys), size)]
    found: dict[str, ObjectState] = {}
    rest: list[str] = []
    with ThreadPoolExecutor(len(parts)) as pool:
        for states, left in pool.map(run, parts):
            found.update(states)
            rest += left
    if rest:
        found.update(store.head(rest))
    return found


def _list_run(
    client: Any, bucket: str, prefix: str, keys: Sequence[str]
) -> tuple[dict[str, ObjectState], Sequence[str]]:
    """States of the sorted `keys` (relative to `prefix`) that exist, listing forward;
    and the keys left for HEADs once the listing proves sparse.

    Each ListObjectsV2 starts just before the next unanswered key (`StartAfter` = that key
    less its last character: smaller than it, and only keys sharing all of it but the last
    character can fall in between). A page answers every key up to its last one (absent
    there = gone), or every key left when it is the last page; a page that ends before the
    next key moves the start past its last key. S3 orders keys by UTF-8 bytes, the same
    order as Python's str comparison. The listing's Prefix is the longest one that
    every key of the run has (on moto, as on a store that filters before it sorts, a
    listing then costs the run's keys rather than the root's).
    """
    found: dict[str, ObjectState] = {}
    i, n = 0, len(keys)
    after = ""
    # Every key of the run shares its first and last keys' common prefix: listing only
    # under it answers the same, and spares the store every key outside the run's range.
    # Character by character on purpose: keys, not paths.
    shared = os.path.commonprefix([keys[0], keys[-1]]) if keys else ""  # noqa: RUF071
    narrowed = prefix + shared
    while i < n:
        after = max(after, (prefix + keys[i])[:-1])
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": narrowed}
        if after:
            request["StartAfter"] = after
        response = client.list_objects_v2(**request)
        contents = response.get("Contents") or []
        truncated = bool(response.get("IsTruncated")) and bool(contents)
        last = contents[-1]["Key"] if contents else ""
        page = {o["Key"]: o for o in contents}
        first = i
        while i < n and (not truncated or prefix + keys[i] <= last):
            o = page.get(prefix + keys[i])
            if o is not None:
                found[keys[i]] = ObjectState(
                    key=keys[i],
                    size=int(o.get("Size", 0)),
                    etag=str(o.get("ETag", "")).strip('"'),
                    last_modified=utc(o["LastModified"]),
                    storage_class=o.get("StorageClass") or "STANDARD",
                )
            i += 1
        if i < n and i - first < LIST_MIN_OBJECTS:
            return found, keys[i:]  # sparse here: HEADs are cheaper
        after = last
    return found, ()


def _listable(action: PlannedAction, store: Store) -> bool:
    versioned = getattr(store, "versioning_enabled", None)
    return (
        action.artifact.uri.endswith("/")
        and len(action.objects) >= LIST_MIN_OBJECTS
        and versioned is not None
        and not versioned()
    )


def _list_artifact(
    action: PlannedAction, stores: StoreFactory
) -> dict[tuple[str, str], ObjectState]:
    root = action.artifact.root_url
    prefix = action.artifact.uri[len(root) :]
    sub = stores(action.artifact.uri)
    return {
        (root, prefix + o.key): ObjectState(
            key=prefix + o.key,
            size=o.size,
            etag=o.etag,
            last_modified=o.last_modified,
            version_id=o.version_id,
            storage_class=o.storage_class,
        )
        for o in sub.list()
        if not o.upload_id
    }


def _quarantine_copies(
    actions: Sequence[PlannedAction],
    states: Mapping[tuple[str, str], ObjectState],
    stores: StoreFactory,
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
) -> dict[tuple[str, str], ObjectState]:
    """Quarantine copies of vanished objects that an interrupted apply was removing."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for action in actions:
        for obj in action.objects:
            row = pending.get((action.id, obj.key))
            if (
                row is not None
                and row["state"] == "pending"
                and row["quarantine_root"]
                and (action.artifact.root_url, obj.key) not in states
            ):
                wanted[row["quarantine_root"]].add(row["quarantine_key"])
    found: dict[tuple[str, str], ObjectState] = {}
    for qroot, keys in wanted.items():
        try:
            heads = stores(qroot).head(sorted(keys))
        except GovernanceError:
            continue  # cannot prove the copy: those objects count as stale
        found.update({(qroot, k): s for k, s in heads.items()})
    return found


def _check_one(
    action: PlannedAction,
    states: Mapping[tuple[str, str], ObjectState],
    quarantined: Mapping[tuple[str, str], ObjectState],
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
    stores: StoreFactory,
    now: datetime,
    tagged: Mapping[tuple[str, str], tuple[str, bool]] | None = None,
    rest: tuple[str, bool] | None = None,
) -> Check:
    check = Check(action)
    if action.action is ActionType.ABORT_UPLOAD:
        check.todo = list(action.objects)
        return check
    target_class = in_place_class(action)
    root = action.artifact.root_url
    if target_class is not None and not stores(root).supports_storage_classes:
        check.skip = f"not applicable: {root} has no storage classes"
        check.final = True
        return check
    problems: list[str] = []
    for obj in action.objects:
        state = states.get((root, obj.key))
        if state is None:
            if _removed_before(action, obj, pending, quarantined):
                check.already.append(obj)
            else:
                problems.append(f"{obj.key} vanished")
            continue
        lock = _lock_reason(obj.key, state, now)
        if lock is not None:
            check.skip, check.final = lock, True
            return check
        found = (tagged or {}).get((root, obj.key)) or rest
        if found is not None:
            check.skip, check.final = found
            return check
        if target_class is not None and (state.storage_class, state.size) == (
            target_class,
            obj.size,
        ):
            check.already.append(obj)  # copied onto itself by an interrupted apply
            check.copied_before.append((obj, state))
            continue
        change = _changed(obj, state)
        if change:
            problems.append(f"{obj.key} {change}")
        else:
            check.todo.append(obj)
    if problems:
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        check.skip = f"stale: {shown} since the plan was made"
        check.todo, check.already, check.copied_before = [], [], []
    return check


def _removed_before(
    action: PlannedAction,
    obj: ObjectRef,
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
    quarantined: Mapping[tuple[str, str], ObjectState],
) -> bool:
    row = pending.get((action.id, obj.key))
    if row is None:
        return False
    if row["state"] == "removed" or not row["quarantine_root"]:
        return True  # versioned or permanent: our delete went through
    copy = quarantined.get((row["quarantine_root"], row["quarantine_key"]))
    return copy is not None and copy.size == obj.size


def _lock_reason(key: str, state: ObjectState, now: datetime) -> str | None:
    if state.legal_hold:
        return f"legal hold: {key} is under a legal hold"
    if state.lock_until is not None and state.lock_until > now:
        mode = (state.lock_mode or "").lower() or "retention"
        return f"object lock: {key} is retained ({mode}) until {state.lock_until.isoformat()}"
    return None


def _changed(obj: ObjectRef, state: ObjectState) -> str | None:
    if state.size != obj.size:
        return f"changed size ({obj.size} -> {state.size} bytes)"
    if obj.etag and state.etag and state.etag != obj.etag:
        return "was rewritten (ETag differs)"
    if obj.version_id and state.version_id and state.version_id != obj.version_id:
        return "was re-uploaded (version differs)"
    return None
