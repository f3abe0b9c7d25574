"""``teamrt ... | head``: a reader that goes away early ends the command quietly, never with a traceback
or Python's "Exception ignored ... BrokenPipeError" at exit (which is what a block-buffered stdout meets
when the last lines are flushed after the reader left)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teamrt.store import Store, create_store
from tests.helpers.waiting import within

TIMEOUT_S = 60


def child_env() -> dict[str, str]:
    """This environment with stdout block-buffered, as a person's shell has it."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def new_run(runs: Path, run: str, events: int) -> Store:
    (runs / run).mkdir()
    store = create_store(runs / run, run, task="a task", workdir="/w")

    async def fill() -> None:
        await store.add_agent("lead", kind="lead", model="sim")
        for i in range(events):
            reason = f"step {i} " + "x" * 150  # a full line of ``logs``: a few hundred fill a pipe
            await store.append_event("agent.status", {"status": "running", "reason": reason}, agent="lead")

    asyncio.run(fill())
    return store


def finished_run(runs: Path, run: str, events: int = 3) -> None:
    with new_run(runs, run, events) as store:
        asyncio.run(store.set_run_status("done"))


@pytest.mark.parametrize(
    "args", [["show", "r1"], ["show", "r1", "--json"], ["ls"], ["logs", "r1"], ["logs", "r1", "-f"]]
)
def test_a_reader_gone_before_anything_is_written_ends_the_command_quietly(
    runs: Path, args: list[str]
) -> None:
    finished_run(runs, "r1")
    read, write = os.pipe()
    os.close(read)  # the reader left at once: every write of the command fails
    try:
        result = subprocess.run(
            [sys.executable, "-m", "teamrt", *args], stdout=write, stderr=subprocess.PIPE,
            text=True, env=child_env(), timeout=TIMEOUT_S,
        )  # fmt: skip
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == 1


@pytest.mark.parametrize("command", ["logs r1 | head -1", "show r1 | head -1", "logs r1 -f | head -2"])
def test_head_takes_the_first_lines_and_nothing_else_is_said(runs: Path, command: str) -> None:
    finished_run(runs, "r1", events=600)  # more than a pipe holds: the writer meets the closed pipe
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{sys.executable} -m teamrt {command}"],
        capture_output=True, text=True, env=child_env(), timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.stderr == ""
    assert len(result.stdout.splitlines()) == int(command[-1])
    assert result.stdout.startswith(
        "   +0.0s  run           run.created" if "logs" in command else "run r1: done"
    )


def test_following_a_live_run_whose_reader_left_ends_quietly_with_the_run(runs: Path) -> None:
    store = new_run(runs, "r1", events=0)  # owned by this process: live until it ends
    with store:
        follower = subprocess.Popen(
            [sys.executable, "-m", "teamrt", "logs", "r1", "-f"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
        )  # fmt: skip
        assert follower.stdout is not None and follower.stderr is not None
        first = within(TIMEOUT_S, follower.stdout.readline)
        assert "run.created" in first
        follower.stdout.close()  # `| head -1`: the reader is gone while the run goes on
        asyncio.run(store.append_event("agent.status", {"status": "idle"}, agent="lead"))
        asyncio.run(store.set_run_status("done"))
    assert within(TIMEOUT_S, follower.wait) == 1
    assert follower.stderr.read() == ""
    follower.stderr.close()
