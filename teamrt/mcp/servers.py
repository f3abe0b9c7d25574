"""A run's MCP servers at work: started once when first needed, journaled, restarted once, stopped at its end.

``McpServers.prepare`` starts the servers an agent about to be built uses (a
server is started once per run, by the first agent that needs it) and lists
their tools once: every agent, fork and resumed agent of the run sees the
same tools in the same order (by server, then tool), so forks keep their
parent's prompt cache.

Each server runs in a task of its own that holds the SDK's client session
(``_Server.own``), so an agent stopped mid-call cannot take the session down
with it. A stdio server's pid and start time are journaled as an
``mcp.started`` event before the first message is sent: a resume kills what
a crash left (``leftover_servers``) just as it kills a tool's processes. A
server that dies (mid-call or idle) fails the call in flight with a clear
error and is started again, once, for the next call; after a second death
its tools fail for the rest of the run. A server that breaks the transport's
limits (a message over ``max_message_bytes``) is stopped and not started
again: a hostile one would only do it again. ``close`` stops them all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from teamrt.events import EventKind
from teamrt.mcp.config import McpConfig, ServerConfig
from teamrt.mcp.tools import McpTool, adapt, result_of
from teamrt.mcp.transport import MAX_MESSAGE_BYTES, Process, transport_for
from teamrt.procs import is_running, kill_group, process_start_time
from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.quarantine import Guard, describe
from teamrt.tools.base import ToolError, ToolResult

if TYPE_CHECKING:
    from teamrt.store import EventRecord, Store

PROCESS: Final = "mcp.process"
"""``{"server", "pid", "start_time"}``: a stdio server's process started (journaled before any message)."""
STARTED: Final = "mcp.started"
"""``{"server", "transport", "pid", "attempt", "tools"}``: a server started and listed its tools."""
FAILED: Final = "mcp.failed"
"""``{"server", "error"}``: a server could not start; its tools are not offered."""
EXITED: Final = "mcp.exited"
"""``{"server", "how", "restart"}``: a running server died."""
STOPPED: Final = "mcp.stopped"
"""``{"server"}``: a server stopped with the run."""
REFUSED: Final = "mcp.refused"
"""``{"server", "problems"}``: tools a server listed that are not offered, a line each."""
NOTICE: Final = "mcp.notice"
"""``{"note"}``: an MCP configuration problem, or a server of the repository that does not start."""
START_TIMEOUT = 30.0
"""Seconds a server has to start and list its tools (``MCP_TIMEOUT``, in milliseconds, as Claude Code)."""
MAX_STARTS = 2
"""A server is started at most twice in a run: once, and once again after it died."""
MAX_PAGES = 20
"""Pages of a tool listing read at most."""
CLIENT = ("teamrt", "1")


