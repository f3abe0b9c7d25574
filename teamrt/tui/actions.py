"""What the TUI does to a run: mail (a message, a stop, an answer to an ask), starting a resume or a
follow-up round.

Each returns the one line to show the user and raises ``ActionFailed`` with
one line when it cannot be done. The TUI never writes the store: these go
through ``teamrt.runs.steer`` (mail) or a ``teamrt resume --detach`` process
(``teamrt.runs.detach``). They block; the app runs them in worker threads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from teamrt.errors import TeamrtError
from teamrt.runs import detach, steer
from teamrt.runs.query import PendingAsk, RunsError
from teamrt.runs.render import describe_call
from teamrt.runs.steer import Sent
from teamrt.store import StoreError

Action = Callable[[], str]


class ActionFailed(TeamrtError):
    """Why an action was not done, in one line."""


def message(run_dir: Path, run_id: str, agent: str, text: str) -> str:
    try:
        sent, status = steer.send(run_dir, run_id, agent, text)
    except (RunsError, StoreError, OSError) as e:
        raise ActionFailed(str(e)) from None
    later = "" if status == "running" else f" (the run is {status}; it is read when the run goes on)"
    return f"sent to {agent}: {sent.message.summary}{later}{_note(sent)}"


def _note(sent: Sent) -> str:
    """How a message to a run on another host went (``steer.describe``), after a "; "; "" for one here."""
    said = steer.describe(sent)
    return "" if said is None else f"; {said}"


def stop(run_dir: Path, run_id: str, agent: str) -> str:
    try:
        sent, _ = steer.stop(run_dir, run_id, agent)
    except (RunsError, StoreError, OSError) as e:
        raise ActionFailed(str(e)) from None
    return f"asked the supervisor to stop {agent}{_note(sent)}"


def answer(
    run_dir: Path, run_id: str, ask: PendingAsk, allow: bool, *, always: bool = False, note: str | None = None
) -> str:
    """Answer ``ask``: allow (``always``: the run also adds the ask's rule to .claude/settings.local.json
    and its live rules, as ``teamrt.runtime.always`` does) or deny (``note``: for the agent)."""
    try:
        sent = steer.answer(run_dir, run_id, ask.id, allow, note, always=always)
    except (RunsError, StoreError, OSError) as e:
        raise ActionFailed(str(e)) from None
    verdict = "approved" if allow else "denied"
    said = f"{verdict} {ask.agent}'s {describe_call(ask.tool, ask.input)}"
    if always:
        said += "; the run adds its rule to .claude/settings.local.json"
    return said + _note(sent)


def resume(run_id: str) -> str:
    """Start ``teamrt resume RUN --detach``; it returns once the new owner holds the run."""
    try:
        detach.resume(run_id)
    except detach.ResumeFailed as e:
        raise ActionFailed(str(e)) from None
    return f"resumed run {run_id}: it goes on in the background"


def follow_up(run_id: str, prompt: str) -> str:
    """Start ``teamrt continue RUN --prompt PROMPT --detach``; it returns once the run's next round began."""
    try:
        detach.follow_up(run_id, prompt)
    except detach.ResumeFailed as e:
        raise ActionFailed(str(e)) from None
    return f"run {run_id} goes on with your follow-up, in the background"
