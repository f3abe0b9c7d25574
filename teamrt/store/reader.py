"""Reading a run's store: what the TUI, ``teamrt ls`` and a resume see.

A reader never writes run data. Each method reads inside one transaction,
so what it returns is a consistent snapshot, and returns records, never
ORM objects. Methods block; the TUI calls them from worker threads.

On a server database a read that loses the server (a restart, a stop, its
session ended) is made again for the grace period (``engine.grace_s``): a
read changes nothing, so it may be repeated. A reader is only made once its
server was reached (``open_reader``), so an unreachable database is still
said at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, Row, select, union_all

from teamrt.store import engine as eng
from teamrt.store import migrate, steering
from teamrt.store import tables as t
from teamrt.store.errors import NotFound, RunNotFound, SchemaTooNew, SchemaTooOld
from teamrt.store.ownership import OwnerLock, database_now
from teamrt.store.records import (
    AgentRecord,
    EventRecord,
    MailRecord,
    MergeRecord,
    RunRecord,
    SteeringRecord,
    TaskRecord,
    ToolCallRecord,
    TurnRecord,
)

P = ParamSpec("P")
R = TypeVar("R")


def _again(read: Callable[Concatenate[StoreReader, P], R]) -> Callable[Concatenate[StoreReader, P], R]:
    """A read made again while the server is lost, for the reader's grace (not inside a snapshot, whose
    transaction went with the connection)."""

    @functools.wraps(read)
    def reading(self: StoreReader, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._conn is not None or self.grace_s <= 0:
            return read(self, *args, **kwargs)
        return eng.reconnecting(
            lambda: read(self, *args, **kwargs), self.grace_s, f"a reader of {self.run_id}"
        )

    return reading


class StoreReader:
    def __init__(
        self, engine: Engine, run: str, *, conn: Connection | None = None, grace_s: float | None = None
    ) -> None:
        """``grace_s``: how long a lost server is waited for (default ``engine.grace_s()`` on PostgreSQL)."""
        self._engine = engine
        self.run_id = run
        self._conn = conn  # a snapshot's: every read in its one transaction
        if grace_s is None:
            grace_s = eng.grace_s() if engine.dialect.name == "postgresql" else 0.0
        self.grace_s = grace_s

    @contextmanager
    def snapshot(self) -> Iterator[StoreReader]:
        """This reader's methods inside one transaction: together they see one state of the run."""
        if self.grace_s > 0:
            conn = eng.reconnecting(self._reached, self.grace_s, f"a reader of {self.run_id}")
        else:
            conn = self._engine.connect()
        try:
            with conn.begin():
                yield StoreReader(self._engine, self.run_id, conn=conn, grace_s=0.0)
        finally:
            conn.close()

    def _reached(self) -> Connection:
        """A connection that has reached the server (checked out of the pool, pinged)."""
        conn = self._engine.connect()
        try:
            conn.exec_driver_sql("SELECT 1")
            conn.rollback()
        except BaseException:
            conn.close()
            raise
        return conn

    @_again
    def now(self) -> float:
        """The database's clock (PostgreSQL's; this machine's for SQLite), in seconds since the epoch:
        what the owner's heartbeats are written in (see ``ownership.database_now``)."""
        with self._read() as conn:
            return database_now(conn)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        if self._conn is not None:
            yield self._conn
            return
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def close(self) -> None:
        self._engine.dispose()

    @_again
    def steering_waiting(self) -> list[SteeringRecord]:
        """Messages left for this run by other hosts and not yet delivered (see ``steering.py``)."""
        with self._read() as conn:
            return steering.waiting(conn, self.run_id)

    @_again
    def run(self) -> RunRecord:
        with self._read() as conn:
            row = conn.execute(select(t.runs).where(t.runs.c.id == self.run_id)).first()
        if row is None:
            raise NotFound("run", self.run_id)
        return t.run_record(row)

    @_again
    def agents(self, names: Collection[str] | None = None) -> list[AgentRecord]:
        """The run's agents (those named, when ``names`` is given), oldest first."""
        query = select(t.agents).where(t.agents.c.run_id == self.run_id)
        if names is not None:
            query = query.where(t.agents.c.name.in_(names))
        with self._read() as conn:
            rows = conn.execute(query.order_by(t.agents.c.created_at)).all()
        return [t.agent_record(r) for r in rows]

    @_again
    def changed_agents(self, since: float) -> tuple[set[str], float]:
        """Agents whose record changed, or whose calls were asked for or started, at ``since`` or later,
        and the latest such time (``since`` when there is none).

        With ``turn_heads`` (a new turn brings an agent's usage and finishes its
        calls) this is what a watcher needs to read only the agents that moved.
        Times are the writer's clock as it wrote; one writer writes in order, so
        what it commits after this read is stamped no earlier than what this
        read saw: passing the time returned to the next call misses nothing.
        """
        a, c = t.agents.c, t.tool_calls.c
        query = union_all(
            select(a.name, a.updated_at).where(a.run_id == self.run_id, a.updated_at >= since),
            select(c.agent, c.created_at).where(
                c.run_id == self.run_id, c.status.in_(("pending", "running")), c.created_at >= since
            ),
            select(c.agent, c.started_at).where(
                c.run_id == self.run_id, c.status.in_(("pending", "running")), c.started_at >= since
            ),
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return {r[0] for r in rows}, max((r[1] for r in rows), default=since)

    @_again
    def agent(self, name: str) -> AgentRecord:
        with self._read() as conn:
            row = conn.execute(
                select(t.agents).where(t.agents.c.run_id == self.run_id, t.agents.c.name == name)
            ).first()
        if row is None:
            raise NotFound("agent", name)
        return t.agent_record(row)

    @_again
    def turns(self, agent: str, after_seq: int = 0) -> list[TurnRecord]:
        with self._read() as conn:
            rows = conn.execute(
                select(t.turns)
                .where(t.turns.c.run_id == self.run_id, t.turns.c.agent == agent, t.turns.c.seq > after_seq)
                .order_by(t.turns.c.seq)
            ).all()
        return [t.turn_record(r) for r in rows]

    @_again
    def tool_calls(
        self,
        agent: str | None = None,
        statuses: Collection[str] = (),
        *,
        agents: Collection[str] | None = None,
    ) -> list[ToolCallRecord]:
        """Journaled calls (of ``agent``, or of ``agents``) in the order they were asked for, with the
        processes each started."""
        query = select(t.tool_calls).where(t.tool_calls.c.run_id == self.run_id)
        if agent is not None:
            query = query.where(t.tool_calls.c.agent == agent)
        if agents is not None:
            query = query.where(t.tool_calls.c.agent.in_(agents))
        if statuses:
            query = query.where(t.tool_calls.c.status.in_(statuses))
        with self._read() as conn:
            calls = conn.execute(query.order_by(t.tool_calls.c.turn_id, t.tool_calls.c.created_at)).all()
            processes = select(t.tool_processes).where(t.tool_processes.c.run_id == self.run_id)
            if agent is not None or agents is not None or statuses:
                processes = processes.where(t.tool_processes.c.call_id.in_([c._mapping["id"] for c in calls]))
            procs = conn.execute(processes.order_by(t.tool_processes.c.id)).all()
        by_call: dict[str, list[Row[Any]]] = {}
        for p in procs:
            by_call.setdefault(p._mapping["call_id"], []).append(p)
        return [t.tool_call_record(c, by_call.get(c._mapping["id"], [])) for c in calls]

    @_again
    def turn_heads(self, after_id: int = 0) -> list[tuple[int, str, str, float]]:
        """``(id, agent, role, created_at)`` of every turn after ``after_id``, without its content:
        what a watcher needs to count turns and see whose turn is whose, cheaply."""
        c = t.turns.c
        query = select(c.id, c.agent, c.role, c.created_at).where(c.run_id == self.run_id, c.id > after_id)
        with self._read() as conn:
            return [(r[0], r[1], r[2], r[3]) for r in conn.execute(query.order_by(c.id)).all()]

    @_again
    def mail(self, agent: str | None = None, *, sender: str | None = None) -> list[MailRecord]:
        """Ingested mail, to ``agent`` and/or from ``sender`` when given."""
        query = select(t.mail).where(t.mail.c.run_id == self.run_id)
        if agent is not None:
            query = query.where(t.mail.c.agent == agent)
        if sender is not None:
            query = query.where(t.mail.c.sender == sender)
        with self._read() as conn:
            rows = conn.execute(query.order_by(t.mail.c.turn_id, t.mail.c.id)).all()
        return [t.mail_record(r) for r in rows]

    @_again
    def ingested_ids(self, agent: str) -> set[str]:
        with self._read() as conn:
            ids = conn.execute(
                select(t.mail.c.id).where(t.mail.c.run_id == self.run_id, t.mail.c.agent == agent)
            ).scalars()
            return set(ids)

    @_again
    def tasks(self) -> list[TaskRecord]:
        with self._read() as conn:
            rows = conn.execute(
                select(t.tasks).where(t.tasks.c.run_id == self.run_id).order_by(t.tasks.c.number)
            ).all()
            blocker = t.tasks.alias("blocker")
            blockers = conn.execute(
                select(t.task_blockers.c.task_id, blocker.c.number)
                .select_from(t.task_blockers.join(blocker, blocker.c.id == t.task_blockers.c.blocker_id))
                .where(t.task_blockers.c.task_id.in_([r._mapping["id"] for r in rows]))
            ).all()
        by_task: dict[int, list[int]] = {}
        for key, number in blockers:
            by_task.setdefault(key, []).append(number)
        return [t.task_record(r, by_task.get(r._mapping["id"], [])) for r in rows]

    @_again
    def merges(self) -> list[MergeRecord]:
        queue = t.merge_queue
        query = select(queue).where(queue.c.run_id == self.run_id).order_by(queue.c.id)
        with self._read() as conn:
            return [t.merge_record(r) for r in conn.execute(query).all()]

    @_again
    def events(
        self, after_id: int = 0, limit: int | None = None, kinds: Collection[str] = ()
    ) -> list[EventRecord]:
        """Events after ``after_id`` in the order they were kept; ``kinds``: only these (default: all)."""
        query = select(t.events).where(t.events.c.run_id == self.run_id, t.events.c.id > after_id)
        if kinds:
            query = query.where(t.events.c.kind.in_(kinds))
        query = query.order_by(t.events.c.id).limit(limit)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [t.event_record(r) for r in rows]

    @_again
    def last_events(self, limit: int) -> list[EventRecord]:
        """The newest ``limit`` events, oldest first."""
        query = (
            select(t.events)
            .where(t.events.c.run_id == self.run_id)
            .order_by(t.events.c.id.desc())
            .limit(limit)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [t.event_record(r) for r in reversed(rows)]


def open_reader(run_dir: Path, run: str) -> StoreReader:
    """A read-only view of the run; raises RunNotFound, SchemaTooNew or SchemaTooOld.

    A store at an older schema whose run has no live owner is first upgraded
    under the run's lock (a schema change, not run data); one held by a live
    older teamrt is refused, since that owner writes the old schema. A file
    with no schema at all is a run being created: RunNotFound, and the lock
    is left to its creator (a reader that took it to "upgrade" the empty file
    would make the creator's ``create_store`` fail as owned).
    """
    url = eng.store_url(run_dir)
    where = eng.describe(url)
    path = eng.run_file(run_dir)
    if path is not None and not path.is_file():
        raise RunNotFound(run, str(run_dir.parent))
    engine = eng.reader_engine(url)
    try:
        with engine.connect() as conn:
            revision = migrate.current_revision(conn)
        if revision is None:
            raise RunNotFound(run, str(run_dir.parent))
        if revision != migrate.HEAD:
            if migrate.is_newer(revision):
                raise SchemaTooNew(where, revision or "", migrate.HEAD)
            _upgrade_idle(run_dir, run, url, where, revision)
        reader = StoreReader(engine, run)
        try:
            reader.run()
        except NotFound:
            raise RunNotFound(run, where) from None
        return reader
    except BaseException:
        engine.dispose()
        raise


def _upgrade_idle(run_dir: Path, run: str, url: str, where: str, revision: str) -> None:
    lock = OwnerLock(run_dir, run, shared_database=eng.run_file(run_dir) is None)
    try:
        lock.acquire()
    except Exception:
        raise SchemaTooOld(where, revision, migrate.HEAD) from None
    writer = eng.writer_engine(url)
    try:
        with writer.connect() as conn:
            migrate.upgrade(conn, where)
    finally:
        writer.dispose()
        lock.release()
