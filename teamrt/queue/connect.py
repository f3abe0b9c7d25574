"""Where the queue lives: the runs' server database (``TEAMRT_DB``), reached through Procrastinate.

The queue has no database of its own: the library's tables (``procrastinate_*``) sit
beside teamrt's in the PostgreSQL database every host already shares, created by
migration 0005. Procrastinate is imported only inside the functions that need it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from teamrt.errors import UserError
from teamrt.store.engine import CONNECT_TIMEOUT_S, DB_ENV, describe, is_postgres, server_url
from teamrt.store.errors import database_reason

if TYPE_CHECKING:
    import procrastinate
    from sqlalchemy import Connection, Engine

DRIVE_TASK = "teamrt.drive_run"
"""Drives one attempt of a run; kwargs ``run_id: str``, ``attempt: int``."""
SWEEP_TASK = "teamrt.sweep"
DEFAULT_POOL = "teamrt"
"""The library's queue name of runs submitted without ``--queue``."""


class NoQueue(UserError):
    """There is no server database to hold a queue."""


class QueueUnreachable(UserError):
    """The queue's database failed a request (down, refused, out of reach)."""


def queue_url() -> str:
    """``TEAMRT_DB`` (SQLAlchemy form) when it names a PostgreSQL database; else ``NoQueue``."""
    url = server_url()
    if url is None or not is_postgres(url):
        raise NoQueue(
            f"the queue needs a PostgreSQL server database: set {DB_ENV}=postgresql://USER@HOST/DATABASE"
        )
    return url


def conninfo(url: str) -> str:
    """The libpq connection string of a SQLAlchemy URL (``postgresql+psycopg://`` → ``postgresql://``)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def make_app(url: str) -> procrastinate.App:
    """A Procrastinate app on an async connector (the worker's side); tasks are registered by the caller."""
    import procrastinate

    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo(url)))


def bound_app() -> procrastinate.App:
    """A Procrastinate app with no connections of its own: every call is given one
    (``connection=psycopg_connection(conn)``), so a defer or a cancel commits or rolls back with the
    teamrt rows written beside it, in one transaction."""
    import procrastinate

    return procrastinate.App(connector=procrastinate.SyncPsycopgConnector())


def psycopg_connection(conn: Connection) -> Any:
    """The psycopg connection under a SQLAlchemy one, inside its transaction."""
    return conn.connection.driver_connection


def run_lock(run_id: str) -> str:
    """The run's lock and queueing lock: one attempt of a run waits, and one runs, at a time."""
    return f"run:{run_id}"


def queue_engine(url: str) -> Engine:
    """An engine for the queue's short write transactions (submit, stop, defer): no pool kept."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine(
        url, poolclass=NullPool,
        connect_args={"application_name": "teamrt queue", "connect_timeout": CONNECT_TIMEOUT_S},
    )  # fmt: skip


@contextmanager
def reaching(url: str) -> Iterator[Engine]:
    """``queue_engine(url)`` for one command, disposed afterwards; a database failure is one line
    (``QueueUnreachable``)."""
    from sqlalchemy.exc import SQLAlchemyError

    engine = queue_engine(url)
    try:
        yield engine
    except SQLAlchemyError as e:
        raise QueueUnreachable(f"the queue in {describe(url)}: {database_reason(e)}") from None
    finally:
        engine.dispose()
