"""audit_head: the newest audit event, so a truncated log is detected

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    # An existing log's head is its newest event as it stands now.
    op.execute(
        "INSERT INTO audit_head (id, last_id, last_hash) "
        "SELECT 1, id, hash FROM audit_events WHERE id = (SELECT max(id) FROM audit_events)"
    )


def downgrade() -> None:
    op.drop_table("audit_head")
