"""approvals and audit_events (approval workflow, hash-chained audit log)

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from governance.catalog.tables import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("plan_id", sa.String(), sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("decision", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("comment", sa.String(), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_approvals_plan_id", "approvals", ["plan_id"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("event", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("plan_id", sa.String(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("prev_hash", sa.String(), nullable=False),
        sa.Column("hash", sa.String(), nullable=False),
    )
    op.create_index("ix_audit_events_plan_id", "audit_events", ["plan_id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_plan_id", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index("ix_approvals_plan_id", table_name="approvals")
    op.drop_table("approvals")