@dataclass
class _Server:
    """One configured server in a run."""

    config: ServerConfig
    state: str = "stopped"
    """``stopped`` (not started yet), ``running``, ``exited`` (died; may start again), ``failed``."""
    tools: list[McpTool] | None = None
    """Its tools as first listed: kept for the whole run."""
    error: str = ""
    refused: list[str] = field(default_factory=list)
    """The tools its first listing had that are not offered, a line each."""
    starts: int = 0
    client: Any = None
    process: Process | None = None
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


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
    ) -> None:
        self.config = config
        self._ctx = ctx
        self._guard = guard
        self._store = store
        self._sandbox = sandbox or default_sandbox()
        self._start_timeout = start_timeout
        self._max_message = max_message_bytes
        self._servers = {name: _Server(c) for name, c in sorted(config.all_servers.items())}

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
        await asyncio.gather(*(self._first_start(self._servers[n]) for n in sorted(set(names))))
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

        return [t for t in self.tools(self.servers_for(definition)) if wanted(t)]

    async def call(self, name: str, tool: str, args: dict[str, Any]) -> ToolResult:
        """Call ``tool`` of server ``name``; a timeout, a dead server or a broken answer is a ToolError. Then
        the project is scanned: what the server made among the protected paths during the call is moved
        out (``teamrt.sandbox.quarantine``) and said with the result."""
        cause = f"the call of mcp__{name}__{tool}"
        try:
            result = await self._call(name, tool, args)
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

    async def _call(self, name: str, tool: str, args: dict[str, Any]) -> ToolResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        server = self._servers[name]
        client, process = await self._client_for_call(server)
        timeout = server.config.timeout
        try:
            result = await client.call_tool(tool, args, read_timeout_seconds=timeout)
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                raise ToolError(
                    f"mcp__{name}__{tool} did not answer within {timeout:g} s; teamrt stopped waiting for it"
                    " (the server may still be at work on it)"
                ) from None
            if e.code == CONNECTION_CLOSED or (process is not None and process.closed.is_set()):
                raise ToolError(await self._lost(server, process, during_call=True)) from None
            raise ToolError(f"MCP server {name!r} refused the call: {_line(e)}") from None
        except (ValidationError, RuntimeError) as e:
            raise ToolError(f"MCP server {name!r} gave an answer that is not valid MCP: {_line(e)}") from None
        return result_of(result)

    async def close(self) -> None:
        """Stop every server (its stdin closed, then its process group killed) and journal it."""
        running = [s for s in self._servers.values() if s.task is not None]
        for server in running:
            server.stop.set()
        for server in running:
            assert server.task is not None
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(server.task), 10)
            if server.state == "running":
                server.state = "stopped"
                await self._journal(STOPPED, {"server": server.config.name})

    # -- starting ------------------------------------------------------------------------------------

    async def _first_start(self, server: _Server) -> None:
        async with server.lock:
            if server.starts == 0:
                await self._start(server)

    async def _start(self, server: _Server) -> None:
        """Start ``server`` (its lock held): ``running`` with its tools listed, or ``failed``."""
        server.starts += 1
        server.stop = asyncio.Event()
        name = server.config.name
        refusal = self._sandbox.refusal(self._ctx.policy) if server.config.transport == "stdio" else None
        if refusal is not None:
            await self._fail(server, f"not started: {refusal}")
            return
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        server.process = Process()
        server.task = asyncio.create_task(self._own(server, ready), name=f"mcp server {name}")
        try:
            listed = await asyncio.wait_for(asyncio.shield(ready), self._start_timeout)
        except TimeoutError:
            ready.cancel()  # what the session says after this is not waited for
            server.stop.set()
            await _settled(server.task)
            said = server.process.said()
            await self._fail(server, f"did not start and list its tools within {self._start_timeout:g} s"
                                     + (f"; it said: {said}" if said else ""))  # fmt: skip
            return
        except Exception as e:
            await _settled(server.task)
            if server.process.broken:
                await self._fail(server, f"could not start: it {server.process.ended()}")
                return
            said = server.process.said()
            await self._fail(server, f"could not start: {_line(e)}" + (f"; it said: {said}" if said else ""))
            return
        tools, problems = adapt(name, listed, self)
        if server.tools is None:  # the first listing stays: every agent of the run sees the same tools
            server.tools, server.refused = tools, problems
            if problems:
                await self._journal(REFUSED, {"server": name, "problems": problems})
        server.state, server.error = "running", ""
        await self._journal(STARTED, {
            "server": name, "transport": server.config.transport, "pid": server.process.pid,
            "attempt": server.starts, "tools": len(server.tools),
        })  # fmt: skip

    async def _own(self, server: _Server, ready: asyncio.Future[list[Any]]) -> None:
        """Hold ``server``'s session from start to stop or death (a task of its own: anyio's scopes must
        be left by the task that entered them)."""
        from mcp.client.client import Client
        from mcp_types import Implementation

        assert server.process is not None
        process = server.process

        async def started(pid: int) -> None:
            start_time = process_start_time(pid)
            if start_time is not None:  # journaled before the first message: a crash now leaves it known
                said = {"server": server.config.name, "pid": pid, "start_time": start_time}
                await self._journal(PROCESS, said)

        transport = transport_for(
            server.config, self._ctx, self._sandbox, process, started,
            private_hosts=self.config.private_hosts, max_message=self._max_message,
        )  # fmt: skip
        try:
            async with Client(transport, client_info=Implementation(name=CLIENT[0], version=CLIENT[1])) as c:
                listed = await _list(c)
                server.client = c
                ready.set_result(listed)
                await _first(server.stop.wait(), process.closed.wait())
        except BaseException as e:
            if not ready.done():
                ready.set_exception(_leaf(e) if isinstance(e, Exception | BaseExceptionGroup) else e)
            if not isinstance(e, Exception | BaseExceptionGroup):
                raise
        finally:
            server.client = None

    async def _client_for_call(self, server: _Server) -> tuple[Any, Process | None]:
        """The session of a running server, and its process: one that died is started again, once."""
        async with server.lock:
            if server.state == "running" and server.process is not None and server.process.closed.is_set():
                await self._lost(server, server.process, during_call=False)
            if server.state == "exited" and server.starts < MAX_STARTS:
                await self._start(server)
            if server.state != "running" or server.client is None:
                name = server.config.name
                raise ToolError(f"MCP server {name!r} is not running: {server.error or server.state}")
            return server.client, server.process

    async def _lost(self, server: _Server, process: Process | None, *, during_call: bool) -> str:
        """Mark a server found dead (``process``, unless it has been started again since); what to tell the
        model."""
        name = server.config.name
        if process is not None and not process.closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.closed.wait(), 3)
        how = process.ended() if process is not None and process.closed.is_set() else "stopped answering"
        said = process.said() if process is not None else ""
        broken = process is not None and bool(process.broken)
        again = server.starts < MAX_STARTS and not broken
        if broken:
            said = ""  # what it wrote to stderr is not why it stopped
        if server.state == "running" and server.process is process:
            server.stop.set()
            server.state = "exited" if again else "failed"
            server.error = f"it {how}" + (f" ({said})" if said else "")
            if broken:
                server.error += "; it is not started again in this run"
            elif not again:
                server.error += f"; started {server.starts} times, it is not started again in this run"
            await self._journal(EXITED, {"server": name, "how": how, "restart": again})
            await self._protected_after(f"the exit of MCP server {name!r}")  # recorded by the guard
        when = "during the call, which did not finish" if during_call else "since its last call"
        then = (
            "it is started again for the next call"
            if again
            else "its tools fail for the rest of this run"
            if broken
            else "it had been restarted once already, so its tools fail for the rest of this run"
        )
        return f"the MCP server {name!r} {how} {when}" + (f" (it said: {said})" if said else "") + f"; {then}"

    async def _fail(self, server: _Server, error: str) -> None:
        server.state, server.error = "failed", error
        if server.tools is None:
            server.tools = []
        await self._journal(FAILED, {"server": server.config.name, "error": error})

    async def _journal(self, kind: EventKind, data: dict[str, Any]) -> None:
        if self._store is not None:
            await self._store.append_event(kind, data)


def _whole(server: str) -> set[str]:
    """The names that stand for every tool of ``server`` in an agent file's ``tools``."""
    return {f"mcp__{server}", f"mcp__{server}__*"}


def _names_server(tools: Iterable[str], server: str) -> bool:
    return any(t == f"mcp__{server}" or t.startswith(f"mcp__{server}__") for t in tools)


async def _list(client: Any) -> list[Any]:
    """Every tool the server lists, page by page."""
    listed: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return listed


async def _first(*waits: Any) -> None:
    """Wait for the first of ``waits`` (coroutines); cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def _settled(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), 10)


def _leaf(error: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: what went wrong, not the task group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _line(error: BaseException) -> str:
    """An exception in one line: its first line, shortened."""
    error = _leaf(error)
    text = str(error).strip().splitlines()
    said = text[0] if text else type(error).__name__
    return said[:300]


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
