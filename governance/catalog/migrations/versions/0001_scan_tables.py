"""roots, scans and objects

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from governance.catalog.tables import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "roots",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_roots_url", "roots", ["url"], unique=True)
    op.create_table(
        "scans",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("objects_listed", sa.Integer(), nullable=False),
        sa.Column("bytes_listed", sa.BigInteger(), nullable=False),
        sa.Column("objects_new", sa.Integer(), nullable=False),
        sa.Column("objects_changed", sa.Integer(), nullable=False),
        sa.Column("objects_gone", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
    )
    op.create_index("ix_scans_root_id", "scans", ["root_id"])
    op.create_table(
        "objects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("upload_id", sa.String(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("etag", sa.String(), nullable=False),
        sa.Column("last_modified", sa.BigInteger(), nullable=False),
        sa.Column("storage_class", sa.String(), nullable=True),
        sa.Column("version_id", sa.String(), nullable=True),
        sa.Column("checksum_algorithm", sa.String(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=True),
        sa.Column("first_scan_id", sa.Integer(), nullable=False),
        sa.Column("changed_scan_id", sa.Integer(), nullable=False),
        sa.Column("gone_scan_id", sa.Integer(), nullable=True),
    )
    op.create_index("ix_objects_root_key", "objects", ["root_id", "key", "upload_id"], unique=True)


def downgrade() -> None:
    op.drop_table("objects")
    op.drop_table("scans")
    op.drop_table("roots")
