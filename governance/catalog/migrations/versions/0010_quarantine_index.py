"""removed_objects.quarantine_root indexed: scans and plans leave out every quarantine used

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_removed_objects_quarantine", "removed_objects", ["quarantine_root"])


def downgrade() -> None:
    op.drop_index("ix_removed_objects_quarantine", table_name="removed_objects")
