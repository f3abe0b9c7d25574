"""The bash tool with real processes: the sandbox, process-group cleanup, environment, output."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_bwrap

from teamrt.procs import group_members, is_running, kill_group, process_start_time
from teamrt.tools import Bash, ToolContext, ToolError, ToolResult
from teamrt.tools.sandbox import WARNING, Sandbox, bwrap_options

SANDBOXES = [
    pytest.param(None, id="bwrap", marks=needs_bwrap),
    pytest.param(Sandbox(None), id="unconfined"),
]


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
def test_every_run_inside_the_workspace_stays_read_only(ctx: ToolContext) -> None:
    other = ctx.run_dir.parent / "r0"
    other.mkdir()
    for target in (".teamrt/runs/r1/new.db", ".teamrt/runs/r0/new.db"):
        result = bash(ctx, f"touch {target}")
        assert result.is_error
        assert "Read-only file system" in result.content
    assert not (ctx.run_dir / "new.db").exists() and not (other / "new.db").exists()


def test_the_workspace_is_writable_and_the_cwd(ctx: ToolContext, ws: Path) -> None:
    result = bash(ctx, "pwd; mkdir -p out && echo made > out/f.txt")
    assert result == ToolResult(f"{ws}\n")
    assert (ws / "out/f.txt").read_text() == "made\n"


@needs_bwrap
def test_tmp_is_private_to_the_call(ctx: ToolContext) -> None:
    name = f"/tmp/teamrt-{uuid.uuid4().hex}"
    assert bash(ctx, f"echo inside > {name} && cat {name}").content == "inside\n"
    assert not Path(name).exists()


def test_bwrap_binds_teamrt_home_read_only_only_when_it_is_inside_the_workspace(
    ctx: ToolContext, tmp_path: Path
) -> None:
    ws, home = str(ctx.workspace), str(ctx.run_dir.parent.parent)
    inside = bwrap_options(ctx.workspace, ctx.run_dir)
    assert inside[inside.index("--tmpfs") :] == [
        *("--tmpfs", "/tmp", "--bind", ws, ws, "--ro-bind", home, home),
        *("--unshare-pid", "--die-with-parent", "--chdir", ws),
    ]
    assert "--ro-bind" not in bwrap_options(ctx.workspace, tmp_path / "elsewhere" / "runs" / "r1")[1:]


def test_without_bwrap_commands_run_and_one_warning_is_printed(
    ctx: ToolContext, capsys: pytest.CaptureFixture[str]
) -> None:
    unconfined = Sandbox(None)
    assert bash(ctx, "echo one", unconfined).content == "one\n"
    assert bash(ctx, "echo two", unconfined).content == "two\n"
    assert capsys.readouterr().err == WARNING + "\n"


# -- the process group ----------------------------------------------------------------------


def test_on_process_gets_the_pid_of_a_running_group_leader(ctx: ToolContext) -> None:
    seen: list[tuple[int, int | None, int]] = []

    async def on_process(pid: int) -> None:
        seen.append((pid, process_start_time(pid), os.getpgid(pid)))

    result = asyncio.run(
        Bash().run({"command": "echo ok"}, ToolContext(ctx.workspace, ctx.run_dir, on_process=on_process))
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
                {"command": command}, ToolContext(ctx.workspace, ctx.run_dir, on_process=on_process)
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
        context = ToolContext(ctx.workspace, ctx.run_dir, on_process=on_process)
        tool = asyncio.create_task(
            Bash(sandbox).run({"command": "echo begun; sleep 1000 & wait", "timeout": 1}, context)
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

    context = ToolContext(ctx.workspace, ctx.run_dir, on_process=on_process)
    result = asyncio.run(Bash(sandbox).run({"command": "sleep 1000 & echo left"}, context))
    assert result.content == "left\n"
    assert group_members(pgids[0]) == []


@needs_bwrap
def test_a_process_that_left_the_group_dies_with_the_sandbox(ctx: ToolContext) -> None:
    pgids: list[int] = []

    async def on_process(pid: int) -> None:
        pgids.append(pid)

    async def go() -> list[Process]:
        context = ToolContext(ctx.workspace, ctx.run_dir, on_process=on_process)
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


# -- what the command sees and what the model gets --------------------------------------


def test_the_environment_has_no_anthropic_variables(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:1")
    monkeypatch.setenv("TEAMRT_DB", "postgresql://user:pw@db/teamrt")
    monkeypatch.setenv("TEAMRT_TOOL_TEST", "visible")
    output = bash(ctx, "env").content
    assert "TEAMRT_TOOL_TEST=visible" in output
    assert "ANTHROPIC" not in output
    assert "TEAMRT_DB" not in output
    assert "sk-ant-secret" not in output


def test_stdin_is_empty_and_stderr_is_merged(ctx: ToolContext) -> None:
    assert bash(ctx, "cat; echo out; echo err >&2", timeout=5).content == "out\nerr\n"


def test_a_failing_command_is_an_error_with_its_exit_code(ctx: ToolContext) -> None:
    assert bash(ctx, "echo no; exit 3") == ToolResult("no\n\n[exit code 3]", is_error=True)
    assert bash(ctx, "true") == ToolResult("(no output)")


def test_long_output_keeps_its_head_and_tail_and_says_how_much_was_cut(ctx: ToolContext) -> None:
    full = "".join(f"{i}\n" for i in range(1, 100_001))
    content = bash(ctx, "seq 1 100000").content
    assert len(content) <= 30_000
    head, note, tail = re.split(r"\n(\[\.\.\. [\d,]+ characters cut from the middle \.\.\.\])\n", content)
    assert full.startswith(head)
    assert full.endswith(tail)
    assert int(re.sub(r"\D", "", note)) == len(full) - len(head) - len(tail)


@pytest.mark.parametrize("timeout", [0, -1, 601, "10", True])
def test_a_bad_timeout_is_refused(ctx: ToolContext, timeout: Any) -> None:
    with pytest.raises(ToolError, match="timeout must be a number of seconds above 0 and at most 600"):
        bash(ctx, "true", timeout=timeout)
