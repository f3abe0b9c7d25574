"""Steering a run owned on another host: a person's message left in the database for its owner.

``teamrt send``, ``stop`` and ``answer`` on a host that is not the run's owner
(its mailbox is on another machine, or on shared storage whose changes this
host's watcher would never see) call ``leave``: one transaction inserts the
message and NOTIFYs ``teamrt_steer``. The owner's supervisor wakes, delivers
each waiting message into its own mailbox (``Mailbox.deliver``: the same
message delivered twice is one message) and only then marks it ``delivered``
through its fenced writer. A crash between the two delivers it again, which
the mailbox takes as the resend it is; so each message arrives exactly once.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, insert, select, update

from teamrt.store import engine as eng
from teamrt.store import tables as t
from teamrt.store.errors import RunNotFound
from teamrt.store.notify import ACKS, STEERING, notify
from teamrt.store.records import SteeringRecord

DELIVERED = "delivered"


def leave(url: str, run: str, message: dict[str, Any], host: str) -> int:
    """Leave ``message`` (a mail message's JSON object) for ``run``'s owner; returns its steering id."""
    engine = eng.writer_engine(url)
    try:
        with engine.connect() as conn, conn.begin():
            if conn.execute(select(t.runs.c.id).where(t.runs.c.id == run)).first() is None:
                raise RunNotFound(run, eng.describe(url))
            row = conn.execute(
                insert(t.steering)
                .values(run_id=run, message=message, sent_at=time.time(), sent_from=host)
                .returning(t.steering.c.id)
            ).scalar_one()
            notify(conn, STEERING, run)
        return int(row)
    finally:
        engine.dispose()


def waiting(conn: Connection, run: str) -> list[SteeringRecord]:
    """The run's messages not yet delivered, oldest first."""
    rows = conn.execute(
        select(t.steering)
        .where(t.steering.c.run_id == run, t.steering.c.delivered_at.is_(None))
        .order_by(t.steering.c.id)
    ).all()
    return [t.steering_record(r) for r in rows]


def settle(conn: Connection, *, run: str, ids: dict[int, str]) -> None:
    """Mark each message delivered (or refused, with why): a write of the owner, fenced like any."""
    now = time.time()
    notify(conn, ACKS, run)
    for steering_id, outcome in ids.items():
        conn.execute(
            update(t.steering)
            .where(t.steering.c.id == steering_id, t.steering.c.run_id == run)
            .values(delivered_at=now, outcome=outcome)
        )


def outcome_of(url: str, steering_id: int) -> SteeringRecord | None:
    """The message as it stands now (``delivered_at`` set once its owner took it)."""
    engine = eng.reader_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(select(t.steering).where(t.steering.c.id == steering_id)).first()
        return None if row is None else t.steering_record(row)
    finally:
        engine.dispose()


def server_now(url: str) -> float:
    """The database's clock: an owner's heartbeat is aged in it, never in this host's (which may be off)."""
    from teamrt.store.ownership import database_now

    engine = eng.reader_engine(url)
    try:
        with engine.connect() as conn:
            return database_now(conn)
    finally:
        engine.dispose()
