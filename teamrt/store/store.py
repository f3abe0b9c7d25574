"""A run's store as its owner sees it: every write one transaction, awaited until committed.

``create_store`` makes a new run, ``open_store`` takes over an existing one
whose owner is gone (a resume). Both hold the run's lock until ``close``.
Writes go through the run's one ``Writer``; reads through ``store.reader``.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, update
from sqlalchemy.exc import DBAPIError

from teamrt.events import EventKind
from teamrt.store import engine as eng
from teamrt.store import integrity, migrate, ops
from teamrt.store import tables as t
from teamrt.store.errors import RunExists, RunNotFound, StoreOpenFailed, StoreWriteFailed, database_reason
from teamrt.store.integrity import CommitStamp
from teamrt.store.notify import COMMITS, notify
from teamrt.store.ownership import HEARTBEAT_S, OwnerLock, check_lease, check_not_live_elsewhere, database_now
from teamrt.store.reader import StoreReader
from teamrt.store.records import (
    AgentRecord,
    FinishedCall,
    IngestedMail,
    MergeRecord,
    NewEvent,
    Owner,
    TaskRecord,
    ToolUse,
    TurnRecord,
    Usage,
)
from teamrt.store.writer import Op, Writer

T = TypeVar("T")


class Store:
    """The owner's handle on one run. Build it with ``create_store`` or ``open_store``."""

    def __init__(
        self, run: str, where: str, engine: Engine, lock: OwnerLock, owner: Owner, url: str, token: int,
        stamp: CommitStamp | None = None,
    ) -> None:  # fmt: skip
        self.run_id = run
        self.where = where
        self.url = url
        self.owner = owner
        self.token = token
        """This owner's fencing token: every write transaction first checks it is still the run's."""
        self._engine = engine
        self._lock = lock
        self._stamp = stamp
        self._writer = Writer(
            engine, where, functools.partial(ops.heartbeat, run=run), HEARTBEAT_S,
            fence=functools.partial(_fence, run=run, token=token, where=where), stamp=stamp,
        )  # fmt: skip
        self.reader = StoreReader(eng.reader_engine(url), run)

    @property
    def commits(self) -> int:
        """Groups committed so far by this store's writer."""
        return self._writer.commits

    @property
    def failure(self) -> StoreWriteFailed | None:
        """Why the store stopped taking writes (a full disk, say), or None while it works."""
        return self._writer.failure

    async def write(self, op: Op[T]) -> T:
        """Run ``op(connection)`` in the next group commit; return once it is durable."""
        return await self._writer.submit(op)

    def on_failure(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the writer's thread) once the store stops taking writes; now if it has."""
        self._writer.on_failure = callback
        if self._writer.failure is not None:
            callback()

    def stop_after(self, op: Op[T], failure: StoreWriteFailed) -> asyncio.Future[T]:
        """Queue ``op`` as the store's last write: once it is committed, every write fails with ``failure``
        (a full disk under the run's files stops the run as a full store does)."""
        return self._writer.stop_after(op, failure)

    def close(self) -> None:
        """Commit what is queued, give up ownership, checkpoint SQLite's WAL into the file, release the
        lock."""
        self._writer.close()
        if self._stamp is not None:
            self._stamp.close()
        if self._writer.failure is None:
            try:
                with self._engine.connect() as conn, conn.begin():
                    conn.execute(
                        update(t.runs)
                        .where(t.runs.c.id == self.run_id, t.runs.c.owner_token == self.token)
                        .values(owner_host=None, owner_pid=None, owner_start_time=None, owner_since=None)
                    )
            except Exception:
                pass  # the heartbeat goes stale instead; readers see the owner gone either way
        self.reader.close()
        if self._writer.failure is None:
            eng.truncate_wal(self._engine)  # a run that ended keeps no WAL (its commits are in run.db)
        self._engine.dispose()
        self._lock.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the operations the runtime needs, each one transaction --------------

    async def add_agent(
        self,
        name: str,
        *,
        kind: str,
        model: str,
        parent: str | None = None,
        role: str | None = None,
        definition: dict[str, Any] | None = None,
        workspace: str | None = None,
        branch: str | None = None,
        budget_tokens: int | None = None,
        budget_usd: float | None = None,
    ) -> AgentRecord:
        return await self.write(
            functools.partial(
                ops.add_agent,
                run=self.run_id,
                name=name,
                kind=kind,
                model=model,
                parent=parent,
                role=role,
                definition=definition or {},
                workspace=workspace,
                branch=branch,
                budget_tokens=budget_tokens,
                budget_usd=budget_usd,
            )
        )

    async def set_agent_status(self, name: str, status: str, reason: str | None = None) -> None:
        await self.write(
            functools.partial(ops.set_agent_status, run=self.run_id, name=name, status=status, reason=reason)
        )

    async def begin_epoch(self, name: str) -> int:
        """Mark the agent running under a new epoch, which it returns."""
        return await self.write(functools.partial(ops.begin_epoch, run=self.run_id, name=name))

    async def append_turn(
        self,
        agent: str,
        *,
        epoch: int,
        role: str,
        content: list[Any],
        stop_reason: str | None = None,
        model: str | None = None,
        usage: Usage | None = None,
        tool_uses: Sequence[ToolUse] = (),
        ingested: Sequence[IngestedMail] = (),
        events: Sequence[NewEvent] = (),
        finished: Sequence[FinishedCall] = (),
    ) -> TurnRecord:
        """Append a turn with its tool calls (pending), the calls it finishes, ingested mail, usage
        and events, atomically."""
        return await self.write(
            functools.partial(
                ops.append_turn,
                run=self.run_id,
                agent=agent,
                epoch=epoch,
                role=role,
                content=content,
                stop_reason=stop_reason,
                model=model,
                usage=usage,
                tool_uses=tool_uses,
                ingested=ingested,
                events=events,
                finished=finished,
            )
        )

    async def add_usage(self, agent: str, usage: Usage) -> None:
        await self.write(functools.partial(ops.add_usage, run=self.run_id, agent=agent, usage=usage))

    async def move_tool_call(
        self, call_id: str, status: str, result: list[Any] | None = None, *, is_error: bool = False
    ) -> None:
        """Move a call along its journal: pending -> running -> done | error | interrupted."""
        await self.write(
            functools.partial(
                ops.move_tool_call,
                run=self.run_id,
                call_id=call_id,
                status=status,
                result=result,
                is_error=is_error,
            )
        )

    async def record_tool_process(self, call_id: str, pid: int, start_time: int) -> None:
        await self.write(
            functools.partial(
                ops.record_tool_process, run=self.run_id, call_id=call_id, pid=pid, start_time=start_time
            )
        )

    async def create_task(
        self, subject: str, description: str, *, created_by: str, blocked_by: Sequence[int] = ()
    ) -> TaskRecord:
        return await self.write(
            functools.partial(
                ops.create_task,
                run=self.run_id,
                subject=subject,
                description=description,
                created_by=created_by,
                blocked_by=blocked_by,
            )
        )

    async def claim_task(self, task_id: int, agent: str) -> TaskRecord:
        """Take an open, unblocked task; raises TaskUnavailable saying why not."""
        return await self.write(
            functools.partial(ops.claim_task, run=self.run_id, task_id=task_id, agent=agent)
        )

    async def update_task(self, task_id: int, status: str, *, by: str) -> TaskRecord:
        return await self.write(
            functools.partial(ops.update_task, run=self.run_id, task_id=task_id, status=status, by=by)
        )

    async def append_event(
        self, kind: EventKind, data: dict[str, Any] | None = None, *, agent: str | None = None
    ) -> int:
        return await self.write(
            functools.partial(ops.append_event, run=self.run_id, kind=kind, agent=agent, data=data or {})
        )

    async def queue_merge(self, agent: str, branch: str, head: str) -> MergeRecord:
        return await self.write(
            functools.partial(ops.queue_merge, run=self.run_id, agent=agent, branch=branch, head=head)
        )

    async def set_merge_status(
        self, agent: str, status: str, *, output: str | None = None, merged_commit: str | None = None
    ) -> MergeRecord:
        return await self.write(
            functools.partial(
                ops.set_merge_status,
                run=self.run_id,
                agent=agent,
                status=status,
                output=output,
                merged_commit=merged_commit,
            )
        )

    async def set_run_status(self, status: str, reason: str | None = None) -> None:
        await self.write(functools.partial(ops.set_run_status, run=self.run_id, status=status, reason=reason))


def _fence(conn: Connection, *, run: str, token: int, where: str) -> None:
    """First in every write transaction: refuse it unless this owner still holds the lease, and tell
    listeners on a server database that the run moved."""
    check_lease(conn, run, token, where)
    notify(conn, COMMITS, run)


def create_store(
    run_dir: Path,
    run: str,
    *,
    task: str,
    workdir: str,
    base_head: str | None = None,
    settings: dict[str, Any] | None = None,
    budget_tokens: int | None = None,
    budget_usd: float | None = None,
) -> Store:
    """Create the store of a new run, at the newest schema, owned by this process."""
    url = eng.store_url(run_dir)
    where = eng.describe(url)
    path = eng.run_file(run_dir)
    if path is not None:
        if path.exists():
            raise RunExists(run, str(run_dir.parent))
        eng.create_file(path)

    def setup(conn: Connection, owner: Owner) -> int:
        if ops.read_run(conn, run) is not None:
            raise RunExists(run, where)
        ops.insert_run(
            conn,
            run,
            task=task,
            workdir=workdir,
            base_head=base_head,
            settings=settings or {},
            budget_tokens=budget_tokens,
            budget_usd=budget_usd,
        )
        record = ops.read_run(conn, run)
        assert record is not None
        return ops.take_ownership(conn, record, owner)

    try:
        return _open(run_dir, run, url, where, setup, fresh=True)
    except BaseException:
        if path is not None:
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)
        raise


