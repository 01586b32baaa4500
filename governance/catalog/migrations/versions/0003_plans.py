"""plans, plan_actions and plan_kept (saved plans)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

from governance.catalog.tables import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.String(), primary_key=True),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("as_of", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("policy_path", sa.String(), nullable=True),
        sa.Column("policy_sha256", sa.String(), nullable=True),
        sa.Column("scans", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("refusal", sa.String(), nullable=True),
        sa.Column("notes", sa.JSON(), nullable=False),
    )
    op.create_index("ix_plans_status", "plans", ["status"])
    op.create_table(
        "plan_actions",
        sa.Column("plan_id", sa.String(), sa.ForeignKey("plans.plan_id"), primary_key=True),
        sa.Column("action_id", sa.Integer(), primary_key=True),
        sa.Column("rule", sa.String(), nullable=False),
        sa.Column("tier", sa.String(), nullable=True),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("destructive", sa.Boolean(), nullable=False),
        sa.Column("artifact_uri", sa.String(), nullable=False),
        sa.Column("artifact_kind", sa.String(), nullable=False),
        sa.Column("artifact_run", sa.String(), nullable=True),
        sa.Column("artifact_step", sa.BigInteger(), nullable=True),
        sa.Column("root_url", sa.String(), nullable=False),
        sa.Column("storage_class", sa.String(), nullable=True),
        sa.Column("dest_url", sa.String(), nullable=True),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("object_count", sa.Integer(), nullable=False),
        sa.Column("early_deletion_usd", sa.Float(), nullable=False),
        sa.Column("request_cost_usd", sa.Float(), nullable=False),
        sa.Column("monthly_cost_before_usd", sa.Float(), nullable=False),
        sa.Column("monthly_cost_after_usd", sa.Float(), nullable=False),
        sa.Column("objects", sa.JSON(), nullable=False),
    )
    op.create_table(
        "plan_kept",
        sa.Column("plan_id", sa.String(), sa.ForeignKey("plans.plan_id"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("artifact_uri", sa.String(), nullable=False),
        sa.Column("artifact_kind", sa.String(), nullable=False),
        sa.Column("artifact_run", sa.String(), nullable=True),
        sa.Column("artifact_step", sa.BigInteger(), nullable=True),
        sa.Column("root_url", sa.String(), nullable=False),
        sa.Column("rule", sa.String(), nullable=True),
        sa.Column("tier", sa.String(), nullable=True),
        sa.Column("how", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("plan_kept")
    op.drop_table("plan_actions")
    op.drop_index("ix_plans_status", table_name="plans")
    op.drop_table("plans")
