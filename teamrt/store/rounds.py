"""A run's rounds: the first prompt, then each follow-up (``teamrt continue``), kept in the store.

A run that ended (done, failed, blocked, stopped: a budget spent, a stop sent) goes on as a new round of
the same run: the same id, directory and store, the same lead with its whole conversation. The move back
to ``running`` is this module's one transaction (``begin_round``), never a status set back
(``ops.set_run_status`` refuses that): with the lease taken, the run's row gets its raised budgets and
the round's settings, the lead its new user turn (the results of calls a stop cut short, then the prompt,
appended after its history so the prompt cache still holds), the teammates the end stopped idle again,
and a ``run.continued`` event records the round's number and prompt. So a crash at any moment after it
leaves a ``running`` run that ``teamrt resume`` finishes, the prompt read once.

What a round needs on resume is kept in the run's settings (``ROUND``): its number, the commit new
worktree agents of the lead branch from (the integration branch as the round began), and the lead's
turn that holds its prompt, after which its answer and turns are counted (``round_so_far``).
``rounds_of`` reads the rounds back from the event log, with their outcomes, for ``show``, ``logs`` and
the TUI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, select, update

from teamrt.errors import UserError
from teamrt.store import engine as eng
from teamrt.store import ops
from teamrt.store import tables as t
from teamrt.store.errors import RunNotFound, StoreError
from teamrt.store.ownership import check_not_live_elsewhere, database_now
from teamrt.store.reader import StoreReader
from teamrt.store.records import RUN_STATUSES, EventRecord, FinishedCall, Owner, RunRecord
from teamrt.store.store import Store, _open

ROUND = "round"
"""The key of the run's settings holding its current round: ``{"number", "prompt", "base",
"team_max_turns" (the lead's limit a round has when none is given), "lead_seq"}``."""
CONTINUED: Final = "run.continued"
ENDED = tuple(s for s in RUN_STATUSES if s != "running")
"""The statuses a run can be continued from."""
LEAD = "lead"


class NotContinuable(StoreError, UserError):
    """A run that cannot take a new round as it stands (live, crashed, changed meanwhile), in one line."""


@dataclass(frozen=True)
class NewRound:
    """What a new round writes in its one transaction (``begin_round``)."""

    number: int
    prompt: str
    lead_turn: list[dict[str, Any]]
    """The lead's new user turn: results for the calls of its last turn left without one, then the prompt."""
    finished: Sequence[FinishedCall]
    """Those calls, ended in the journal with the turn (only those the journal still has open)."""
    lead_seq: int
    """The lead's newest kept turn when the round was planned: if it moved, the round is refused."""
    settings: dict[str, Any]
    """The run's settings for the round: its team (raised budgets, the lead's turn limit) and ``ROUND``
    (without ``lead_seq``, which the turn's own seq fills in)."""
    budget_tokens: int | None
    budget_usd: float | None
    revive: Sequence[str] = ()
    """Teammates the run's end stopped: they idle again, to be messaged as before."""
    data: dict[str, Any] = field(default_factory=dict)
    """More for the ``run.continued`` event (the budget and turn limit of the round)."""


@dataclass(frozen=True)
class Round:
    """One round of a run as its event log tells it."""

    number: int
    prompt: str
    started_at: float
    status: str | None
    """How it ended (None: it has not, or the run crashed in it)."""
    reason: str | None
    ended_at: float | None


def begin_round(conn: Connection, run: str, owner: Owner, new: NewRound) -> int:
    """Take the ended run ``run`` for ``owner`` and start round ``new`` in it, in one transaction; returns
    the lease's token. Refused (``NotContinuable``) unless the run has ended and its lead is as planned."""
    record = ops.read_run(conn, run)
    if record is None:
        raise RunNotFound(run, "this database")
    check_not_live_elsewhere(record, owner, database_now(conn))
    if record.status not in ENDED:
        raise NotContinuable(f"run {run} is {record.status}: only a run that ended can be continued")
    lead = ops._agent(conn, run, LEAD)
    seq = conn.execute(
        select(t.turns.c.seq)
        .where(t.turns.c.run_id == run, t.turns.c.agent == LEAD)
        .order_by(t.turns.c.seq.desc())
        .limit(1)
    ).scalar_one_or_none()
    if (seq or 0) != new.lead_seq:
        raise NotContinuable(f"run {run} changed while its round {new.number} was prepared; try again")
    ops.set_agent_status(conn, run, LEAD, "running", None)
    turn = ops.append_turn(
        conn, run, agent=LEAD, epoch=lead.epoch, role="user", content=new.lead_turn, stop_reason=None,
        model=None, usage=None, tool_uses=(), ingested=(), events=(), finished=new.finished,
    )  # fmt: skip
    settings = dict(new.settings)
    settings[ROUND] = {**settings.get(ROUND, {}), "number": new.number, "lead_seq": turn.seq}
    conn.execute(
        update(t.runs)
        .where(t.runs.c.id == run)
        .values(
            status="running", status_reason=None, finished_at=None, settings=settings,
            budget_tokens=new.budget_tokens, budget_usd=new.budget_usd,
        )
    )  # fmt: skip
    ops.append_event(conn, run, "run.status", None, {"status": "running", "reason": None})
    for name in new.revive:
        ops.set_agent_status(conn, run, name, "idle", None)
    data = {"round": new.number, "prompt": new.prompt, "previous": record.status, **new.data}
    ops.append_event(conn, run, CONTINUED, None, data)
    return ops.take_ownership(conn, record, owner)


def continue_store(run_dir: Path, run: str, new: NewRound) -> Store:
    """The store of the ended run ``run``, taken over by this process with round ``new`` begun: refused
    while a process holds the run's lock (``RunOwned``), whatever its row says."""
    url = eng.store_url(run_dir)
    where = eng.describe(url)
    path = eng.run_file(run_dir)
    if path is not None and not path.is_file():
        raise RunNotFound(run, str(run_dir.parent))
    return _open(run_dir, run, url, where, lambda conn, owner: begin_round(conn, run, owner, new))


def round_number(run: RunRecord) -> int:
    """The run's current round (1 until it is continued)."""
    number = run.settings.get(ROUND, {}).get("number")
    return number if isinstance(number, int) else 1


def round_prompt(run: RunRecord) -> str:
    """The prompt of the run's current round (its task in the first)."""
    prompt = run.settings.get(ROUND, {}).get("prompt")
    return prompt if isinstance(prompt, str) else run.task


def round_base(run: RunRecord) -> str | None:
    """The commit the lead's new worktree agents branch from in the run's current round: the integration
    branch as the round began, so they see the work merged before it (the run's base in its first)."""
    base = run.settings.get(ROUND, {}).get("base")
    return base if isinstance(base, str) and base else run.base_head


def round_so_far(reader: StoreReader) -> tuple[str, int] | None:
    """The lead's answer in the run's current round so far (its newest text after the round's prompt, ""
    if none yet) and its turns in the round; None in a first round, where every turn counts."""
    seq = reader.run().settings.get(ROUND, {}).get("lead_seq")
    if not isinstance(seq, int):
        return None
    said = [t for t in reader.turns(LEAD, after_seq=seq) if t.role == "assistant"]
    for turn in reversed(said):
        text = "".join(b.get("text", "") for b in turn.content if b.get("type") == "text")
        if text:
            return text, len(said)
    return "", len(said)


def rounds_of(run: RunRecord, events: Sequence[EventRecord]) -> list[Round]:
    """The run's rounds, oldest first, each with its prompt and how it ended (``events``: the run's
    ``run.created``, ``run.continued`` and ``run.status`` events at least, in order)."""
    rounds: list[Round] = []
    number, prompt, started, status, reason, ended = 1, run.task, run.created_at, None, None, None
    for event in events:
        if event.kind == CONTINUED:
            rounds.append(Round(number, prompt, started, status, reason, ended))
            number = int(event.data.get("round", number + 1))
            prompt, started = str(event.data.get("prompt", "")), event.at
            status = reason = ended = None
        elif event.kind == "run.status" and event.data.get("status") in ENDED and status is None:
            status, ended = str(event.data["status"]), event.at
            reason = event.data.get("reason") if isinstance(event.data.get("reason"), str) else None
    rounds.append(Round(number, prompt, started, status, reason, ended))
    return rounds
