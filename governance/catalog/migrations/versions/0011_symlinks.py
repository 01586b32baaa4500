"""symlinks: each root's symbolic links that point inside it, as its last complete scan met them

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Empty until a root's next complete scan: `govern plan` scans first by default.
    op.create_table(
        "symlinks",
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), primary_key=True),
        sa.Column("link_key", sa.String(), primary_key=True),
        sa.Column("target_key", sa.String(), nullable=False),
        sa.Column("scan_id", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("symlinks")
