"""Runs, agents, the transcript, the tool-call journal, ingested mail and events.

Revision ID: 0001
Revises: None
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_run_id_id"), ["run_id", "id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("workdir", sa.Text(), nullable=False),
        sa.Column("base_head", sa.String(length=64), nullable=True),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("budget_tokens", sa.BigInteger(), nullable=True),
        sa.Column("budget_usd", sa.Double(), nullable=True),
        sa.Column("owner_host", sa.String(length=255), nullable=True),
        sa.Column("owner_pid", sa.Integer(), nullable=True),
        sa.Column("owner_start_time", sa.BigInteger(), nullable=True),
        sa.Column("owner_since", sa.Double(), nullable=True),
        sa.Column("heartbeat_at", sa.Double(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )

    op.create_table(
        "agents",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("parent", sa.String(length=64), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=64), nullable=True),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("branch", sa.String(length=255), nullable=True),
        sa.Column("budget_tokens", sa.BigInteger(), nullable=True),
        sa.Column("budget_usd", sa.Double(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_agents_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "name", name=op.f("pk_agents")),
    )

    op.create_table(
        "turns",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("stop_reason", sa.String(length=32), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id", "agent"], ["agents.run_id", "agents.name"], name=op.f("fk_turns_run_id_agents")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turns")),
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_turns_run_id_agent_seq"), ["run_id", "agent", "seq"], unique=True
        )

    op.create_table(
        "mail",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("sender", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("turn_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("message", sa.JSON(), nullable=False),
        sa.Column("ingested_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], name=op.f("fk_mail_turn_id_turns")),
        sa.PrimaryKeyConstraint("run_id", "id", name=op.f("pk_mail")),
    )

    op.create_table(
        "tool_calls",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("input", sa.JSON(), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], name=op.f("fk_tool_calls_turn_id_turns")),
        sa.PrimaryKeyConstraint("run_id", "id", name=op.f("pk_tool_calls")),
    )
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tool_calls_run_id_status"), ["run_id", "status"], unique=False)

    op.create_table(
        "tool_processes",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("call_id", sa.String(length=128), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("start_time", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id", "call_id"],
            ["tool_calls.run_id", "tool_calls.id"],
            name=op.f("fk_tool_processes_run_id_tool_calls"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_processes")),
    )


def downgrade() -> None:
    op.drop_table("tool_processes")
    op.drop_table("tool_calls")
    op.drop_table("mail")
    op.drop_table("turns")
    op.drop_table("agents")
    op.drop_table("runs")
    op.drop_table("events")
