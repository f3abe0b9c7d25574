"""Who owns a run: an flock on one host, a lease with a fencing token across hosts.

On one host, an flock on the run directory's lock file: the kernel drops it
the moment its owner dies, so a second owner is refused exactly while the
first lives, with no stale-lock guessing. The heartbeat (renewed by the
writer every ``HEARTBEAT_S``) tells readers such as ``teamrt ls`` whether the
owner still works, and refuses an owner on another host sharing a server
database while a fresh one beats.

Across hosts the flock proves nothing (each host locks its own file: flock
over shared storage is not to be trusted), so the run's row holds a lease:
``owner_token``, bumped by every take. A take is a compare-and-set on the
token it saw, and every write transaction of the owner first checks, under a
shared row lock, that the token is still its own (``check_lease``). A host
that was wedged past ``STALE_AFTER_S`` and taken over from therefore has
its next write refused in the same transaction (``RunTakenOver``): clocks
decide only when a take is allowed, never whether a stale write lands.

The clock that decides is the database's (``database_now``): on PostgreSQL
heartbeats are written, and their age measured, in the server's
``clock_timestamp()``, so a host whose clock is wrong by an hour neither
looks dead to the others nor takes a healthy run from them. SQLite's runs
are on one machine, whose clock is the database's.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from pathlib import Path

from sqlalchemy import Connection, Double, bindparam, cast, func, select, update
from sqlalchemy.sql.elements import ColumnElement

from teamrt.errors import UserError
from teamrt.procs import is_running, own_identity
from teamrt.store import tables as t
from teamrt.store.errors import RunOwned, RunTakenOver, StoreError
from teamrt.store.records import Owner, RunRecord

LOCK_FILE = "owner.lock"
HOST_ENV = "TEAMRT_HOST"
HEARTBEAT_S = 2.0
STALE_AFTER_S = 15.0  # several missed heartbeats: the owner is gone or wedged
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


class BadHost(StoreError, UserError):
    def __init__(self, value: str) -> None:
        super().__init__(
            f"{HOST_ENV}={value[:60]!r} is not a host name (letters, digits, '.', '_' and '-', up to 255)"
        )


def host_identity() -> str:
    """This host's name in ownership: ``TEAMRT_HOST`` when set (containers that share a hostname), else
    the machine's hostname."""
    value = os.environ.get(HOST_ENV)
    if value is None or value == "":
        return socket.gethostname()
    if not _HOST_NAME.fullmatch(value):
        raise BadHost(value)
    return value


def lock_name(shared_database: bool) -> str:
    """The lock file: ``owner.lock`` beside a run's own SQLite file, one per host when runs live in a
    server database (hosts that share the run directory each lock their own; the lease keeps them apart)."""
    return f"owner.{host_identity()}.lock" if shared_database else LOCK_FILE


class OwnerLock:
    """This process's exclusive hold on one run directory."""

    def __init__(self, run_dir: Path, run: str, *, shared_database: bool = False) -> None:
        self.path = run_dir / lock_name(shared_database)
        self.run = run
        self._fd: int | None = None

    def acquire(self) -> Owner:
        """Take the lock or raise RunOwned naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunOwned(  # noqa: B904 - the lock being held is the news, not a cause
                self.run, holder.host if holder else "this machine", holder.pid if holder else 0, None
            )
        except BaseException:
            os.close(fd)
            raise
        pid, start = own_identity()
        owner = Owner(host_identity(), pid, start, time.time())
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": owner.host, "pid": pid, "start_time": start}).encode(), 0)
        self._fd = fd
        return owner

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _read_holder(fd: int) -> Owner | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
        return Owner(str(data["host"]), int(data["pid"]), int(data["start_time"]), 0.0)
    except (ValueError, TypeError, KeyError):
        return None


_SERVER_NOW = cast(func.extract("epoch", func.clock_timestamp()), Double)


def database_now(conn: Connection) -> float:
    """The database's clock in seconds since the epoch: the server's on PostgreSQL, this machine's on
    SQLite (one machine). Heartbeats are written, and their age measured, in it."""
    if conn.dialect.name == "postgresql":
        return float(conn.execute(select(_SERVER_NOW)).scalar_one())
    return time.time()


def now_in_database(conn: Connection) -> ColumnElement[float] | float:
    """The database's clock as a value to write: evaluated by the server on PostgreSQL (no round trip)."""
    return _SERVER_NOW if conn.dialect.name == "postgresql" else time.time()


