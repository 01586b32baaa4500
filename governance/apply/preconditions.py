"""Re-checking a plan's preconditions against storage, just before acting.

Every object of an action is compared with what the plan saw: size, ETag (or mtime
token) and version id. One changed, vanished or re-uploaded object makes the whole
artifact's action `stale` (never half-processed), and so does, for a delete of a whole
folder, an object added to the folder since the plan was made (`folders`), and, for a
removal from a run the plan read as failed or abandoned, a write in that run since
(`quiet`). Object Lock retention in the future or a legal hold skips the artifact too, for good: locks are never
bypassed. A check that cannot be made (a read or a listing that fails) fails the action:
it is not acted on, and a later apply tries it again.

Requests are batched. On an S3 bucket without versioning (hence without Object Lock,
which needs versioning, so a listing tells all a HEAD would) the keys of every action of
the batch are answered by range listings (`ranges.list_states`). Elsewhere: one `head`
call per root for many actions (S3Store runs HEADs in its thread pool), and for directory
artifacts on a store that can say it is unversioned one listing of the artifact's prefix.
An incomplete upload to abort is looked for in one listing of the root's uploads, and its
parts are listed again: one that grew since the plan is still being written (stale).

An object that is gone but has a `pending` removal row was removed by an apply that was
killed before it could record so: it counts as removed, not as stale (for quarantine,
only when its quarantine copy is there). When the rest of such an action is skipped all
the same (another of its objects changed since the plan), those objects are kept in
`Check.removed_before`, for the executor to record as removed (restorable), and the
reason says the action was partly carried out.

An object of a transition (or archive by class) found in the target class already is done
only when it is what an interrupted apply's copy would leave (`_copied_before`), or is
unchanged since the plan; anything else there is a changed object.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from governance.apply.folders import (
    KnownBefore,
    folder_of,
    new_objects,
    removes_whole_folder,
    unplanned,
)
from governance.apply.kept import HeldAtPlan, KeptFile, kept_files
from governance.apply.links import LinksRead, linked_now
from governance.apply.modes import s3_parts
from governance.apply.protection import Finding, lock_reason, protected_now, rest_protected
from governance.apply.quiet import QuietRuns, written_since
from governance.apply.ranges import (
    LIST_MIN_OBJECTS,
    Listed,
    list_states,
    range_listable,
)
from governance.apply.trackers import HeldFiles, trackers_of
from governance.apply.types import StoreFactory, open_destination
from governance.errors import GovernanceError
from governance.plan.types import (
    ActionType,
    ObjectRef,
    PlannedAction,
    in_place_class,
    removes_objects,
)
from governance.storage.base import ObjectState, Store

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
    failed: bool = False  # the check itself could not be made: the action fails, for now
    removed_before: list[ObjectRef] = field(default_factory=list)
    """Of a removal skipped all the same (stale, locked...), the objects an interrupted
    apply removed already: never forgotten, the executor records them as removed (so
    that `govern restore` brings them back) although the rest is not acted on."""

    def block(self, finding: Finding) -> Check:
        """Not acted on: for good, or (not final) a failure that a later apply retries."""
        self.skip_for(finding[0])
        self.final = finding[1]
        self.failed = not self.final
        return self

    def skip_for(self, reason: str) -> None:
        """Skip the whole action (nothing more of it is done), for `reason`. What an
        interrupted apply removed of it already is kept in `removed_before`, and the
        reason says so: the action was partly carried out, the rest is skipped."""
        if self.already and removes_objects(self.action):
            self.removed_before = [*self.removed_before, *self.already]
        self.skip = _partly(reason, len(self.removed_before), len(self.action.objects))
        self.todo, self.already, self.copied_before = [], [], []


def _partly(reason: str, removed: int, total: int) -> str:
    """`stale: partly carried out by an interrupted apply (6 of 7 objects removed
    already: recorded as removed, `govern restore` brings them back); the rest skipped:
    K was rewritten (ETag differs) since the plan was made`."""
    if not removed:
        return reason
    done = (
        f"partly carried out by an interrupted apply ({removed:,} of {total:,} objects "
        "removed already: recorded as removed, `govern restore` brings them back)"
    )
    if reason.startswith("stale: "):
        return f"stale: {done}; the rest skipped: {reason[len('stale: ') :]}"
    return f"{reason}; {done}, the rest skipped"


@dataclass(slots=True)
class Seen:
    """What storage says now about one batch of actions."""

    states: dict[tuple[str, str], ObjectState]  # (root URL, key) -> state, where it exists
    quarantined: dict[tuple[str, str], ObjectState] = field(default_factory=dict)
    unread_quarantine: dict[str, str] = field(default_factory=dict)  # root URL -> why
    tagged: dict[tuple[str, str], Finding] = field(default_factory=dict)
    rest: dict[int, Finding] = field(default_factory=dict)  # action id -> its other objects'
    new: dict[int, list[str] | str] = field(default_factory=dict)  # see folders.new_objects
    uploads: dict[str, dict[tuple[str, str], int | None]] = field(default_factory=dict)
    """root URL -> (key, upload id) of its incomplete uploads -> the bytes of their parts
    now (of those the plan aborts; None: not known), for roots that could say."""
    restored: Collection[tuple[str, str]] = ()  # (root URL, key): `_skip_restored` says so
    kept: dict[int, list[KeptFile]] = field(default_factory=dict)  # strip id -> what it keeps
    linked: dict[int, str] = field(default_factory=dict)  # action id -> a link to it now
    trackers: dict[int, list[KeptFile]] = field(default_factory=dict)  # see `trackers`
    copies_since: datetime | None = None
    """When the first earlier apply of the plan started (None: there was none): an object
    copied in place since then, as that copy would leave it, is done already."""
    quiet: dict[int, Finding | str] = field(default_factory=dict)  # see `quiet.written_since`


def check_actions(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    *,
    now: datetime,
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
    concurrency: int = 16,
    protected_tags: Mapping[str, str] | None = None,
    restored: Collection[tuple[str, str]] = (),
    known: KnownBefore | None = None,
    held: HeldAtPlan | None = None,
    held_files: HeldFiles | None = None,
    links_read: LinksRead | None = None,
    moved: Collection[tuple[str, str]] = (),
    copies_since: datetime | None = None,
    quiet: QuietRuns | None = None,
) -> list[Check]:
    """One Check per action, in order, with storage asked in as few requests as it can.

    `protected_tags`: the plan's `protect.tags`. S3 changes neither an object's ETag nor
    its LastModified when its tags change, so a tag put on an object after its tags were
    read is seen only here: each object's tags are read again (one GetObjectTagging each,
    in parallel) and a protected one skips the artifact for good, as a lock does.

    `restored`: (root URL, key) of objects `govern restore` brought back since the plan
    was made; an action that would remove one again is skipped (see
    `journal.restored_since`).

    `known`: which objects the catalog held when the plan was made; an object under the
    folder of a whole-folder delete that it names neither the action nor `known` is new
    (see `folders`; without `known`, every such object is).

    `held`: what the catalog held under a folder when the plan was made; a strip whose
    kept files (those it does not name) vanished or changed since is stale (see `kept`).
    `links_read`: the folders earlier batches read for symbolic links (see `links`).
    `moved`: (root URL, key) of what an earlier apply of the plan removed for the other
    actions of the strips' artifacts (an archive of what a strip keeps).
    `copies_since`: when the first earlier (interrupted) apply of the plan started, None
    when there was none; only such an apply can have copied an object in place (see
    `_copied_before`).

    `quiet`: the failed or abandoned runs the plan removes from; a removal from one that
    has been written since is stale (see `quiet`)."""
    started = {action_id for action_id, _ in pending}
    kept = kept_files(actions, held, started, moved)
    extra = {i: [f.key for f, _ in files] for i, files in kept.items()}
    trackers = trackers_of(actions, held_files)
    for i, files in trackers.items():
        extra[i] = [*extra.get(i, ()), *(f.key for f, _ in files)]
    states, listed = _current_states(actions, stores, concurrency, extra)
    seen = Seen(states, restored=restored, kept=kept, copies_since=copies_since, trackers=trackers)
    seen.quarantined, seen.unread_quarantine = _quarantine_copies(actions, states, stores, pending)
    seen.tagged = protected_now(actions, stores, protected_tags or {}, concurrency)
    seen.rest = rest_protected(actions, stores, protected_tags or {}, now, concurrency)
    seen.new = new_objects(actions, unplanned(actions, listed, stores, concurrency), known)
    seen.uploads = _uploads_now(actions, stores)
    seen.linked = linked_now(actions, stores, links_read)
    seen.quiet = written_since(actions, quiet, stores, concurrency)
    checks = [_check_one(a, seen, pending, stores, now) for a in actions]
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
        check.skip_for(
            f"stale: {back[0]}{more} restored since the plan was made (govern restore); "
            "not removed again, plan again to decide on it"
        )


def _current_states(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    concurrency: int = 16,
    extra: Mapping[int, Sequence[str]] | None = None,
) -> tuple[dict[tuple[str, str], ObjectState], dict[str, Listed]]:
    """(root URL, key) -> state now, for every object of the actions that has one, and
    for the `extra` keys of an action (action id -> keys of its root: what a strip
    keeps); and, by root, what listings saw of the folders that deletes remove whole."""
    extra = extra or {}
    by_root: dict[str, list[PlannedAction]] = defaultdict(list)
    for action in actions:
        if action.action is not ActionType.ABORT_UPLOAD:
            by_root[action.artifact.root_url].append(action)
    to_head: dict[str, set[str]] = defaultdict(set)
    found: dict[tuple[str, str], ObjectState] = {}
    listed: dict[str, Listed] = {}
    for root, root_actions in by_root.items():
        store = stores(root)
        keys = {o.key for a in root_actions for o in a.objects}
        keys.update(k for a in root_actions for k in extra.get(a.id, ()))
        folders = {folder_of(a) for a in root_actions if removes_whole_folder(a)}
        if len(keys) >= LIST_MIN_OBJECTS and range_listable(store):
            states, listed[root] = list_states(store, sorted(keys), concurrency, folders)
            found.update({(root, k): st for k, st in states.items()})
            continue
        for action in root_actions:
            if _listable(action, store):  # (the listing has the folder's other files too)
                found.update(_list_artifact(action, stores, listed.setdefault(root, Listed())))
                # but not a tracker beside the folder: asked for on its own
                to_head[root].update(k for k in extra.get(action.id, ()) if (root, k) not in found)
            else:
                to_head[root].update(o.key for o in action.objects)
                to_head[root].update(extra.get(action.id, ()))
    for root, head_keys in to_head.items():
        for key, state in stores(root).head(sorted(head_keys)).items():
            found[(root, key)] = state
    return found, listed


def _listable(action: PlannedAction, store: Store) -> bool:
    versioned = getattr(store, "versioning_enabled", None)
    return (
        action.artifact.uri.endswith("/")
        and len(action.objects) >= LIST_MIN_OBJECTS
        and versioned is not None
        and not versioned()
    )


def _list_artifact(
    action: PlannedAction, stores: StoreFactory, listed: Listed
) -> dict[tuple[str, str], ObjectState]:
    """The states of everything under the artifact's folder (noted in `listed`: the
    listing saw the folder whole)."""
    root = action.artifact.root_url
    prefix = folder_of(action)
    sub = stores(action.artifact.uri)
    found = {
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
    listed.spans.append((prefix, "", None))
    listed.keys.update(k for _, k in found)
    return found


def _uploads_now(
    actions: Sequence[PlannedAction], stores: StoreFactory
) -> dict[str, dict[tuple[str, str], int | None]]:
    """root URL -> (key, upload id) of the incomplete uploads under the aborts' common
    prefix now, one paginated ListMultipartUploads per root: an upload an earlier apply
    aborted is done, not to do; and, for each upload an abort names that is still there,
    the bytes of its parts now (one ListParts each: aborts are few). Roots that cannot
    say (not S3, the listing refused) are left out: their aborts are sent, as an abort of
    a gone upload is harmless."""
    by_root: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for a in actions:
        if a.action is ActionType.ABORT_UPLOAD:
            by_root[a.artifact.root_url] += [(o.key, o.upload_id) for o in a.objects]
    found: dict[str, dict[tuple[str, str], int | None]] = {}
    for root, named in by_root.items():
        parts = s3_parts(stores(root))
        if parts is None:
            continue
        client, bucket, prefix = parts
        keys = [key for key, _ in named]
        shared = prefix + os.path.commonprefix(keys)  # noqa: RUF071 (keys, not paths)
        try:
            pages = client.get_paginator("list_multipart_uploads").paginate(
                Bucket=bucket, Prefix=shared
            )
            listed = {
                (u["Key"][len(prefix) :], u["UploadId"])
                for page in pages
                for u in page.get("Uploads") or ()
            }
        except Exception:  # cannot say: the aborts are sent as before
            continue
        sizes: dict[tuple[str, str], int | None] = dict.fromkeys(listed)
        for upload in set(named) & listed:  # (one named and gone is done: not listed)
            sizes[upload] = _parts_size(client, bucket, prefix + upload[0], upload[1])
        found[root] = sizes
    return found


def _parts_size(client: Any, bucket: str, key: str, upload_id: str) -> int | None:
    """The bytes of an incomplete upload's parts now; None when they cannot be listed."""
    try:
        pages = client.get_paginator("list_parts").paginate(
            Bucket=bucket, Key=key, UploadId=upload_id
        )
        return sum(int(p.get("Size", 0)) for page in pages for p in page.get("Parts") or ())
    except Exception:  # (gone since, denied: not known; the abort is decided without it)
        return None


