"""``teamrt stop`` for a run no owner is running: queued, or crashed and waiting for a worker.

A running run is stopped as every run is, by mail to its supervisor
(``teamrt.runs.steer``); this module only records the request
(``queue_runs.stop_requested_at``, which workers and the sweeper honour when they race
with it) and says so by returning None. A run with no owner has no one to read mail:
its waiting job is cancelled (the library cancels only a job still ``todo``, so a worker
that fetched it first wins, and stops the run as it starts) and the run is ended
``stopped``, its batch settled, all in one transaction under the queue row's lock.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from teamrt.queue.connect import bound_app, psycopg_connection, reaching
from teamrt.queue.ledger import end_queued_run, end_run_row
from teamrt.runs.query import CRASHED, RunsError, run_status
from teamrt.runs.queued import has_queue
from teamrt.store import queue_tables as q
from teamrt.store import tables as t
from teamrt.store.engine import is_postgres, server_url
from teamrt.store.ownership import database_now, now_in_database

BEFORE_START = "stopped before it started"
WHILE_WAITING = "stopped while waiting for a worker"


def stop_if_queued(run_id: str, agent: str | None) -> str | None:
    """Stop ``run_id`` if the queue holds it and no owner runs it; what was done, in one line. None: the
    run is not the queue's to stop here (not submitted, no queue, or running: steer it)."""
    url = server_url()
    if url is None or not is_postgres(url):
        return None
    with reaching(url) as engine, engine.connect() as conn, conn.begin():
        if not has_queue(conn):
            return None
        return _stop(conn, run_id, agent)


def _stop(conn: Connection, run_id: str, agent: str | None) -> str | None:
    queued = conn.execute(
        select(q.queue_runs.c.ended_at, q.queue_runs.c.end_status)
        .where(q.queue_runs.c.run_id == run_id)
        .with_for_update()
    ).first()
    if queued is None:
        return None
    row = conn.execute(select(t.runs).where(t.runs.c.id == run_id).with_for_update()).first()
    if queued.ended_at is not None and row is None:
        raise RunsError(f"run {run_id!r} is {queued.end_status}; there is nothing to stop")
    conn.execute(
        update(q.queue_runs)
        .where(q.queue_runs.c.run_id == run_id, q.queue_runs.c.stop_requested_at.is_(None))
        .values(stop_requested_at=now_in_database(conn))
    )
    if queued.ended_at is not None:
        return None  # ended with its row: the usual path says how
    if row is not None and run_status(t.run_record(row), database_now(conn)) != CRASHED:
        return None  # an owner runs it (or it has just ended): its supervisor stops it
    if agent is not None:
        raise RunsError(f"run {run_id!r} is not running; stop the whole run: teamrt stop {run_id}")
    if (row is None and _started(conn, run_id)) or not _cancel_waiting(conn, run_id):
        return f"run {run_id} is being started by a worker; it was asked to stop and will as it starts"
    if row is None:
        end_queued_run(conn, run_id, "stopped", BEFORE_START)
        return f"stopped run {run_id} before it started"
    end_run_row(conn, run_id, "stopped", WHILE_WAITING)
    end_queued_run(conn, run_id, "stopped", WHILE_WAITING)
    return f"stopped run {run_id}, which was waiting for a worker"


def _started(conn: Connection, run_id: str) -> bool:
    """Whether a worker has started an attempt of the run that has not ended."""
    started = select(q.run_jobs.c.attempt).where(
        q.run_jobs.c.run_id == run_id, q.run_jobs.c.started_at.is_not(None), q.run_jobs.c.ended_at.is_(None)
    )
    return conn.execute(started.limit(1)).first() is not None


def _cancel_waiting(conn: Connection, run_id: str) -> bool:
    """Cancel the run's attempts not started yet; False when a worker has fetched one already."""
    pending = conn.execute(
        select(q.run_jobs.c.attempt, q.run_jobs.c.job_id).where(
            q.run_jobs.c.run_id == run_id, q.run_jobs.c.started_at.is_(None), q.run_jobs.c.ended_at.is_(None)
        )
    ).all()
    app = bound_app()
    for attempt, job_id in pending:
        if job_id is not None and not app.job_manager.cancel_job_by_id(
            job_id, connection=psycopg_connection(conn)
        ):
            return False
        conn.execute(
            update(q.run_jobs)
            .where(q.run_jobs.c.run_id == run_id, q.run_jobs.c.attempt == attempt)
            .values(ended_at=now_in_database(conn), outcome="cancelled")
        )
    return True
