"""build_plan: roots' classifications + policy + as_of -> a fingerprinted `Plan`. Pure.

Groups are consumed one at a time (see `decide.Decider`); only the actions and the
kept list the plan outputs are held. The output is sorted canonically (root URL, artifact
key, action order), so the same catalog, policy and `as_of` give the same plan whatever
order the groups and artifacts arrive in (invariant 6).

Example::

    plan = build_plan(
        [RootSnapshot("s3://b/", scan_id=7, total_bytes=10**12,
                      supports_storage_classes=True, groups=classify(...))],
        policy, as_of, plan_id="p-1", created_by="ana", created_at=now,
    )
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain, islice, pairwise, repeat
from operator import attrgetter, le, lt
from typing import Any

from governance.heap import no_settle, settled_collections
from governance.model.types import Group, RunStatus
from governance.plan.costs import GB, MIN_BILLABLE_BYTES, billable_bytes
from governance.plan.decide import Decider, Unmeasured
from governance.plan.fingerprint import fingerprint
from governance.plan.limits import refusal
from governance.plan.selectors import storage_class_of
from governance.plan.tiers import ArchivedRecord
from governance.plan.totals import Left, Totals, summarize
from governance.plan.types import (
    WHAT_IF_MARGIN,
    ActionType,
    BestArchived,
    CompletedRun,
    KeptArtifact,
    Plan,
    PlannedAction,
    PlanStatus,
    QuietRun,
    in_place_class,
    removes_objects,
)
from governance.policy.models import Policy
from governance.policy.units import format_duration
from governance.wording import counted

_COMPLETED = RunStatus.COMPLETED
_QUIET = (RunStatus.FAILED, RunStatus.ABANDONED)
"""Statuses a run has by having stopped: what a plan removes from it rests on that."""
_ACTION_ORDER = {t: i for i, t in enumerate(ActionType)}
"""Within one artifact: strip before archive (archive moves what the strip leaves)."""


@dataclass(frozen=True)
class RootSnapshot:
    """One root as the planner sees it: its URL, scan, size and classification stream."""

    url: str  # normalized root URL ending in '/', e.g. "s3://b/" or "file:///data/"
    scan_id: int
    total_bytes: int | None  # live bytes of the root (for max_delete_fraction); None: the
    # bytes of the objects `groups` streams (every live object lands in one artifact)
    supports_storage_classes: bool  # False on filesystems: class changes are not applicable
    groups: Iterable[Group]  # the root's classification, streamed run by run
    # What protection needed read for this root's objects (for the record: each object
    # not read is marked `unread` in `groups`, which is what the planner acts on): their
    # tags (the policy uses tags, the root has them) and lock state (Object Lock enabled).
    tags_matter: bool = False
    object_lock: bool = False
    scanned_at: datetime | None = None  # when the scan began (what it lists is from then on)
    versioning: bool | None = None  # the bucket's versioning is Enabled; None: not known
    # The root's symbolic links that point inside it, as its scan met them: (link key,
    # target key, a folder's ending in '/'); what they point at is protected.
    links: tuple[tuple[str, str], ...] = ()
    # What `govern restore` brought back at this root lately: (key, when, plan id), each
    # protected for `protect.restored_for` from its restore.
    restored: tuple[tuple[str, datetime, str], ...] = ()
    # By run key, the bests applied plans archived to another location, with their
    # (metric, mode): what is left of the run is compared with them (`archived_of_run`).
    archived_bests: Mapping[str, Sequence[ArchivedRecord]] = field(default_factory=dict)


def _action_sort_key(a: PlannedAction) -> tuple[str, str, int, str]:
    return (a.artifact.root_url, a.artifact.uri, _ACTION_ORDER[a.action], a.objects[0].key)


def _kept_sort_key(k: KeptArtifact) -> tuple[str, str]:
    return (k.artifact.root_url, k.artifact.uri)


def _in_plan_order(actions: list[PlannedAction]) -> bool:
    """Whether sorting by `_action_sort_key` (stable) would leave `actions` as they are."""
    return all(_follows(a, b) for a, b in pairwise(actions))


def _continues(actions: list[PlannedAction], start: int, new: list[PlannedAction]) -> bool:
    """Whether `actions`, in plan order before `start`, still are with `new` (= `actions[
    start:]`, one group's): a group's actions are on one root, so URIs that increase
    strictly settle it (compared in C); only a tie (strip and archive of one artifact)
    needs the full sort key."""
    if start and not _follows(actions[start - 1], new[0]):
        return False
    uris = [a.artifact.uri for a in new]
    if all(map(lt, uris, islice(uris, 1, None))):
        return True
    return all(map(_follows, new, islice(new, 1, None)))


def _kept_continues(kept: list[KeptArtifact], start: int) -> bool:
    """`_continues` for the kept list (sorted by `_kept_sort_key`, stable)."""
    if start and _kept_sort_key(kept[start - 1]) > _kept_sort_key(kept[start]):
        return False
    new = kept[start:]  # a slice: `islice` would walk the whole list up to `start`
    uris = [k.artifact.uri for k in new]
    if all(map(le, uris, islice(uris, 1, None))):
        return True
    keys = [_kept_sort_key(k) for k in new]
    return all(map(le, keys, islice(keys, 1, None)))


def _follows(a: PlannedAction, b: PlannedAction) -> bool:
    """Whether `b` may come right after `a` in plan order (`_action_sort_key`, stable).

    Groups arrive in key order almost always, so their actions do too: comparing
    neighbours (by artifact URI first, the sort key only on a tie of root and URI) is
    cheaper than building a key per action and sorting.
    """
    x, y = a.artifact, b.artifact
    if x.root_url == y.root_url and x.uri < y.uri:
        return True
    return _action_sort_key(a) <= _action_sort_key(b)


def _name_runs_apart(
    actions: list[PlannedAction],
    kept: list[KeptArtifact],
    run_keys: dict[tuple[str, str], set[str]],
) -> None:
    """Where runs of one root share a name (`runs/{run}-seed{seed}/`, or one name under
    two teams), each artifact of theirs names its run by the run's folder instead
    (`runs/r1-seed2`): every report groups by run, and merged under one name a reviewer
    saw one run lose steps another kept. Runs with a name of their own keep it."""
    clashing = {
        name: sorted(keys, key=len, reverse=True)  # the deepest run holding a key wins
        for name, keys in run_keys.items()
        if len(keys) > 1
    }
    if not clashing:
        return
    for ref in chain((a.artifact for a in actions), (k.artifact for k in kept)):
        if ref.run is None:
            continue
        keys = clashing.get((ref.root_url, ref.run))
        if keys is None:
            continue
        where = ref.uri[len(ref.root_url) :]
        for key in keys:
            if where.startswith(key):
                ref.run = key.rstrip("/") or ref.run  # (a run at the root keeps its name)
                break


def _versioning_notes(
    mode: str, versioning: dict[str, bool], removing: set[str], copying: Iterable[str] = ()
) -> list[str]:
    """What the bucket's versioning means for this plan's deletes, per root that has any:
    `versioned` deletes need it Enabled (apply refuses them otherwise), and quarantine on
    a versioned bucket keeps two copies of each object until lifecycle expires one; and
    for its class changes (`copying`: roots with transitions or archives in place): each
    is a copy onto itself, whose old version stays, billed in its old class."""
    notes = [
        f"root {url}: the bucket keeps versions: a transition or archive in place copies "
        "each object onto itself, and the old version stays as a noncurrent version in its "
        "old class until the bucket's lifecycle expires noncurrent versions, so the plan "
        "saves less than shown until then"
        for url in sorted(copying)
        if versioning.get(url)
    ]
    for url in sorted(removing):
        enabled = versioning.get(url)
        if enabled is False and mode == "versioned":
            notes.append(
                f"root {url}: apply.delete_mode is versioned but the bucket's versioning is "
                "not Enabled: apply refuses this plan's deletes until it is (there would be "
                "no old version to restore)"
            )
        elif enabled and mode == "quarantine":
            notes.append(
                f"root {url}: the bucket keeps versions: a quarantined object also stays "
                "here as a noncurrent version until the bucket's lifecycle expires it, so "
                "the deletes save less than shown until then; delete_mode versioned "
                "removes it with a delete marker instead, without a copy"
            )
    return notes


S3_KEY_MAX_BYTES = 1024
"""S3's longest object key, in UTF-8 bytes."""
_REMOVES = frozenset({ActionType.DELETE, ActionType.STRIP, ActionType.DEDUPE})


def _keys_too_long_to_quarantine(
    policy: Policy, plan_id: str, actions: Iterable[PlannedAction]
) -> list[str]:
    """One note per S3 root with objects whose quarantine copy's key would pass S3's
    1,024 bytes (the copy's key adds the quarantine folder, the plan id and the root's
    bucket and prefix to the object's): apply fails their actions, and they stay."""
    from governance.apply.actions import quarantine_key

    limits: dict[str, int] = {}  # root -> the longest key (bytes) that can be quarantined
    found: dict[str, list[str]] = {}
    for a in actions:
        if a.action not in _REMOVES and not (a.action is ActionType.ARCHIVE and a.dest_url):
            continue
        root = a.artifact.root_url
        limit = limits.get(root)
        if limit is None:
            where = policy.apply.quarantine_url_for(root)
            if not where.startswith("s3://"):
                limit = limits[root] = S3_KEY_MAX_BYTES * 4  # (not a bucket: no such limit)
            else:
                folder = where.split("://", 1)[1].partition("/")[2]
                if folder and not folder.endswith("/"):
                    folder += "/"
                overhead = len((folder + quarantine_key(plan_id, root, "", where)).encode())
                limit = limits[root] = S3_KEY_MAX_BYTES - overhead
        for o in a.objects:
            # (a character is at most 4 bytes: most keys are settled without encoding)
            if len(o.key) * 4 > limit and len(o.key.encode()) > limit:
                found.setdefault(root, []).append(o.key)
    return [
        f"root {root}: {counted(len(keys), 'object')} (first {keys[0]}) with a key over "
        f"{limits[root]:,} bytes cannot be quarantined: the copy's key adds "
        f"{S3_KEY_MAX_BYTES - limits[root]:,} bytes under "
        f"{policy.apply.quarantine_url_for(root)} and S3 keys are at most "
        f"{S3_KEY_MAX_BYTES:,}; apply fails their actions and leaves them (delete_mode "
        "versioned, on a bucket with versioning, removes them without a copy)"
        for root, keys in sorted(found.items())
    ]


def _unmeasured_note(root: str, rule: str, tier: str, metric: str, runs: list[Unmeasured]) -> str:
    """One note per root, rule, tier and metric: how many runs report no such metric, with
    the first of them and what it reports instead (often the same metric's other name)."""
    first = runs[0]
    named = f"run {first.run}" if first.run is not None else "checkpoints outside any run"
    instead = (
        f"its checkpoints report {', '.join(first.reported)}"
        if first.reported
        else "its checkpoints report no metric"
    )
    return (
        f"root {root}: tier {tier} (rule {rule}) keeps the best checkpoint by {metric}, but "
        f"no checkpoint of {counted(len(runs), 'run')} reports {metric} (e.g. {named}: {instead}); "
        "best keeps nothing there"
    )


def policy_controls(policy: Policy) -> dict[str, Any]:
    """The blocks that govern approval and apply, frozen into the plan."""
    return {
        "approval": policy.approval.model_dump(mode="json"),
        "apply": policy.apply.model_dump(mode="json"),
        # apply reads each object's tags again: a tag put on since is seen there only
        "protect_tags": dict(policy.protect.tags),
    }


WHAT_IF_NOTE = (
    "what-if: made as of {as_of}, after the time it was made; it is reported on, never "
    "approved or applied"
)

PAST_NOTE = (
    "root {root}: planned as of {as_of}, before its scan began: the catalog is as scanned, "
    "not as it was then, and objects written after {as_of} count as younger than "
    "protect.min_age (kept)"
)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


DEDUPE_NOT_PLANNED = (
    "dedupe: the block is validated, but content dedupe is not planned yet; this plan "
    "has no dedupe actions and leaves duplicate copies as the rules decide"
)


NOTICE_UNANNOUNCED = (
    "approval.mode notice: no one is notified (the notify block is validated, but "
    "notifications are not sent yet): unless rejected, this plan's actions can be applied "
    "{period} after it was made, with no approval; govern plans lists it meanwhile"
)


def build_plan(
    roots: Iterable[RootSnapshot],
    policy: Policy,
    as_of: datetime,
    *,
    plan_id: str,
    created_by: str,
    created_at: datetime,
) -> Plan:
    """Plan every root's groups under `policy` at `as_of`; never touches storage."""
    if as_of.tzinfo is None:
        raise ValueError("as_of must be timezone-aware (UTC)")
    with settled_collections() as settle:
        return _build(roots, policy, as_of, plan_id, created_by, created_at, settle)


def _tally_classes(group: Group, class_bytes: dict[str, int]) -> int:
    """Add the group's billed bytes per storage class (an empty class is STANDARD; an
    object under its class's minimum billable size counts as that size) to the tally;
    returns the group's bytes."""
    objects = list(chain.from_iterable(map(_OBJECTS, group.artifacts)))
    classes = set(map(_STORAGE_CLASS, objects))
    if len(classes) == 1:  # the usual case: sums taken in C
        sizes = list(map(_SIZE, objects))
        total = sum(sizes)
        if objects:
            cls = classes.pop() or "STANDARD"
            smallest = MIN_BILLABLE_BYTES.get(storage_class_of(cls), 0)
            billed = sum(map(max, sizes, repeat(smallest))) if smallest else total
            class_bytes[cls] = class_bytes.get(cls, 0) + billed
        return total
    total = 0
    for o in objects:
        size = o.size
        total += size
        cls = o.storage_class or "STANDARD"
        class_bytes[cls] = class_bytes.get(cls, 0) + billable_bytes(size, cls)
    return total


_OBJECTS = attrgetter("objects")
_STORAGE_CLASS = attrgetter("storage_class")
_SIZE = attrgetter("size")


def _build(
    roots: Iterable[RootSnapshot],
    policy: Policy,
    as_of: datetime,
    plan_id: str,
    created_by: str,
    created_at: datetime,
    settle: Callable[[], None] = no_settle,
) -> Plan:
    actions: list[PlannedAction] = []
    kept: list[KeptArtifact] = []
    scans: dict[str, int] = {}
    scanned_at: dict[str, datetime] = {}
    run_keys: dict[tuple[str, str], set[str]] = {}  # (root, run name) -> the runs' keys
    completed_runs: dict[str, list[CompletedRun]] = {}
    quiet_runs: dict[str, list[QuietRun]] = {}
    bests_archived: dict[str, list[BestArchived]] = {}
    versioning: dict[str, bool] = {}
    totals: dict[str, int] = {}
    deleted: dict[str, int] = {}
    moved: dict[str, int] = {}  # of `deleted`, archived to another location
    not_applicable: Counter[tuple[str, str, str]] = Counter()
    unmeasured: dict[tuple[str, str, str, str], list[Unmeasured]] = {}
    class_bytes: dict[str, int] = {}  # integers: the bill must not depend on input order
    running = Totals()  # the summary, valid while the actions stay in the order added
    left = Left()
    in_order = kept_in_order = True
    abandoned_after = policy.layout.run_status.abandoned_after
    for root in roots:
        scans[root.url] = root.scan_id
        if root.scanned_at is not None:
            scanned_at[root.url] = root.scanned_at
        if root.versioning is not None:
            versioning[root.url] = root.versioning
        removed = deleted.setdefault(root.url, 0)
        completed = completed_runs.setdefault(root.url, [])
        quiet = quiet_runs.setdefault(root.url, [])
        live = 0
        decider = Decider(
            policy,
            as_of,
            root.url,
            root.supports_storage_classes,
            root.links,
            root.restored,
            root.archived_bests,
        )
        bests = bests_archived.setdefault(root.url, [])
        for group in root.groups:
            live += _tally_classes(group, class_bytes)
            run = group.run
            if run is not None:
                run_keys.setdefault((root.url, run.name), set()).add(run.key)
            result = decider.decide(group)
            if result.bests:
                bests += result.bests
            if run is not None and run.status is _COMPLETED:
                completed.append(
                    CompletedRun(run.key, run.status_reason, run.last_write, result.final)
                )
            start, kept_start = len(actions), len(kept)
            for d in result.decisions:
                if d.actions:
                    actions += d.actions
                elif d.kept is None:
                    left.add(d.rule, d.ref, d.artifact.bytes, d.reason)
                    continue
                if d.kept is not None:
                    kept.append(d.kept)
            if len(actions) > start:
                new = actions[start:]
                if run is not None and run.status in _QUIET and any(map(removes_objects, new)):
                    alive = max(run.last_write, as_of - abandoned_after)
                    quiet.append(QuietRun(run.key, run.status.value, run.last_write, alive))
                in_order = in_order and _continues(actions, start, new)
                for i, a in enumerate(new, start + 1):
                    a.id = i
                away = running.moved
                removed += running.add(new)
                if running.moved != away:
                    moved[root.url] = moved.get(root.url, 0) + running.moved - away
            if kept_in_order and len(kept) > kept_start:
                kept_in_order = _kept_continues(kept, kept_start)
            for rule, what in result.not_applicable:
                not_applicable[(root.url, rule, what)] += 1
            for u in result.unmeasured:
                unmeasured.setdefault((root.url, u.rule, u.tier, u.metric), []).append(u)
            settle()
        deleted[root.url] = removed
        totals[root.url] = live if root.total_bytes is None else root.total_bytes
    _name_runs_apart(actions, kept, run_keys)
    if not in_order:
        actions.sort(key=_action_sort_key)
        for i, a in enumerate(actions, start=1):
            a.id = i
    if not kept_in_order:
        kept.sort(key=_kept_sort_key)
    notes = [
        f"root {root}: {what} (rule {rule}) is not applicable, the root has no storage "
        f"classes; {counted(n, 'artifact')} left as {'it is' if n == 1 else 'they are'}"
        for (root, rule, what), n in sorted(not_applicable.items())
    ]
    notes += [_unmeasured_note(*key, runs) for key, runs in sorted(unmeasured.items())]
    notes += [
        PAST_NOTE.format(root=url, as_of=_iso(as_of))
        for url, at in sorted(scanned_at.items())
        if as_of < at - WHAT_IF_MARGIN
    ]
    removing = {url for url, n in deleted.items() if n}  # (bytes removed: known per root)
    copying = (
        {a.artifact.root_url for a in actions if in_place_class(a) is not None}
        if any(versioning.values())
        else set()
    )
    notes += _versioning_notes(policy.apply.delete_mode, versioning, removing, copying)
    if policy.apply.delete_mode == "quarantine" and removing:
        notes += _keys_too_long_to_quarantine(policy, plan_id, actions)
    if policy.dedupe is not None:
        notes.append(DEDUPE_NOT_PLANNED)
    if policy.approval.mode == "notice":
        period = format_duration(policy.approval.notice_period)
        notes.append(NOTICE_UNANNOUNCED.format(period=period))
    # The roots' whole monthly bill, so the summary shows the bill before -> after.
    storage_cost = sum(policy.price(sc) * n / GB for sc, n in sorted(class_bytes.items()))
    refused = refusal(deleted, totals, policy.safety, moved)
    what_if = as_of > created_at + WHAT_IF_MARGIN
    if what_if:  # first, in words too: a refused one's status does not say it
        notes.insert(0, WHAT_IF_NOTE.format(as_of=as_of.isoformat().replace("+00:00", "Z")))
    if refused is not None:
        status = PlanStatus.REFUSED  # (the issue: over a limit is `refused`, what-if or not)
    elif what_if:
        # everything in it looked older than it is (min_age and grace did not hold): a
        # plan to read, never to approve or apply, even once its as_of has passed
        status = PlanStatus.WHAT_IF
    elif any(policy.requires_approval(a.action.value) for a in actions):
        status = PlanStatus.PENDING_APPROVAL
    else:
        status = PlanStatus.APPROVED
    summary = running.summary(storage_cost) if in_order else summarize(actions, storage_cost)
    summary.left = left.summaries()
    return Plan(
        plan_id=plan_id,
        fingerprint=fingerprint(actions, kept),
        as_of=as_of,
        created_at=created_at,
        created_by=created_by,
        policy_path=str(policy.source_path) if policy.source_path is not None else None,
        policy_sha256=policy.source_sha256,
        status=status,
        scans=scans,
        actions=actions,
        kept=kept,
        summary=summary,
        refusal=refused,
        notes=notes,
        controls=policy_controls(policy),
        completed_runs=completed_runs,
        quiet_runs={url: runs for url, runs in quiet_runs.items() if runs},
        bests_archived={url: found for url, found in bests_archived.items() if found},
    )