def _quarantine_copies(
    actions: Sequence[PlannedAction],
    states: Mapping[tuple[str, str], ObjectState],
    stores: StoreFactory,
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
) -> tuple[dict[tuple[str, str], ObjectState], dict[str, str]]:
    """Quarantine copies of vanished objects that an interrupted apply was removing; and
    the quarantine roots whose copies could not be read, with why."""
    wanted: dict[str, set[str]] = defaultdict(set)
    serves: dict[str, str] = {}  # quarantine root -> a root whose copies it holds
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
                serves.setdefault(row["quarantine_root"], action.artifact.root_url)
    found: dict[tuple[str, str], ObjectState] = {}
    unread: dict[str, str] = {}
    for qroot, keys in wanted.items():
        try:
            # (another bucket: opened with the endpoint of the root it serves)
            heads = open_destination(stores, qroot, serves[qroot]).head(sorted(keys))
        except GovernanceError as exc:
            unread[qroot] = str(exc)  # cannot prove the copies: those actions fail for now
            continue
        found.update({(qroot, k): s for k, s in heads.items()})
    return found, unread


def _check_one(
    action: PlannedAction,
    seen: Seen,
    pending: Mapping[tuple[int, str], Mapping[str, Any]],
    stores: StoreFactory,
    now: datetime,
) -> Check:
    check = Check(action)
    root = action.artifact.root_url
    if action.action is ActionType.ABORT_UPLOAD:
        return _check_aborts(check, seen.uploads.get(root))
    target_class = in_place_class(action)
    if target_class is not None and not stores(root).supports_storage_classes:
        return check.block((f"not applicable: {root} has no storage classes", True))
    problems: list[str] = []
    # A reason not to act found on one object is acted on once every object is looked
    # at: what an interrupted apply removed already is recorded all the same.
    blocked: Finding | None = None
    for obj in action.objects:
        state = seen.states.get((root, obj.key))
        if state is None:
            row = pending.get((action.id, obj.key)) or {}
            if row.get("quarantine_root") in seen.unread_quarantine:
                why = seen.unread_quarantine[row["quarantine_root"]]
                blocked = blocked or (f"quarantine copy of {obj.key} cannot be read ({why})", False)
            elif _removed_before(action, obj, pending, seen.quarantined):
                check.already.append(obj)
            else:
                problems.append(f"{obj.key} vanished")
            continue
        lock = lock_reason(obj.key, state, now)
        if lock is not None:
            blocked = blocked or (lock, True)
            continue
        found = seen.tagged.get((root, obj.key)) or seen.rest.get(action.id)
        if found is not None:
            blocked = blocked or found
            continue
        # a restored copy has a new time: `_skip_restored` names it as what it is
        change = None if (root, obj.key) in seen.restored else _changed(obj, state)
        if (
            target_class is not None
            and (state.storage_class, state.size)
            == (
                target_class,
                obj.size,
            )
            and (change is None or _copied_before(obj, state, seen.copies_since))
        ):
            check.already.append(obj)  # in its class already (copied onto itself)
            check.copied_before.append((obj, state))
            continue
        if change is None and target_class is not None:
            change = _class_moved(obj, state)
        if change:
            problems.append(f"{obj.key} {change}")
        else:
            check.todo.append(obj)
    if blocked is not None:
        return check.block(blocked)
    problems += _kept_changed(root, seen.kept.get(action.id, ()), seen)
    problems += _tracker_changed(root, seen.trackers.get(action.id, ()), seen)
    link = seen.linked.get(action.id)
    if link is not None and " cannot be read " in link:
        return check.block((f"{link}: not acted on", False))
    if link is not None:
        problems.append(f"{link} (a link made or pointed here)")
    new = seen.new.get(action.id)
    if isinstance(new, str):
        return check.block((new, False))
    if new:
        problems.append(_new_in_folder(new))
    resumed = seen.quiet.get(action.id)
    if isinstance(resumed, tuple):
        return check.block(resumed)
    if resumed:
        problems.append(resumed)
    if problems:
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        check.skip_for(f"stale: {shown} since the plan was made")
    return check


