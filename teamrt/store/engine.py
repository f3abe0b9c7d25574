"""Where a run's store lives, and the engines that reach it.

SQLite (the default, one ``runs/<run>/run.db`` per run): WAL, ``synchronous=FULL``,
a busy timeout, foreign keys on, and ``BEGIN IMMEDIATE`` for the writer so a
write transaction takes the lock up front instead of failing half-way.
Readers open the file with ``mode=ro`` and read inside deferred transactions,
which gives each read a consistent snapshot.

``TEAMRT_DB`` names a server database (PostgreSQL, through psycopg 3) that
holds every run instead. There the writer's connection ends any transaction
left idle for ``STALE_AFTER_S`` (a wedged owner must not hold the run's row
lock against a takeover), and readers read in ``REPEATABLE READ`` read-only
transactions: the server's equivalent of SQLite's snapshot, and a reader that
cannot write.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import NullPool

from .ownership import STALE_AFTER_S

DB_ENV = "TEAMRT_DB"
DB_FILE = "run.db"
FILE_MODE = 0o600
BUSY_TIMEOUT_MS = 10_000


def store_url(run_dir: Path) -> str:
    """The URL of the database holding the run whose directory is ``run_dir``."""
    return server_url() or f"sqlite:///{run_dir / DB_FILE}"


def server_url() -> str | None:
    """``TEAMRT_DB``, with a bare ``postgresql://`` made ``postgresql+psycopg://`` (the driver teamrt
    ships); None when every run keeps its own SQLite file."""
    url = os.environ.get(DB_ENV)
    if not url:
        return None
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            return "postgresql+psycopg://" + url[len(bare) :]
    return url


def is_postgres(url: str) -> bool:
    return url.startswith("postgresql")


def run_file(run_dir: Path) -> Path | None:
    """The run's own database file, or None when ``TEAMRT_DB`` holds every run."""
    return None if server_url() else run_dir / DB_FILE


def describe(url: str) -> str:
    """A URL as shown to a user: the file for SQLite, the URL without its password otherwise."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    return parsed.render_as_string(hide_password=True)


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlite_path(url: str) -> Path | None:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return Path(parsed.database)


def create_file(path: Path) -> None:
    """Create an empty database file, 0600, before SQLite opens it (its -wal and -shm copy the mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
    os.close(fd)


def writer_engine(url: str) -> Engine:
    """An engine for the one writer connection of a run (and its set-up)."""
    if is_postgres(url):
        idle_ms = int(STALE_AFTER_S * 1000)
        return create_engine(
            url, poolclass=NullPool,
            connect_args={"options": f"-c idle_in_transaction_session_timeout={idle_ms}",
                          "application_name": "teamrt writer"},
        )  # fmt: skip
    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, poolclass=NullPool)
    _sqlite_transactions(engine, begin="BEGIN IMMEDIATE", wal=True)
    return engine


def reader_engine(url: str) -> Engine:
    """An engine that can only read: SQLite's ``mode=ro``, PostgreSQL's read-only snapshots."""
    if is_postgres(url):
        return create_engine(
            url, pool_pre_ping=True, pool_size=2, isolation_level="REPEATABLE READ",
            connect_args={"options": "-c default_transaction_read_only=on",
                          "application_name": "teamrt reader"},
        )  # fmt: skip
    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True)
    path = sqlite_path(url)
    if path is None:
        raise ValueError(f"a reader needs a database file, not {url!r}")
    engine = create_engine(
        f"sqlite:///file:{path}?mode=ro&uri=true", connect_args={"check_same_thread": False}
    )
    _sqlite_transactions(engine, begin="BEGIN", wal=False)
    return engine


def _sqlite_transactions(engine: Engine, *, begin: str, wal: bool) -> None:
    """Let SQLAlchemy, not the sqlite3 module, start transactions, and start them with ``begin``."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # sqlite3 would otherwise BEGIN on its own
        cursor = dbapi_connection.cursor()
        if wal:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql(begin)
