"""Apply executions, per-action results, removed objects (the way back) and the apply lock.

- `executions`: one row per `govern apply` run of a plan (a dry run writes none).
- `action_results`: one committed row per action per execution, written as each batch
  finishes, so a killed apply resumes where it stopped and never repeats a done action.
- `removed_objects`: every object an apply removed (or is about to: state `pending`,
  written before the storage call), where it went (quarantine object, delete marker),
  and whether it was restored or purged since. `restore` and `purge` work from it.
- `apply_locks`: at most one apply per plan at a time (the primary key is the lock).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, Index
from sqlmodel import Field, SQLModel

from governance.catalog.tables import _ts


class ExecutionRow(SQLModel, table=True):
    """One apply run of one plan."""

    __tablename__ = "executions"
    __table_args__ = (Index("ix_executions_plan", "plan_id"),)

    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(foreign_key="plans.plan_id")
    actor: str
    host: str
    pid: int
    started_at: datetime = _ts(nullable=False)
    finished_at: datetime | None = _ts(nullable=True)
    status: str  # running | applied | partially_applied | interrupted | failed
    delete_mode: str
    only_non_destructive: bool = False
    actions_ok: int = 0
    actions_skipped: int = 0
    actions_failed: int = 0
    actions_done_before: int = 0
    objects_purged: int = 0
    error: str | None = None


class ActionResultRow(SQLModel, table=True):
    """The outcome of one action in one execution: ok, skipped or failed, with a reason."""

    __tablename__ = "action_results"
    __table_args__ = (Index("ix_action_results_plan_action", "plan_id", "action_id"),)

    execution_id: int = Field(foreign_key="executions.id", primary_key=True)
    action_id: int = Field(primary_key=True)
    plan_id: str
    action: str
    artifact_uri: str
    outcome: str  # ok | skipped | failed
    final: bool  # done for this plan: ok, or skipped as intended (lock, not applicable)
    reason: str
    objects: int
    bytes: int = Field(sa_column=Column(BigInteger(), nullable=False))
    finished_at: datetime = _ts(nullable=False)


class RemovedObjectRow(SQLModel, table=True):
    """One object an apply removed, and how to bring it back."""

    __tablename__ = "removed_objects"
    __table_args__ = (
        Index("ix_removed_objects_plan", "plan_id", "action_id", "key"),
        Index("ix_removed_objects_purge", "state", "purge_after"),
        # every quarantine location in use, read by each scan and plan (queries.quarantines)
        Index("ix_removed_objects_quarantine", "quarantine_root"),
    )

    id: int | None = Field(default=None, primary_key=True)
    plan_id: str
    action_id: int
    execution_id: int
    artifact_uri: str
    root_url: str
    key: str
    size: int = Field(sa_column=Column(BigInteger(), nullable=False))
    etag: str
    mode: str  # quarantine | versioned | permanent
    quarantine_root: str | None = None
    quarantine_key: str | None = None
    marker_version_id: str | None = None
    # the quarantine copy's own ETag on an object store, as apply made it (restore checks
    # the copy by it); None on local disk, and for rows of earlier releases
    copy_etag: str | None = None
    # the object's encryption when apply copied it into quarantine (S3: JSON [algorithm,
    # KMS key id, Bucket Key]), which restore gives back: the copy's own may be the
    # quarantine bucket's default; None on local disk, and for rows of earlier releases
    encryption: str | None = None
    state: str  # pending | removed | restored | purged
    removed_at: datetime | None = _ts(nullable=True)
    purge_after: datetime | None = _ts(nullable=True)
    restored_at: datetime | None = _ts(nullable=True)
    purged_at: datetime | None = _ts(nullable=True)


class ApplyLockRow(SQLModel, table=True):
    """Held while an execution runs; `heartbeat_at` lets a dead holder's lock be taken over."""

    __tablename__ = "apply_locks"

    plan_id: str = Field(primary_key=True)
    execution_id: int
    holder: str  # host:pid
    acquired_at: datetime = _ts(nullable=False)
    heartbeat_at: datetime = _ts(nullable=False)