def _kept_changed(root: str, kept: Sequence[KeptFile], seen: Seen) -> list[str]:
    """What became of the files a strip keeps, since the plan was made."""
    problems = []
    for obj, changed_since in kept:
        state = seen.states.get((root, obj.key))
        if state is None:
            change: str | None = "vanished"
        elif changed_since:
            change = "was written again (the catalog saw it change after the plan's scan)"
        else:
            change = None if (root, obj.key) in seen.restored else _changed(obj, state)
        if change:
            problems.append(f"{obj.key}, which the strip keeps, {change}")
    return problems


def _tracker_changed(root: str, trackers: Sequence[KeptFile], seen: Seen) -> list[str]:
    """Trackers beside the checkpoint rewritten since the plan (see `trackers`); one
    gone is not judged."""
    problems = []
    for obj, changed_since in trackers:
        state = seen.states.get((root, obj.key))
        if state is None:
            continue
        change = (
            "was written again (the catalog saw it change after the plan's scan)"
            if changed_since
            else _changed(obj, state)
        )
        if change:
            problems.append(f"{obj.key}, which names the checkpoint the run resumes from, {change}")
    return problems


def _new_in_folder(keys: Sequence[str]) -> str:
    """`unplanned object K in the artifact (...)`; `unplanned objects K1, K2 and 3 more
    ...`: objects the plan's scan did not see as they are (written, restored, or listed
    again after a change since), under a folder the action removes whole."""
    how = "in the artifact (written, restored or listed anew)"
    if len(keys) == 1:
        return f"unplanned object {keys[0]} {how}"
    shown = ", ".join(keys[:2]) + (f" and {len(keys) - 2} more" if len(keys) > 2 else "")
    return f"unplanned objects {shown} {how}"


