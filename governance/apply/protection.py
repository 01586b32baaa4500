"""Protection that apply sees again just before acting: tags put on, and locks set,
since the plan was made.

S3 changes neither an object's ETag nor its LastModified when its tags change, so a
protected tag put on after the plan read the tags is seen only by reading them again; a
legal hold or a retention date likewise. Protection covers a whole artifact, as at plan
time: an action on part of a folder artifact (a strip, a move of some of its files) looks
at the files it leaves too. What is found is a `Finding`: for good (protected, locked), or
a read that failed (not acted on now; a later apply tries again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from governance.apply.types import StoreFactory
from governance.errors import GovernanceError
from governance.plan.selectors import tags_match
from governance.plan.types import ActionType, PlannedAction
from governance.storage.base import ObjectState, Store
from governance.storage.errors import KeyNotFoundError

Finding = tuple[str, bool]
"""Why an action may not run: (reason, final). Final: for good (a lock, a protected tag);
not final: a check that could not be made (a read that failed), a failure of the action."""


_LEAVES_PART = (ActionType.STRIP, ActionType.TRANSITION, ActionType.ARCHIVE)
"""Actions that may act on only some of a folder artifact's objects."""


def rest_protected(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    protected: Mapping[str, str],
    now: datetime,
    concurrency: int,
) -> dict[int, Finding]:
    """action id -> what was found, for an action on part of a folder artifact (a strip,
    a move of some of its files) while another of the artifact's objects now carries a
    protected tag or a lock: protection covers the whole artifact, as at plan time, and
    those objects are not the action's own, so they are looked up here (the artifact is
    listed, then each other object's tags and lock state read, where they can matter)."""
    partial = [a for a in actions if a.action in _LEAVES_PART and a.artifact.uri.endswith("/")]
    lockable = {
        root: _lock_enabled(stores(root)) for root in {a.artifact.root_url for a in partial}
    }
    partial = [a for a in partial if protected or lockable[a.artifact.root_url]]
    out: dict[int, Finding] = {}
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

    def why(item: tuple[int, str, str]) -> Finding | None:
        _, root, key = item
        store = stores(root)
        try:
            if lockable[root]:
                lock = store.object_lock(key)
                state = ObjectState(key, 0, "", now, legal_hold=lock.legal_hold,
                                    lock_until=lock.retain_until, lock_mode=lock.mode)  # fmt: skip
                locked = lock_reason(key, state, now)
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


def _tag_reason(key: str, tags: Mapping[str, str], protected: Mapping[str, str]) -> Finding | None:
    for name, value in sorted(protected.items()):
        if tags_match({name: value}, dict(tags)):
            return f"protected: {key} has protected tag {name}={tags[name]} now", True
    return None


def protected_now(
    actions: Sequence[PlannedAction],
    stores: StoreFactory,
    protected: Mapping[str, str],
    concurrency: int,
) -> dict[tuple[str, str], Finding]:
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

    def why(item: tuple[str, str]) -> Finding | None:
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


def lock_reason(key: str, state: ObjectState, now: datetime) -> str | None:
    if state.legal_hold:
        return f"legal hold: {key} is under a legal hold"
    if state.lock_until is not None and state.lock_until > now:
        mode = (state.lock_mode or "").lower() or "retention"
        return f"object lock: {key} is retained ({mode}) until {state.lock_until.isoformat()}"
    return None
