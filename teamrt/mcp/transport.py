"""How teamrt reaches an MCP server: a confined stdio process of its own, or streamable HTTP.

``stdio`` is teamrt's own transport rather than the SDK's ``stdio_client``,
for three reasons: the SDK does not say which process it started, and teamrt
journals every process it starts (pid and start time) so that a resume can
kill what a crash left; the server must run as a hook or a ``Bash`` command
does, in the sandbox (``teamrt.sandbox.bwrap``), in a process group of its
own; and a hostile server's output must cost teamrt's process linear time and
bounded memory (``Lines``: a message over ``MAX_MESSAGE_BYTES`` stops the
server). The framing is the SDK's: one JSON-RPC message per line.

``http`` is the SDK's streamable HTTP client with the configured headers,
through WebFetch's address checks (``teamrt.tools.web.address``): the URL's
host is resolved once, every address must be public unless the team file
names the host (``[mcp] private_hosts`` or ``[web] private_hosts``), and every
request connects to the address checked (``_pinned_transport``), to that origin only.
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
from teamrt.procs import kill_group
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.tools.base import ToolError
from teamrt.tools.web.address import IPAddress, Target, resolve, target

if TYPE_CHECKING:
    import httpx2
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

    ctx = dataclasses.replace(ctx, extra_roots=(*ctx.extra_roots, *program_files(config, ctx)))
    command = sandbox.command(argv(config), ctx)
    cgroup = pidlimit.make(command.max_processes, command.max_memory_mb)
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


# -- HTTP ------------------------------------------------------------------------------------------------

_TIMEOUT, _READ_TIMEOUT = 30.0, 300.0
"""The SDK's own: connecting and writing, and reading (a response stream may stay open)."""


MCP_RULE = (
    "an HTTP MCP server is reached only at public addresses unless the team file's [mcp] private_hosts"
    " names the host"
)


class AddressRefused(TeamrtError, ValueError):
    """An HTTP server's URL that teamrt does not connect to; the message says why, in one line."""


async def checked_address(url: str, private_hosts: tuple[str, ...]) -> tuple[Target, IPAddress]:
    """``url`` read as WebFetch reads it and its host resolved once: the address to connect to. Every
    address the name has must be public unless ``private_hosts`` names the host (``name``, ``name:port``);
    raises ``AddressRefused``."""
    try:
        found = target(url)
    except ToolError as e:
        raise AddressRefused(str(e).removeprefix("WebFetch: ")) from None
    return found, await resolve(found, private_hosts, refusal=AddressRefused, rule=MCP_RULE)


def _pinned_transport(found: Target, address: IPAddress, max_message: int) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport that sends every request to ``address`` (the one checked), keeping the name in
    ``Host`` and TLS's server name, and refuses a request to any other origin (a redirect elsewhere). A
    JSON answer over ``max_message`` bytes fails as one the SDK cannot parse (an event stream's events
    are bounded by the SDK's ``max_sse_event_size``, which ``http_transport`` sets to the same)."""
    import httpx2

    class TooLarge(httpx2.StreamError):
        """An answer over the limit: the SDK turns it into the request's error."""

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, stream: Any) -> None:
            self.stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self.stream:
                seen += len(chunk)
                if seen > max_message:
                    raise TooLarge(
                        f"the server sent an answer of more than {max_message:,} bytes, the most teamrt reads"
                    )
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    class Pinned(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport(trust_env=False)

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            url = request.url
            host = url.raw_host.decode("ascii").lower().removesuffix(".")
            if (url.scheme, host, url.port or found.port) != (found.url.scheme, found.host, found.port):
                raise httpx2.ConnectError(f"refused: {url.scheme}://{host} is not the server's origin")
            request.url = url.copy_with(host=str(address))
            if url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": found.host}
            response = await self.inner.handle_async_request(request)
            if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                return response
            return httpx2.Response(
                response.status_code, headers=response.headers, stream=Capped(response.stream),
                extensions=response.extensions,
            )  # fmt: skip

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Pinned()


@contextlib.asynccontextmanager
async def http_transport(
    config: ServerConfig, private_hosts: tuple[str, ...] = (), max_message: int = MAX_MESSAGE_BYTES
) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP client for ``config.url``, sending ``config.headers`` with each request,
    connected only to the address ``checked_address`` allows; answers of at most ``max_message`` bytes."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    found, address = await checked_address(config.url, private_hosts)
    client = httpx2.AsyncClient(
        headers=dict(config.headers), timeout=httpx2.Timeout(_TIMEOUT, read=_READ_TIMEOUT), trust_env=False,
        transport=_pinned_transport(found, address, max_message),
    )  # fmt: skip
    reading = streamable_http_client(config.url, http_client=client, max_sse_event_size=max_message)
    async with client, reading as streams:
        yield streams


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
    """The transport that reaches ``config``'s server: HTTP only at ``private_hosts`` among the private
    addresses; stdio messages of at most ``max_message`` bytes."""
    if config.transport == "http":
        return http_transport(config, private_hosts, max_message)
    return stdio_transport(config, ctx, sandbox, process, on_started, max_message)
