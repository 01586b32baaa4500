"""object attributes: S3 Object Lock state per object, the bucket's Object Lock per root

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs, never a batch copy: `objects` may hold millions of rows, and
    # SQLite adds a column (even NOT NULL with a default) without rewriting the table.
    op.add_column(
        "objects", sa.Column("lock_read", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column("objects", sa.Column("lock_mode", sa.String(), nullable=True))
    op.add_column("objects", sa.Column("lock_retain_until_us", sa.BigInteger(), nullable=True))
    op.add_column("objects", sa.Column("legal_hold", sa.Boolean(), nullable=True))
    op.add_column("roots", sa.Column("object_lock", sa.Boolean(), nullable=True))
    op.add_column("roots", sa.Column("tags_read_scan_id", sa.Integer(), nullable=True))
    op.add_column("roots", sa.Column("locks_read_scan_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("roots") as batch:
        batch.drop_column("locks_read_scan_id")
        batch.drop_column("tags_read_scan_id")
        batch.drop_column("object_lock")
    with op.batch_alter_table("objects") as batch:
        batch.drop_column("legal_hold")
        batch.drop_column("lock_retain_until_us")
        batch.drop_column("lock_mode")
        batch.drop_column("lock_read")
