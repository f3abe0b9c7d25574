"""The ``Bash`` tool: one command in a fresh shell, sandboxed, in a process group of its own.

The group is the unit of cleanup. When the command ends, whatever it left
running in the background is ended too (inside bubblewrap the PID namespace
does that anyway; unconfined, ``kill_group`` does it), so every call behaves
the same. When the command times out, has more processes than the run allows,
or the agent running it is cancelled, the whole group is killed before the
tool returns or re-raises.

The process limit is watched here, not left to ``RLIMIT_NPROC``: the kernel
does not apply that to root, and counts all of a user's processes, not the
command's. Every ``WATCH_SECONDS`` the command's process tree is counted (in
its PID namespace no process leaves the tree; unconfined, its group is counted
too), and the group is killed once the tree is over the limit. Where teamrt may
make a cgroup, the kernel holds the limit exactly (``teamrt.sandbox.limits``).

Memory is held for the command as a whole, not per process: by its cgroup
where teamrt may make one (the kernel kills a process over the limit, and the
tool then ends the command, saying why), else by a total taken here every
``MEMORY_EVERY`` looks: the proportional set sizes of the command's processes
(shared pages once, ``MAP_SHARED`` memory counted) plus what its in-memory
places (``/tmp``, ``/dev/shm``, ...) hold; over ``max_memory_mb`` the group is
killed. The total can be outrun between two looks; the cgroup cannot.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import itertools
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.procs import group_members, kill_group, tree
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox.bwrap import SHM, TMP, Command, MiB, Sandbox, default_sandbox, sizes
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.sandbox.quarantine import absent, describe, quarantine
from teamrt.tools import toolargs
from teamrt.tools.base import OnProcess, ToolContext, ToolError, ToolResult
from teamrt.tools.shell.gitguard import git_escape

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
"""Seconds; the model gives its ``timeout`` in milliseconds, as to Claude Code's Bash."""
OUTPUT_CHARS = 30_000
"""Output beyond this keeps its beginning and its end."""
DRAIN_SECONDS = 1.0
"""After the group is gone, how long to wait for the output pipe to close (a process that left the
group may hold it open; unconfined, nothing stops that)."""
WATCH_SECONDS = 0.05
"""How often a command's processes are counted."""
MEMORY_EVERY = 4
"""Every how many counts the memory of a command without a memory cgroup is totalled (it reads each
process's ``smaps_rollup``, which costs more than a count)."""
_CHUNK = 65_536


@dataclass(frozen=True)
class BashLimits:
    """A run's limits for Bash commands: Claude Code's ``BASH_DEFAULT_TIMEOUT_MS``,
    ``BASH_MAX_TIMEOUT_MS`` and ``BASH_MAX_OUTPUT_LENGTH`` when its settings set them
    (``teamrt.claudecode.envknobs``), else these defaults. Seconds and characters."""

    timeout: float = DEFAULT_TIMEOUT
    max_timeout: float = MAX_TIMEOUT
    output_chars: int = OUTPUT_CHARS


def _description(limits: BashLimits) -> str:
    return DESCRIPTION.replace(f"Output over {OUTPUT_CHARS:,}", f"Output over {limits.output_chars:,}")


def _schema(limits: BashLimits) -> dict[str, Any]:
    timeout = {
        "type": "number",
        "description": f"Milliseconds before the command is killed (default {limits.timeout * 1000:g},"
        f" at most {limits.max_timeout * 1000:g}).",
    }
    return {**SCHEMA, "properties": {**SCHEMA["properties"], "timeout": timeout}}


