"""Whole-folder deletes: an object added to the folder since the plan makes it stale.

A delete of a folder artifact (a checkpoint directory, its URI ending in '/') names every
object the plan saw in it. An object under the folder that the plan does not name, and
that the catalog did not hold when the plan's scan of the root ran, was written since: the
folder is no longer what was reviewed, and removing the objects the plan names would leave
a folder that reads as an incomplete checkpoint. Such an action is skipped as stale
("unplanned object KEY in the artifact (written, restored or listed anew) since the plan
was made").

What is under each folder now comes from the range listings the precondition check made
anyway, where they saw the folder whole (`ranges.Listed`), else from one listing of the
folder (one request per 1,000 keys on S3, one directory walk on a filesystem): never a
request per object. An object the catalog held at the plan's scan is another artifact's
(a Lightning log folder holds the run's checkpoint files), not new.

Strips, transitions and archives act on the objects they name and leave the rest of the
folder as it is, so a file added beside them changes nothing they do: they are not
checked this way (a strip keeps the weights and metadata, and the new file beside them;
what it keeps is re-checked in `kept`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from governance.apply.modes import s3_parts
from governance.apply.ranges import Listed
from governance.apply.types import StoreFactory
from governance.errors import GovernanceError, NoSuchRootError
from governance.plan.types import ActionType, PlannedAction
from governance.storage import open_store

KnownBefore = Callable[[Sequence[tuple[str, str]]], set[tuple[str, str]]]
"""Of some (root URL, key) pairs, those the catalog held when the plan was made."""


def removes_whole_folder(action: PlannedAction) -> bool:
    """A delete of a folder artifact: the planner's deletes take every object the artifact
    had (an incomplete upload in it has an abort of its own), so after it nothing of the
    artifact should be left."""
    return action.action is ActionType.DELETE and action.artifact.uri.endswith("/")


def folder_of(action: PlannedAction) -> str:
    """The artifact's folder, relative to its root."""
    return action.artifact.uri[len(action.artifact.root_url) :]


def unplanned(
    actions: Sequence[PlannedAction],
    listed: Mapping[str, Listed],
    stores: StoreFactory,
    concurrency: int = 16,
) -> dict[int, list[str] | str]:
    """action id -> the keys under the folder of each whole-folder delete that the action
    does not name, or why the folder could not be listed (a check not made)."""
    found: dict[int, list[str] | str] = {}
    to_list: list[PlannedAction] = []
    for action in actions:
        if not removes_whole_folder(action):
            continue
        seen = listed.get(action.artifact.root_url)
        folder = folder_of(action)
        if seen is not None and seen.covers(folder):
            found[action.id] = seen.keys_under(folder)
        else:
            to_list.append(action)
    if to_list:
        with ThreadPoolExecutor(max(1, min(concurrency, len(to_list)))) as pool:
            listings = pool.map(lambda a: _listing(a, stores), to_list)
            found.update(zip([a.id for a in to_list], listings, strict=True))
    for action in actions:
        under = found.get(action.id)
        if isinstance(under, list) and under:
            named = {o.key for o in action.objects}
            found[action.id] = [k for k in under if k not in named]
    return found


def new_objects(
    actions: Sequence[PlannedAction],
    extra: Mapping[int, list[str] | str],
    known: KnownBefore | None,
) -> dict[int, list[str] | str]:
    """`extra` less the objects the catalog held when the plan was made (all of them are
    new when `known` is None)."""
    asked = [
        (a.artifact.root_url, key)
        for a in actions
        if isinstance(keys := extra.get(a.id), list)
        for key in keys
    ]
    held = known(asked) if asked and known is not None else set()
    out: dict[int, list[str] | str] = {}
    for a in actions:
        keys = extra.get(a.id)
        if isinstance(keys, str):
            out[a.id] = keys
        elif keys:
            new = [k for k in keys if (a.artifact.root_url, k) not in held]
            if new:
                out[a.id] = new
    return out


def _listing(action: PlannedAction, stores: StoreFactory) -> list[str] | str:
    """Every object's key under the action's folder now (root-relative), or why not."""
    try:
        return [
            key for key, _ in folder_entries(stores, action.artifact.root_url, folder_of(action))
        ]
    except NoSuchRootError:
        return []  # the folder is gone: nothing new in it
    except GovernanceError as exc:
        return f"{action.artifact.uri} cannot be listed ({exc}): not acted on"


def folder_entries(stores: StoreFactory, root_url: str, folder: str) -> list[tuple[str, datetime]]:
    """(key, last modified) of every object under `folder` of a root now, keys
    root-relative: on S3 with the root's own client (a store of its own per folder would
    be a new client each), elsewhere one listing of the folder. NoSuchRootError when the
    folder is gone, another GovernanceError when it cannot be listed."""
    from governance.storage.errors import translate

    root = stores(root_url)
    parts = s3_parts(root)
    if parts is None:
        # A local folder needs no settings: opened here, not kept by the factory (a
        # store per folder of a large plan would add up).
        uri = root_url + folder
        sub = open_store(uri) if uri.startswith("file://") else stores(uri)
        return [(folder + o.key, o.last_modified) for o in sub.list() if not o.upload_id]
    client, bucket, prefix = parts
    out: list[tuple[str, datetime]] = []
    request = {"Bucket": bucket, "Prefix": prefix + folder}
    try:
        for page in client.get_paginator("list_objects_v2").paginate(**request):
            contents = page.get("Contents") or ()
            out += [(o["Key"][len(prefix) :], o["LastModified"]) for o in contents]
    except Exception as exc:
        raise translate(str(getattr(root, "url", "")), exc) from exc
    return out
