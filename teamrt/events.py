"""The names a run's records share: every event kind the store records, the two mailbox addresses that
are not agents, and the statuses and kinds of runs, agents, tasks and merges.

They are written by the runtime and read by the store, ``runs/`` and the TUI, so they live in a leaf that
imports nothing of teamrt. Each is a ``Literal`` type, so mypy checks every place that records an event
or names a status against this one list; the tuples the store checks values with at run time are derived
from the same types (``typing.get_args``), never spelled twice. The modules that record an event name its
kind as a ``Final`` constant (``runtime.losses.STORE_BEHIND``, ``sandbox.bwrap.SANDBOX_EVENT``), which
mypy reads as its literal. The meaning and data of each kind: docs/architecture.md, "Events".
"""

from __future__ import annotations

from typing import Final, Literal, get_args

SUPERVISOR: Final = "supervisor"
"""The supervisor's own mailbox: control mail comes to it (recorded as ``control`` events), and the notes
it sends agents come from it."""
USER: Final = "user"
"""The sender of a person's mail (teamrt stop, answer, send, the TUI): the only one the supervisor obeys."""

EventKind = Literal[
    # the run
    "run.created",
    "run.owner",
    "run.status",
    "run.resumed",
    "run.continued",
    "run.stalled",
    # its agents
    "agent.added",
    "agent.started",
    "agent.status",
    "agent.compacted",
    "agent.waited",
    "agent.prefix",
    "agent.raised",
    "agent.done",
    "agent.failed",
    "agent.stopped",
    "spawn",
    "spawn.failed",
    "spawn.forecast",
    # the task list and the todo lists
    "task.created",
    "task.claimed",
    "task.updated",
    "todos",
    # worktrees, the merge queue and the integration branch
    "worktree.created",
    "worktree.remade",
    "merge.queued",
    "merge.merging",
    "merge.merged",
    "merge.conflict",
    "merge.red",
    "merge.retried",
    "branch.restored",
    "branch.lost",
    # mail, steering and asks
    "control",
    "mail.quarantined",
    "mail.failed",
    "mail.kept_delivered",
    "steering.delivered",
    "ask",
    "ask.again",
    "ask.answered",
    # notifications: the run's budget near its end, the person's [notify] command failing
    "budget.near",
    "notify.failed",
    # the store itself
    "store.behind",
    # confinement and Claude Code hooks
    "sandbox",
    "protected.quarantined",
    "hook",
    # memory: a path-scoped rule given to an agent (teamrt.runtime.scopedrules)
    "memory.rule",
    # MCP servers
    "mcp.process",
    "mcp.started",
    "mcp.failed",
    "mcp.exited",
    "mcp.stopped",
    "mcp.refused",
    "mcp.notice",
    # what MCP servers ask of the client and tell it (teamrt.mcp.capabilities)
    "mcp.sampled",
    "mcp.elicited",
    "mcp.progress",
    "mcp.log",
    "mcp.tools",
    # a person's /mcp__<server>__<prompt> command expanded, or refused (teamrt.mcp.prompts)
    "mcp.prompt",
    # the simulator
    "sim.unplayed",
]
"""Every kind of event the store records."""
EVENT_KINDS: Final = get_args(EventKind)

RunStatus = Literal["running", "done", "failed", "stopped", "blocked"]
"""``blocked``: the team ended having done nothing, every call that would have done something refused."""
SpawnKind = Literal["fork", "worktree", "team"]
"""The agents an agent starts with ``spawn_agent``."""
AgentKind = Literal["lead", SpawnKind, "task"]
"""``task``: a Task call's agent, which ends when it answers."""
AgentStatus = Literal["pending", "running", "idle", "merging", "done", "failed", "stopped"]
AgentEnd = Literal["done", "failed", "stopped"]
"""How an agent's loop ends."""
TaskStatus = Literal["open", "in_progress", "done", "abandoned"]
"""``abandoned``: not done when the run ended (its owner had stopped, or nobody had claimed it)."""
MergeStatus = Literal["queued", "merging", "merged", "conflict", "red"]
"""A worktree branch in the merge queue: queued -> merging -> merged | conflict | red; conflict and red go
back to the agent, whose next finish queues it again."""

AGENT_ENDED: Final[dict[AgentEnd, EventKind]] = {
    "done": "agent.done",
    "failed": "agent.failed",
    "stopped": "agent.stopped",
}
"""The event an agent's loop records as it ends."""
MERGE_EVENTS: Final[dict[str, EventKind]] = {
    "queued": "merge.queued",
    "merging": "merge.merging",
    "merged": "merge.merged",
    "conflict": "merge.conflict",
    "red": "merge.red",
}
"""The event a merge's move to each ``MergeStatus`` records (a status the store has checked)."""
