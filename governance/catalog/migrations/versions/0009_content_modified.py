"""objects.content_modified_us: when the content was written, past govern's own copies

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (nullable): SQLite adds it without rewriting `objects`.
    op.add_column("objects", sa.Column("content_modified_us", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("objects") as batch:
        batch.drop_column("content_modified_us")
