"""completed_runs: the runs saved plans saw completed, kept past the evidence an apply removes

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Filled by each saved plan (`catalog.completions`); empty until the next one.
    op.create_table(
        "completed_runs",
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), primary_key=True),
        sa.Column("run_key", sa.String(), primary_key=True),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("last_write_us", sa.BigInteger(), nullable=False),
        sa.Column("plan_id", sa.String(), nullable=False),
        sa.Column("final_key", sa.String(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("completed_runs")
