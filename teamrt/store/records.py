"""What the store takes and gives: plain frozen dataclasses, never ORM objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

from teamrt.events import AgentKind, AgentStatus, EventKind, MergeStatus, RunStatus, TaskStatus

# The values the store takes, checked as it writes them: the types in ``teamrt.events``, as tuples.
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
AGENT_KINDS: tuple[AgentKind, ...] = get_args(AgentKind)
AGENT_STATUSES: tuple[AgentStatus, ...] = get_args(AgentStatus)
ROLES = ("user", "assistant", "compaction")  # compaction: the messages that replace all before it
TASK_STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
# A merge's attempts count its times through the queue: conflict and red go back to the agent.
MERGE_STATUSES: tuple[MergeStatus, ...] = get_args(MergeStatus)

# The tool-call journal (docs/architecture.md, Contracts): pending -> running -> done | error | interrupted.
# pending -> error is a call refused before it ran (denied, invalid input);
# pending -> done is a read-only call, which needs no "running" mark: it is run again either way;
# running -> running is a read-only call run again after a crash.
TOOL_TRANSITIONS: dict[str, tuple[str, ...]] = {
    "pending": ("running", "done", "error", "interrupted"),
    "running": ("running", "done", "error", "interrupted"),
}
TOOL_STATES = ("pending", "running", "done", "error", "interrupted")


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and dollars of one model call, or the total of many."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_creation_tokens + self.cache_read_tokens


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    pid: int
    start_time: int
    since: float


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: str
    created_at: float
    task: str
    status: RunStatus
    status_reason: str | None
    finished_at: float | None
    workdir: str
    base_head: str | None
    settings: dict[str, Any]
    budget_tokens: int | None
    budget_usd: float | None
    usage: Usage
    owner: Owner | None
    heartbeat_at: float | None
    owner_token: int = 0
    """The lease's fencing token: bumped by every take of the run; a write under an older one is refused."""
    commits: int = 0
    """The writer's group commits so far (see ``integrity.py``): the run directory's ``commits`` file
    ahead of it means the store lost commits."""


@dataclass(frozen=True, slots=True)
class AgentRecord:
    name: str
    kind: AgentKind
    parent: str | None
    depth: int
    role: str | None
    definition: dict[str, Any]
    model: str
    status: AgentStatus
    status_reason: str | None
    epoch: int
    workspace: str | None
    branch: str | None
    budget_tokens: int | None
    budget_usd: float | None
    usage: Usage
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool call the model asked for, journaled ``pending`` with its assistant turn."""

    id: str
    name: str
    input: dict[str, Any]
    read_only: bool


@dataclass(frozen=True, slots=True)
class IngestedMail:
    """A message taken into a user turn; recorded in that turn's transaction."""

    id: str
    sender: str
    kind: str
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FinishedCall:
    """A tool call's end, journaled in the same transaction as the turn carrying its result."""

    id: str
    status: str
    result: list[Any]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class NewEvent:
    kind: EventKind
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    id: int
    agent: str
    seq: int
    epoch: int
    role: str
    content: list[Any]
    stop_reason: str | None
    model: str | None
    usage: Usage
    created_at: float


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    pid: int
    start_time: int
    started_at: float


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    id: str
    agent: str
    turn_id: int
    epoch: int
    name: str
    input: dict[str, Any]
    read_only: bool
    status: str
    result: list[Any] | None
    is_error: bool
    created_at: float
    started_at: float | None
    finished_at: float | None
    processes: tuple[ProcessRecord, ...]


@dataclass(frozen=True, slots=True)
class MailRecord:
    id: str
    agent: str
    sender: str
    kind: str
    turn_id: int
    message: dict[str, Any]
    ingested_at: float


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: int
    subject: str
    description: str
    status: TaskStatus
    owner: str | None
    created_by: str
    blocked_by: tuple[int, ...]
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: int
    at: float
    agent: str | None
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MergeRecord:
    """One worktree agent's way through the merge queue (one row per agent; ``attempts`` counts)."""

    id: int
    agent: str
    branch: str
    head: str
    status: MergeStatus
    attempts: int
    output: str | None
    merged_commit: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class SteeringRecord:
    """A person's message to a run, left in the database by a host that cannot reach its mailbox."""

    id: int
    message: dict[str, Any]
    sent_at: float
    sent_from: str
    delivered_at: float | None
    outcome: str | None
    """``delivered``, or ``refused: why`` for a message the owner could not take; None while it waits."""
