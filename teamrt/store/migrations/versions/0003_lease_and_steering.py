"""The lease's fencing token, steering from other hosts, and tasks numbered per run.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_token", sa.BigInteger(), server_default="0", nullable=False))

    op.create_table(
        "steering",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("message", sa.JSON(), nullable=False),
        sa.Column("sent_at", sa.Double(), nullable=False),
        sa.Column("sent_from", sa.String(length=255), nullable=False),
        sa.Column("delivered_at", sa.Double(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_steering_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_steering")),
    )
    with op.batch_alter_table("steering", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_steering_run_id_delivered_at"), ["run_id", "delivered_at"])

    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("number", sa.Integer(), nullable=True))
    op.execute("UPDATE tasks SET number = id")  # stores so far hold one run each: ids are numbers
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.alter_column("number", existing_type=sa.Integer(), nullable=False)
        batch_op.create_index(batch_op.f("ix_tasks_run_id_number"), ["run_id", "number"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_run_id_number"))
        batch_op.drop_column("number")
    with op.batch_alter_table("steering", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_steering_run_id_delivered_at"))
    op.drop_table("steering")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("owner_token")
