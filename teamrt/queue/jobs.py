"""One attempt of a queued run deferred as a Procrastinate job, with its ``run_jobs`` row.

The ``run_jobs`` row, the library's job and the row's ``job_id`` are written in one
transaction (the library defers on the transaction's own connection), so an attempt
either exists with its job or not at all. The run's lock and queueing lock
(``connect.run_lock``) keep two attempts of one run from waiting, or running, at once.
"""

from __future__ import annotations

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from teamrt.errors import UserError
from teamrt.queue.connect import DRIVE_TASK, bound_app, psycopg_connection, queue_engine, run_lock
from teamrt.store import queue_tables as q


class QueueError(UserError):
    """A queue request that cannot be met, in one line."""


class AlreadyQueued(QueueError):
    """An attempt of the run is already waiting for a worker (the library's queueing lock refused another),
    or this attempt number was deferred before."""


class NotQueued(QueueError):
    """The run was never submitted, or its queue record has ended."""


MAX_PRIORITY = 1_000_000
"""The priorities a submitter may give: from -MAX_PRIORITY to MAX_PRIORITY, higher first."""
RESUMED_FIRST = 2 * MAX_PRIORITY + 1
"""Added to the priority of a run's attempts after the first: a run a dead worker left goes before every
run that has not started (the library fetches by priority, then age), not behind a long queue."""


def defer_attempt(url: str, run_id: str, attempt: int) -> int:
    """Defer attempt ``attempt`` of the queued run ``run_id`` (``DRIVE_TASK``, its pool and priority);
    returns the library's job id."""
    engine = queue_engine(url)
    try:
        with engine.connect() as conn, conn.begin():
            return defer_in(conn, run_id, attempt)
    finally:
        engine.dispose()


def defer_in(conn: Connection, run_id: str, attempt: int) -> int:
    """``defer_attempt`` inside the caller's transaction (``teamrt submit`` records the run in the same
    one). On a refusal the caller must roll back: the database has refused a statement."""
    import procrastinate.exceptions

    row = conn.execute(
        select(q.queue_runs.c.pool, q.queue_runs.c.priority, q.queue_runs.c.ended_at)
        .where(q.queue_runs.c.run_id == run_id)
        .with_for_update()
    ).first()
    if row is None or row.ended_at is not None:
        raise NotQueued(f"run {run_id!r} is not queued" + (" (it has ended)" if row is not None else ""))
    try:
        with conn.begin_nested():
            conn.execute(insert(q.run_jobs).values(run_id=run_id, attempt=attempt))
    except IntegrityError:
        raise AlreadyQueued(f"attempt {attempt} of run {run_id!r} was deferred already") from None
    lock = run_lock(run_id)
    priority = row.priority + (RESUMED_FIRST if attempt > 1 else 0)
    deferrer = bound_app().configure_task(
        DRIVE_TASK, lock=lock, queueing_lock=lock, priority=priority, queue=row.pool,
        connection=psycopg_connection(conn),
    )  # fmt: skip
    try:
        job_id = deferrer.defer(run_id=run_id, attempt=attempt)
    except procrastinate.exceptions.AlreadyEnqueued:
        raise AlreadyQueued(f"run {run_id!r} already has an attempt waiting for a worker") from None
    conn.execute(
        update(q.run_jobs)
        .where(q.run_jobs.c.run_id == run_id, q.run_jobs.c.attempt == attempt)
        .values(job_id=job_id)
    )
    return job_id
