"""A run handed to a process of its own: ``teamrt run|resume`` in a new session, waited for until it owns it.

``teamrt run --detach``, ``resume --detach`` and ``run --tui`` start the run in a process that
outlives the command: its stdin closed, its output appended to the run's ``output.log``, its session
its own, so that the terminal's signals never reach it. ``start`` returns once the run's store shows
that process (so that ``teamrt logs``, ``show`` and ``ls`` find the run), or once it ended first:
then it did not start, and its output's last lines say why (``NotStarted``). The TUI resumes a crashed
run through ``teamrt resume --detach`` the same way (``resume``), never in its own process.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from teamrt.errors import TeamrtError
from teamrt.procs import python_module
from teamrt.runs.follow import OUTPUT_LOG

DETACH_WAIT_S = 60.0  # how long ``start`` waits for the run's store before it returns anyway
DETACH_POLL_S = 0.05
TAIL_LINES = 10  # of a detached run's output.log, shown when it did not start
RESUME_TIMEOUT_S = 60.0


class NotStarted(TeamrtError):
    """The process ended before its run was ready: ``code`` its exit status, ``tail`` the last lines of
    its ``output``."""

    def __init__(self, code: int, tail: list[str], output: Path) -> None:
        super().__init__(f"exit {code}; its output is in {output}")
        self.code = code
        self.tail = tail
        self.output = output


class ResumeFailed(TeamrtError):
    """``teamrt resume --detach`` (or ``continue --detach``) did not take the run over; the message is one
    line saying why."""


def start(argv: list[str], run_dir: Path, ready: Callable[[], bool]) -> bool:
    """Start ``teamrt argv`` in a session of its own, its output appended to the run's output.log, and
    wait until ``ready()`` (True), until ``DETACH_WAIT_S`` passed (False: it has not started yet, and may
    still), or until the process's end (``NotStarted``)."""
    output = run_dir / OUTPUT_LOG
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            python_module("teamrt", *argv),
            stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # output.log follows the run as it goes
        )  # fmt: skip
    finally:
        os.close(fd)
    deadline = time.monotonic() + DETACH_WAIT_S
    while True:
        code = child.poll()  # before ready(): a run that ended that fast still counts as started
        if ready():
            return True
        if code is not None:
            tail = output.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
            raise NotStarted(code, tail, output)
        if time.monotonic() >= deadline:
            return False
        time.sleep(DETACH_POLL_S)


def resume(run_id: str) -> None:
    """Run ``teamrt resume RUN --detach``: it returns once the new owner holds the run."""
    _take_over(["resume", run_id, "--detach"])


def follow_up(run_id: str, prompt: str) -> None:
    """Run ``teamrt continue RUN --prompt PROMPT --detach`` (the TUI's ``c``): it returns once the new
    owner holds the run, its next round begun."""
    _take_over(["continue", run_id, f"--prompt={prompt}", "--detach"])


def _take_over(argv: list[str]) -> None:
    """Run ``teamrt argv`` (a command that takes a run over in the background), to its return."""
    command = f"teamrt {argv[0]}"
    try:
        done = subprocess.run(
            python_module("teamrt", *argv),
            capture_output=True, text=True, timeout=RESUME_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ResumeFailed(f"could not start {command}: {e}") from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines() or [f"{command} exited with {done.returncode}"]
        raise ResumeFailed(said[-1])
