"""How teamrt reaches an MCP server: a confined stdio process of its own, or one at a URL (``remote``).

``stdio`` is teamrt's own transport rather than the SDK's ``stdio_client``,
for three reasons: the SDK does not say which process it started, and teamrt
journals every process it starts (pid and start time) so that a resume can
kill what a crash left; the server must run as a hook or a ``Bash`` command
does, in the sandbox (``teamrt.sandbox.bwrap``), in a process group of its
own; and a hostile server's output must cost teamrt's process linear time and
bounded memory (``Lines``: a message over ``MAX_MESSAGE_BYTES`` stops the
server). The framing is the SDK's: one JSON-RPC message per line.

``http`` and ``sse`` are the SDK's clients under WebFetch's address checks
(``teamrt.mcp.remote``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from teamrt.errors import TeamrtError
from teamrt.mcp.config import ServerConfig
from teamrt.mcp.launchers import confined
from teamrt.mcp.remote import http_transport, sse_transport
from teamrt.procs import kill_group
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

STDERR_KEPT = 4096
"""Of a server's stderr, the last this many bytes are kept: what it said before it failed."""
EXIT_GRACE = 2.0
"""After its stdin closes, how long a stopping server has to exit before its group is killed."""
MAX_MESSAGE_BYTES = 16 << 20
"""The largest message (one line) read from a stdio server; past it the server is stopped as failed."""
INTERPRETERS = re.compile(r"(python|pypy)[0-9.]*|node(js)?|bun|deno|ruby|perl|php|lua|bash|sh|dash|zsh")
"""Commands whose first argument is the server's own program (``python ~/mcp/server.py``)."""
CREDENTIAL_PLACES = frozenset({
    ".ssh", ".aws", ".gnupg", ".config", ".netrc", ".docker", ".kube", ".azure", ".gcloud",
    ".password-store", ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".cargo", ".terraform.d",
    ".vault-token", ".claude", ".claude.json", ".local/share/keyrings",
})  # fmt: skip
"""Names that no path shown to a server may pass through, wherever they are: where credentials live."""

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
    broken: str = ""
    """Why teamrt stopped the server for good ('' unless it did): it broke the transport's limits."""

    def said(self) -> str:
        """The last line the server wrote to stderr, for an error message ('' when none)."""
        lines = [x for x in self.stderr.decode("utf-8", errors="replace").splitlines() if x.strip()]
        return lines[-1].strip()[:300] if lines else ""

    def ended(self) -> str:
        """How the process ended, in words: ``exited with code 3``, ``was killed by signal 9``."""
        if self.broken:
            return f"was stopped by teamrt: {self.broken}"
        code = self.returncode
        if code is None:
            return "closed its output"
        return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def program_files(config: ServerConfig, ctx: Confinement) -> tuple[Path, ...]:
    """The server's own program, shown read-only in its sandbox even where the sandbox hides everything
    (your home, ``/tmp``). Only for a server of the person's own (a repository's sees what every command
    sees: its program belongs in the project), and only its command when written as an absolute path, and
    the first argument when the command is an interpreter (``python ~/mcp/server.py``), each when it is a
    regular file outside every credential place (``CREDENTIAL_PLACES``), teamrt's home and the runs. The
    rest of a hidden place stays hidden; more only by ``[sandbox] read``."""
    if config.repository:
        return ()
    named = [config.command]
    if config.args and INTERPRETERS.fullmatch(os.path.basename(config.command)):
        named.append(config.args[0])
    return tuple(Path(p) for p in named if _own_program(p, ctx))


def _own_program(path: str, ctx: Confinement) -> bool:
    """Whether ``path`` may be shown as a server's program (see ``program_files``)."""
    if not os.path.isabs(path):
        return False
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        return False
    from teamrt.home import home_path

    barred = [home_path(), ctx.run_dir.parent, ctx.run_dir.parent.parent]
    for shown in (PurePath(os.path.abspath(path)), PurePath(real)):
        parts = shown.parts
        places = {*parts, *("/".join(parts[i : i + 3]) for i in range(len(parts)))}
        if places & CREDENTIAL_PLACES:
            return False
        if any(shown.is_relative_to(os.path.realpath(place)) for place in barred):
            return False
    return True


