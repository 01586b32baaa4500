"""Approval and audit tables: who approved or vetoed which plan, and the hash-chained log.

`approvals` rows are never updated or deleted: the plan's effective state is derived from
them (bound to the fingerprint each row carries), so a changed plan loses its approvals.

`audit_events` ids are assigned by `governance.audit` under the append lock (last id + 1),
not by a database sequence: the ids are gapless, so a deleted event shows as a gap, and a
second writer that somehow read the same last event fails on the primary key instead of
forking the chain.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column
from sqlmodel import Field, SQLModel

from governance.catalog.tables import UTCDateTime


class ApprovalRow(SQLModel, table=True):
    """One decision on one plan: `approve` or `reject`, by an identity, for a fingerprint."""

    __tablename__ = "approvals"

    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(foreign_key="plans.plan_id", index=True)
    decision: str  # approve | reject
    actor: str
    fingerprint: str
    comment: str | None = None
    at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class AuditEventRow(SQLModel, table=True):
    """One audit event; `hash` covers every other column and `prev_hash` (see audit.py)."""

    __tablename__ = "audit_events"

    id: int = Field(sa_column=Column(BigInteger(), primary_key=True, autoincrement=False))
    at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    event: str
    actor: str
    plan_id: str | None = Field(default=None, index=True)  # no FK: the log outlives plans
    payload: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON(), nullable=False))
    prev_hash: str
    hash: str


class AuditHeadRow(SQLModel, table=True):
    """The newest audit event, written in the same transaction as every append: a log
    whose newest events were deleted no longer ends where its head says (`verify`)."""

    __tablename__ = "audit_head"

    id: int = Field(default=1, primary_key=True)  # a single row
    last_id: int = Field(sa_column=Column(BigInteger(), nullable=False))
    last_hash: str
