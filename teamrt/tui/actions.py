"""What the TUI does to a run: mail (a message, a stop, an answer to an ask) and starting a resume.

Each returns the one line to show the user and raises ``ActionFailed`` with
one line when it cannot be done. The TUI never writes the store: these go
through ``teamrt.runs.query`` (mail) or a ``teamrt resume --detach`` process. They
block; the app runs them in worker threads.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from teamrt.errors import TeamrtError
from teamrt.runs import query as runs
from teamrt.runs.steer import Sent
from teamrt.store import StoreError

RESUME_TIMEOUT_S = 60.0

Action = Callable[[], str]


class ActionFailed(TeamrtError):
    """Why an action was not done, in one line."""


def message(run_dir: Path, run_id: str, agent: str, text: str) -> str:
    try:
        sent, status = runs.send(run_dir, run_id, agent, text)
    except (runs.RunsError, StoreError, OSError) as e:
        raise ActionFailed(str(e)) from None
    later = "" if status == "running" else f" (the run is {status}; it is read when the run goes on)"
    return f"sent to {agent}{_via(sent)}: {sent.message.summary}{later}"


def _via(sent: Sent) -> str:
    if not sent.through_database:
        return ""
    if sent.owner_host is None:
        return " through the database (a resume delivers it)"
    return f" through {sent.owner_host}" + ("" if sent.taken else " (not taken yet)")


def stop(run_dir: Path, run_id: str, agent: str) -> str:
    try:
        sent, _ = runs.stop(run_dir, run_id, agent)
    except (runs.RunsError, StoreError, OSError) as e:
        raise ActionFailed(str(e)) from None
    return f"asked the supervisor{_via(sent)} to stop {agent}"


def answer(run_dir: Path, run_id: str, ask: runs.PendingAsk, allow: bool) -> str:
    try:
        sent = runs.answer(run_dir, run_id, ask.id, allow)
    except (runs.RunsError, StoreError, OSError) as e:
        raise ActionFailed(str(e)) from None
    verdict = "approved" if allow else "denied"
    return f"{verdict} {ask.agent}'s {runs.describe_call(ask.tool, ask.input)}{_via(sent)}"


def resume(run_id: str) -> str:
    """Start ``teamrt resume RUN --detach``; it returns once the new owner holds the run."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "teamrt", "resume", run_id, "--detach"],
            capture_output=True, text=True, timeout=RESUME_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ActionFailed(f"could not start teamrt resume: {e}") from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines() or [f"teamrt resume exited with {done.returncode}"]
        raise ActionFailed(said[-1])
    return f"resumed run {run_id}: it goes on in the background"
