"""A per-run count of the writer's group commits, which the run directory's ``commits`` file follows.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN (SQLite takes one with a constant default): no copy of the table, which on SQLite
    # would rebuild ``runs`` under readers of a run being created
    op.add_column("runs", sa.Column("commits", sa.BigInteger(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("commits")
