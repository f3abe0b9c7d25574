"""The bash tool with real processes: the sandbox, process-group cleanup, limits, environment, output."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from teamrt.procs import group_members, is_running, kill_group, process_start_time
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.tools import Bash, ToolContext, ToolError, ToolResult
from tests.helpers.machine import needs_bwrap, shown_in_homes

SANDBOXES = [
    pytest.param(None, id="bwrap", marks=needs_bwrap),
    pytest.param(Sandbox(None), id="unconfined"),
]
UNCONFINED = SandboxPolicy(unconfined=True)
"""The run's opt-in: without bwrap, commands run unconfined (with bwrap it changes nothing)."""


def bash(ctx: ToolContext, command: str, sandbox: Sandbox | None = None, **input: Any) -> ToolResult:
    return asyncio.run(Bash(sandbox).run({"command": command, **input}, ctx))


Process = tuple[int, int]
"""(pid, start time)."""


def processes(argv: list[str], pgid: int | None = None) -> list[Process]:
    """Live processes whose command line is ``argv``, in group ``pgid`` when given (else anywhere)."""
    want = "\0".join(argv).encode() + b"\0"
    found = []
    for pid in (
        group_members(pgid) if pgid is not None else [int(p) for p in os.listdir("/proc") if p.isdigit()]
    ):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        start = process_start_time(pid)
        if cmdline == want and start is not None and is_running(pid, start):
            found.append((pid, start))
    return found


def survivors(found: list[Process]) -> list[Process]:
    """Those of ``found`` still running, which are then killed so a failing test leaves nothing behind."""
    alive = [p for p in found if is_running(*p)]
    for pid, _ in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


async def started(tool: asyncio.Task[ToolResult], pgids: list[int], argv: list[str], n: int) -> list[Process]:
    """Wait until ``n`` processes running ``argv`` exist in the tool's group (or anywhere, for ``n`` < 0)."""
    for _ in range(500):
        if pgids:
            found = processes(argv, pgids[0] if n > 0 else None)
            if len(found) >= abs(n):
                return found
        assert not tool.done(), tool.result()
        await asyncio.sleep(0.01)
    raise AssertionError(f"{argv} did not start")


# -- the sandbox ----------------------------------------------------------------------


@needs_bwrap
@pytest.mark.hostile
def test_outside_the_workspace_nothing_can_be_written(ctx: ToolContext) -> None:
    result = bash(ctx, "cd /; touch teamrt-x")
    assert result.is_error
    assert "Read-only file system" in result.content
    assert "[exit code 1]" in result.content
    assert not Path("/teamrt-x").exists()
    result = bash(ctx, 'python3 -c \'open("/etc/teamrt-x", "w")\'')
    assert result.is_error
    assert "Read-only file system" in result.content
    assert not Path("/etc/teamrt-x").exists()


@needs_bwrap
@pytest.mark.hostile
def test_every_run_inside_the_workspace_is_hidden_and_read_only(ctx: ToolContext) -> None:
    other = ctx.run_dir.parent / "r0"
    other.mkdir()
    (other / "run.db").write_text("another run's store\n")
    assert bash(ctx, "ls -A .teamrt/runs").content == "(no output)", "no run is shown, its own neither"
    result = bash(ctx, "cat .teamrt/runs/r0/run.db .teamrt/runs/r1/run.db")
    assert result.is_error
    assert "store" not in result.content
    assert result.text.count("No such file or directory") == 2
    for target in (".teamrt/runs/r1/new.db", ".teamrt/runs/r0", ".teamrt/new.db"):
        result = bash(ctx, f"mkdir -p {target}")
        assert result.is_error
        assert "Read-only file system" in result.content
    assert not (ctx.run_dir / "new.db").exists() and (ctx.run_dir / "run.db").read_text() == "secret store\n"
    assert sorted(p.name for p in other.iterdir()) == ["run.db"]


