"""How a person acts on a run from outside: ``send``, ``stop`` and ``answer``, by mail as ``user``.

``teamrt send``, ``stop`` and ``answer`` (and the TUI's actions) post mail as
``user``. On the run's own host it is delivered into the run's mailbox, where
the owner's watcher sees it at once. When the run lives in a server database
and its owner is another host (or its directory is not here at all), a
mailbox write would never wake that owner (inotify does not see another
machine's writes to shared storage), so the message is left in the
database instead (``store.steering``): the owner is woken by NOTIFY,
delivers it into its mailbox and acknowledges it, which this side waits for;
``describe`` says which way a message went.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from teamrt.errors import UserError
from teamrt.events import SUPERVISOR, USER
from teamrt.mailbox import Mailbox, MailboxError, Message
from teamrt.mailbox.message import preview
from teamrt.runs.query import (
    CRASHED,
    LIVE_AGENT,
    OWNED,
    RunsError,
    reading,
    run_status,
    unreadable,
)
from teamrt.runs.render import clip, describe_call
from teamrt.runtime.asking import ANSWERED, ASK
from teamrt.store import RunRecord, owner_alive, steering
from teamrt.store.engine import server_url
from teamrt.store.notify import ACKS, Listener
from teamrt.store.ownership import host_identity
from teamrt.terminal import clean_line

MAILBOX_DIR = "mailbox"
SPILL_DIR = "spill"
SUMMARY_CHARS = 80
ACK_WAIT_S = 5.0  # how long a sender waits for the owner on another host to take its message
MAX_REMOTE_BYTES = 1024 * 1024  # a message left in the database; the owner spills what is long


class SteerError(UserError):
    """A message that cannot go, or that the owner refused; one line for the user, safe for a terminal
    (what it quotes of the database, an owner's host and its outcome, goes through ``clean_line``)."""


@dataclass(frozen=True, slots=True)
class Sent:
    message: Message
    owner_host: str | None = None
    """The owner's host when the message went through the database; None when it went into the mailbox."""
    taken: bool = True
    """False when the owner on another host had not taken it within ``ACK_WAIT_S`` (it still will), or
    when the run has no live owner (the next one, a resume, delivers it)."""
    through_database: bool = False


def elsewhere(run_dir: Path, run: RunRecord) -> bool:
    """Whether mail for ``run`` must go through the database: the run is in a server database and its
    owner is another host, or its directory is not reachable here."""
    if server_url() is None:
        return False
    if not (run_dir / MAILBOX_DIR).is_dir():
        return True
    return run.owner is not None and run.owner.host != host_identity()


def post(run_dir: Path, run: RunRecord, *, recipient: str, body: str, register: bool = False,
         **fields: Any) -> Sent:  # fmt: skip
    """Post ``body`` from ``user`` to ``recipient`` of ``run``; ``register`` creates the recipient's
    mailbox on this host first (the supervisor's, before it ever read one)."""
    msg = Message.compose(run=run.id, sender=USER, recipient=recipient, body=body, **fields)
    if not elsewhere(run_dir, run):
        root = run_dir / MAILBOX_DIR
        with Mailbox(root, run.id, spill_dir=run_dir / SPILL_DIR) as mailbox:
            if register and not (root / recipient).is_dir():
                mailbox.register(recipient)
            return Sent(mailbox.deliver(msg))
    return _leave(run, msg)


def _leave(run: RunRecord, msg: Message) -> Sent:
    url = server_url()
    assert url is not None
    size = len(msg.encode())
    if size > MAX_REMOTE_BYTES:
        raise SteerError(
            f"the message is {size:,} bytes; one sent to a run on another host"
            f" is at most {MAX_REMOTE_BYTES:,}"
        )
    # nobody to take it now (its heartbeat aged in the database's clock, as the owner wrote it): a resume will
    if run.owner is None or not owner_alive(run, steering.server_now(url)):
        steering.leave(url, run.id, msg.to_dict(), host_identity())
        return Sent(msg, None, taken=False, through_database=True)
    host = run.owner.host
    acks = Listener(url, ACKS, run.id)
    try:
        acks.wait(0)  # listening before the message is left: its acknowledgement cannot be missed
        steering_id = steering.leave(url, run.id, msg.to_dict(), host_identity())
        deadline = time.monotonic() + ACK_WAIT_S
        while True:
            record = steering.outcome_of(url, steering_id)
            if record is not None and record.outcome is not None:
                if record.outcome != steering.DELIVERED:
                    said = f"the owner of run {run.id!r} on {host} {record.outcome}"
                    raise SteerError(clean_line(said))
                return Sent(msg, host, through_database=True)
            left = deadline - time.monotonic()
            if left <= 0:
                return Sent(msg, host, taken=False, through_database=True)
            acks.wait(left)
    finally:
        acks.close()


def describe(sent: Sent) -> str | None:
    """How a message that went through the database to a run on another host fares, in one line; None
    for one delivered into the mailbox here."""
    if not sent.through_database:
        return None
    run_id = sent.message.run
    if sent.owner_host is None:
        return f"left in the database for run {run_id!r}, which has no live owner: a resume delivers it"
    if sent.taken:
        return f"delivered through the database to its owner on {sent.owner_host}"
    return (
        f"left in the database for run {run_id!r}; its owner on {sent.owner_host} has not taken it"
        " yet (it will when it reads again)"
    )


# -- send and stop -------------------------------------------------------------


def send(run_dir: Path, run_id: str, agent: str, text: str) -> tuple[Sent, str]:
    """Deliver ``text`` from the user to ``agent`` (see ``post``); returns it and the run's status."""
    if not text.strip():
        raise RunsError("the message is empty; nothing was sent")
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        names = [a.name for a in reader.agents()]
    if agent not in names:
        raise RunsError(_no_agent(run_id, agent, names))
    root = run_dir / MAILBOX_DIR
    if not elsewhere(run_dir, run) and not (root / agent).is_dir():
        raise RunsError(f"agent {agent!r} of run {run_id!r} has no mailbox at {root / agent}")
    sent = _post(run_dir, run, recipient=agent, body=text, summary=preview(text, SUMMARY_CHARS))
    return sent, run_status(run)


def stop(run_dir: Path, run_id: str, agent: str | None) -> tuple[Sent, bool]:
    """Ask the run's supervisor to stop the run, or one agent, by a ``control`` message.

    Refused unless the run is live. Returns the message and whether the
    supervisor's mailbox had to be created (then no supervisor has read it yet).
    """
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        agents = {a.name: a for a in reader.agents()}
    status = run_status(run)
    if status == CRASHED:
        raise RunsError(f"run {run_id!r} crashed; resume it with teamrt resume {run_id}")
    if status not in OWNED:  # a not responding owner reads the mail when it goes on
        raise RunsError(f"run {run_id!r} is {status}; there is nothing to stop")
    if agent is not None:
        record = agents.get(agent)
        if record is None:
            raise RunsError(_no_agent(run_id, agent, list(agents)))
        if record.status not in LIVE_AGENT:
            raise RunsError(f"agent {agent!r} of run {run_id!r} is {record.status}; there is nothing to stop")
    created = not elsewhere(run_dir, run) and not (run_dir / MAILBOX_DIR / SUPERVISOR).is_dir()
    sent = _post(
        run_dir, run, recipient=SUPERVISOR, register=True, kind="control",
        body=f"stop agent {agent}" if agent else "stop the run", data={"action": "stop", "agent": agent},
    )  # fmt: skip
    return sent, created


def _post(run_dir: Path, run: RunRecord, **fields: Any) -> Sent:
    """``post``, its every failure one line: a refusal, a message mail cannot carry, a database
    out of reach."""
    try:
        return post(run_dir, run, **fields)
    except (SteerError, MailboxError) as e:
        raise RunsError(str(e)) from None
    except SQLAlchemyError as e:
        raise unreadable(run.id, e) from None


# -- permission asks ------------------------------------------------------------------


def answer(
    run_dir: Path, run_id: str, ask_id: str, allow: bool, reason: str | None = None, *, always: bool = False
) -> Sent:
    """Answer the waiting ask ``ask_id`` by a ``control`` message to the run's supervisor, as the user;
    ``always``: allow it and add its rule (the ask's ``rule``) to ``.claude/settings.local.json`` and the
    live run (the supervisor writes it: ``teamrt.runtime.always``).

    Refused unless the run is live and the ask waits (and, for ``always``, has a rule). The answer counts
    only if it reaches the supervisor before the ask's wait runs out (then the run's policy has answered,
    and the ``ask.answered`` event says so).
    """
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        events = reader.events(kinds=(ASK, ANSWERED))
    status = run_status(run)
    if status == CRASHED:
        raise RunsError(f"run {run_id!r} crashed; resume it with teamrt resume {run_id}")
    if status not in OWNED:
        raise RunsError(f"run {run_id!r} is {status}; no ask waits for an answer")
    asked = {e.data.get("id"): e for e in events if e.kind == ASK}
    done = {e.data.get("id"): e for e in events if e.kind == ANSWERED}
    if ask_id not in asked:
        waiting = [str(i) for i in asked if i not in done]
        said = f"asks waiting: {', '.join(waiting)}" if waiting else "none is waiting"
        raise RunsError(f"no ask {clip(ask_id, 40)!r} in run {run_id!r} ({said})")
    if ask_id in done:
        verdict = done[ask_id].data
        how = "allowed" if verdict.get("allowed") else "denied"
        raise RunsError(
            f"ask {ask_id!r} of run {run_id!r} was already answered: {how} by {verdict.get('by')}"
        )
    reason = " ".join(reason.split()) if reason else None
    call = describe_call(str(asked[ask_id].data.get("tool", "?")), asked[ask_id].data.get("input") or {})
    rule = asked[ask_id].data.get("rule")
    if always and not allow:
        raise RunsError("allow always goes with allow, not deny")
    if always and not isinstance(rule, str):
        why = asked[ask_id].data.get("no_rule") or "the run proposed no rule for it"
        raise RunsError(clean_line(f"ask {ask_id!r} cannot be allowed always ({why}); allow it once"))
    verb = f"allow always ({rule})" if always else "allow" if allow else "deny"
    return _post(
        run_dir,
        run,
        recipient=SUPERVISOR,
        register=True,
        kind="control",
        body=f"{verb} {ask_id} ({asked[ask_id].agent}: {call})" + (f": {reason}" if reason else ""),
        summary=f"{'allow always' if always else verb} {ask_id}",
        data={"action": "answer", "ask": ask_id, "allow": allow, "reason": reason or None, "always": always},
    )


def _no_agent(run_id: str, agent: str, names: list[str]) -> str:
    known = ", ".join(sorted(names)) or "none yet"
    return f"no agent named {clip(agent, 40)!r} in run {run_id!r} (its agents: {known})"
