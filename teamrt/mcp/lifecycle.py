"""The start and stop of one run's MCP servers: each started once when first needed, restarted once, stopped.

Each server runs in a task of its own that holds the SDK's client session
(``Lifecycle._own``), so an agent stopped mid-call cannot take the session down
with it. A stdio server's pid and start time are journaled as an
``mcp.process`` event before the first message is sent: a resume kills what a
crash left (``teamrt.mcp.servers.leftover_servers``) just as it kills a tool's
processes. A server that dies (mid-call or idle) fails the call in flight with
a clear error and is started again, once, for the next call; after a second
death its tools fail for the rest of the run. A server that breaks the
transport's limits (a message over ``max_message_bytes``) is stopped and not
started again: a hostile one would only do it again.

Each session declares and answers teamrt's client capabilities
(``teamrt.mcp.capabilities``) with the run's ``McpHost``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from teamrt.events import EventKind
from teamrt.mcp.capabilities import ClientSide, McpHost
from teamrt.mcp.config import McpConfig, ServerConfig
from teamrt.mcp.tools import Caller, McpTool, adapt
from teamrt.mcp.transport import Process, transport_for
from teamrt.procs import process_start_time
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.tools.base import ToolError

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
START_TIMEOUT = 30.0
"""Seconds a server has to start and list its tools (``MCP_TIMEOUT``, in milliseconds, as Claude Code)."""
MAX_STARTS = 2
"""A server is started at most twice in a run: once, and once again after it died."""
MAX_PAGES = 20
"""Pages of a tool listing read at most."""
CLIENT = ("teamrt", "1")


class Journal(Protocol):
    """Records an event of the run, an agent's when ``agent`` is given (``McpServers._journal``)."""

    def __call__(
        self, kind: EventKind, data: dict[str, Any], agent: str | None = None
    ) -> Awaitable[None]: ...


def _set(event: asyncio.Event) -> asyncio.Event:
    event.set()
    return event


@dataclass
class Server:
    """One configured server in a run."""

    config: ServerConfig
    state: str = "stopped"
    """``stopped`` (not started yet), ``running``, ``exited`` (died; may start again), ``failed``."""
    tools: list[McpTool] | None = None
    """Its tools as first listed (or as listed again after ``tools/list_changed``)."""
    error: str = ""
    refused: list[str] = field(default_factory=list)
    """The tools its listing had that are not offered, a line each."""
    starts: int = 0
    client: Any = None
    process: Process | None = None
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    side: ClientSide | None = None
    calls: list[str] = field(default_factory=list)
    """The agents of the calls in flight, oldest first ("" for a call outside an agent)."""
    relists: int = 0
    relisting: asyncio.Task[None] | None = None
    changed_again: bool = False
    listed: asyncio.Event = field(default_factory=lambda: _set(asyncio.Event()))
    """Set while no ``tools/list_changed`` waits for its listing (``teamrt.mcp.relisting``)."""

    def declares(self, capability: str) -> bool:
        """Whether the server, running, declared ``capability`` (``resources``, ``prompts``) as it started."""
        if self.state != "running" or self.client is None:
            return False
        try:
            return getattr(self.client.server_capabilities, capability, None) is not None
        except RuntimeError:  # not initialized
            return False


