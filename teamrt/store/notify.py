"""Wake-ups through PostgreSQL's LISTEN/NOTIFY, for stores in a server database.

Two channels, each notified with a run's id as payload, delivered only when
the notifying transaction commits:

- ``teamrt_commit``: the owner's writer committed a group (the TUI and
  ``logs -f`` read again only then, instead of every 150 ms);
- ``teamrt_steer``: a person on another host left a message for the run
  (see ``steering.py``); the owner's supervisor delivers it;
- ``teamrt_steered``: the owner delivered (or refused) such messages; the
  sender, waiting for its acknowledgement, reads the outcome.

A notification is only a hint to read: a listener that reconnects, or one
that starts late, reads the store once anyway, so a lost notification costs
a delay, never a message.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

if TYPE_CHECKING:
    import psycopg

COMMITS = "teamrt_commit"
STEERING = "teamrt_steer"
ACKS = "teamrt_steered"
RECONNECT_S = 1.0

log = logging.getLogger(__name__)


def notify(conn: Connection, channel: str, run: str) -> None:
    """Tell ``channel``'s listeners about ``run`` when this transaction commits (PostgreSQL only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, :run)"), {"channel": channel, "run": run})


class Listener:
    """A connection of its own that LISTENs on ``channel`` for one run (or every run: ``run=None``).

    ``wait(timeout)`` returns True once a notification for the run came (or
    the connection had to be made again: something may have been missed),
    False when the time ran out. It never raises for a lost server; it keeps
    trying to reconnect and says True when it has.
    """

    def __init__(self, url: str, channel: str, run: str | None) -> None:
        self._conninfo = _conninfo(url)
        self._channel = channel
        self._run = run
        self._conn: psycopg.Connection[Any] | None = None

    def wait(self, timeout: float) -> bool:
        conn = self._conn
        if conn is None:
            if self._connect():
                return True
            time.sleep(min(timeout, RECONNECT_S))
            return False
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                notes = list(conn.notifies(timeout=max(0.0, left), stop_after=1))
                if not notes:
                    return False
                notes += conn.notifies(timeout=0)  # and whatever else is waiting
                if any(self._run is None or n.payload == self._run for n in notes):
                    return True
        except Exception as e:  # the server went away: read again once it is back
            log.debug("listener lost its connection: %s", e)
            self.close()
            return False

    def _connect(self) -> bool:
        import psycopg

        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5)
            conn.execute(f'LISTEN "{self._channel}"')  # a constant of this module
        except psycopg.Error as e:
            log.debug("listener cannot connect: %s", e)
            return False
        self._conn = conn
        return True  # listening from now on; what came before was not heard: read once

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None


def _conninfo(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://...``) as psycopg's connection string."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
