"""The owner's side of steering from other hosts: messages left in the database become local mail.

Runs beside the supervisor's control loop when the run lives in PostgreSQL.
It wakes on ``NOTIFY teamrt_steer`` for its run (and reads once at start
and after any reconnect, for what came while nobody listened), delivers
each waiting message into the run's mailbox, and marks it delivered through
the store's fenced writer, with an event for ``teamrt logs``. The mailbox
contract is unchanged: the supervisor and the agents read mail as always.

What it refuses, marked so with the reason (the sender sees it): a message
that is not valid mail, one for another run, one not from ``user`` (only a
person steers; an agent cannot reach the database), one for an agent the run
does not have.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Final

from sqlalchemy import Connection

from teamrt.events import USER
from teamrt.mailbox import Mailbox, MailboxError, Message
from teamrt.store import Store, StoreWriteFailed, ops
from teamrt.store import steering as st
from teamrt.store.engine import is_postgres
from teamrt.store.notify import STEERING, Listener

log = logging.getLogger(__name__)

WAIT_S = 0.5  # how long one wait on the listener lasts: the longest a stopping relay takes to notice
STEERED: Final = "steering.delivered"


class SteeringRelay:
    def __init__(self, store: Store, mailbox: Mailbox) -> None:
        self.store = store
        self.mailbox = mailbox

    async def run(self) -> None:
        """Deliver until cancelled; returns at once for a run kept in SQLite (one host, local mail)."""
        if not is_postgres(self.store.url):
            return
        listener = Listener(self.store.url, STEERING, self.store.run_id)
        try:
            woke = True
            while True:
                again = False
                if woke:
                    try:
                        await self.deliver_waiting()
                    except StoreWriteFailed:
                        return  # the store stopped (or the run was taken over): the run is ending
                    except Exception as e:  # the database or the mailbox's disk, for now: the
                        log.warning("cannot deliver steering messages now: %s", e)  # messages wait
                        again = True
                woke = await asyncio.to_thread(listener.wait, WAIT_S) or again
        finally:
            listener.close()

    async def deliver_waiting(self) -> int:
        """Deliver every waiting message; returns how many were settled (delivered or refused)."""
        records = await asyncio.to_thread(self.store.reader.steering_waiting)
        if not records:
            return 0
        outcomes: dict[int, str] = {}
        events: list[dict[str, Any]] = []
        for record in records:
            outcome, msg = await asyncio.to_thread(self._deliver, record.message)
            outcomes[record.id] = outcome
            events.append({
                "id": record.id, "from_host": record.sent_from, "outcome": outcome,
                "message": msg.id if msg else None, "to": msg.recipient if msg else None,
            })  # fmt: skip

        def settle(conn: Connection) -> None:
            st.settle(conn, run=self.store.run_id, ids=outcomes)
            for data in events:
                ops.append_event(conn, self.store.run_id, STEERED, None, data)

        await self.store.write(settle)
        return len(outcomes)

    def _deliver(self, raw: dict[str, Any]) -> tuple[str, Message | None]:
        try:
            msg = Message.decode(json.dumps(raw).encode("utf-8"))
        except (MailboxError, ValueError, TypeError) as e:
            return f"refused: not a valid message: {e}", None
        if msg.run != self.store.run_id:
            return f"refused: the message is for run {msg.run!r}", msg
        if msg.sender != USER:
            return f"refused: only {USER!r} steers a run from another host, not {msg.sender!r}", msg
        if msg.recipient not in self.mailbox.members():
            return f"refused: run {self.store.run_id!r} has no agent {msg.recipient!r}", msg
        try:
            self.mailbox.deliver(msg)
        except MailboxError as e:
            return f"refused: {e}", msg
        return st.DELIVERED, msg
