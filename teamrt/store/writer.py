"""The one writer of a run: a thread that commits queued operations in groups.

Agents (asyncio tasks) hand an operation to ``submit`` and await it. The
writer thread takes everything queued, runs the operations in one
``BEGIN IMMEDIATE`` transaction, commits once, and only then settles the
callers' futures. While one group's fsync runs, the next group queues,
so fifty agents cost about one fsync per group instead of one each, and no
caller ever hears "done" before its commit is on disk.

An operation that raises fails alone (see ``_commit``). A
failure of the database itself (disk full, I/O error) fails the whole group
and stops the writer: everything committed before stays, nothing more is
accepted, and every caller gets ``StoreWriteFailed``.

A server database that restarts, stops for a while or ends the writer's
session is not such a failure: the writer connects again for the grace
period (``engine.grace_s``) and runs the group again, the fence (the lease)
first, so a takeover during the outage is refused. A group whose COMMIT was
under way when the connection went may have been kept: the server is asked
(``pg_xact_status`` of the transaction's id, read before COMMIT), and a kept
group is settled, never run twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from teamrt import faults
from teamrt.store import engine as eng
from teamrt.store.errors import StoreClosed, StoreWriteFailed
from teamrt.store.integrity import CommitStamp

T = TypeVar("T")
Op = Callable[[Connection], T]

log = logging.getLogger(__name__)

MAX_GROUP = 1000  # operations per transaction, so one commit never grows without bound


@dataclass(slots=True)
class _Job:
    op: Op[Any]
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[Any] | None
    result: Any = None
    error: BaseException | None = None
    then_stop: StoreWriteFailed | None = None
    """Commit this job's group, then take no more writes: they fail with this (``Writer.stop_after``)."""


