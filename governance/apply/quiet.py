"""Removals from runs the plan read as quiet: stale once the run writes again.

A plan that removes from a failed or abandoned run rests on the run having stopped: a rule
for dead runs selected its checkpoints, its expiry counted from its last write, and
invariant 1 did not keep its newest checkpoint, since nothing would resume from it. The
saved plan records each such run with its last write (`catalog.quiet_runs`); before acting,
apply lists the run's folder (one listing per run of the batch: one request per 1,000 keys
on S3, a directory walk on a filesystem), and an object in it written after that last
write, and within the policy's `abandoned_after` of the plan's `as_of` (`live_after`:
training resumed, a job relaunched into the folder), makes every removal of the run
stale: "run runs/a/ (abandoned when the plan was made) was written since: runs/a/x at ...".

An object this very plan copies in place (a transition or an archive by class of the run's
other checkpoints, on S3) is rewritten by govern itself, after the plan was made: not a
write of the run's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from governance.apply.folders import folder_entries
from governance.apply.protection import Finding
from governance.apply.types import StoreFactory
from governance.errors import GovernanceError, NoSuchRootError
from governance.plan.types import PlannedAction, QuietRun, removes_objects

OwnCopies = Callable[[str, str], set[str]]
"""(root URL, run key) -> the keys under the run that the plan copies in place."""

SHOWN = 3
"""How many of the objects written since a reason names."""


@dataclass(frozen=True)
class QuietRuns:
    """A plan's quiet runs, by root URL and run key, and what apply needs to judge them."""

    by_root: Mapping[str, Mapping[str, QuietRun]]
    made_at: datetime | None = None  # when the plan was made
    own_copies: OwnCopies = field(default=lambda root, run: set())

    @classmethod
    def of(
        cls,
        runs: Mapping[str, Sequence[QuietRun]],
        made_at: datetime | None = None,
        own_copies: OwnCopies | None = None,
    ) -> QuietRuns:
        by_root = {url: {r.key: r for r in found} for url, found in runs.items() if found}
        return cls(by_root, made_at, own_copies or (lambda root, run: set()))

    def run_of(self, action: PlannedAction) -> QuietRun | None:
        """The (innermost) quiet run holding the action's artifact, if any."""
        runs = self.by_root.get(action.artifact.root_url)
        if not runs:
            return None
        key = action.artifact.uri[len(action.artifact.root_url) :]
        found = None
        cut = key.find("/")
        while cut != -1:
            run = runs.get(key[: cut + 1])
            if run is not None:
                found = run
            cut = key.find("/", cut + 1)
        return found


def written_since(
    actions: Sequence[PlannedAction],
    quiet: QuietRuns | None,
    stores: StoreFactory,
    concurrency: int = 16,
) -> dict[int, Finding | str]:
    """action id -> why each removal from a quiet run is not acted on: a stale problem
    (text: the run was written since), or a check not made (a `Finding`, not final: the
    run's folder could not be listed)."""
    if quiet is None or not quiet.by_root:
        return {}
    runs: dict[tuple[str, str], list[int]] = {}
    held: dict[tuple[str, str], QuietRun] = {}
    for action in actions:
        if not removes_objects(action):
            continue
        run = quiet.run_of(action)
        if run is not None:
            where = (action.artifact.root_url, run.key)
            runs.setdefault(where, []).append(action.id)
            held[where] = run
    if not runs:
        return {}
    places = list(runs)
    with ThreadPoolExecutor(max(1, min(concurrency, len(places)))) as pool:
        answers = list(pool.map(lambda p: _written(p[0], held[p], quiet, stores), places))
    out: dict[int, Finding | str] = {}
    for place, answer in zip(places, answers, strict=True):
        if answer is None:
            continue
        for action_id in runs[place]:
            out[action_id] = answer
    return out


def _written(
    root: str, run: QuietRun, quiet: QuietRuns, stores: StoreFactory
) -> Finding | str | None:
    """Why the run's removals are stale (what was written in it since), or why it could
    not be looked at, or None: nothing was."""
    try:
        listing = folder_entries(stores, root, run.key)
        own: set[str] | None = None
        since: list[tuple[str, datetime]] = []
        # (S3 gives times to the second: a copy made in the second the plan was made)
        made = quiet.made_at.replace(microsecond=0) if quiet.made_at is not None else None
        for key, when in listing:
            if when <= run.live_after:
                continue
            if made is not None and when >= made:
                if own is None:
                    own = quiet.own_copies(root, run.key)
                if key in own:
                    continue  # (this plan's own copy in place)
            since.append((key, when))
            if len(since) == SHOWN:
                break
    except NoSuchRootError:
        return None  # the run's folder is gone: nothing written in it
    except GovernanceError as exc:
        return (f"run {run.key} cannot be listed ({exc}): not acted on", False)
    if not since:
        return None
    shown = ", ".join(f"{key} at {when:%Y-%m-%d %H:%M:%S} UTC" for key, when in since)
    more = " (and more)" if len(since) == SHOWN else ""
    return (
        f"run {run.key} ({run.status} when the plan was made, last written "
        f"{run.last_write:%Y-%m-%d %H:%M:%S} UTC) has new writes: {shown}{more}"
    )
