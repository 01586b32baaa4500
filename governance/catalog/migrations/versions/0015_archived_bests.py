"""archived_bests: runs' best checkpoints that plans archived to another location

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Filled by each saved plan (`catalog.bests`); empty until the next one.
    op.create_table(
        "archived_bests",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), nullable=False),
        sa.Column("run_key", sa.String(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("plan_id", sa.String(), nullable=False),
        sa.Column("action_id", sa.Integer(), nullable=False),
    )
    op.create_index("ix_archived_bests_root_id", "archived_bests", ["root_id"])


def downgrade() -> None:
    op.drop_index("ix_archived_bests_root_id", table_name="archived_bests")
    op.drop_table("archived_bests")
