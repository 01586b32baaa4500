"""The catalog's tables (SQLModel on SQLAlchemy 2). Alembic migrations create them.

Object times are stored as integer microseconds since the epoch (UTC): portable across
SQLite and PostgreSQL, sortable, and cheap to bulk-write. Row times (scans, plans) use
`UTCDateTime`, which always hands back timezone-aware datetimes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    LargeBinary,
    TypeDecorator,
    false,
)
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel


class UTCDateTime(TypeDecorator[datetime]):
    """A DateTime that refuses naive values and returns aware UTC on every backend."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the catalog; use timezone-aware UTC")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _ts(**kw: Any) -> Any:
    return Field(sa_column=Column(UTCDateTime(), **kw))


def _json(**kw: Any) -> Any:
    return Field(default=None, sa_column=Column(JSON(), **kw))


class Root(SQLModel, table=True):
    __tablename__ = "roots"

    id: int | None = Field(default=None, primary_key=True)
    url: str = Field(unique=True, index=True)
    name: str | None = None
    created_at: datetime = _ts(nullable=False)
    classify_options: dict[str, Any] | None = _json(nullable=True)  # layout used by the last scan
    classified_scan_id: int | None = None  # the scan the stored runs/artifacts come from
    # The bucket's S3 Object Lock configuration as last asked (scan, or a plan with the
    # root at hand); None: never asked (or not an S3 root).
    object_lock: bool | None = None
    # The last complete scan after which every live object's tags / lock state were read
    # (`scan.attributes`): while it is still the last, there is nothing to look for.
    tags_read_scan_id: int | None = None
    locks_read_scan_id: int | None = None


class Scan(SQLModel, table=True):
    __tablename__ = "scans"

    id: int | None = Field(default=None, primary_key=True)
    root_id: int = Field(foreign_key="roots.id", index=True)
    actor: str
    started_at: datetime = _ts(nullable=False)
    finished_at: datetime | None = _ts(nullable=True)
    # superseded: a scan of the root that began later completed first (nothing written)
    status: str = "running"  # running | complete | failed | superseded
    source: str = "listing"  # listing | inventory
    objects_listed: int = 0
    bytes_listed: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False))
    objects_new: int = 0
    objects_changed: int = 0
    objects_gone: int = 0
    error: str | None = None


