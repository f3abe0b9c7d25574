"""A run's MCP servers: which agent gets which tools, and the one door to the servers' sessions.

``McpServers.prepare`` starts the servers an agent about to be built uses (a
server is started once per run, by the first agent that needs it) and lists
their tools once: every agent, fork and resumed agent of the run sees the
same tools in the same order (by server, then tool), so forks keep their
parent's prompt cache.

The work is split by job: ``teamrt.mcp.lifecycle`` starts, restarts and stops
the servers (and journals it); ``teamrt.mcp.calling`` runs a tool call with its
progress and wall-clock timeout; ``teamrt.mcp.relisting`` lists a server's tools
again after ``tools/list_changed``; ``teamrt.mcp.resources`` and
``teamrt.mcp.prompts`` make the servers' resources and prompts usable. This
module decides what an agent is offered (``tools_for``, ``follow``), scans the
project after each call (``call``), and finds what a crashed run left running
(``leftover_servers``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from teamrt.events import EventKind
from teamrt.mcp.calling import call_tool
from teamrt.mcp.capabilities import McpHost
from teamrt.mcp.config import McpConfig
from teamrt.mcp.lifecycle import (
    EXITED,
    FAILED,
    PROCESS,
    REFUSED,
    START_TIMEOUT,
    STARTED,
    STOPPED,
    Lifecycle,
    Server,
)
from teamrt.mcp.relisting import Relisting
from teamrt.mcp.resources import LIST, READ, resource_tools
from teamrt.mcp.tools import McpTool
from teamrt.mcp.transport import MAX_MESSAGE_BYTES
from teamrt.procs import is_running, kill_group
from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.quarantine import Guard, describe
from teamrt.tools.base import Tool, ToolError, ToolResult

if TYPE_CHECKING:
    from teamrt.store import EventRecord, Store

__all__ = [  # the journal's kinds, for those reading a run's events
    "EXITED", "FAILED", "NOTICE", "PROCESS", "REFUSED", "STARTED", "START_TIMEOUT", "STOPPED",
    "McpServers", "kill_leftover_servers", "leftover_servers",
]  # fmt: skip

NOTICE: Final = "mcp.notice"
"""``{"note"}``: an MCP configuration problem, or a server of the repository that does not start."""


class McpServers:
    """The MCP servers of one run. ``ctx``: where stdio servers run (the project, the run's sandbox policy);
    ``guard``: the run's check of protected paths, which scans the project after each call (None: none);
    ``store``: where their starts and ends are journaled (None: not journaled, as ``teamrt mcp`` lists)."""

    def __init__(
        self,
        config: McpConfig,
        ctx: Confinement,
        *,
        guard: Guard | None = None,
        store: Store | None = None,
        sandbox: Sandbox | None = None,
        start_timeout: float = START_TIMEOUT,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        host: McpHost | None = None,
    ) -> None:
        """``host``: what answers the servers' sampling and elicitation requests (None: they are refused)."""
        self.config = config
        self.host = host
        self.version = 0
        """Counts the changes of the servers' tools since they started (``follow``)."""
        self._ctx = ctx
        self._guard = guard
        self._store = store
        self._servers = {name: Server(c) for name, c in sorted(config.all_servers.items())}
        self._relisting = Relisting(self._journal, self, self._tools_changed, start_timeout)
        self._life = Lifecycle(
            config, ctx, sandbox or default_sandbox(), start_timeout, max_message_bytes, host, self._journal,
            self, self._relisting.tools_changed, self._protected_after,
        )  # fmt: skip

    def state(self, name: str) -> tuple[str, str]:
        """A server's state and what went wrong, if anything."""
        server = self._servers[name]
        return server.state, server.error

    def refused(self, name: str) -> list[str]:
        """The tools server ``name`` listed that are not offered, a line each."""
        return list(self._servers[name].refused)

    async def prepare(self, names: Iterable[str]) -> None:
        """Start each of ``names`` not started yet and list its tools; one that fails is journaled
        (``mcp.failed``) and offers none. Never raises for a server's failure."""
        await asyncio.gather(*(self._life.first_start(self._servers[n]) for n in sorted(set(names))))
        await self._protected_after("the start of MCP servers")  # what one made as it started

    def tools(self, names: Iterable[str]) -> list[McpTool]:
        """The tools of the started servers among ``names``, by server, then tool."""
        found: list[McpTool] = []
        for name in sorted(set(names)):
            found += self._servers[name].tools or []
        return found

    def servers_for(self, definition: Any) -> list[str]:
        """The servers an agent of ``definition`` (an ``AgentDefinition``) uses: the run's (those its
        ``tools`` name, when it names tools) and its own inline ones, less those it disallows whole."""
        own = self.config.agent_servers.get(definition.name, {})
        named = [
            n for n in self.config.servers if definition.tools is None or _names_server(definition.tools, n)
        ]
        return sorted(
            {*named, *own} - {n for n in self._servers if _whole(n) & set(definition.disallowed_tools)}
        )

    def tools_for(self, definition: Any) -> list[McpTool]:
        """The tools an agent of ``definition`` gets, of servers ``prepare`` started: all of its servers'
        when its ``tools`` name none, else those named (``mcp__s__t``, or ``mcp__s`` for all of ``s``); its
        own servers' always; less those it disallows."""
        own = self.config.agent_servers.get(definition.name, {})
        listed, barred = definition.tools, set(definition.disallowed_tools)

        def wanted(tool: McpTool) -> bool:
            if tool.name in barred or _whole(tool.server) & barred:
                return False
            return (
                listed is None
                or tool.server in own
                or tool.name in listed
                or bool(_whole(tool.server) & set(listed))
            )

        found = [t for t in self.tools(self.servers_for(definition)) if wanted(t)]
        return found + self._resource_tools(definition)

    def _resource_tools(self, definition: Any) -> list[McpTool]:
        """``ListMcpResourcesTool`` and ``ReadMcpResourceTool`` over the agent's running servers that declare
        resources (``teamrt.mcp.resources``), unless its ``tools`` leave them out."""
        listed, barred = definition.tools, set(definition.disallowed_tools)
        wanted = [n for n in (LIST, READ) if n not in barred and (listed is None or n in listed)]
        having = [n for n in self.servers_for(definition) if self._servers[n].declares("resources")]
        return resource_tools(self, having, {n: self._servers[n].config.timeout for n in having}, wanted)

    async def session(self, name: str) -> Any:
        """The client of running server ``name`` (started again once if it died) for a request other than
        a tool call (``teamrt.mcp.resources``); a ToolError when it does not run."""
        client, _ = await self._life.client_for_call(self._servers[name])
        return client

    def names(self) -> list[str]:
        """The servers of the run that may start, by name."""
        return list(self._servers)

    def timeout(self, name: str) -> float:
        """Seconds a request to server ``name`` may take (its entry's ``timeout``)."""
        return self._servers[name].config.timeout

    async def prompt_servers(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` that run (started now if they were not) and declare the ``prompts``
        capability: the servers a person's ``/mcp__`` command may reach (``teamrt.mcp.prompts``)."""
        wanted = sorted(set(names) & set(self._servers))
        await self.prepare(wanted)
        return [n for n in wanted if self._servers[n].declares("prompts")]

    def follow(self, definition: Any) -> Callable[[dict[str, Tool]], bool]:
        """What keeps an agent of ``definition`` up to date with its servers' tools: called with its tools
        before each model call, it puts the tools its servers list now in place of those they listed
        before (the agent's other tools first, as ``assembly`` made them) and says whether any changed."""
        seen = self.version
        had = {t.name: t.input_schema for t in self.tools_for(definition)}  # what the agent was made with

        def refresh(tools: dict[str, Tool]) -> bool:
            nonlocal seen, had
            if seen == self.version:
                return False
            seen = self.version
            now = {t.name: t for t in self.tools_for(definition)}
            listed = {n: t.input_schema for n, t in now.items()}
            if listed == had:  # a fork shares its parent's dict: its own view decides whether it changed
                return False
            had = listed
            others = {n: t for n, t in tools.items() if not isinstance(t, McpTool)}
            tools.clear()
            tools.update(others)
            tools.update(now)
            return True

        return refresh

    async def call(self, name: str, tool: str, args: dict[str, Any], *, agent: str = "") -> ToolResult:
        """Call ``tool`` of server ``name`` for ``agent``; a timeout, a dead server or a broken answer is a
        ToolError. Then the project is scanned: what the server made among the protected paths during the
        call is moved out (``teamrt.sandbox.quarantine``) and said with the result."""
        cause = f"the call of mcp__{name}__{tool}"
        try:
            result = await self._call(name, tool, args, agent)
        except ToolError as e:
            note = await asyncio.shield(self._protected_after(cause))
            if note is None:
                raise
            raise ToolError(f"{e}\n{note}") from None
        note = await asyncio.shield(self._protected_after(cause))
        if note is None:
            return result
        content = result.content
        if isinstance(content, str):
            return ToolResult(f"{content}\n{note}", is_error=True)
        return ToolResult([*content, {"type": "text", "text": note}], is_error=True)

    async def _protected_after(self, cause: str) -> str | None:
        """Scan the servers' workspace after ``cause``: the note on what was moved out, or None."""
        guard = self._guard
        if guard is None:
            return None
        moved = await guard.check(self._ctx.workspace, cause=cause)
        return describe(moved, cause) if moved else None

    async def _call(self, name: str, tool: str, args: dict[str, Any], agent: str) -> ToolResult:
        server = self._servers[name]
        result = await call_tool(self._life, server, tool, args, agent, self._journal)
        await self._relisting.listed(server)  # tools the call changed: in place for the agent's next turn
        return result

    async def close(self) -> None:
        """Stop every server (its stdin closed, then its process group killed) and journal it."""
        await self._life.close(list(self._servers.values()))

    def _tools_changed(self) -> None:
        """A server's tools changed after ``tools/list_changed``: agents take the new list (``follow``)."""
        self.version += 1

    async def _journal(self, kind: EventKind, data: dict[str, Any], agent: str | None = None) -> None:
        if self._store is not None:
            await self._store.append_event(kind, data, agent=agent or None)


def _whole(server: str) -> set[str]:
    """The names that stand for every tool of ``server`` in an agent file's ``tools``."""
    return {f"mcp__{server}", f"mcp__{server}__*"}


def _names_server(tools: Iterable[str], server: str) -> bool:
    return any(t == f"mcp__{server}" or t.startswith(f"mcp__{server}__") for t in tools)


def leftover_servers(events: Sequence[EventRecord]) -> list[tuple[int, int]]:
    """(pid, start time) of each stdio server the run journaled that is still running."""
    found = []
    for event in events:
        pid, start = event.data.get("pid"), event.data.get("start_time")
        if event.kind != PROCESS or not isinstance(pid, int) or not isinstance(start, int):
            continue
        if is_running(pid, start):
            found.append((pid, start))
    return list(dict.fromkeys(found))


async def kill_leftover_servers(events: Sequence[EventRecord]) -> int:
    """Kill the process groups of the servers a crashed run left running; how many there were."""
    left = leftover_servers(events)
    await asyncio.gather(*(kill_group(pid) for pid, _ in left))
    return len(left)