def check_not_live_elsewhere(run: RunRecord, me: Owner, now: float | None = None) -> None:
    """Refuse a run another machine's owner still heartbeats (the lock file only covers this one); ``now``:
    the database's clock (``database_now``), which the heartbeat was written in."""
    owner = run.owner
    if owner is None or owner.host == me.host or run.heartbeat_at is None:
        return
    age = (time.time() if now is None else now) - run.heartbeat_at
    if age < STALE_AFTER_S:
        raise RunOwned(run.id, owner.host, owner.pid, max(0.0, age))


def owner_alive(run: RunRecord, now: float | None = None) -> bool:
    """Whether the run's recorded owner still works: its process exists (here) and its heartbeat is fresh.
    ``now``: the database's clock (``StoreReader.now``); this machine's when not given."""
    owner = run.owner
    if owner is None or run.heartbeat_at is None:
        return False
    if (time.time() if now is None else now) - run.heartbeat_at >= STALE_AFTER_S:
        return False
    if owner.host == host_identity():
        return is_running(owner.pid, owner.start_time)
    return True


LIVE, NOT_RESPONDING, GONE = "live", "not responding", "gone"


def owner_state(run: RunRecord, now: float | None = None) -> str:
    """How the run's recorded owner is: ``live`` (fresh heartbeat, its process here exists), ``not
    responding`` (its process exists on this host, its heartbeat is stale: stopped, say by SIGSTOP, or
    overloaded; a resume would be refused by its lock) or ``gone``. An owner on another host whose
    heartbeat is stale cannot be checked from here: ``gone``. ``now``: as for ``owner_alive``."""
    owner = run.owner
    if owner is None or run.heartbeat_at is None:
        return GONE
    here = owner.host == host_identity()
    if here and not is_running(owner.pid, owner.start_time):
        return GONE
    if (time.time() if now is None else now) - run.heartbeat_at < STALE_AFTER_S:
        return LIVE
    return NOT_RESPONDING if here else GONE


def take_lease(conn: Connection, run: RunRecord, owner: Owner) -> int:
    """Make ``owner`` the run's owner under a new fencing token, which it returns.

    A compare-and-set on the token read with ``run``: if another host took the
    run in between, this take is refused as owned by that host.
    """
    token = run.owner_token + 1
    taken = conn.execute(
        update(t.runs)
        .where(t.runs.c.id == run.id, t.runs.c.owner_token == run.owner_token)
        .values(
            owner_host=owner.host, owner_pid=owner.pid, owner_start_time=owner.start_time,
            owner_since=owner.since, heartbeat_at=now_in_database(conn), owner_token=token,
        )
    )  # fmt: skip
    if taken.rowcount != 1:
        now = conn.execute(select(t.runs).where(t.runs.c.id == run.id)).first()
        holder = t.run_record(now).owner if now is not None else None
        raise RunOwned(run.id, holder.host if holder else "another host", holder.pid if holder else 0, 0.0)
    return token


# Built once: the writer runs it first in every transaction, where building it cost as much as running it.
_LEASE = (
    select(t.runs.c.owner_token, t.runs.c.owner_host, t.runs.c.owner_pid)
    .where(t.runs.c.id == bindparam("b_run"))
    .with_for_update(read=True)
)


def check_lease(conn: Connection, run: str, token: int, where: str) -> None:
    """Refuse this transaction unless ``token`` is still the run's lease. The check holds a shared lock
    on the run's row (PostgreSQL: ``FOR SHARE``; SQLite's writer holds the whole file), so a take waits
    for this transaction, and this one sees a take that committed first."""
    row = conn.execute(_LEASE, {"b_run": run}).first()
    if row is None:
        raise RunTakenOver(run, where, token, -1, None, None)
    if row.owner_token == token:
        return
    host, pid = row.owner_host, row.owner_pid
    if host is None:  # the new owner already let go: its take is in the events
        taken = conn.execute(
            select(t.events.c.data)
            .where(t.events.c.run_id == run, t.events.c.kind == "run.owner")
            .order_by(t.events.c.id.desc())
            .limit(1)
        ).scalar()
        if isinstance(taken, dict):
            host, pid = taken.get("host"), taken.get("pid")
    raise RunTakenOver(run, where, token, int(row.owner_token), host, pid)
