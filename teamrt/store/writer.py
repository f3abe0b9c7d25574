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

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from .. import faults
from .errors import StoreClosed, StoreWriteFailed

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
    ) -> None:
        """``idle_op``: run when nothing was written for ``idle_interval`` (the heartbeat); ``fence``: run
        first in every transaction, refusing the whole group by raising (the lease check)."""
        self._engine = engine
        self._fence = fence
        self._where = where
        self._idle_op = idle_op
        self._idle_interval = idle_interval
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._failure: StoreWriteFailed | None = None
        self._closed = False
        self.commits = 0  # groups committed, for tests and benchmarks
        self._thread = threading.Thread(target=self._run, name="teamrt-store-writer", daemon=True)
        self._thread.start()

    @property
    def failure(self) -> StoreWriteFailed | None:
        return self._failure

    async def submit(self, op: Op[T]) -> T:
        """Run ``op`` in the next group and return its result once that group is committed."""
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise StoreClosed(self._where)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Job(op, loop, future))
        # A cancelled caller does not cancel the write: it is already queued.
        return await asyncio.shield(future)

    def close(self) -> None:
        """Commit what is queued, then stop the thread and close the connection."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    # -- the writer thread ---------------------------------------------------

    def _run(self) -> None:
        try:
            with self._engine.connect() as conn:
                self._serve(conn)
        except Exception as e:  # the connection failed to open or to close
            if self._failure is None:
                self._fail(e, [])
        finally:
            self._drain_after_stop()

    def _serve(self, conn: Connection) -> None:
        next_beat = time.monotonic() + self._idle_interval
        while self._failure is None:
            group, stopping = self._collect(next_beat)
            if self._idle_op is not None and time.monotonic() >= next_beat:
                group.append(_Job(self._idle_op, None, None))
                next_beat = time.monotonic() + self._idle_interval
            if group:
                self._commit(conn, group)
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
                if len(group) >= MAX_GROUP:
                    return group, False
                item = self._queue.get_nowait()
        except queue.Empty:
            return group, False
        return group, True

    def _commit(self, conn: Connection, group: list[_Job]) -> None:
        """Commit the group in one transaction: optimistically, or with a savepoint per operation.

        Operations rarely raise, and a savepoint costs two statements each, so
        the group first runs bare; if one operation raises, the transaction is
        rolled back and the group runs again with each operation isolated.
        """
        try:
            isolated = False
            while True:
                with conn.begin() as transaction:
                    if self._fence is not None:
                        self._fence(conn)
                    if _run_ops(conn, group, isolated):
                        faults.point("store.before_commit")
                        break
                    transaction.rollback()
                isolated = True
        except Exception as e:
            self._fail(e, group)
            return
        self.commits += 1
        faults.point("store.after_commit")  # committed, callers not yet told: a place to crash
        _settle(group)

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
    """Errors of the database or the disk, as opposed to an operation's own (a constraint, a bad value)."""
    if isinstance(error, OSError):
        return True
    return isinstance(error, DBAPIError) and not isinstance(error, IntegrityError)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        return f"{os.strerror(error.errno).lower()} (errno {error.errno})"
    if isinstance(error, DBAPIError):
        return str(error.orig)
    return f"{type(error).__name__}: {error}"
