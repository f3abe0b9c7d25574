"""Where a person's message to a run goes: its mailbox on this host, or the database for another host.

``teamrt send``, ``stop`` and ``answer`` (and the TUI's actions) post mail as
``user``. On the run's own host it is delivered into the run's mailbox, where
the owner's watcher sees it at once. When the run lives in a server database
and its owner is another host (or its directory is not here at all), a
mailbox write would never wake that owner (inotify does not see another
machine's writes to shared storage), so the message is left in the
database instead (``store.steering``): the owner is woken by NOTIFY,
delivers it into its mailbox and acknowledges it, which this side waits for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.errors import UserError
from teamrt.mailbox import Mailbox, Message
from teamrt.runtime.asking import USER
from teamrt.store import RunRecord, owner_alive
from teamrt.store.engine import server_url
from teamrt.store.notify import ACKS, Listener
from teamrt.store.ownership import host_identity
from teamrt.terminal import clean_line

MAILBOX_DIR = "mailbox"
SPILL_DIR = "spill"
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
    from teamrt.store import steering

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
