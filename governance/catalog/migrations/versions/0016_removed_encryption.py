"""removed_objects.encryption: a quarantined object's encryption, which restore gives back

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Rows of earlier applies have none: restore names the quarantine copy's KMS key then.
    op.add_column("removed_objects", sa.Column("encryption", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("removed_objects") as batch:
        batch.drop_column("encryption")
