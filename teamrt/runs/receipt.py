"""What ``teamrt send`` says after the message went: where it is, and whether the agent has read it.

A person who sends an agent a message wants to know it arrived and was read, not a bare id. Delivery
is known at once (``steer.Sent``: into the agent's mailbox here, or through the database to the run's
owner on another host). Reading is the agent's: a message is read when a turn of the agent takes it
in, which the run records in the same transaction (the ``mail`` table, ``ingested_at``): the read
receipt ``read_after`` waits for, for a few seconds, on a terminal. An agent that has ended, or a run
that is not live, will not read it, and ``expectation`` says so instead of making anyone wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from teamrt.runs.personmail import sent_time
from teamrt.runs.query import CRASHED, LIVE_AGENT, OWNED, reading, run_status
from teamrt.runs.steer import Sent, describe

POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class Standing:
    """The run and the recipient as the message found them."""

    run_status: str
    agent_status: str
    reason: str | None = None


def standing(run_dir: Path, run_id: str, agent: str) -> Standing:
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        record = reader.agent(agent)
    return Standing(run_status(run), record.status, record.status_reason)


def delivered_line(sent: Sent, agent: str) -> str:
    """``sent m-… to coder; delivered (in coder's inbox)``, or how it went through the database."""
    said = describe(sent) or f"delivered (in {agent}'s inbox)"
    return f"sent {sent.message.id} to {agent}; {said}"


def expectation(run_id: str, agent: str, now: Standing) -> str | None:
    """Why ``agent`` will not read the message soon (the run is not live, the agent has ended), in a
    line; None when it may read it any moment."""
    if now.run_status == CRASHED:
        return f"run {run_id} crashed: {agent} reads it once the run is resumed (teamrt resume {run_id})"
    if now.run_status not in OWNED:
        return f"run {run_id} is {now.run_status}: no agent reads mail now; it waits in {agent}'s mailbox"
    if now.agent_status not in LIVE_AGENT:
        why = f" ({' '.join(now.reason.split())})" if now.reason else ""
        return f"{agent} has ended, {now.agent_status}{why}: it will not read it"
    return None


def read_after(
    run_dir: Path, run_id: str, agent: str, msg_id: str, wait_s: float, *,
    clock: Callable[[], float] = time.monotonic,
) -> float | None:  # fmt: skip
    """Seconds from the message's send to its reading by ``agent`` (the run's read receipt), waiting up
    to ``wait_s`` for it; None when it is not read by then, or the agent ends first."""
    deadline = clock() + wait_s
    with reading(run_dir, run_id) as reader:
        while True:
            if msg_id in reader.ingested_ids(agent):
                mail = next(m for m in reader.mail(agent) if m.id == msg_id)
                sent = sent_time(mail.message.get("created_at"), mail.ingested_at)
                return max(0.0, mail.ingested_at - sent)
            if clock() >= deadline or reader.agent(agent).status not in LIVE_AGENT:
                return None
            time.sleep(POLL_S)


def busy_line(run_id: str, agent: str, now: Standing, waited: float) -> str:
    """What is said when ``agent`` has not read it within ``waited`` seconds."""
    doing = {
        "running": "is in the middle of a turn (a model call or a tool); it reads mail between turns",
        "merging": "is in the merge queue; it reads mail once its merge is judged",
        "pending": "has not started yet",
        "idle": "is idle and should read it at once",
    }.get(now.agent_status, f"is {now.agent_status}")
    return f"not read yet after {waited:g}s: {agent} {doing}; teamrt logs {run_id} shows when it does"
