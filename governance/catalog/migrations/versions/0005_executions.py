"""executions, action_results, removed_objects and apply_locks (apply and restore)

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

from governance.catalog.tables import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "executions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("plan_id", sa.String(), sa.ForeignKey("plans.plan_id"), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("delete_mode", sa.String(), nullable=False),
        sa.Column("only_non_destructive", sa.Boolean(), nullable=False),
        sa.Column("actions_ok", sa.Integer(), nullable=False),
        sa.Column("actions_skipped", sa.Integer(), nullable=False),
        sa.Column("actions_failed", sa.Integer(), nullable=False),
        sa.Column("actions_done_before", sa.Integer(), nullable=False),
        sa.Column("objects_purged", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
    )
    op.create_index("ix_executions_plan", "executions", ["plan_id"])
    op.create_table(
        "action_results",
        sa.Column("execution_id", sa.Integer(), sa.ForeignKey("executions.id"), primary_key=True),
        sa.Column("action_id", sa.Integer(), primary_key=True),
        sa.Column("plan_id", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("artifact_uri", sa.String(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("objects", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_action_results_plan_action", "action_results", ["plan_id", "action_id"])
    op.create_table(
        "removed_objects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("plan_id", sa.String(), nullable=False),
        sa.Column("action_id", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("artifact_uri", sa.String(), nullable=False),
        sa.Column("root_url", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("etag", sa.String(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("quarantine_root", sa.String(), nullable=True),
        sa.Column("quarantine_key", sa.String(), nullable=True),
        sa.Column("marker_version_id", sa.String(), nullable=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("removed_at", UTCDateTime(), nullable=True),
        sa.Column("purge_after", UTCDateTime(), nullable=True),
        sa.Column("restored_at", UTCDateTime(), nullable=True),
        sa.Column("purged_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ix_removed_objects_plan", "removed_objects", ["plan_id", "action_id"])
    op.create_index("ix_removed_objects_purge", "removed_objects", ["state", "purge_after"])
    op.create_table(
        "apply_locks",
        sa.Column("plan_id", sa.String(), primary_key=True),
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("acquired_at", UTCDateTime(), nullable=False),
        sa.Column("heartbeat_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("apply_locks")
    op.drop_index("ix_removed_objects_purge", table_name="removed_objects")
    op.drop_index("ix_removed_objects_plan", table_name="removed_objects")
    op.drop_table("removed_objects")
    op.drop_index("ix_action_results_plan_action", table_name="action_results")
    op.drop_table("action_results")
    op.drop_index("ix_executions_plan", table_name="executions")
    op.drop_table("executions")