def argv(config: ServerConfig) -> str:
    """The server's command line as the sandbox's shell runs it: ``exec``, so the shell becomes it."""
    return "exec " + shlex.join([config.command, *config.args])


@contextlib.asynccontextmanager
async def stdio_transport(
    config: ServerConfig,
    ctx: Confinement,
    sandbox: Sandbox,
    process: Process,
    on_started: OnStarted,
    max_message: int = MAX_MESSAGE_BYTES,
) -> AsyncIterator[TransportStreams]:
    """Start ``config``'s server confined as ``ctx`` says, in its workspace, its own process group, with the
    allowlisted environment and its configured ``env``; yield the SDK's message streams. On exit, close
    its stdin, give it ``EXIT_GRACE`` seconds, then kill its group. A message over ``max_message`` bytes
    kills it: ``process.broken`` says so, and the session sees the connection end."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    shown = (*ctx.extra_roots, *program_files(config, ctx), *config.roots)  # roots: a plugin's folder
    ctx, launched = confined(config.launch, config.fetch, dataclasses.replace(ctx, extra_roots=shown))
    command = sandbox.command(argv(config), ctx)
    cgroup = pidlimit.make(command.max_processes, command.max_memory_mb)
    started = command.argv if cgroup is None else pidlimit.enter(command.argv, cgroup)
    try:
        proc = await anyio.open_process(
            started, env={**command.env, **launched, **config.env}, cwd=ctx.workspace, start_new_session=True
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
        lines = Lines(max_message)
        try:
            async with incoming:
                async for chunk in proc.stdout:
                    for line in lines.feed(chunk):
                        if not line.strip():
                            continue
                        try:
                            parsed = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                            item: SessionMessage | Exception = SessionMessage(parsed)
                        except ValueError as e:
                            item = e
                        await incoming.send(item)
        except MessageTooLarge as e:
            process.broken = str(e)
            with anyio.CancelScope(shield=True):
                await kill_group(proc.pid, grace=0)
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


class MessageTooLarge(TeamrtError):
    """A server's message (one line) over the transport's limit."""


class Lines:
    """A byte stream split into lines (without their ``\\n``) in linear time and bounded memory: each
    chunk is searched once, a line's pieces joined once, and a line longer than ``limit`` bytes raises
    ``MessageTooLarge`` as soon as it is known to be."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pieces: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes."""
        found: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:end])
            found.append(self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces))
            self._pieces, self._size = [], 0
            start = end + 1
        if start < len(chunk):
            self._keep(chunk[start:])
        return found

    @property
    def pending(self) -> int:
        """Bytes of the unfinished line kept."""
        return self._size

    def _keep(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._size > self.limit:
            self._pieces, self._size = [], 0
            raise MessageTooLarge(
                f"it sent a message of more than {self.limit:,} bytes, the most teamrt reads from a server"
            )
        self._pieces.append(piece)


def transport_for(
    config: ServerConfig,
    ctx: Confinement,
    sandbox: Sandbox,
    process: Process,
    on_started: OnStarted,
    *,
    private_hosts: tuple[str, ...] = (),
    max_message: int = MAX_MESSAGE_BYTES,
) -> contextlib.AbstractAsyncContextManager[Any]:
    """The transport that reaches ``config``'s server: HTTP or SSE (``teamrt.mcp.remote``) only at
    ``private_hosts`` among the private addresses; messages of at most ``max_message`` bytes."""
    if config.transport == "http":
        return http_transport(config, private_hosts, max_message)
    if config.transport == "sse":
        return sse_transport(config, private_hosts, max_message)
    return stdio_transport(config, ctx, sandbox, process, on_started, max_message)
