"""roots remember their layout and classification; plans freeze their approval and apply blocks

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("roots") as batch:
        batch.add_column(sa.Column("classify_options", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("classified_scan_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("controls", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.drop_column("controls")
    with op.batch_alter_table("roots") as batch:
        batch.drop_column("classified_scan_id")
        batch.drop_column("classify_options")
