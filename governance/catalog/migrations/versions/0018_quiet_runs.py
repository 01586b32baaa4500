"""quiet_runs: the failed or abandoned runs a saved plan removes from, re-checked by apply

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Filled by each saved plan (`catalog.quiet_runs`); a plan saved before has none,
    # and apply checks its runs as it did.
    op.create_table(
        "quiet_runs",
        sa.Column("plan_id", sa.String(), primary_key=True),
        sa.Column("root_url", sa.String(), primary_key=True),
        sa.Column("run_key", sa.String(), primary_key=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("last_write_us", sa.BigInteger(), nullable=False),
        sa.Column("live_after_us", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("quiet_runs")