def _check_aborts(check: Check, uploads: Mapping[tuple[str, str], int | None] | None) -> Check:
    """An upload no longer listed was aborted (or completed) since: done, not to do. One
    whose parts hold more bytes than the plan saw is still being written: stale (an
    abort would throw away an upload in progress)."""
    grown: list[str] = []
    for obj in check.action.objects:
        if uploads is None:
            check.todo.append(obj)
            continue
        upload = (obj.key, obj.upload_id)
        if upload not in uploads:
            check.already.append(obj)
            continue
        now = uploads[upload]
        if now is not None and now > obj.size:
            grown.append(f"upload of {obj.key} grew since the plan ({obj.size:,} -> {now:,} bytes)")
        check.todo.append(obj)
    if grown:
        check.skip_for(f"stale: {'; '.join(grown)}: still being written")
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


COPY_CLOCK_SLACK = timedelta(seconds=5)  # storage's clock against this host's


def _copied_before(obj: ObjectRef, state: ObjectState, since: datetime | None) -> bool:
    """Whether `state`, in the action's target class and of the planned size, is what an
    interrupted apply's copy of `obj` onto itself would have left: only when an earlier
    apply of the plan ran (`since`: when the first one started), the object was written
    after it started (a copy is stamped anew), and it holds the planned content: the
    same ETag (a copy keeps a single-part object's), or, for an object the plan saw as a
    multipart upload (`<md5>-<parts>`, an ETag a copy does not keep), any ETag. Anything
    else in the target class (new content of the same size written there after the plan)
    is a changed object: its action is stale, and the new content never gets the old
    content's age in the catalog."""
    if since is None or state.last_modified < since - COPY_CLOCK_SLACK:
        return False
    if not obj.etag or not state.etag or obj.etag.startswith("mtime:"):
        return False
    return state.etag == obj.etag or "-" in obj.etag


