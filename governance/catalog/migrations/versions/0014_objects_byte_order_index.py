"""objects by (root_id, key COLLATE "C") on a PostgreSQL database that does not sort text
as bytes (`en_US`, ICU): the folder ranges apply reads, and the key order plans read in,
read the whole table without it

Revision ID: 0014
Revises: 0013
"""

from alembic import op

from governance.catalog.engine import BYTE_ORDER_INDEX, byte_order_index

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    byte_order_index(op.get_bind())  # (nothing on SQLite, or where text sorts as bytes)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {BYTE_ORDER_INDEX}")
