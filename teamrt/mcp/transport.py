"""How teamrt reaches an MCP server: a confined stdio process of its own, or streamable HTTP.

``stdio`` is teamrt's own transport rather than the SDK's ``stdio_client``,
for two reasons: the SDK does not say which process it started, and teamrt
journals every process it starts (pid and start time) so that a resume can
kill what a crash left; and the server must run as a hook or a ``Bash``
command does, in the sandbox (``teamrt.tools.sandbox``), in a process group of
its own. The framing is the SDK's: one JSON-RPC message per line.

``http`` is the SDK's streamable HTTP client with the configured headers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..procs import kill_group
from ..tools import pidlimit
from ..tools.base import ToolContext
from ..tools.sandbox import Sandbox
from .config import ServerConfig

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

STDERR_KEPT = 4096
"""Of a server's stderr, the last this many bytes are kept: what it said before it failed."""
EXIT_GRACE = 2.0
"""After its stdin closes, how long a stopping server has to exit before its group is killed."""

OnStarted = Callable[[int], Awaitable[None]]
"""Called with a started server's pid (its process group's id) before any message is sent."""


@dataclass
class Process:
    """What the transport knows of the server process it started."""

    pid: int | None = None
    returncode: int | None = None
    stderr: bytearray = field(default_factory=bytearray)
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set when the server's stdout ends: it exited, or closed it."""

    def said(self) -> str:
        """The last line the server wrote to stderr, for an error message ('' when none)."""
        lines = [x for x in self.stderr.decode("utf-8", errors="replace").splitlines() if x.strip()]
        return lines[-1].strip()[:300] if lines else ""

    def ended(self) -> str:
        """How the process ended, in words: ``exited with code 3``, ``was killed by signal 9``."""
        code = self.returncode
        if code is None:
            return "closed its output"
        return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def program_files(config: ServerConfig) -> tuple[Path, ...]:
    """The server's own files, shown read-only in its sandbox even where the sandbox hides everything (your
    home, ``/tmp``): its command when written as a path, and each argument that is the absolute path of an
    existing file (``python /home/me/mcp/server.py``). Only these: the rest of a hidden place stays
    hidden."""
    named = [config.command, *config.args]
    return tuple(Path(p) for p in named if os.path.isabs(p) and os.path.isfile(p))


def argv(config: ServerConfig) -> str:
    """The server's command line as the sandbox's shell runs it: ``exec``, so the shell becomes it."""
    return "exec " + shlex.join([config.command, *config.args])


@contextlib.asynccontextmanager
async def stdio_transport(
    config: ServerConfig, ctx: ToolContext, sandbox: Sandbox, process: Process, on_started: OnStarted
) -> AsyncIterator[TransportStreams]:
    """Start ``config``'s server in ``ctx``'s sandbox and workspace, its own process group, with the
    allowlisted environment and its configured ``env``; yield the SDK's message streams. On exit, close
    its stdin, give it ``EXIT_GRACE`` seconds, then kill its group."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    ctx = dataclasses.replace(ctx, extra_roots=(*ctx.extra_roots, *program_files(config)))
    command = sandbox.command(argv(config), ctx)
    cgroup = pidlimit.make(command.max_processes)
    started = command.argv if cgroup is None else pidlimit.enter(command.argv, cgroup)
    try:
        proc = await anyio.open_process(
            started, env={**command.env, **config.env}, cwd=ctx.workspace, start_new_session=True
        )
    except OSError:
        if cgroup is not None:
            await anyio.to_thread.run_sync(pidlimit.remove, cgroup)
        raise
    process.pid = proc.pid
    incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert proc.stdout is not None
        buffer = b""
        try:
            async with incoming:
                async for chunk in proc.stdout:
                    lines = (buffer + chunk).split(b"\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            parsed = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                            item: SessionMessage | Exception = SessionMessage(parsed)
                        except ValueError as e:
                            item = e
                        await incoming.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            with anyio.move_on_after(EXIT_GRACE, shield=True):
                process.returncode = await proc.wait()
            process.closed.set()

    async def read_stderr() -> None:
        assert proc.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in proc.stderr:
                process.stderr += chunk
                del process.stderr[:-STDERR_KEPT]

    async def write_stdin() -> None:
        assert proc.stdin is not None
        try:
            async with outgoing:
                async for message in outgoing:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await proc.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await incoming.aclose()  # the session sees the connection end, not a request hanging

    try:
        await on_started(proc.pid)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(read_stderr)
            tasks.start_soon(write_stdin)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(proc, process)
                    for stream in (read_stream, write_stream, incoming, outgoing):
                        await stream.aclose()
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                await kill_group(proc.pid, grace=0)
            if cgroup is not None:
                await anyio.to_thread.run_sync(pidlimit.remove, cgroup)


async def _stop(proc: anyio.abc.Process, process: Process) -> None:
    """Close the server's stdin and let it exit; kill its group after ``EXIT_GRACE`` seconds."""
    assert proc.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await proc.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE):
        while proc.returncode is None:
            await anyio.sleep(0.01)
    await kill_group(proc.pid, grace=0.5)  # what it started goes too, even when it exited itself
    with anyio.move_on_after(EXIT_GRACE):
        process.returncode = await proc.wait()


@contextlib.asynccontextmanager
async def http_transport(config: ServerConfig) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP client for ``config.url``, sending ``config.headers`` with each request."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = create_mcp_http_client(headers=dict(config.headers))
    async with client, streamable_http_client(config.url, http_client=client) as streams:
        yield streams


def transport_for(
    config: ServerConfig, ctx: ToolContext, sandbox: Sandbox, process: Process, on_started: OnStarted
) -> contextlib.AbstractAsyncContextManager[Any]:
    """The transport that reaches ``config``'s server."""
    if config.transport == "http":
        return http_transport(config)
    return stdio_transport(config, ctx, sandbox, process, on_started)
