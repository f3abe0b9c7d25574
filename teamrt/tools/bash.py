"""The ``bash`` tool: one command in a fresh shell, sandboxed, in a process group of its own.

The group is the unit of cleanup. When the command ends, whatever it left
running in the background is ended too (inside bubblewrap the PID namespace
does that anyway; unconfined, ``kill_group`` does it), so every call behaves
the same. When the command times out, or the agent running it is cancelled,
the whole group is killed before the tool returns or re-raises.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..procs import kill_group
from .base import OnProcess, ToolContext, ToolError, ToolResult
from .gitguard import git_escape
from .sandbox import Sandbox, default_sandbox

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
OUTPUT_CHARS = 30_000
"""Output beyond this keeps its beginning and its end."""
DRAIN_SECONDS = 1.0
"""After the group is gone, how long to wait for the output pipe to close (a process that left the
group may hold it open; unconfined, nothing stops that)."""
_CHUNK = 65_536

DESCRIPTION = (
    "Run a shell command with /bin/bash in the workspace and get its output (stdout and stderr together)"
    " and its exit code when that is not 0. Each call starts a fresh shell in the workspace directory:"
    " cd, variables and background processes do not carry over, and anything still running when the"
    " command ends is stopped. When sandboxed, the workspace is the only writable place and /tmp is"
    f" private to the call. Output over {OUTPUT_CHARS:,} characters keeps its beginning and end."
    " Prefer the read, edit, glob and grep tools for files."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command, run as /bin/bash -c COMMAND."},
        "timeout": {
            "type": "number",
            "description": f"Seconds before the command is killed (default {DEFAULT_TIMEOUT:g},"
            f" at most {MAX_TIMEOUT:g}).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


class Bash:
    """The ``bash`` tool. ``sandbox`` defaults to the process's (bwrap when installed)."""

    name = "bash"
    description = DESCRIPTION
    input_schema = SCHEMA
    read_only = False

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = input.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("bash: command must be a non-empty string")
        timeout = _timeout(input.get("timeout", DEFAULT_TIMEOUT))
        escape = git_escape(command, ctx.workspace)
        if escape is not None:
            raise ToolError(f"bash: refused: {escape}")
        argv = (self.sandbox or default_sandbox()).argv(
            command, ctx.workspace, ctx.run_dir, ctx.writable, ctx.readable
        )
        code, output = await run_in_group(argv, ctx.workspace, timeout, ctx.on_process, ctx.env)
        text = output or "(no output)"
        if code is None:
            return ToolResult(
                f"{text}\n[timed out after {timeout:g} s; the command and all it started were killed]",
                is_error=True,
            )
        if code < 0:
            return ToolResult(f"{text}\n[killed by {_signal_name(-code)}]", is_error=True)
        if code:
            return ToolResult(f"{text}\n[exit code {code}]", is_error=True)
        return ToolResult(text)


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT:
        raise ToolError(f"bash: timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}")
    return float(value)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def tool_env() -> dict[str, str]:
    """This process's environment without ``ANTHROPIC_*`` (credentials) and ``TEAMRT_DB`` (may hold one)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and k != "TEAMRT_DB"}


async def run_in_group(
    argv: list[str],
    cwd: Path,
    timeout: float,
    on_process: OnProcess | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int | None, str]:
    """Run ``argv`` in a new session with stdin from /dev/null: (exit code or None on timeout, capped output).

    The group is killed on timeout, on cancellation (then CancelledError is
    re-raised) and, for what the command left behind, when it ends.
    """
    output = _Output(OUTPUT_CHARS)
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    try:
        proc = await _start(argv, cwd, write_fd, {**tool_env(), **(env or {})})
        pump = asyncio.create_task(_pump(reader, output))
        try:
            code = await _supervise(proc, timeout, on_process)
            await asyncio.wait([pump], timeout=DRAIN_SECONDS)
        finally:
            pump.cancel()
    finally:
        transport.close()
    return code, output.text()


async def _start(
    argv: list[str], cwd: Path, stdout_fd: int, env: dict[str, str]
) -> asyncio.subprocess.Process:
    """Start ``argv`` writing stdout and stderr to ``stdout_fd``, which is closed here."""
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout_fd,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as e:
        raise ToolError(f"bash: could not start {argv[0]} in {cwd}: {e.strerror}") from e
    finally:
        os.close(stdout_fd)


async def _supervise(
    proc: asyncio.subprocess.Process, timeout: float, on_process: OnProcess | None
) -> int | None:
    """Wait for ``proc`` (None on timeout), then kill its group, however the wait ended."""
    try:
        if on_process is not None:
            await on_process(proc.pid)
        try:
            return await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            return None
    finally:
        await asyncio.shield(_end(proc))


async def _end(proc: asyncio.subprocess.Process) -> None:
    await kill_group(proc.pid)
    await proc.wait()


async def _pump(reader: asyncio.StreamReader, output: _Output) -> None:
    while chunk := await reader.read(_CHUNK):
        output.add(chunk)


class _Output:
    """Text read in chunks, of which only the first and last ``limit / 2`` characters are kept."""

    def __init__(self, limit: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._half = (limit - 100) // 2  # room for the note on what was cut
        self._head = ""
        self._tail = ""
        self._total = 0

    def add(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        self._total += len(text)
        room = self._half - len(self._head)
        self._head += text[:room]
        self._tail = (self._tail + text[room:])[-self._half :]

    def text(self) -> str:
        self.add(b"", final=True)
        cut = self._total - len(self._head) - len(self._tail)
        if cut:
            return f"{self._head}\n[... {cut:,} characters cut from the middle ...]\n{self._tail}"
        return self._head + self._tail