class Writer:
    """Owns the run's single write connection on a thread of its own."""

    def __init__(
        self,
        engine: Engine,
        where: str,
        idle_op: Op[None] | None = None,
        idle_interval: float = 2.0,
        *,
        fence: Op[None] | None = None,
        grace_s: float | None = None,
        stamp: CommitStamp | None = None,
    ) -> None:
        """``idle_op``: run when nothing was written for ``idle_interval`` (the heartbeat); ``fence``: run
        first in every transaction, refusing the whole group by raising (the lease check); ``grace_s``: how
        long a lost server is waited for (default ``engine.grace_s()`` on PostgreSQL, 0 on SQLite)."""
        self._engine = engine
        self._fence = fence
        self._stamp = stamp  # counts each group commit, in the store and then in the run directory
        self._where = where
        self._idle_op = idle_op
        self._idle_interval = idle_interval
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._failure: StoreWriteFailed | None = None
        self._closed = False
        self.commits = 0  # groups committed, for tests and benchmarks
        if grace_s is None:
            grace_s = eng.grace_s() if engine.dialect.name == "postgresql" else 0.0
        self._grace = grace_s
        self._conn: Connection | None = None
        self._xid: str | None = None  # the server's id of the transaction being committed
        self.reconnects = 0  # connections made again after a lost one, for tests
        self.on_failure: Callable[[], None] | None = None
        """Called, on the writer's thread, once the writer stops taking writes (its owner must stop: an
        agent idle on its inbox would otherwise wait for ever)."""
        self._thread = threading.Thread(target=self._run, name="teamrt-store-writer", daemon=True)
        self._thread.start()

    @property
    def failure(self) -> StoreWriteFailed | None:
        return self._failure

    async def submit(self, op: Op[T]) -> T:
        """Run ``op`` in the next group and return its result once that group is committed."""
        # A cancelled caller does not cancel the write: it is already queued.
        return await asyncio.shield(self._queued(op, None))

    def stop_after(self, op: Op[T], failure: StoreWriteFailed) -> asyncio.Future[T]:
        """Queue ``op`` as the last write: its group ends with it, and once that group is committed every
        later write fails with ``failure``, as after a crash there. Queued at once (not when awaited), so
        nothing its caller writes afterwards can be committed before it."""
        return self._queued(op, failure)

    def _queued(self, op: Op[T], then_stop: StoreWriteFailed | None) -> asyncio.Future[T]:
        """Queue ``op`` now; the future of its result, settled once its group is committed."""
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise StoreClosed(self._where)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        future.add_done_callback(_retrieved)  # a caller cancelled meanwhile (a stopped agent) never reads it
        self._queue.put(_Job(op, loop, future, then_stop=then_stop))
        return future

    def close(self) -> None:
        """Commit what is queued, then stop the thread and close the connection."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    # -- the writer thread ---------------------------------------------------

    def _run(self) -> None:
        try:
            self._conn = eng.reconnecting(self._engine.connect, self._grace, self._where)
            try:
                self._serve()
            finally:
                self._close_connection()
        except Exception as e:  # the connection failed to open
            if self._failure is None:
                self._fail(e, [])
        finally:
            self._drain_after_stop()

    def _close_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass  # a lost connection: nothing left to close
            self._conn = None

    def _serve(self) -> None:
        next_beat = time.monotonic() + self._idle_interval
        while self._failure is None:
            group, stopping = self._collect(next_beat)
            if self._idle_op is not None and time.monotonic() >= next_beat:
                group.append(_Job(self._idle_op, None, None))
                next_beat = time.monotonic() + self._idle_interval
            if group:
                self._commit(group)
                last = next((job.then_stop for job in group if job.then_stop is not None), None)
                if last is not None and self._failure is None:
                    self._failure = last
                    log.error("%s", last)
                    self._told_stopped()
            if stopping:
                return

    def _collect(self, deadline: float) -> tuple[list[_Job], bool]:
        """Wait for a first job (or the heartbeat's deadline), then take every job queued behind it.

        Returns the group and whether ``close`` was called.
        """
        timeout = None if self._idle_op is None else max(0.0, deadline - time.monotonic())
        group: list[_Job] = []
        try:
            item = self._queue.get(timeout=timeout)
            while item is not None:
                group.append(item)
                if len(group) >= MAX_GROUP or item.then_stop is not None:
                    return group, False
                item = self._queue.get_nowait()
        except queue.Empty:
            return group, False
        return group, True

    def _commit(self, group: list[_Job]) -> None:
        """Commit the group (``_transact``); on a lost server, connect again within the grace and run it
        again, unless the transaction lost with the connection was kept."""
        lost_at: float | None = None
        while True:
            try:
                self._transact(group)
                break
            except Exception as e:
                if self._grace <= 0 or not _lost(e):
                    self._fail(e, group)
                    return
                lost_at = time.monotonic() if lost_at is None else lost_at
                try:
                    if self._recover(lost_at + self._grace):
                        break
                except Exception as gone:
                    self._fail(gone, group)
                    return
        self.commits += 1
        if self._stamp is not None:
            self._stamp.committed()  # only now: the run directory's count never leads the store's
        faults.point("store.after_commit")  # committed, callers not yet told: a place to crash
        _settle(group)

    def _transact(self, group: list[_Job]) -> None:
        """Commit the group in one transaction: optimistically, or with a savepoint per operation.

        Operations rarely raise, and a savepoint costs two statements each, so
        the group first runs bare; if one operation raises, the transaction is
        rolled back and the group runs again with each operation isolated.
        """
        conn = self._conn
        if conn is None:
            raise StoreClosed(self._where)
        self._xid = None
        isolated = False
        while True:
            with conn.begin() as transaction:
                if self._fence is not None:
                    self._fence(conn)
                if _run_ops(conn, group, isolated):
                    if self._stamp is not None:
                        self._stamp.bump(conn)
                    if self._grace > 0:
                        self._xid = _transaction_id(conn)
                    faults.point("store.before_commit")
                    break
                transaction.rollback()
            isolated = True

    def _recover(self, deadline: float) -> bool:
        """Connect again (until ``deadline``); whether the transaction lost with the old connection was
        kept. Raises what kept the server out of reach once the deadline passed."""
        xid, self._xid = self._xid, None
        self._close_connection()
        log.warning("%s: lost its connection; connecting again for up to %g s", self._where, self._grace)
        while True:
            try:
                self._conn = self._engine.connect()
                self.reconnects += 1
                return xid is not None and self._kept(self._conn, xid, deadline)
            except DBAPIError as e:
                self._close_connection()
                if not eng.is_disconnect(e):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreWriteFailed(
                        self._where, f"{eng.one_line(e)} (out of reach for {self._grace:g} s)"
                    ) from e
                time.sleep(eng.RETRY_S)

    def _kept(self, conn: Connection, xid: str, deadline: float) -> bool:
        """Whether transaction ``xid`` committed, asked of the server; one still in progress (its session
        not yet ended) is waited for."""
        while True:
            try:
                with conn.begin():
                    status = conn.execute(_XACT_STATUS, {"xid": xid}).scalar()
            except DBAPIError as e:
                if getattr(e.orig, "sqlstate", None) == _XID_IN_FUTURE:
                    return False  # a crash took the server back before it: it never reached the WAL
                raise
            if status != "in progress":
                return status == "committed"
            if time.monotonic() >= deadline:
                raise StoreWriteFailed(self._where, f"whether transaction {xid} was kept stayed unknown")
            time.sleep(0.1)

    def _fail(self, error: BaseException, group: list[_Job]) -> None:
        if isinstance(error, StoreWriteFailed):  # the fence: another owner took the run
            self._failure = error
        else:
            self._failure = StoreWriteFailed(self._where, _reason(error))
            self._failure.__cause__ = error
        log.error("%s", self._failure)
        for job in group:
            job.error = self._failure
        _settle(group)
        self._told_stopped()

    def _told_stopped(self) -> None:
        if self.on_failure is not None:
            try:
                self.on_failure()
            except Exception:  # the owner's loop may be gone: nobody left to tell
                log.exception("%s: telling the owner the store stopped failed", self._where)

    def _drain_after_stop(self) -> None:
        """Answer whatever was queued after the writer stopped, so no caller waits forever."""
        leftover: list[_Job] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item.error = self._failure or StoreClosed(self._where)
                leftover.append(item)
        _settle(leftover)


def _run_ops(conn: Connection, group: list[_Job], isolated: bool) -> bool:
    """Run every operation; False if one raised while not isolated (the caller rolls back)."""
    for job in group:
        job.error = None
        try:
            if isolated:
                with conn.begin_nested():
                    job.result = job.op(conn)
            else:
                job.result = job.op(conn)
        except Exception as e:
            if _is_storage_failure(e):
                raise
            if not isolated:
                return False
            job.error = e
    return True


_XACT_ID = text("SELECT pg_current_xact_id()::text")
_XACT_STATUS = text("SELECT pg_xact_status(CAST(:xid AS xid8))")
_XID_IN_FUTURE = "22023"  # pg_xact_status's "transaction ID ... is in the future"


def _transaction_id(conn: Connection) -> str | None:
    """The server's id of this transaction (PostgreSQL 13+), asked before COMMIT so that a COMMIT whose
    answer is lost can be looked up afterwards."""
    return str(conn.execute(_XACT_ID).scalar())


def _lost(error: BaseException) -> bool:
    """A lost connection, met directly or behind the error of rolling back on it."""
    seen: BaseException | None = error
    for _ in range(3):
        if seen is None:
            return False
        if eng.is_disconnect(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark the failure a write's future holds as seen: its caller may be gone, and the failure is said
    where the run ends (``Store.failure``), not as "Future exception was never retrieved"."""
    if not future.cancelled():
        future.exception()


def _settle(group: list[_Job]) -> None:
    """Hand results to their loops: one thread-safe call per loop, not one per caller."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
    for job in group:
        if job.loop is not None:
            by_loop.setdefault(job.loop, []).append(job)
    for loop, jobs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_set_results, jobs)
        except RuntimeError:  # the loop has closed; nobody is waiting any more
            pass


def _set_results(jobs: list[_Job]) -> None:
    for job in jobs:
        if job.future is None or job.future.done():
            continue
        if job.error is not None:
            job.future.set_exception(job.error)
        else:
            job.future.set_result(job.result)


def _is_storage_failure(error: BaseException) -> bool:
    """Errors of the database or the disk, as opposed to an operation's own (a constraint, a bad value).
    An operation that raises ``StoreWriteFailed`` stops the store on purpose (the run's disk is full)."""
    if isinstance(error, (OSError, StoreWriteFailed)):
        return True
    return isinstance(error, DBAPIError) and not isinstance(error, IntegrityError)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        return f"{os.strerror(error.errno).lower()} (errno {error.errno})"
    if isinstance(error, DBAPIError):
        return eng.one_line(error)  # psycopg adds hints on lines below
    return f"{type(error).__name__}: {error}"
