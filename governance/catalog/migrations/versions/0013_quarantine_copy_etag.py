"""removed_objects.copy_etag: the quarantine copy's own ETag, which restore checks it by;
the (plan, action) index takes the key too, for the journal's updates object by object

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for rows of earlier applies: their copies are checked by size (and time) only
    op.add_column("removed_objects", sa.Column("copy_etag", sa.String(), nullable=True))
    op.drop_index("ix_removed_objects_plan", table_name="removed_objects")
    op.create_index(
        "ix_removed_objects_plan", "removed_objects", ["plan_id", "action_id", "key"]
    )


def downgrade() -> None:
    op.drop_index("ix_removed_objects_plan", table_name="removed_objects")
    op.create_index("ix_removed_objects_plan", "removed_objects", ["plan_id", "action_id"])
    with op.batch_alter_table("removed_objects") as batch:
        batch.drop_column("copy_etag")