@needs_bwrap
@pytest.mark.hostile
def test_the_runs_spill_directory_is_readable_and_nothing_else_of_the_run(ctx: ToolContext) -> None:
    (ctx.run_dir / "spill").mkdir()
    (ctx.run_dir / "spill" / "big.txt").write_text("spilled\n")
    assert bash(ctx, "ls .teamrt/runs/r1; cat .teamrt/runs/r1/spill/big.txt").content == "spill\nspilled\n"
    assert "Read-only file system" in bash(ctx, "touch .teamrt/runs/r1/spill/x").content


def test_the_workspace_is_writable_and_the_cwd(ctx: ToolContext, ws: Path) -> None:
    result = bash(ctx, "pwd; mkdir -p out && echo made > out/f.txt")
    assert result == ToolResult(f"{ws}\n")
    assert (ws / "out/f.txt").read_text() == "made\n"


@needs_bwrap
def test_tmp_is_private_to_the_call(ctx: ToolContext) -> None:
    name = f"/tmp/teamrt-{uuid.uuid4().hex}"
    assert bash(ctx, f"echo inside > {name} && cat {name}").content == "inside\n"
    assert not Path(name).exists()


def test_without_bwrap_bash_is_refused_unless_the_run_opted_in(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as refused:
        bash(ctx, "echo one", Sandbox(None))
    said = str(refused.value)
    assert said.startswith("Bash: refused: bubblewrap (bwrap) is not installed")
    assert "teamrt run --unconfined" in said and "[sandbox] unconfined = true" in said
    opted_in = replace(ctx, policy=UNCONFINED)
    assert bash(opted_in, "echo two", Sandbox(None)).content == "two\n"


# -- the process group ----------------------------------------------------------------------


def test_on_process_gets_the_pid_of_a_running_group_leader(ctx: ToolContext) -> None:
    seen: list[tuple[int, int | None, int]] = []
    go = ctx.workspace / "go"
    os.mkfifo(go)  # the command lives until on_process has looked at it: a quick one could be reaped first

    async def on_process(pid: int) -> None:
        seen.append((pid, process_start_time(pid), os.getpgid(pid)))
        await asyncio.to_thread(go.write_text, "go\n")

    result = asyncio.run(
        Bash().run(
            {"command": "read -r _ < go; echo ok"},
            replace(ctx, on_process=on_process, policy=UNCONFINED),
        )
    )
    assert result.content == "ok\n"
    [(pid, start, pgid)] = seen
    assert start is not None
    assert pgid == pid


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize(
    ("command", "count"),
    [("sleep 1000", 1), ("sleep 1000 & wait", 1), ("bash -c 'sleep 1000' & sleep 1000 & wait", 2)],
)
def test_cancelling_the_tool_kills_everything_it_started(
    ctx: ToolContext, sandbox: Sandbox | None, command: str, count: int
) -> None:
    pgids: list[int] = []

    async def on_process(pid: int) -> None:
        pgids.append(pid)

    async def go() -> list[Process]:
        tool = asyncio.create_task(
            Bash(sandbox).run(
                {"command": command},
                replace(ctx, on_process=on_process, policy=UNCONFINED),
            )
        )
        sleepers = await started(tool, pgids, ["sleep", "1000"], count)
        tool.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tool
        return sleepers

    sleepers = asyncio.run(go())
    assert len(sleepers) == count
    assert survivors(sleepers) == []
    assert group_members(pgids[0]) == []


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_timeout_kills_the_group_and_reports_the_output_so_far(
    ctx: ToolContext, sandbox: Sandbox | None
) -> None:
    pgids: list[int] = []

    async def on_process(pid: int) -> None:
        pgids.append(pid)

    async def go() -> tuple[ToolResult, list[Process]]:
        context = replace(ctx, on_process=on_process, policy=UNCONFINED)
        tool = asyncio.create_task(
            Bash(sandbox).run({"command": "echo begun; sleep 1000 & wait", "timeout": 1000}, context)
        )
        sleepers = await started(tool, pgids, ["sleep", "1000"], 1)
        return await tool, sleepers

    result, sleepers = asyncio.run(go())
    assert result == ToolResult(
        "begun\n\n[timed out after 1 s; the command and all it started were killed]", is_error=True
    )
    assert survivors(sleepers) == []
    assert group_members(pgids[0]) == []


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_what_a_command_leaves_in_the_background_ends_with_it(
    ctx: ToolContext, sandbox: Sandbox | None
) -> None:
    pgids: list[int] = []

    async def on_process(pid: int) -> None:
        pgids.append(pid)

    context = replace(ctx, on_process=on_process, policy=UNCONFINED)
    result = asyncio.run(Bash(sandbox).run({"command": "sleep 1000 & echo left"}, context))
    assert result.content == "left\n"
    assert group_members(pgids[0]) == []


@needs_bwrap
@pytest.mark.hostile
def test_a_process_that_left_the_group_dies_with_the_sandbox(ctx: ToolContext) -> None:
    pgids: list[int] = []

    async def on_process(pid: int) -> None:
        pgids.append(pid)

    async def go() -> list[Process]:
        context = replace(ctx, on_process=on_process, policy=UNCONFINED)
        tool = asyncio.create_task(Bash().run({"command": "setsid sleep 1001 & wait"}, context))
        escaped = await started(tool, pgids, ["sleep", "1001"], -1)
        tool.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tool
        return escaped

    escaped = asyncio.run(go())
    assert survivors(escaped) == []


def test_kill_group_sends_sigkill_to_what_ignores_sigterm() -> None:
    proc = subprocess.Popen(["bash", "-c", "trap '' TERM; sleep 1000 & wait"], start_new_session=True)
    try:
        for _ in range(500):
            if processes(["sleep", "1000"], proc.pid):
                break
            asyncio.run(asyncio.sleep(0.01))
        sleepers = processes(["sleep", "1000"], proc.pid)
        assert sleepers
        asyncio.run(kill_group(proc.pid, grace=0.2))
        assert proc.wait(timeout=5) == -9
        assert survivors(sleepers) == []
    finally:
        proc.kill()
        proc.wait()


# -- what root inside may do, and the limits -------------------------------------------------

# The interpreter itself (a virtual environment's link lies under /tmp, which is private), and its
# installation, which may lie in a hidden home directory (~/.pyenv), named in [sandbox] read.
PYTHON = os.path.realpath(sys.executable)
PYTHON_HOME = os.path.realpath(sys.base_prefix)


@needs_bwrap
@pytest.mark.hostile
def test_every_capability_is_dropped_and_hard_limits_stay(ctx: ToolContext) -> None:
    assert bash(ctx, "grep CapEff /proc/self/status").content == "CapEff:\t0000000000000000\n"
    result = bash(ctx, "ulimit -H -f unlimited")
    assert result.is_error and "Operation not permitted" in result.content


@needs_bwrap
@pytest.mark.hostile
def test_homes_are_hidden_but_what_the_run_names_in_read(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "someone"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("private key\n")
    (home / ".pyenv").mkdir()
    (home / ".pyenv" / "version").write_text("3.11\n")
    monkeypatch.setenv("HOME", str(home))
    result = bash(ctx, "cat ~/.ssh/id_rsa")
    assert result.is_error and "private key" not in result.content
    assert "No such file or directory" in result.content
    listed = bash(ctx, "ls -A ~ /root /home").text.split()
    assert {f"{home}:", "/home:", "/root:"} <= set(listed)
    assert set(listed) - {f"{home}:", "/home:", "/root:"} <= shown_in_homes(), "only toolchains show"
    assert bash(ctx, "cat ~/.pyenv/version").content == "3.11\n", "a toolchain is shown by default"
    assert "Read-only file system" in bash(ctx, "touch ~/.pyenv/x").content
    (home / "tools").mkdir()
    (home / "tools" / "version").write_text("1.0\n")
    assert "No such file" in bash(ctx, "cat ~/tools/version").content
    reading = replace(ctx, policy=SandboxPolicy(read=("~/tools",)))
    assert bash(reading, "cat ~/tools/version").content == "1.0\n"
    assert "No such file" in bash(reading, "cat ~/.ssh/id_rsa").content
    assert "Read-only file system" in bash(reading, "touch ~/tools/x").content


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 (connections wait in its backlog); its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@needs_bwrap
@pytest.mark.hostile
def test_the_network_is_cut_unless_the_run_allows_it(ctx: ToolContext, listener: int) -> None:
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected"
    result = bash(ctx, connect, timeout=60_000)
    assert result.is_error and "Connection refused" in result.content
    assert (
        bash(replace(ctx, policy=SandboxPolicy(network=True)), connect, timeout=60_000).content
        == "connected\n"
    )


@needs_bwrap
@pytest.mark.hostile
def test_protected_paths_in_the_workspace_are_read_only_and_writable_dirs_inside_them_writable(
    ctx: ToolContext, ws: Path
) -> None:
    (ws / ".git" / "worktrees" / "a").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    context = replace(
        ctx, protected=(ws / ".git", ws / ".claude"), writable=(ws / ".git" / "worktrees" / "a",)
    )
    result = bash(context, "echo x >> .git/config; touch .git/worktrees/a/HEAD && echo wrote")
    assert result.text.endswith("Read-only file system\nwrote\n"), result.text
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert (ws / ".git" / "worktrees" / "a" / "HEAD").exists()


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.hostile
def test_a_command_with_too_many_processes_is_killed_with_all_it_started(
    ctx: ToolContext, sandbox: Sandbox | None
) -> None:
    pgids: list[int] = []

    async def on_process(pid: int) -> None:
        pgids.append(pid)

    policy = SandboxPolicy(unconfined=True, max_processes=20)
    context = replace(ctx, policy=policy, on_process=on_process)
    result = bash(
        context, "echo begun; for i in $(seq 200); do sleep 1003 & done; wait", sandbox, timeout=120_000
    )
    assert result.is_error and result.text.startswith("begun\n")
    assert result.text.endswith("\n[killed: more than 20 processes]")  # the kernel may refuse forks first
    assert group_members(pgids[0]) == []
    assert survivors(processes(["sleep", "1003"])) == []
    few = bash(context, "for i in $(seq 5); do sleep 0.2 & done; wait; echo fine", sandbox, timeout=120_000)
    assert few == ToolResult("fine\n")


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.hostile
def test_memory_and_file_size_are_limited(ctx: ToolContext, sandbox: Sandbox | None) -> None:
    policy = SandboxPolicy(unconfined=True, max_memory_mb=256, max_file_mb=1, read=(PYTHON_HOME,))
    context = replace(ctx, policy=policy)
    hog = bash(context, f"{PYTHON} -c 'bytearray(1 << 30)'", sandbox)
    assert hog.is_error and "MemoryError" in hog.content
    assert bash(context, f"{PYTHON} -c 'bytearray(64 << 20)' && echo fits", sandbox).content == "fits\n"
    big = bash(context, "head -c 3M /dev/zero > big.bin", sandbox)
    assert big.is_error and "a file reached the size limit of 1 MiB]" in big.content, big.content
    assert (ctx.workspace / "big.bin").stat().st_size == 1 << 20


# -- what the command sees and what the model gets --------------------------------------


@pytest.mark.hostile
def test_the_environment_is_an_allowlist_and_what_the_team_file_names(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("TEAMRT_DB", "postgresql://user:pw@db/teamrt")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("TEAMRT_TOOL_TEST", "named")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("TZ", "UTC")
    context = replace(ctx, env={"GIT_DIR_TEST": "from-context"})
    names = {line.partition("=")[0] for line in bash(context, "env").text.splitlines()}
    assert names - {"PWD", "SHLVL", "_", "OLDPWD"} <= {
        "PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME", "LC_TIME", "GIT_DIR_TEST",
        "PYTHONDONTWRITEBYTECODE",
    }  # fmt: skip
    assert {"PATH", "HOME", "TZ", "LC_TIME", "GIT_DIR_TEST"} <= names
    named = replace(context, policy=SandboxPolicy(env=("TEAMRT_TOOL_TEST", "ANTHROPIC_API_KEY")))
    output = bash(named, "env").content
    assert "TEAMRT_TOOL_TEST=named" in output
    assert "sk-ant-secret" not in output, "teamrt's own credentials are never passed, even when named"
    assert "ghp_secret" not in output and "aws-secret" not in output


def test_stdin_is_empty_and_stderr_is_merged(ctx: ToolContext) -> None:
    assert bash(ctx, "cat; echo out; echo err >&2", timeout=5000).content == "out\nerr\n"


def test_a_failing_command_is_an_error_with_its_exit_code(ctx: ToolContext) -> None:
    assert bash(ctx, "echo no; exit 3") == ToolResult("no\n\n[exit code 3]", is_error=True)
    assert bash(ctx, "true") == ToolResult("(no output)")


def test_long_output_keeps_its_head_and_tail_and_says_how_much_was_cut(ctx: ToolContext) -> None:
    full = "".join(f"{i}\n" for i in range(1, 100_001))
    content = bash(ctx, "seq 1 100000").text
    assert len(content) <= 30_000
    head, note, tail = re.split(r"\n(\[\.\.\. [\d,]+ characters cut from the middle \.\.\.\])\n", content)
    assert full.startswith(head)
    assert full.endswith(tail)
    assert int(re.sub(r"\D", "", note)) == len(full) - len(head) - len(tail)


@pytest.mark.parametrize("timeout", [0, -1, 600_001, "10", True])
def test_a_bad_timeout_is_refused(ctx: ToolContext, timeout: Any) -> None:
    with pytest.raises(
        ToolError, match="timeout must be a number of milliseconds above 0 and at most 600000"
    ):
        bash(ctx, "true", timeout=timeout)


def _cgroups_allowed() -> bool:
    probe = pidlimit.make(1)
    if probe is not None:
        pidlimit.remove(probe)
    return probe is not None


@pytest.mark.skipif(not _cgroups_allowed(), reason="no writable cgroup pids controller here (not root)")
@pytest.mark.hostile
def test_where_a_cgroup_can_be_made_the_kernel_refuses_the_fork_past_the_limit(ctx: ToolContext) -> None:
    limited = replace(ctx, policy=SandboxPolicy(max_processes=8))
    result = bash(limited, "for i in $(seq 50); do sleep 30 & done; wait")
    assert result.is_error and "Resource temporarily unavailable" in result.content
    assert result.text.endswith("[killed: more than 8 processes]")
    assert not [p for p in (pidlimit.PIDS / "teamrt").iterdir() if p.name.startswith(f"{os.getpid()}-")]


OWNER = """
import subprocess, sys, time
from teamrt.sandbox import limits
made = limits.make(8)
sleeper = subprocess.Popen(limits.enter(["sleep", "300"], made))
print(made.pids, sleeper.pid, flush=True)
time.sleep(300)
"""
NEXT_COMMAND = "from teamrt.sandbox import limits; limits.remove(limits.make(1))"


@pytest.mark.skipif(not _cgroups_allowed(), reason="no writable cgroup pids controller here (not root)")
def test_the_cgroup_of_an_owner_killed_mid_command_is_removed_by_the_next_owner_once_empty() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    path, sleeper = owner.stdout.readline().split()
    cgroup = Path(path)
    assert cgroup.name.startswith(f"{owner.pid}-")
    try:
        while not (cgroup / "cgroup.procs").read_text().split():
            asyncio.run(asyncio.sleep(0.01))  # the shell moves itself in, then becomes sleep
        owner.kill()  # mid-command: it never removes its cgroup
        owner.wait()
        subprocess.run([sys.executable, "-c", NEXT_COMMAND], check=True, timeout=60)
        assert cgroup.is_dir(), "a cgroup still holding a process stays"
    finally:
        os.kill(int(sleeper), signal.SIGKILL)
    for _ in range(500):
        if not (cgroup / "cgroup.procs").read_text().split():
            break
        asyncio.run(asyncio.sleep(0.01))
    subprocess.run([sys.executable, "-c", NEXT_COMMAND], check=True, timeout=60)
    assert not cgroup.exists(), "the next owner removed the dead owner's empty cgroup"