DESCRIPTION = (
    "Run a shell command with /bin/bash in the workspace and get its output (stdout and stderr together)"
    " and its exit code when that is not 0. Each call starts a fresh shell in the workspace directory:"
    " cd, variables and background processes do not carry over, and anything still running when the"
    " command ends is stopped. The workspace is the only writable place on disk; /tmp is private to the"
    " call and held in the command's memory (write large files in the workspace), home directories are"
    " hidden, the network is off unless the run allows it, and the processes,"
    f" memory and file sizes of a command are limited. Output over {OUTPUT_CHARS:,} characters keeps its"
    " beginning and end."
    " Prefer Read, Edit, Glob, Grep and LS for files. Commands cannot run in the background."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command, run as /bin/bash -c COMMAND."},
        "description": {
            "type": "string",
            "description": "What the command does, in 5-10 words, for the person watching the run.",
        },
        "timeout": {
            "type": "number",
            "description": f"Milliseconds before the command is killed (default {DEFAULT_TIMEOUT * 1000:g},"
            f" at most {MAX_TIMEOUT * 1000:g}).",
        },
        "run_in_background": {
            "type": "boolean",
            "description": "Not supported: every command ends with its call (leave it out or false).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


class Bash:
    """The ``Bash`` tool. ``sandbox`` defaults to the process's (bwrap when installed)."""

    name = "Bash"
    description = DESCRIPTION
    input_schema = SCHEMA
    read_only = False

    def __init__(self, sandbox: Sandbox | None = None, limits: BashLimits | None = None) -> None:
        self.sandbox = sandbox
        self.limits = limits or BashLimits()
        if limits is not None:  # the model is told the run's limits
            self.description = _description(self.limits)
            self.input_schema = _schema(self.limits)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = input.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("Bash: command must be a non-empty string")
        timeout = _timeout(input.get("timeout", self.limits.timeout * 1000), self.limits.max_timeout)
        if not isinstance(input.get("description", ""), str):
            raise ToolError("Bash: description must be a string")
        if toolargs.flag(input, "Bash", "run_in_background"):
            raise ToolError(
                "Bash: run_in_background is not supported: each command ends with its call, and what it"
                " leaves running is stopped; run it in the foreground with a timeout of up to"
                f" {self.limits.max_timeout * 1000:g} ms"
            )
        escape = git_escape(command, ctx.workspace)
        if escape is not None:
            raise ToolError(f"Bash: refused: {escape}")
        sandbox = self.sandbox or default_sandbox()
        refusal = sandbox.refusal(ctx.policy)
        if refusal is not None:
            raise ToolError(f"Bash: refused: {refusal}")
        missing = absent(ctx.confinement) if ctx.guard is None else []
        try:
            confined = sandbox.command(command, ctx.confinement)
            done = await run_in_group(
                confined, ctx.workspace, timeout, ctx.on_process, output_chars=self.limits.output_chars
            )
        finally:  # a cancelled command was stopped: what it made is moved out all the same
            refused = await asyncio.shield(_protected_after(ctx, missing))
        text = done.output or "(no output)"
        if refused is not None:
            return ToolResult(f"{text}\n{refused}", is_error=True)
        if done.code is None:
            return ToolResult(f"{text}\n[{done.killed}]", is_error=True)
        if done.code:
            return ToolResult(f"{text}\n[{_exit_note(done.code, ctx.policy, text)}]", is_error=True)
        return ToolResult(text)


async def _protected_after(ctx: ToolContext, missing: list[Path]) -> str | None:
    """What the command created or changed among the protected paths, moved out by the run's guard (by
    the old check of ``missing`` paths outside a run): the note for the model, or None."""
    if ctx.guard is not None:
        moved = await ctx.guard.check(ctx.workspace, cause="Bash", agent=ctx.agent or None)
        return describe(moved, "the command") if moved else None
    old = await asyncio.to_thread(quarantine, missing, ctx.confinement)
    if not old:
        return None
    shown = ", ".join(f"{path.name} (moved to {keep})" for path, keep in old)
    why = "no agent may create .git, .claude, .mcp.json or agent definitions, in any permission mode"
    return f"[refused: the command created {shown}; {why}]"


def _timeout(value: Any, most: float = MAX_TIMEOUT) -> float:
    """The command's time limit in seconds, from the model's ``timeout`` in milliseconds (at most
    ``most`` seconds)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= most * 1000:
        raise ToolError(f"Bash: timeout must be a number of milliseconds above 0 and at most {most * 1000:g}")
    return float(value) / 1000


def _exit_note(code: int, policy: SandboxPolicy, output: str = "") -> str:
    """``exit code 3``, ``killed by SIGSEGV``; a death by SIGXFSZ (bwrap passes it on as 128 + 25) says
    why, and so does a full in-memory place (``No space left on device`` in the output)."""
    said = f"killed by {_signal_name(-code)}" if code < 0 else f"exit code {code}"
    if signal.SIGXFSZ in (-code, code - 128):
        said += f": a file reached the size limit of {policy.max_file_mb} MiB"
    elif signal.SIGSYS in (-code, code - 128):
        said += ": a system call through an ABI the sandbox refuses (i386's int 0x80 or x32 on x86_64)"
    elif signal.SIGBUS in (-code, code - 128):
        room = sizes(policy, [TMP])
        said += (
            ": a file mapped in memory was bigger than the room left for it (/dev/shm holds at most"
            f" {room[SHM] // MiB} MiB and /tmp {room[TMP] // MiB} MiB)"
        )
    elif os.strerror(errno.ENOSPC) in output:
        room = sizes(policy, [TMP])
        said += (
            f"; no space left: /tmp holds at most {room[TMP] // MiB} MiB and /dev/shm {room[SHM] // MiB} MiB,"
            f" in memory (from max_memory_mb, {policy.max_memory_mb} MiB); write large files in the workspace"
        )
    return said


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass(frozen=True)
class Finished:
    code: int | None
    """The exit code (negative: the signal that ended it), or None when teamrt killed it."""
    output: str
    killed: str = ""
    """Why teamrt killed it, as the reader sees it: ``timed out after 5 s; ...``."""


async def run_in_group(
    command: Command,
    cwd: Path,
    timeout: float,
    on_process: OnProcess | None = None,
    *,
    output_chars: int = OUTPUT_CHARS,
) -> Finished:
    """Run ``command`` in a new session with stdin from /dev/null; its output is capped at
    ``output_chars`` characters (its beginning and its end kept).

    The group is killed on timeout, when the command has more processes than
    it may, on cancellation (then CancelledError is re-raised) and, for what
    the command left behind, when it ends.
    """
    output = _Output(output_chars)
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    cgroup = pidlimit.make(command.max_processes, command.max_memory_mb)
    try:
        argv = command.argv if cgroup is None else pidlimit.enter(command.argv, cgroup)
        proc = await _start(argv, cwd, write_fd, command.env)
        pump = asyncio.create_task(_pump(reader, output))
        try:
            code, killed = await _supervise(proc, command, timeout, on_process, cgroup)
            if not killed and cgroup is not None and pidlimit.out_of_memory(cgroup):
                code, killed = None, _memory_note(command)  # the kernel's kill ended it first
            await asyncio.wait([pump], timeout=DRAIN_SECONDS)
        finally:
            pump.cancel()
    finally:
        transport.close()
        if cgroup is not None:
            await asyncio.to_thread(pidlimit.remove, cgroup)
    return Finished(code, output.text(), killed)


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
        raise ToolError(f"Bash: could not start {argv[0]} in {cwd}: {e.strerror}") from e
    finally:
        os.close(stdout_fd)


async def _supervise(
    proc: asyncio.subprocess.Process,
    command: Command,
    timeout: float,
    on_process: OnProcess | None,
    cgroup: pidlimit.Cgroups | None,
) -> tuple[int | None, str]:
    """Wait for ``proc``: (its exit code, "") or (None, why it was killed); then kill its group, however
    the wait ended."""
    try:
        if on_process is not None:
            await on_process(proc.pid)
        ended = asyncio.ensure_future(proc.wait())
        crowded = asyncio.ensure_future(_over_limit(proc.pid, command, cgroup))
        try:
            done, _ = await asyncio.wait(
                [ended, crowded], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ended.cancel()  # no-op for one that is done
            crowded.cancel()
        if ended in done:
            return ended.result(), ""
        if crowded in done:
            await kill_group(proc.pid, grace=0)
            return None, crowded.result()
        return None, f"timed out after {timeout:g} s; the command and all it started were killed"
    finally:
        await asyncio.shield(_end(proc))


async def _over_limit(pid: int, command: Command, cgroup: pidlimit.Cgroups | None) -> str:
    """Return why, once the command started by ``pid`` has more than ``command.max_processes`` processes
    or the kernel refused it one more (in its ``cgroup``), or its memory is over ``max_memory_mb``."""
    totalled = command.max_memory_mb is not None and (cgroup is None or cgroup.memory is None)
    for look in itertools.count(1):
        await asyncio.sleep(WATCH_SECONDS)
        members = tree(pid)
        if not command.contained:  # an orphan leaves the tree, not the group
            members.update(group_members(pid))
        if len(members) > command.max_processes or (cgroup is not None and pidlimit.refused(cgroup)):
            return f"killed: more than {command.max_processes} processes"
        if cgroup is not None and pidlimit.out_of_memory(cgroup):
            return _memory_note(command)
        if totalled and look % MEMORY_EVERY == 0:
            used = await asyncio.to_thread(_memory_used, pid, members, command)
            if used > (command.max_memory_mb or 0):
                return _memory_note(command)
    raise AssertionError("unreachable")


def _memory_used(pid: int, members: set[int], command: Command) -> float:
    """The command's memory in MiB: its processes and, seen through a process inside the sandbox, what
    its in-memory places hold."""
    inside = next((m for m in members if m != pid and _own_mounts(m)), None)
    places = [f"/proc/{inside}/root{place}" for place in command.in_memory] if inside is not None else []
    return pidlimit.used_mb(members, places)


def _own_mounts(pid: int) -> bool:
    """Whether ``pid`` sees mounts of its own (it is inside bubblewrap's mount namespace)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    except OSError:
        return False


def _memory_note(command: Command) -> str:
    return (
        f"killed: the command used more than {command.max_memory_mb} MiB of memory (max_memory_mb: all its"
        " processes together, with their shared memory and what they keep in /tmp and /dev/shm)"
    )


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
