"""The team's tools: spawn sub-agents, talk by mail, share a task list, shut down by handshake.

They are coordination, not side effects on the user's machine, so a team's
permissions allow them unless a rule denies them. Each call acts for the
agent named in its ``ToolContext``; the ``TeamServices`` protocol is the supervisor.
Two of them are Claude Code's: ``Task`` (a sub-agent that answers the call,
teamrt's spawn in Claude Code's form) and ``TodoWrite`` (``teamrt.tools.todo``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, get_args

from teamrt.events import SpawnKind
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema
from teamrt.tools.todo import TodoWrite

KINDS: tuple[SpawnKind, ...] = get_args(SpawnKind)
"""What ``spawn_agent`` starts. A ``Task`` call starts a fork, or a ``task``: one agent of a role, in its
caller's workspace, that ends when it answers."""
GENERAL_PURPOSE = "general-purpose"
"""Claude Code's sub-agent type for "no particular role": in teamrt, a fork."""


class TeamServices(Protocol):
    """What the team tools need from the supervisor."""

    async def spawn(
        self, parent: str, *, kind: str, role: str | None, directives: list[str], wait: bool
    ) -> str: ...

    def send(self, sender: str, to: str, body: str, *, kind: str = "message", summary: str = "",
             data: dict[str, Any] | None = None) -> str:  # fmt: skip
        """Deliver a message; a ``ToolError`` naming why when it cannot be (no such agent, or the disk
        refused it: ``not delivered: no space left on device (mailbox of X)``, with what happens to it)."""
        ...

    def broadcast(self, sender: str, body: str, summary: str) -> list[str]:
        """Deliver to every other live agent; a ``ToolError`` naming who has it and who has not when the
        disk refuses some."""
        ...

    async def create_task(self, agent: str, subject: str, description: str, blocked_by: list[int]) -> str: ...

    async def claim_task(self, agent: str, task_id: int) -> str: ...

    async def update_task(self, agent: str, task_id: int, status: str) -> str: ...

    def list_tasks(self) -> str: ...

    def accept_shutdown(self, agent: str, reason: str) -> None: ...

    def role_agents(self) -> Mapping[str, str]:
        """Each role of the team by name, with the name of its agent definition."""
        ...

    async def record_todos(self, agent: str, todos: list[dict[str, str]]) -> None: ...


_REQUIRED = object()