def open_store(run_dir: Path, run: str) -> Store:
    """Take over an existing run (a resume): refused while its owner lives, upgraded if older."""
    url = eng.store_url(run_dir)
    where = eng.describe(url)
    path = eng.run_file(run_dir)
    if path is not None and not path.is_file():
        raise RunNotFound(run, str(run_dir.parent))

    def setup(conn: Connection, owner: Owner) -> int:
        record = ops.read_run(conn, run)
        if record is None:
            raise RunNotFound(run, where)
        check_not_live_elsewhere(record, owner, database_now(conn))
        return ops.take_ownership(conn, record, owner)

    return _open(run_dir, run, url, where, setup)


def _open(
    run_dir: Path, run: str, url: str, where: str, setup: Callable[[Connection, Owner], int], *,
    fresh: bool = False,
) -> Store:  # fmt: skip
    """Lock, upgrade and take the run (``setup``); ``fresh``: a new run, whose commit count starts at 0. A
    full disk or a failing device is said in one line (``StoreOpenFailed``), never a driver's traceback."""
    try:
        lock = OwnerLock(run_dir, run, shared_database=eng.run_file(run_dir) is None)
        owner = lock.acquire()
    except OSError as e:
        raise StoreOpenFailed(where, _os_reason(e)) from e
    engine = eng.writer_engine(url)
    try:
        with engine.connect() as conn:
            migrate.upgrade(conn, where)
            with conn.begin():
                token = setup(conn, owner)
                count = integrity.stored_count(conn, run)
        stamp = integrity.CommitStamp(run, run_dir, count, engine.dialect.name, reset=fresh)
        return Store(run, where, engine, lock, owner, url, token, stamp)
    except BaseException as e:
        engine.dispose()
        lock.release()
        if isinstance(e, DBAPIError):
            raise StoreOpenFailed(where, database_reason(e)) from e
        if isinstance(e, OSError):
            raise StoreOpenFailed(where, _os_reason(e)) from e
        raise


def _os_reason(error: OSError) -> str:
    if error.errno is None:
        return str(error)
    return f"{os.strerror(error.errno).lower()} (errno {error.errno})"