def _changed(obj: ObjectRef, state: ObjectState) -> str | None:
    if state.size != obj.size:
        return f"changed size ({obj.size} -> {state.size} bytes)"
    if obj.etag and state.etag and state.etag != obj.etag:
        if obj.etag.startswith("mtime:"):  # a filesystem: the token is the modification time
            return "was written again (modification time differs)"
        return "was rewritten (ETag differs)"
    if obj.version_id and state.version_id and state.version_id != obj.version_id:
        return "was re-uploaded (version differs)"
    if not state.etag.startswith("mtime:") and _second(state.last_modified) != _second(
        obj.class_since or obj.last_modified
    ):
        # the same bytes put again: same size and ETag, a new time (on a versioned bucket
        # a new version too); the plan judged the old one's age (protect.min_age, expiry)
        return "was re-uploaded (modification time differs)"
    return None


def _class_moved(obj: ObjectRef, state: ObjectState) -> str | None:
    """For a copy onto itself (a transition, an archive by class): the object is in
    another class than the plan saw, moved since (a bucket lifecycle rule keeps its ETag
    and time). Copied on, it left GLACIER_IR for the warmer STANDARD_IA the plan named,
    a rewrite nobody approved, with a retrieval and an early-deletion charge."""
    planned = obj.storage_class or "STANDARD"
    now = state.storage_class or "STANDARD"
    if planned == now:
        return None
    return f"was moved from {planned} to {now} (by a lifecycle rule?)"


def _second(moment: datetime) -> int:
    """Whole seconds since the epoch: a listing gives milliseconds, a HEAD seconds (an
    mtime token, on filesystems, already carries the time and is compared as the ETag)."""
    return int(moment.timestamp())
