"""Planning against the catalog: snapshot each scanned root, build the plan, save it.

The planner (`plan.build`) is pure; this module is the one place that feeds it from the
catalog (live objects streamed through classification, with metadata read through the
catalog's cache) and stores what it returns. It never writes to storage.

    plan = make_plan(engine, load_policy("retention.yaml"), as_of, actor="alice")
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from governance.catalog.bests import archived_bests
from governance.catalog.completions import seen_completed
from governance.catalog.derived import (
    CachedMetaReader,
    classify_stream,
    reader_without_cache_writes,
    recorded_attributes,
    refresh_metadata,
    refresh_object_attributes,
)
from governance.catalog.links import root_links
from governance.catalog.plans import new_plan_id, save_plan
from governance.catalog.queries import quarantines
from governance.catalog.removals import last_removal, recently_restored
from governance.catalog.roots import find_root, last_complete_scan
from governance.errors import ArgumentError, GovernanceError
from governance.model.types import Group
from governance.plan.build import RootSnapshot, build_plan
from governance.scan.targets import excluded_prefixes, resolve_roots
from governance.storage import typed_url

if TYPE_CHECKING:
    from governance.plan.explain import Explanation
    from governance.plan.types import Plan
    from governance.policy import Policy
    from governance.storage.base import Store

_ID_ATTEMPTS = 5


def root_snapshots(
    engine: Engine,
    policy: Policy,
    as_of: datetime,
    stores: Mapping[str, Store] | None = None,
    *,
    read_only: bool = False,
) -> list[RootSnapshot]:
    """One snapshot per policy root, its groups streamed lazily from the last complete scan.

    A root never scanned completely is an ArgumentError: planning on nothing would keep
    everything and say so silently. `read_only`: the catalog cannot be written (`explain`
    by a reader): metadata files the cache lacks are read and kept in memory, and tags
    and lock states it lacks stay not read (their artifacts protected, and said so).
    """
    options = policy.classify_options(as_of)
    tags = uses_tags(policy)
    used = quarantines(engine)  # every quarantine applies have used: never a root's data
    snapshots = []
    for spec in resolve_roots(policy, ()):
        url = spec.url
        root = find_root(engine, url)
        scan = last_complete_scan(engine, root.id) if root is not None and root.id else None
        if root is None or root.id is None or scan is None or scan.id is None:
            where = policy.source_path or "P"
            raise ArgumentError(
                f"root {url} has not been scanned; run govern scan --policy {where} first "
                "(govern plan scans unless given --no-scan)"
            )
        store = (stores or {}).get(url)
        reach = spec.connection()
        if read_only:  # (`explain` on a catalog this user may read but not write)
            needs = recorded_attributes(engine, root.id, url, tags=tags)
            reader = reader_without_cache_writes(
                engine, root.id, url, reach, options.metadata_max_bytes
            )
        else:
            # Read the metadata files the cache lacks, in parallel, first (a read, never a
            # change; a root out of reach is planned from the cache and a warning says so).
            refresh_metadata(engine, root.id, url, reach, store=store)
            # Then the tags and lock state protection needs and the catalog lacks (S3
            # roots: tags when the policy uses them, locks when the bucket has Object
            # Lock); what stays unread marks its objects, whose artifacts the planner
            # then protects.
            needs = refresh_object_attributes(engine, root.id, url, reach, store, tags=tags)
            reader = CachedMetaReader(engine, root.id, store, options.metadata_max_bytes)
        # runs earlier plans saw completed: an apply since may have removed the evidence
        root_options = replace(options, seen_completed=seen_completed(engine, root.id))
        # The quarantine inside a root is not its data: a catalog filled by `scan --root`
        # (which knows no policy) holds its copies, and planning them would delete them.
        stream = classify_stream(
            engine,
            root.id,
            root_options,
            reader,
            tags=needs.tags,
            lock=needs.lock,
            exclude=excluded_prefixes(
                url, policy, used, engine.url.render_as_string(hide_password=False)
            ),
        )
        snapshots.append(
            RootSnapshot(
                url=url,
                scan_id=scan.id,
                total_bytes=None,  # counted as the groups stream: no query of its own
                supports_storage_classes=url.startswith("s3://"),
                groups=_closing(stream, reader),
                tags_matter=needs.tags,
                object_lock=needs.lock,
                scanned_at=scan.started_at,
                versioning=_versioning(store),
                # what the root's links point at is protected (as of the same scan)
                links=tuple(root_links(engine, root.id)),
                restored=_restored(engine, url, policy, as_of),
                archived_bests=archived_bests(engine, root.id) if _archives_bests(policy) else {},
            )
        )
    return snapshots


def _archives_bests(policy: Policy) -> bool:
    """Whether some tier keeps `best` and archives it to another location."""
    return any(
        t.best_metric is not None and t.archive is not None and t.archive.url is not None
        for r in policy.rules
        for t in r.tiers or ()
    )


def _restored(
    engine: Engine, url: str, policy: Policy, as_of: datetime
) -> tuple[tuple[str, datetime, str], ...]:
    """What `govern restore` brought back at the root less than `protect.restored_for`
    before `as_of`, or since (the planner protects it: see `protect.protector_for`)."""
    keep_for = policy.protect.restored_for
    if not keep_for:
        return ()
    with engine.connect() as conn:
        return tuple(recently_restored(conn, url, as_of - keep_for))


def _versioning(store: Store | None) -> bool | None:
    """Whether the root's bucket has versioning Enabled, as the scan just asked (cached by
    the store); None when not known (no store at hand, not S3, or the question failed)."""
    ask = getattr(store, "versioning_enabled", None)
    if ask is None or not str(getattr(store, "url", "")).startswith("s3://"):
        return None
    try:
        return bool(ask())
    except GovernanceError:
        return None


def uses_tags(policy: Policy) -> bool:
    """Whether any protection or rule of the policy looks at objects' tags (`protect.tags`,
    a rule's `select.tags`). Reading tags costs a request per object, so `dedupe.select`
    joins this only when dedupe is planned (today the block is validated, not acted on)."""
    return bool(policy.protect.tags) or any(r.select.tags is not None for r in policy.rules)


def _closing(groups: Iterator[Group], reader: CachedMetaReader) -> Iterator[Group]:
    """`groups`, then the reader's connection back to the pool, when the stream ends or is
    dropped: classification holds the reader in a reference cycle, and left to the cyclic
    collector the connection stayed checked out (on PostgreSQL, idle in a transaction)."""
    try:
        yield from groups
    finally:
        reader.close()


def make_plan(
    engine: Engine,
    policy: Policy,
    as_of: datetime,
    *,
    actor: str,
    stores: dict[str, Store] | None = None,
) -> Plan:
    """Plan the policy against the catalog at `as_of`, save the plan, and return it.

    A refused plan (over a safety limit) is saved too, with status `refused`: the report
    shows what would have happened and why it was stopped.
    """
    if as_of.tzinfo is None:
        raise ArgumentError("as_of must be timezone-aware (UTC)")
    created_at = datetime.now(UTC)
    plan_id = new_plan_id(created_at)

    def build() -> Plan:
        roots = root_snapshots(engine, policy, as_of, stores)
        return build_plan(
            roots, policy, as_of, plan_id=plan_id, created_by=actor, created_at=created_at
        )

    plan = build()
    if _acted_tags_changed(engine, policy, plan, stores):
        plan = build()  # (once: what changed is read now, and protects what it covers)
    for attempt in range(_ID_ATTEMPTS):
        try:
            save_plan(engine, plan)
        except IntegrityError:
            # Two plans in the same second drew the same 16 random bits: draw again.
            if attempt == _ID_ATTEMPTS - 1:
                raise
            plan.plan_id = new_plan_id(created_at)
            continue
        _audit_new_plan(engine, plan)
        return plan
    raise AssertionError("unreachable")


def _acted_tags_changed(
    engine: Engine, policy: Policy, plan: Plan, stores: Mapping[str, Store] | None
) -> bool:
    """Whether the tags of an object of an artifact the plan acts on differ now from the
    catalog's (which then holds the new ones). S3 keeps an object's ETag, LastModified and
    version when its tags change, so tags read for an earlier plan can be stale: under a
    policy that uses tags, those of the acted-on artifacts are read again (invariant 2)."""
    from governance.catalog.derived import reread_acted_tags
    from governance.plan.types import ActionType

    if not uses_tags(policy) or not plan.actions:
        return False
    changed = 0
    for spec in resolve_roots(policy, ()):
        url = spec.url
        keys = {
            a.artifact.uri[len(url) :]
            for a in plan.actions
            if a.artifact.root_url == url and a.action is not ActionType.ABORT_UPLOAD
        }
        root = find_root(engine, url) if keys and url.startswith("s3://") else None
        if root is None or root.id is None:
            continue
        changed += reread_acted_tags(
            engine, root.id, url, keys, spec.connection(), (stores or {}).get(url)
        )
    return changed > 0


def _audit_new_plan(engine: Engine, plan: Plan) -> None:
    """The `plan` audit event: what was planned, by whom, and the fingerprint approvals bind to."""
    from governance.audit import record_now
    from governance.integrity import controls_digest

    s = plan.summary
    record_now(
        engine,
        "plan",
        actor=plan.created_by,
        plan_id=plan.plan_id,
        at=plan.created_at,
        payload={
            "fingerprint": plan.fingerprint,
            "status": plan.status.value,
            "as_of": plan.as_of,
            "policy_path": plan.policy_path,
            "policy_sha256": plan.policy_sha256,
            "actions": s.actions,
            "objects": s.objects,
            "bytes_deleted": s.bytes_deleted,
            "bytes_transitioned": s.bytes_transitioned,
            "bytes_archived": s.bytes_archived,
            "refusal": plan.refusal,
            # the frozen approval and apply rules, as `integrity` compares the row with them
            "controls_sha256": controls_digest(plan.controls),
        },
    )


def explain_uri(engine: Engine, policy: Policy, as_of: datetime, uri: str) -> Explanation:
    """Why the artifact at `uri` is kept or acted on, from the same snapshots a plan uses."""
    from sqlalchemy.exc import DBAPIError

    from governance.catalog.engine import is_read_only, may_not_write
    from governance.plan.explain import explain

    full = typed_url(uri)
    try:
        roots = root_snapshots(engine, policy, as_of, read_only=is_read_only(engine))
    except DBAPIError as exc:
        if not may_not_write(exc):  # (a role that may read the catalog, not write it)
            raise
        roots = root_snapshots(engine, policy, as_of, read_only=True)
    if not any(full.startswith(r.url) for r in roots):
        listed = ", ".join(r.url for r in roots)
        raise ArgumentError(f"{full} is under none of the policy's roots ({listed})")
    try:
        return explain(roots, policy, as_of, full)
    except ArgumentError as exc:
        root = max((r.url for r in roots if full.startswith(r.url)), key=len)
        with engine.connect() as conn:
            removal = last_removal(conn, root, full[len(root) :])
        if removal is None:
            raise
        raise ArgumentError(f"{exc}: {removed_by(full, removal)}") from None


def removed_by(uri: str, removal: dict[str, Any]) -> str:
    """What became of an artifact an apply removed, and the way back if there is one:
    "Why is my checkpoint gone?" is what `explain` is asked most after an apply."""
    plan, action, mode = removal["plan_id"], removal["action_id"], removal["mode"]
    when = removal["removed_at"]
    done = f"plan {plan} (action {action}) removed it" + (
        f" on {when:%Y-%m-%d %H:%M} UTC" if when is not None else ""
    )
    if removal["state"] == "purged":
        purged = removal["purged_at"]
        on = f" on {purged:%Y-%m-%d}" if purged is not None else ""
        return f"{done}; its quarantine copy was purged{on}: there is no way back"
    if mode == "permanent":
        return f"{done}, deleted for good (apply.delete_mode permanent): there is no way back"
    if removal["state"] == "pending":
        return f"{done} in an apply that did not finish; `govern apply {plan}` finishes it"
    how = (
        f"into quarantine until {removal['purge_after']:%Y-%m-%d}"
        if mode == "quarantine" and removal["purge_after"] is not None
        else "behind a delete marker"
        if mode == "versioned"
        else "into quarantine"
    )
    return f"{done}, {how}: `govern restore {plan} --uri {uri}` brings it back"