@dataclass
class Lifecycle:
    """Starts, restarts and stops the servers of one run. ``caller``: what the adapted tools call
    (``McpServers``); ``on_tools_changed``: told of a server's ``tools/list_changed``; ``protected_after``:
    the scan of the project after a server's exit (the guard's note, or None)."""

    config: McpConfig
    ctx: Confinement
    sandbox: Sandbox
    start_timeout: float
    max_message: int
    host: McpHost | None
    journal: Journal
    caller: Caller
    on_tools_changed: Callable[[Server], None]
    protected_after: Callable[[str], Awaitable[str | None]]

    async def first_start(self, server: Server) -> None:
        """Start ``server`` unless it was started before in this run."""
        async with server.lock:
            if server.starts == 0:
                await self.start(server)

    async def start(self, server: Server) -> None:
        """Start ``server`` (its lock held): ``running`` with its tools listed, or ``failed``."""
        server.starts += 1
        server.stop = asyncio.Event()
        name = server.config.name
        refusal = self.sandbox.refusal(self.ctx.policy) if server.config.transport == "stdio" else None
        if refusal is not None:
            await self.fail(server, f"not started: {refusal}")
            return
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        server.process = Process()
        server.task = asyncio.create_task(self._own(server, ready), name=f"mcp server {name}")
        try:
            listed = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout)
        except TimeoutError:
            ready.cancel()  # what the session says after this is not waited for
            server.stop.set()
            await settled(server.task)
            said = server.process.said()
            await self.fail(server, f"did not start and list its tools within {self.start_timeout:g} s"
                                    + (f"; it said: {said}" if said else ""))  # fmt: skip
            return
        except Exception as e:
            await settled(server.task)
            if server.process.broken:
                await self.fail(server, f"could not start: it {server.process.ended()}")
                return
            said = server.process.said()
            said = f"; it said: {said}" if said else ""
            await self.fail(server, f"could not start: {one_line(e)}{said}")
            return
        tools, problems = adapt(name, listed, self.caller)
        if server.tools is None:  # the first listing stays: every agent of the run sees the same tools
            server.tools, server.refused = tools, problems
            if problems:
                await self.journal(REFUSED, {"server": name, "problems": problems})
        server.state, server.error = "running", ""
        await self.journal(STARTED, {
            "server": name, "transport": server.config.transport, "pid": server.process.pid,
            "attempt": server.starts, "tools": len(server.tools),
        })  # fmt: skip

    async def _own(self, server: Server, ready: asyncio.Future[list[Any]]) -> None:
        """Hold ``server``'s session from start to stop or death (a task of its own: anyio's scopes must
        be left by the task that entered them)."""
        from mcp.client.client import Client
        from mcp_types import Implementation

        assert server.process is not None
        process = server.process
        name = server.config.name

        side = ClientSide(
            name, self.ctx.workspace, host=self.host, journal=self.journal,
            caller=lambda: server.calls[0] if server.calls else None,
            on_tools_changed=lambda: self.on_tools_changed(server),
        )  # fmt: skip
        server.side = side

        async def started(pid: int) -> None:
            start_time = process_start_time(pid)
            if start_time is not None:  # journaled before the first message: a crash now leaves it known
                said = {"server": server.config.name, "pid": pid, "start_time": start_time}
                await self.journal(PROCESS, said)

        transport = transport_for(
            server.config, self.ctx, self.sandbox, process, started,
            private_hosts=self.config.private_hosts, max_message=self.max_message,
        )  # fmt: skip
        try:
            info = Implementation(name=CLIENT[0], version=CLIENT[1])
            async with Client(transport, client_info=info, **side.callbacks()) as c:
                listed = await list_tools(c)
                server.client = c
                ready.set_result(listed)
                await _first(server.stop.wait(), process.closed.wait())
        except BaseException as e:
            if not ready.done():
                ready.set_exception(leaf(e) if isinstance(e, Exception | BaseExceptionGroup) else e)
            if not isinstance(e, Exception | BaseExceptionGroup):
                raise
        finally:
            server.client = None

    async def client_for_call(self, server: Server) -> tuple[Any, Process | None]:
        """The session of a running server, and its process: one that died is started again, once."""
        async with server.lock:
            if server.state == "running" and server.process is not None and server.process.closed.is_set():
                await self.lost(server, server.process, during_call=False)
            if server.state == "exited" and server.starts < MAX_STARTS:
                await self.start(server)
            if server.state != "running" or server.client is None:
                name = server.config.name
                raise ToolError(f"MCP server {name!r} is not running: {server.error or server.state}")
            return server.client, server.process

    async def lost(self, server: Server, process: Process | None, *, during_call: bool) -> str:
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
            await self.journal(EXITED, {"server": name, "how": how, "restart": again})
            await self.protected_after(f"the exit of MCP server {name!r}")  # recorded by the guard
        when = "during the call, which did not finish" if during_call else "since its last call"
        then = (
            "it is started again for the next call"
            if again
            else "its tools fail for the rest of this run"
            if broken
            else "it had been restarted once already, so its tools fail for the rest of this run"
        )
        return f"the MCP server {name!r} {how} {when}" + (f" (it said: {said})" if said else "") + f"; {then}"

    async def fail(self, server: Server, error: str) -> None:
        server.state, server.error = "failed", error
        if server.tools is None:
            server.tools = []
        await self.journal(FAILED, {"server": server.config.name, "error": error})

    async def close(self, servers: list[Server]) -> None:
        """Stop every server of ``servers`` (its stdin closed, then its process group killed) and journal it;
        a listing after ``tools/list_changed`` ends first."""
        running = [s for s in servers if s.task is not None]
        for server in servers:
            if server.relisting is not None:
                server.relisting.cancel()
                await settled(server.relisting)
        for server in running:
            server.stop.set()
        for server in running:
            assert server.task is not None
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(server.task), 10)
            if server.state == "running":
                server.state = "stopped"
                await self.journal(STOPPED, {"server": server.config.name})


async def list_tools(client: Any) -> list[Any]:
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


async def settled(task: asyncio.Task[None] | None) -> None:
    """Wait (10 s at most) for ``task`` to end, whatever it raises."""
    if task is not None:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), 10)


def leaf(error: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: what went wrong, not the task group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def one_line(error: BaseException) -> str:
    """An exception in one line: its first line, shortened."""
    error = leaf(error)
    text = str(error).strip().splitlines()
    said = text[0] if text else type(error).__name__
    return said[:300]