def _get(input: dict[str, Any], key: str, kind: type, default: Any = _REQUIRED) -> Any:
    """``input[key]``, checked to be a ``kind``; a missing required key is a ToolError."""
    if key not in input or input[key] is None:
        if default is _REQUIRED:
            raise ToolError(f"{key} is required")
        return default
    value = input[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(f"{key} must be a {kind.__name__}")
    return value


class _TeamTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only = False

    def __init__(self, team: TeamServices) -> None:
        self.team = team


class SpawnAgent(_TeamTool):
    name = "spawn_agent"
    description = (
        "Start sub-agents. kind 'fork': copies of you with your whole context, one per directive, for"
        " parallel investigation; they answer and end. kind 'worktree': an agent of the given role per"
        " directive, each in its own git worktree and branch cut from your committed HEAD; when it finishes,"
        " its work is committed and merged onto the run's integration branch once the team's gates pass"
        " (a conflict or a failing gate goes back to it to fix). kind 'team': a long-lived teammate of the"
        " given role, in your workspace, with its own context, reached by send_message. With wait true (the"
        " default for forks and worktree agents) this call returns when each child has answered: a fork's"
        " final answer, a worktree agent's answer once merged (or given up), a teammate's first answer (it"
        " stays available). Otherwise each child's end arrives later as mail."
    )
    input_schema = object_schema(
        {
            "kind": {"type": "string", "enum": list(KINDS)},
            "directives": {"type": "array", "items": {"type": "string"}, "description": "one per child"},
            "role": {"type": "string", "description": "for kinds 'worktree' and 'team': the role to start"},
            "wait": {"type": "boolean"},
        },
        "kind",
        "directives",
    )

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        kind = _get(input, "kind", str)
        if kind not in KINDS:
            raise ToolError(f"kind must be one of {', '.join(KINDS)}")
        directives = _get(input, "directives", list)
        if not directives or not all(isinstance(d, str) and d.strip() for d in directives):
            raise ToolError("directives must be a non-empty list of non-empty strings")
        wait = _get(input, "wait", bool, kind != "team")
        role = _get(input, "role", str, None)
        return ToolResult(
            await self.team.spawn(ctx.agent, kind=kind, role=role, directives=directives, wait=wait)
        )


class Task(_TeamTool):
    name = "Task"
    description = (
        "Hand a piece of work to a sub-agent with a context of its own; this call returns its final"
        " answer. subagent_type names one of the team's roles (listed in your system prompt): an agent of"
        f" that role works on the prompt in your workspace and ends when it answers. '{GENERAL_PURPOSE}'"
        " (or no subagent_type) starts a fork instead: a copy of you, with your whole context, given the"
        " prompt. A role's agent sees nothing but the prompt, so make it stand alone: the goal, the files"
        " involved, and what to report back. To start several at once, worktree agents on their own"
        " branches, or teammates that stay, use spawn_agent."
    )
    input_schema = object_schema(
        {
            "description": {"type": "string", "description": "What the sub-agent is for, in 3-5 words."},
            "prompt": {"type": "string", "description": "The work, for the sub-agent to do."},
            "subagent_type": {
                "type": "string",
                "description": f"A role of the team, or '{GENERAL_PURPOSE}' for a fork of you.",
            },
        },
        "description",
        "prompt",
    )

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        kind, role, prompt = task_spawn(input, self.team.role_agents())
        return ToolResult(
            await self.team.spawn(ctx.agent, kind=kind, role=role, directives=[prompt], wait=True)
        )


def task_spawn(input: dict[str, Any], roles: Mapping[str, str]) -> tuple[str, str | None, str]:
    """What a ``Task`` call starts, given the team's ``roles`` (``role_agents``): (``fork``, None, prompt) or
    (``task``, the role, prompt). ``subagent_type`` may name a role or its agent definition, in any case."""
    _get(input, "description", str)
    prompt = _get(input, "prompt", str)
    if not prompt.strip():
        raise ToolError("prompt must not be empty")
    wanted = _get(input, "subagent_type", str, "").strip()
    folded = wanted.casefold()
    found = [r for r, agent in roles.items() if folded in (r.casefold(), agent.casefold())]
    if wanted in roles:
        return "task", wanted, prompt
    if found:
        return "task", found[0], prompt
    if folded in ("", GENERAL_PURPOSE):
        return "fork", None, prompt
    known = ", ".join([GENERAL_PURPOSE, *sorted(roles)])
    raise ToolError(f"subagent_type {wanted[:100]!r} is not a role of this team; use one of: {known}")


class SendMessage(_TeamTool):
    name = "send_message"
    description = (
        "Send a message to another agent of the team by name. It is delivered at once, durably, or the call"
        " fails saying why (and what becomes of the message)."
    )
    input_schema = object_schema(
        {"to": {"type": "string"}, "body": {"type": "string"}, "summary": {"type": "string"}}, "to", "body"
    )

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        to, body = _get(input, "to", str), _get(input, "body", str)
        return ToolResult(self.team.send(ctx.agent, to, body, summary=_get(input, "summary", str, "")))


class Broadcast(_TeamTool):
    name = "broadcast"
    description = "Send the same message to every other agent of the team."
    input_schema = object_schema({"body": {"type": "string"}, "summary": {"type": "string"}}, "body")

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        sent = self.team.broadcast(ctx.agent, _get(input, "body", str), _get(input, "summary", str, ""))
        return ToolResult(f"sent to {len(sent)} agents: {', '.join(sent)}" if sent else "no one else to tell")


class TaskCreate(_TeamTool):
    name = "task_create"
    description = "Add a task to the team's shared list; blocked_by lists task ids that must be done first."
    input_schema = object_schema(
        {
            "subject": {"type": "string"},
            "description": {"type": "string"},
            "blocked_by": {"type": "array", "items": {"type": "integer"}},
        },
        "subject",
    )

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        blocked = _get(input, "blocked_by", list, [])
        if not all(isinstance(b, int) for b in blocked):
            raise ToolError("blocked_by must list task ids (integers)")
        subject, description = _get(input, "subject", str), _get(input, "description", str, "")
        return ToolResult(await self.team.create_task(ctx.agent, subject, description, blocked))


class TaskClaim(_TeamTool):
    name = "task_claim"
    description = "Claim an open task whose blockers are done. Only one agent can hold a task."
    input_schema = object_schema({"task_id": {"type": "integer"}}, "task_id")

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(await self.team.claim_task(ctx.agent, _get(input, "task_id", int)))


class TaskUpdate(_TeamTool):
    name = "task_update"
    description = "Set a task's status: open, in_progress or done."
    input_schema = object_schema(
        {
            "task_id": {"type": "integer"},
            "status": {"type": "string", "enum": ["open", "in_progress", "done"]},
        },
        "task_id",
        "status",
    )

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        task_id, status = _get(input, "task_id", int), _get(input, "status", str)
        return ToolResult(await self.team.update_task(ctx.agent, task_id, status))


class TaskList(_TeamTool):
    name = "task_list"
    description = "List the team's tasks with status, owner and what blocks them."
    input_schema = object_schema({})
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(self.team.list_tasks())


class RequestShutdown(_TeamTool):
    name = "request_shutdown"
    description = "Ask a teammate to finish. It answers by mail: accepted, or rejected with a reason."
    input_schema = object_schema({"agent": {"type": "string"}, "reason": {"type": "string"}}, "agent")

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        agent, reason = _get(input, "agent", str), _get(input, "reason", str, "the work is done")
        return ToolResult(
            self.team.send(ctx.agent, agent, reason, kind="shutdown_request", summary="shutdown?")
        )


class RespondShutdown(_TeamTool):
    name = "respond_shutdown"
    description = (
        "Answer a shutdown request: accept (you finish after this turn) or reject with a reason"
        " (for example, work still in progress)."
    )
    input_schema = object_schema(
        {"request_id": {"type": "string"}, "to": {"type": "string"}, "accept": {"type": "boolean"},
         "reason": {"type": "string"}},
        "to", "accept",
    )  # fmt: skip

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        accept, to = _get(input, "accept", bool), _get(input, "to", str)
        reason = _get(input, "reason", str, "")
        data = {"accept": accept, "request_id": _get(input, "request_id", str, None)}
        sent = self.team.send(
            ctx.agent, to, reason or ("accepted" if accept else "rejected"), kind="shutdown_response",
            summary="accepted" if accept else "rejected", data=data,
        )  # fmt: skip
        if accept:
            self.team.accept_shutdown(ctx.agent, reason or "shutdown accepted")
        return ToolResult(sent + ("; you finish after this turn" if accept else ""))


def team_tools(team: TeamServices) -> dict[str, Any]:
    """The tools that need the team, Claude Code's two (``TodoWrite``, ``Task``) first."""
    tools: list[_TeamTool | TodoWrite] = [
        TodoWrite(team), Task(team), SpawnAgent(team), SendMessage(team), Broadcast(team), TaskCreate(team),
        TaskClaim(team), TaskUpdate(team), TaskList(team), RequestShutdown(team), RespondShutdown(team),
    ]  # fmt: skip
    return {t.name: t for t in tools}


def describe_tasks(tasks: list[Any]) -> str:
    if not tasks:
        return "no tasks yet"
    return "\n".join(
        json.dumps(
            {
                "id": t.id,
                "subject": t.subject,
                "status": t.status,
                "owner": t.owner,
                "blocked_by": list(t.blocked_by),
            }
        )
        for t in tasks
    )
