"""Symbolic links made since the plan that point at what an action removes (local disk).

A plan keeps what a link inside its root points at (`plan.protect.LinkTargets`): a link
`runs/a/best -> checkpoint-500` says that someone wants that checkpoint. A link made (or
pointed elsewhere) after the plan's scan is seen only here. Before an artifact is removed,
apply reads the links in the folder that holds it, where such links sit (`best`,
`last.ckpt` beside the checkpoints): one directory read per folder and apply, no walk of
the root.
An artifact a link points at now is stale; the next plan keeps it. A link elsewhere in the
root, made since the plan, is not seen until the next scan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from governance.apply.types import StoreFactory
from governance.errors import GovernanceError
from governance.model.detectors.base import parent
from governance.plan.protect import LinkTargets
from governance.plan.types import PlannedAction, removes_objects

LinksRead = dict[tuple[str, str], list[tuple[str, str]]]
"""(root URL, folder) -> the links read there, kept for the rest of one apply: batches
after the first that meet the folder (20,000 residue files in one) do not read it again."""


def linked_now(
    actions: Sequence[PlannedAction], stores: StoreFactory, read: LinksRead | None = None
) -> dict[int, str]:
    """action id -> why, for each removal on local disk whose artifact a symbolic link in
    the folder holding it points at now ("the symbolic link runs/a/best points at it"),
    or why that folder could not be read (then it is not acted on, for now). `read`:
    folders read by earlier batches of the apply (added to)."""
    read = {} if read is None else read
    by_folder: dict[tuple[str, str], list[PlannedAction]] = defaultdict(list)
    for a in actions:
        root = a.artifact.root_url
        if root.startswith("file://") and removes_objects(a):
            by_folder[(root, parent(a.artifact.uri[len(root) :]))].append(a)
    found: dict[int, str] = {}
    for (root, folder), group in by_folder.items():
        links = read.get((root, folder))
        if links is None:
            links_in = getattr(stores(root), "links_in", None)
            if links_in is None:
                continue
            try:
                links = read[(root, folder)] = links_in(folder)
            except GovernanceError as exc:
                for a in group:
                    found[a.id] = f"the links in {root}{folder} cannot be read ({exc})"
                continue
        if not links:
            continue
        targets = LinkTargets(links)
        for a in group:
            key = a.artifact.uri[len(root) :]
            why = targets.reason_for(key, [o.key for o in a.objects])
            if why is not None:
                found[a.id] = why
    return found