class StoredObject(SQLModel, table=True):
    """One key of one root. `gone_scan_id` is set when a complete scan no longer lists it.

    A live row (gone_scan_id IS NULL) was seen by every complete scan of its root since
    `first_scan_id`; `changed_scan_id` is the last scan that rewrote the row.
    """

    __tablename__ = "objects"
    __table_args__ = (
        # The one index: every query of objects goes by root and key; a second index
        # would cost a B-tree insert per listed object for no query that needs it.
        Index("ix_objects_root_key", "root_id", "key", "upload_id", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    root_id: int = Field(foreign_key="roots.id")
    key: str
    upload_id: str = ""
    size: int = Field(sa_column=Column(BigInteger(), nullable=False))
    etag: str
    last_modified: int = Field(sa_column=Column(BigInteger(), nullable=False))
    storage_class: str | None = None
    version_id: str | None = None
    checksum_algorithm: str | None = None
    # Read before planning when needed (`scan.attributes`), for the object as it is now:
    # a scan that rewrites the row (changed, revived) resets them to not read.
    tags: dict[str, str] | None = _json(nullable=True)  # NULL: not read; {}: read, none
    first_scan_id: int
    changed_scan_id: int
    gone_scan_id: int | None = None
    lock_read: bool = Field(
        default=False, sa_column=Column(Boolean(), nullable=False, server_default=false())
    )  # false: lock state not read (the three below mean nothing yet)
    lock_mode: str | None = None  # GOVERNANCE | COMPLIANCE
    lock_retain_until_us: int | None = Field(
        default=None, sa_column=Column(BigInteger(), nullable=True)
    )
    legal_hold: bool | None = None
    # When the content was last written, where govern's own copy in place (a transition,
    # an archive by class) gave the object a later `last_modified`: policy ages count from
    # the content, not the copy. NULL: `last_modified` is that time. Set by apply with the
    # copy's ETag and time, so the next scan finds the row unchanged; a scan that rewrites
    # the row (the object was written again) clears it.
    content_modified_us: int | None = Field(
        default=None, sa_column=Column(BigInteger(), nullable=True)
    )


class MetaCache(SQLModel, table=True):
    """Small metadata files (trainer_state.json, index files) read once per ETag."""

    __tablename__ = "meta_cache"

    root_id: int = Field(foreign_key="roots.id", primary_key=True)
    key: str = Field(primary_key=True)
    etag: str = Field(primary_key=True)
    content: bytes | None = Field(default=None, sa_column=Column(LargeBinary(), nullable=True))


class RunRow(SQLModel, table=True):
    """A run as the last classification of its root saw it."""

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_root_key", "root_id", "key", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    root_id: int = Field(foreign_key="roots.id")
    scan_id: int
    key: str
    uri: str
    name: str
    status: str
    status_reason: str
    attributes: dict[str, str] | None = _json(nullable=True)
    last_write: int = Field(sa_column=Column(BigInteger(), nullable=False))
    bytes: int = Field(sa_column=Column(BigInteger(), nullable=False))
    objects: int
    checkpoints: int
    best_checkpoint: str | None = None


class ArtifactRow(SQLModel, table=True):
    """An artifact as the last classification of its root saw it."""

    __tablename__ = "artifacts"
    __table_args__ = (
        Index("ix_artifacts_root_key", "root_id", "key", unique=True),
        Index("ix_artifacts_run", "root_id", "run_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    root_id: int = Field(foreign_key="roots.id")
    scan_id: int
    run_key: str | None = None
    key: str
    uri: str
    kind: str
    layout: str
    step: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    complete: bool
    completeness_reason: str
    strippable: bool
    bytes: int = Field(sa_column=Column(BigInteger(), nullable=False))
    objects: int
    last_modified: int = Field(sa_column=Column(BigInteger(), nullable=False))
    components: dict[str, int] | None = _json(nullable=True)
    metrics: dict[str, float] | None = _json(nullable=True)
    note: str = ""


def datetime_from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class PlanRow(SQLModel, table=True):
    """A saved plan's header. Actions and kept artifacts live in their own tables."""

    __tablename__ = "plans"

    plan_id: str = Field(primary_key=True)
    fingerprint: str
    status: str = Field(index=True)
    as_of: datetime = _ts(nullable=False)
    created_at: datetime = _ts(nullable=False)
    created_by: str
    policy_path: str | None = None
    policy_sha256: str | None = None
    scans: dict[str, int] | None = _json(nullable=False)  # root URL -> scan id
    summary: dict[str, Any] | None = _json(nullable=False)
    refusal: str | None = None
    notes: list[str] | None = _json(nullable=False)
    controls: dict[str, Any] | None = _json(nullable=True)  # approval + apply blocks


class PlanActionRow(SQLModel, table=True):
    """One planned action. `objects` holds its object preconditions as compact JSON arrays."""

    __tablename__ = "plan_actions"

    plan_id: str = Field(foreign_key="plans.plan_id", primary_key=True)
    action_id: int = Field(primary_key=True)
    rule: str
    tier: str | None = None
    action: str
    destructive: bool
    artifact_uri: str
    artifact_kind: str
    artifact_run: str | None = None
    artifact_step: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    root_url: str
    storage_class: str | None = None
    dest_url: str | None = None
    reason: str
    bytes: int = Field(sa_column=Column(BigInteger(), nullable=False))
    object_count: int
    early_deletion_usd: float = 0.0
    request_cost_usd: float = 0.0
    monthly_cost_before_usd: float = 0.0
    monthly_cost_after_usd: float = 0.0
    objects: list[list[Any]] | None = _json(nullable=False)
    # µs since the epoch: `ArtifactRef.written` (runs with a checkpoint without a step)
    artifact_written: int | None = Field(
        default=None, sa_column=Column(BigInteger(), nullable=True)
    )


class PlanKeptRow(SQLModel, table=True):
    """One artifact a plan keeps (whole, stripped, archived, protected, ...) and why."""

    __tablename__ = "plan_kept"

    plan_id: str = Field(foreign_key="plans.plan_id", primary_key=True)
    seq: int = Field(primary_key=True)
    artifact_uri: str
    artifact_kind: str
    artifact_run: str | None = None
    artifact_step: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    root_url: str
    rule: str | None = None
    tier: str | None = None
    how: str
    reason: str
    artifact_written: int | None = Field(  # as plan_actions'
        default=None, sa_column=Column(BigInteger(), nullable=True)
    )
