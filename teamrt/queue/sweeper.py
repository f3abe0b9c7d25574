"""The sweeper: a periodic task that hands on the runs of dead workers (``connect.SWEEP_TASK``).

Every ``SWEEP_EVERY_S`` one copy runs on some worker of the pool. For each
``DRIVE_TASK`` job the library finds stalled (its worker's heartbeat older than
``STALLED_WORKER_S``):

- the run has ended: the attempt is booked ended, the job finished;
- the run's lease is fresh: left alone (the owner lives though its worker looks dead);
- otherwise the attempt ends ``worker lost`` and the next is deferred (or the run
  ends failed after ``MAX_ATTEMPTS``), in one transaction, and the old job is
  finished ``failed`` so that the run's lock lets the next one be fetched. A run with
  no row yet waits until the worker has been silent ``NO_RUN_ROW_STALLED_S``.

It also defers again a run left with no attempt pending or running (or ends it, when
its stop was asked). A stop asked while a run waits for a worker is honoured by the
worker that fetches its attempt (``attempts.begin``), before any quota.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, exists, select

from teamrt.queue import attempts, ledger
from teamrt.queue.attempts import LOST
from teamrt.queue.connect import DRIVE_TASK, SWEEP_TASK
from teamrt.queue.jobs import QueueError, defer_in
from teamrt.queue.timing import NO_RUN_ROW_STALLED_S, STALLED_WORKER_S
from teamrt.store import queue_tables as q

if TYPE_CHECKING:
    import procrastinate
    from sqlalchemy import Connection

log = logging.getLogger("teamrt.queue")
SWEEP_SUFFIX = ":sweep"
"""The sweeper's queue is its pool's name with this suffix (a worker's slots never hold it up)."""


async def sweep(app: procrastinate.App, url: str, pool: str) -> None:
    """One sweep of ``pool`` (see the module's docstring)."""
    import asyncio

    manager = app.job_manager
    stalled = await manager.get_stalled_jobs(
        queue=pool, task_name=DRIVE_TASK, seconds_since_heartbeat=STALLED_WORKER_S
    )
    long_stalled = {
        job.id
        for job in await manager.get_stalled_jobs(
            queue=pool, task_name=DRIVE_TASK, seconds_since_heartbeat=NO_RUN_ROW_STALLED_S
        )
    }
    for job in stalled:
        assert job.id is not None
        kwargs = job.task_kwargs
        try:
            finish = await asyncio.to_thread(
                settle_stalled,
                url,
                str(kwargs["run_id"]),
                int(str(kwargs["attempt"])),
                job.id in long_stalled,
            )
        except Exception as e:  # one run's trouble must not stop the sweep of the others
            log.warning("sweep: job %s: %s", job.id, e)
            continue
        if finish is not None:
            await _finish(manager, job.id, finish)
    for job in await manager.get_stalled_jobs(
        queue=pool + SWEEP_SUFFIX, task_name=SWEEP_TASK, seconds_since_heartbeat=STALLED_WORKER_S
    ):
        assert job.id is not None  # a sweep a dead worker held: nothing to book
        await _finish(manager, job.id, "failed")
    await asyncio.to_thread(settle_idle, url, pool)


async def _finish(manager: Any, job_id: int, status: str) -> None:
    from procrastinate.jobs import Status

    try:
        await manager.finish_job_by_id_async(job_id, Status(status), delete_job=False)
    except Exception as e:  # finished meanwhile (its worker came back)
        log.info("sweep: job %s was finished already: %s", job_id, e)


def settle_stalled(url: str, run_id: str, attempt: int, long_stalled: bool) -> str | None:
    """Book a stalled attempt; the status to finish its job with, or None to leave it alone."""
    with attempts.transaction(url) as conn:
        queued = attempts.queue_row(conn, run_id)
        job = attempts.job_row(conn, run_id, attempt)
        run = attempts.run_row(conn, run_id)
        if queued is None or job is None or job.ended_at is not None or queued.ended_at is not None:
            return "failed"  # nothing of ours: only the job row is left to end
        if run is not None and run.status != "running":
            attempts.finish_ended(conn, run_id, attempt, run)
            return "succeeded"
        if run is not None and attempts.lease_fresh(conn, run):
            return None
        if run is None and not long_stalled:
            return None
        attempts.hand_on(conn, run_id, attempt, run, LOST)
        return "failed"


def settle_idle(url: str, pool: str) -> None:
    """Runs of ``pool`` left with no attempt pending or running: deferred again (or ended, when a stop was
    asked)."""
    with attempts.transaction(url) as conn:
        open_attempt = exists().where(
            and_(q.run_jobs.c.run_id == q.queue_runs.c.run_id, q.run_jobs.c.ended_at.is_(None))
        )
        idle = conn.execute(
            select(q.queue_runs.c.run_id).where(
                q.queue_runs.c.pool == pool, q.queue_runs.c.ended_at.is_(None), ~open_attempt
            )
        ).scalars()
        for run_id in list(idle):
            _restart(conn, run_id)


def _restart(conn: Connection, run_id: str) -> None:
    queued = attempts.queue_row(conn, run_id)
    if queued is None or queued.ended_at is not None:
        return
    run = attempts.run_row(conn, run_id)
    if queued.stop_requested_at is not None:
        attempts.stop(conn, run_id, None, run)
    elif run is not None and run.status != "running":
        ledger.end_queued_run(conn, run_id, run.status, run.status_reason or "")
    else:
        try:
            with conn.begin_nested():
                defer_in(conn, run_id, ledger.attempts(conn, run_id) + 1)
        except QueueError as e:
            log.info("sweep: run %s: %s", run_id, e)
