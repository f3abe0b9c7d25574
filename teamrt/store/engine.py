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

A server can restart, or end a connection, under a live run. Every
connection that has reached the server once (the writer's, a reader's, a
listener's) tries again for ``TEAMRT_DB_GRACE_S`` seconds (``grace_s``,
default 30) when it loses the server (``is_disconnect``), and goes on; past
that, the error stands. A first connection is never retried: a command whose
database is out of reach says so at once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import NullPool

from teamrt.errors import UserError
from teamrt.store.errors import StoreError
from teamrt.store.ownership import STALE_AFTER_S

T = TypeVar("T")
log = logging.getLogger(__name__)

DB_ENV = "TEAMRT_DB"
DB_FILE = "run.db"
FILE_MODE = 0o600
BUSY_TIMEOUT_MS = 10_000
GRACE_ENV = "TEAMRT_DB_GRACE_S"
GRACE_S = 30.0  # how long a connection that reached the server once tries again after losing it
RETRY_S = 0.5  # between two attempts to reach it again
CONNECT_TIMEOUT_S = 5  # one attempt's: a server that does not answer must not hold a retry forever
# Lost connections: class 08 (connection exceptions), and the server shutting down or starting up.
_DISCONNECT_STATES = ("57P01", "57P02", "57P03")


class BadGrace(StoreError, UserError):
    def __init__(self, value: str) -> None:
        super().__init__(f"{GRACE_ENV}={value[:40]!r} is not a number of seconds (0 or more)")


def grace_s() -> float:
    """How long a lost server is waited for (``TEAMRT_DB_GRACE_S``, default 30 s; 0: not at all)."""
    value = os.environ.get(GRACE_ENV, "").strip()
    if not value:
        return GRACE_S
    try:
        seconds = float(value)
    except ValueError:
        raise BadGrace(value) from None
    if not seconds >= 0 or seconds == float("inf"):  # NaN fails the first test
        raise BadGrace(value)
    return seconds


def is_disconnect(error: BaseException) -> bool:
    """Whether ``error`` is a lost or refused connection to a server database (it restarted, stopped, or
    ended this session), as opposed to an error of the statement or of the server's storage."""
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    if not isinstance(error, OperationalError):
        return False
    state = getattr(error.orig, "sqlstate", None)
    return state is None or state.startswith("08") or state in _DISCONNECT_STATES


def reconnecting(attempt: Callable[[], T], grace: float, what: str) -> T:
    """``attempt()``, made again every ``RETRY_S`` while it fails for a lost connection, for up to
    ``grace`` seconds from the first failure; then its error stands. ``attempt`` must be safe to repeat
    (a read, or a connect)."""
    deadline: float | None = None
    while True:
        try:
            return attempt()
        except DBAPIError as e:
            if grace <= 0 or not is_disconnect(e):
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + grace
                log.warning("%s lost the database (%s); trying again for %g s", what, one_line(e), grace)
            if now >= deadline:
                raise
            time.sleep(RETRY_S)


def one_line(error: BaseException) -> str:
    """A driver's error on one line: its first, without the hints psycopg adds below it."""
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0].strip() if text else type(error).__name__


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
                          "application_name": "teamrt writer", "connect_timeout": CONNECT_TIMEOUT_S},
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
                          "application_name": "teamrt reader", "connect_timeout": CONNECT_TIMEOUT_S},
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


CHECKPOINT_WAIT_MS = 2_000  # for readers to finish theirs before the WAL is cut; else it stays as it is


def truncate_wal(engine: Engine) -> None:
    """Move a SQLite store's WAL into its file and cut the WAL to nothing (``wal_checkpoint(TRUNCATE)``),
    as its owner closes it: the run's commits all live in ``run.db`` then, and no megabytes of WAL stay
    beside a finished run (SQLite deletes the WAL itself only when the last connection to close is a
    writer, and readers such as ``teamrt logs -f`` often close after it). Nothing for a server
    database. Best effort: a reader that holds a snapshot longer than ``CHECKPOINT_WAIT_MS`` leaves the
    WAL whole, which loses nothing (the commit counter in ``integrity`` is in the database either way)."""
    if engine.dialect.name != "sqlite":
        return
    try:
        raw = engine.raw_connection()  # isolation_level None (``_sqlite_transactions``): no BEGIN around it
    except Exception as e:
        log.warning("cannot open %s to checkpoint its WAL: %s", engine.url.database, one_line(e))
        return
    try:
        cursor = raw.cursor()
        cursor.execute(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
        busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy and busy[0]:
            log.info("the WAL of %s stays: a reader held it past the checkpoint's wait", engine.url.database)
    except Exception as e:
        log.warning("cannot checkpoint the WAL of %s: %s", engine.url.database, one_line(e))
    finally:
        raw.close()


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
