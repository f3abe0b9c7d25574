"""The books of one attempt of a queued run, each step one transaction on the runs' server database.

A worker starts an attempt (``begin``), settles it when its child exits
(``settle``); the sweeper hands on the attempt of a worker it found dead
(``hand_on``). The run's lease (``runs``) says whether the run is live or ended;
``run_jobs`` says which attempt is current; ``queue_runs`` is locked first in every
step, so two workers, or a worker and the sweeper, never settle one run at once.
A crashed attempt is followed by the next (``defer_in``, same transaction) until
``MAX_ATTEMPTS``, then the run ends failed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, select, update

from teamrt.queue import ledger
from teamrt.queue.connect import queue_engine
from teamrt.queue.jobs import defer_in
from teamrt.queue.timing import MAX_ATTEMPTS
from teamrt.store import queue_tables as q
from teamrt.store import tables as t
from teamrt.store.ownership import STALE_AFTER_S, database_now, now_in_database

ENDED, CRASHED, LOST, STOPPED = "ended", "crashed", "worker lost", "stopped"
"""``run_jobs.outcome`` values this module writes."""
FAILED_REASON = f"crashed on {MAX_ATTEMPTS} workers"


class QuotaWait(Exception):
    """The submitter has their quota of runs running: the job is tried again later, not counted."""


class Start(enum.Enum):
    DRIVE = "drive"
    """This worker drives the attempt (it is marked started here)."""
    FOLLOW = "follow"
    """Another delivery of this attempt has started it: wait for that one to end."""
    DONE = "done"
    """Nothing to do: the run or the attempt ended, a newer attempt exists, or a stop was honoured."""


@dataclass(frozen=True)
class Begun:
    start: Start
    repo_url: str | None = None
    repo_ref: str | None = None
    has_run: bool = False
    """The run has its ``runs`` row: the child resumes it."""


def begin(url: str, run_id: str, attempt: int, host: str) -> Begun:
    """Start attempt ``attempt`` on ``host`` unless there is nothing to do; raises ``QuotaWait`` (nothing
    written) while the submitter has their quota of runs running."""
    with transaction(url) as conn:
        queued = queue_row(conn, run_id)
        job = job_row(conn, run_id, attempt)
        if queued is None or queued.ended_at is not None or job is None or job.ended_at is not None:
            return Begun(Start.DONE)
        if ledger.attempts(conn, run_id) > attempt:
            return Begun(Start.DONE)
        if job.started_at is not None:
            return Begun(Start.FOLLOW)
        run = run_row(conn, run_id)
        if queued.stop_requested_at is not None:
            stop(conn, run_id, attempt, run)
            return Begun(Start.DONE)
        conn.execute(
            select(q.user_quotas.c.submitter)
            .where(q.user_quotas.c.submitter == queued.submitter)
            .with_for_update()
        )  # one submitter's starts, one at a time: the count below cannot be raced
        quota = ledger.quota_of(conn, queued.submitter)
        if quota is not None and ledger.running_count(conn, queued.submitter) >= quota:
            raise QuotaWait(f"{queued.submitter} has {quota} run(s) running")
        _mark(conn, run_id, attempt, started_at=now_in_database(conn), worker_host=host)
        return Begun(Start.DRIVE, queued.repo_url, queued.repo_ref, has_run=run is not None)


class Verdict(enum.Enum):
    ENDED = "ended"
    CRASHED = "crashed"
    OWNED = "owned"
    """Another live owner holds the run: follow it."""
    SUPERSEDED = "superseded"
    """The sweeper handed this attempt on already: nothing here is ours."""


def settle(
    url: str, run_id: str, attempt: int, host: str, child_pid: int, refused: str | None = None
) -> Verdict:
    """Book the end of the attempt whose child (``child_pid``, on ``host``) has exited; ``refused``: why its
    first start was refused (the run then ends failed, saying so)."""
    with transaction(url) as conn:
        queued = queue_row(conn, run_id)
        job = job_row(conn, run_id, attempt)
        if queued is None or job is None or job.ended_at is not None:
            return Verdict.SUPERSEDED
        run = run_row(conn, run_id)
        if run is not None and run.status != "running":
            finish_ended(conn, run_id, attempt, run)
            return Verdict.ENDED
        if queued.ended_at is not None or (run is None and refused is not None):
            _mark(conn, run_id, attempt, ended_at=now_in_database(conn), outcome=ENDED)
            if refused is not None:
                ledger.end_queued_run(conn, run_id, "failed", refused)
            return Verdict.ENDED
        if run is not None and run.owner_host == host and run.owner_pid == child_pid:
            conn.execute(  # its owner is dead, here: the next attempt need not wait for the lease to go stale
                update(t.runs)
                .where(t.runs.c.id == run_id, t.runs.c.owner_token == run.owner_token)
                .values(owner_host=None, owner_pid=None, owner_start_time=None, owner_since=None)
            )
        elif run is not None and lease_fresh(conn, run):
            return Verdict.OWNED
        hand_on(conn, run_id, attempt, run, CRASHED)
        return Verdict.CRASHED


def hand_on(conn: Connection, run_id: str, attempt: int, run: Row[Any] | None, outcome: str) -> None:
    """End attempt ``attempt`` with ``outcome`` and defer the next, or end the run failed after
    ``MAX_ATTEMPTS``; a run whose stop was asked ends stopped instead."""
    _mark(conn, run_id, attempt, ended_at=now_in_database(conn), outcome=outcome)
    queued = queue_row(conn, run_id)
    if queued is None or queued.ended_at is not None:
        return
    if queued.stop_requested_at is not None:
        stop(conn, run_id, None, run)
    elif attempt >= MAX_ATTEMPTS:
        if run is not None:
            ledger.end_run_row(conn, run_id, "failed", FAILED_REASON)
        ledger.end_queued_run(conn, run_id, "failed", FAILED_REASON)
    else:
        defer_in(conn, run_id, attempt + 1)


def fail_unstarted(url: str, run_id: str, attempt: int, reason: str) -> None:
    """End a run that could not begin (its repository would not clone): failed, with ``reason``."""
    with transaction(url) as conn:
        if queue_row(conn, run_id) is None:
            return
        _mark(conn, run_id, attempt, ended_at=now_in_database(conn), outcome=ENDED)
        ledger.end_queued_run(conn, run_id, "failed", reason)


def stop_unstarted(url: str, run_id: str, attempt: int) -> None:
    """An attempt aborted before its child started: the run ends stopped."""
    with transaction(url) as conn:
        if queue_row(conn, run_id) is not None:
            stop(conn, run_id, attempt, run_row(conn, run_id))


def finish_ended(conn: Connection, run_id: str, attempt: int, run: Row[Any]) -> None:
    """The run reached an end: book the attempt ``ended`` and the run's queue record with its status."""
    _mark(conn, run_id, attempt, ended_at=now_in_database(conn), outcome=ENDED)
    ledger.end_queued_run(conn, run_id, run.status, run.status_reason or "")


