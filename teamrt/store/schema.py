"""The run store's tables, as SQLAlchemy 2 declarative models.

Portable types only (strings, integers, doubles, booleans, JSON), so the same
models serve one SQLite file per run and one server database (``TEAMRT_DB``)
for all runs; every table carries ``run_id`` for the latter. Times are Unix
seconds. The models describe the schema and feed Alembic's autogenerate;
reads and writes go through SQLAlchemy Core on ``Model.__table__`` (see
``ops.py`` for why), and no ORM object leaves the store.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# SQLite only autoincrements an INTEGER PRIMARY KEY; servers get 64 bits.
Serial = BigInteger().with_variant(Integer(), "sqlite")
Name = String(64)


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class UsageTotals:
    """Token and dollar totals, kept on runs, agents and turns."""

    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_creation_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cost_usd: Mapped[float] = mapped_column(Double, default=0.0)


class Run(UsageTotals, Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(Name, primary_key=True)
    created_at: Mapped[float] = mapped_column(Double)
    task: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[float | None] = mapped_column(Double)
    workdir: Mapped[str] = mapped_column(Text)
    base_head: Mapped[str | None] = mapped_column(String(64))
    settings: Mapped[dict[str, Any]]
    budget_tokens: Mapped[int | None] = mapped_column(BigInteger)
    budget_usd: Mapped[float | None] = mapped_column(Double)
    # Ownership: the lock file says who holds the run on this machine; these
    # columns say it to readers and to owners on other machines.
    owner_host: Mapped[str | None] = mapped_column(String(255))
    owner_pid: Mapped[int | None] = mapped_column(Integer)
    owner_start_time: Mapped[int | None] = mapped_column(BigInteger)
    owner_since: Mapped[float | None] = mapped_column(Double)
    heartbeat_at: Mapped[float | None] = mapped_column(Double)
    # The lease's fencing token: every take of the run bumps it, and every write transaction of the
    # owner checks it (see ownership.py), so an owner that was taken over from can no longer write.
    owner_token: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # The writer's group commits so far: each bumps it, then writes it to the run directory's ``commits``
    # file (``integrity.py``); a file ahead of this column proves the database lost commits.
    commits: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class Agent(UsageTotals, Base):
    __tablename__ = "agents"

    run_id: Mapped[str] = mapped_column(Name, ForeignKey("runs.id"), primary_key=True)
    name: Mapped[str] = mapped_column(Name, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    parent: Mapped[str | None] = mapped_column(Name)
    depth: Mapped[int] = mapped_column(Integer, default=0)
    role: Mapped[str | None] = mapped_column(Name)
    definition: Mapped[dict[str, Any]]
    model: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    workspace: Mapped[str | None] = mapped_column(Text)
    branch: Mapped[str | None] = mapped_column(String(255))
    budget_tokens: Mapped[int | None] = mapped_column(BigInteger)
    budget_usd: Mapped[float | None] = mapped_column(Double)
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)


class Turn(UsageTotals, Base):
    """One message of an agent's transcript, in the Messages API's shape."""

    __tablename__ = "turns"
    __table_args__ = (
        ForeignKeyConstraint(["run_id", "agent"], ["agents.run_id", "agents.name"]),
        Index(None, "run_id", "agent", "seq", unique=True),
    )

    id: Mapped[int] = mapped_column(Serial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Name)
    agent: Mapped[str] = mapped_column(Name)
    seq: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[list[Any]]
    stop_reason: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Double)


class ToolCall(Base):
    """The journal of one tool call: pending -> running -> done | error | interrupted."""

    __tablename__ = "tool_calls"
    __table_args__ = (Index(None, "run_id", "status"),)

    run_id: Mapped[str] = mapped_column(Name, primary_key=True)
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent: Mapped[str] = mapped_column(Name)
    turn_id: Mapped[int] = mapped_column(Serial, ForeignKey("turns.id"))
    epoch: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    input: Mapped[dict[str, Any]]
    read_only: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16))
    result: Mapped[list[Any] | None] = mapped_column(JSON)
    is_error: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)


class ToolProcess(Base):
    """A process a tool call started; the start time tells it from a reused pid."""

    __tablename__ = "tool_processes"
    __table_args__ = (ForeignKeyConstraint(["run_id", "call_id"], ["tool_calls.run_id", "tool_calls.id"]),)

    id: Mapped[int] = mapped_column(Serial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Name)
    call_id: Mapped[str] = mapped_column(String(128))
    pid: Mapped[int] = mapped_column(Integer)
    start_time: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[float] = mapped_column(Double)


class Mail(Base):
    """A message an agent ingested, recorded in the transaction of the turn that ingested it."""

    __tablename__ = "mail"

    run_id: Mapped[str] = mapped_column(Name, primary_key=True)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    agent: Mapped[str] = mapped_column(Name)
    sender: Mapped[str] = mapped_column(Name)
    kind: Mapped[str] = mapped_column(String(32))
    turn_id: Mapped[int] = mapped_column(Serial, ForeignKey("turns.id"))
    message: Mapped[dict[str, Any]]
    ingested_at: Mapped[float] = mapped_column(Double)


class Task(Base):
    """An entry of the team's shared task list: open -> in_progress -> done.

    ``id`` is the row's key in the database; ``number`` is the task's number
    in its run (1, 2, ...), the one agents see, the same whether the run has
    a file of its own or shares a server database with other runs."""

    __tablename__ = "tasks"
    __table_args__ = (Index(None, "run_id", "status"), Index(None, "run_id", "number", unique=True))

    id: Mapped[int] = mapped_column(Serial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Name, ForeignKey("runs.id"))
    number: Mapped[int] = mapped_column(Integer)
    subject: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str | None] = mapped_column(Name)
    created_by: Mapped[str] = mapped_column(Name)
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)


class TaskBlocker(Base):
    """``task_id`` cannot be claimed until ``blocker_id`` is done."""

    __tablename__ = "task_blockers"

    task_id: Mapped[int] = mapped_column(Serial, ForeignKey("tasks.id"), primary_key=True)
    blocker_id: Mapped[int] = mapped_column(Serial, ForeignKey("tasks.id"), primary_key=True)


class MergeEntry(Base):
    """A finished worktree branch waiting for, or going through, the gated merge."""

    __tablename__ = "merge_queue"
    __table_args__ = (Index(None, "run_id", "status"),)

    id: Mapped[int] = mapped_column(Serial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Name, ForeignKey("runs.id"))
    agent: Mapped[str] = mapped_column(Name)
    branch: Mapped[str] = mapped_column(String(255))
    head: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    output: Mapped[str | None] = mapped_column(Text)
    merged_commit: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)


class Event(Base):
    """The append-only audit trail."""

    __tablename__ = "events"
    __table_args__ = (Index(None, "run_id", "id"),)

    id: Mapped[int] = mapped_column(Serial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Name)
    at: Mapped[float] = mapped_column(Double)
    agent: Mapped[str | None] = mapped_column(Name)
    kind: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]]


class Steering(Base):
    """A person's message (``send``, ``stop``, ``answer``) to a run owned on another host.

    The owner's supervisor turns each into mail in its own mailbox, woken by
    LISTEN/NOTIFY, and marks it delivered; the mailbox contract is unchanged.
    """

    __tablename__ = "steering"
    __table_args__ = (Index(None, "run_id", "delivered_at"),)

    id: Mapped[int] = mapped_column(Serial, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(Name, ForeignKey("runs.id"))
    message: Mapped[dict[str, Any]]
    sent_at: Mapped[float] = mapped_column(Double)
    sent_from: Mapped[str] = mapped_column(String(255))
    delivered_at: Mapped[float | None] = mapped_column(Double)
    outcome: Mapped[str | None] = mapped_column(Text)
