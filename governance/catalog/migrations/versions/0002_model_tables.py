"""meta_cache, runs and artifacts (classification results)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "meta_cache",
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("etag", sa.String(), primary_key=True),
        sa.Column("content", sa.LargeBinary(), nullable=True),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), nullable=False),
        sa.Column("scan_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("uri", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("status_reason", sa.String(), nullable=False),
        sa.Column("attributes", sa.JSON(), nullable=True),
        sa.Column("last_write", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("objects", sa.Integer(), nullable=False),
        sa.Column("checkpoints", sa.Integer(), nullable=False),
        sa.Column("best_checkpoint", sa.String(), nullable=True),
    )
    op.create_index("ix_runs_root_key", "runs", ["root_id", "key"], unique=True)
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("root_id", sa.Integer(), sa.ForeignKey("roots.id"), nullable=False),
        sa.Column("scan_id", sa.Integer(), nullable=False),
        sa.Column("run_key", sa.String(), nullable=True),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("uri", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("layout", sa.String(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("completeness_reason", sa.String(), nullable=False),
        sa.Column("strippable", sa.Boolean(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("objects", sa.Integer(), nullable=False),
        sa.Column("last_modified", sa.BigInteger(), nullable=False),
        sa.Column("components", sa.JSON(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.Column("note", sa.String(), nullable=False),
    )
    op.create_index("ix_artifacts_root_key", "artifacts", ["root_id", "key"], unique=True)
    op.create_index("ix_artifacts_run", "artifacts", ["root_id", "run_key"])


def downgrade() -> None:
    op.drop_table("artifacts")
    op.drop_table("runs")
    op.drop_table("meta_cache")
