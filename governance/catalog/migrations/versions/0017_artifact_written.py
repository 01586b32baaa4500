"""plan_actions / plan_kept .artifact_written: when an artifact was last written, for runs
whose checkpoints a step cannot order (reports order them by time, as the tiers do)

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plans saved before have none: their reports order such checkpoints by name.
    for table in ("plan_actions", "plan_kept"):
        op.add_column(table, sa.Column("artifact_written", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    for table in ("plan_actions", "plan_kept"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("artifact_written")