def stop(conn: Connection, run_id: str, attempt: int | None, run: Row[Any] | None) -> None:
    """Honour a stop asked while no child holds the run: it ends ``stopped``, with ``attempt`` (if any)."""
    if attempt is not None:
        _mark(conn, run_id, attempt, ended_at=now_in_database(conn), outcome=STOPPED)
    if run is not None and run.status == "running":
        ledger.end_run_row(conn, run_id, "stopped", "stopped while waiting for a worker")
        ledger.end_queued_run(conn, run_id, "stopped", "stopped while waiting for a worker")
    elif run is not None:
        ledger.end_queued_run(conn, run_id, run.status, run.status_reason or "")
    else:
        ledger.end_queued_run(conn, run_id, "stopped", "stopped before it started")


def lease_fresh(conn: Connection, run: Row[Any]) -> bool:
    """Whether the run's owner heartbeats (in the database's clock) within the stale limit."""
    if run.owner_host is None or run.heartbeat_at is None:
        return False
    return bool(database_now(conn) - run.heartbeat_at < STALE_AFTER_S)


def look(url: str, run_id: str, attempt: int) -> tuple[bool, bool]:
    """(attempt over, lease fresh): whether the attempt (or the run's queue record) has ended, and whether
    the run's owner is live."""
    with transaction(url) as conn:
        queued = conn.execute(select(q.queue_runs.c.ended_at).where(q.queue_runs.c.run_id == run_id)).first()
        job = job_row(conn, run_id, attempt, lock=False)
        run = run_row(conn, run_id)
        over = queued is None or queued.ended_at is not None or job is None or job.ended_at is not None
        ended = run is not None and run.status != "running"
        return over or ended, run is not None and lease_fresh(conn, run)


@dataclass(frozen=True)
class Seen:
    """What a worker watches of the run it drives."""

    branch: str | None
    """The run's integration branch, once its row exists and it works in git."""
    stop_missed: bool
    """A stop was asked before the run's present owner took it (nobody delivered it to that owner)."""


def watch(url: str, run_id: str) -> Seen:
    with transaction(url) as conn:
        run = conn.execute(
            select(t.runs.c.settings, t.runs.c.owner_since).where(t.runs.c.id == run_id)
        ).first()
        asked = conn.execute(
            select(q.queue_runs.c.stop_requested_at).where(q.queue_runs.c.run_id == run_id)
        ).scalar()
    if run is None:
        return Seen(None, False)
    branch = run.settings.get("integration_branch") if isinstance(run.settings, dict) else None
    missed = asked is not None and run.owner_since is not None and asked < run.owner_since
    return Seen(branch if isinstance(branch, str) else None, missed)


@contextmanager
def transaction(url: str) -> Iterator[Connection]:
    engine = queue_engine(url)
    try:
        with engine.connect() as conn, conn.begin():
            yield conn
    finally:
        engine.dispose()


def queue_row(conn: Connection, run_id: str) -> Row[Any] | None:
    return conn.execute(select(q.queue_runs).where(q.queue_runs.c.run_id == run_id).with_for_update()).first()


def job_row(conn: Connection, run_id: str, attempt: int, *, lock: bool = True) -> Row[Any] | None:
    query = select(q.run_jobs).where(q.run_jobs.c.run_id == run_id, q.run_jobs.c.attempt == attempt)
    return conn.execute(query.with_for_update() if lock else query).first()


def run_row(conn: Connection, run_id: str) -> Row[Any] | None:
    return conn.execute(select(t.runs).where(t.runs.c.id == run_id)).first()


def _mark(conn: Connection, run_id: str, attempt: int, **values: Any) -> None:
    conn.execute(
        update(q.run_jobs)
        .where(q.run_jobs.c.run_id == run_id, q.run_jobs.c.attempt == attempt)
        .values(**values)
    )
