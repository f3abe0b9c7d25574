"""A run's place in the queue of a server database, as ``teamrt ls`` and the TUI list it.

Reads the queue's own tables (``store.queue_tables``), never the library's, and only in
a database at revision 0005 or later: a SQLite home and a server database no run was ever
submitted to list as before. What it returns is shown through ``clean_line`` by the
caller's table (submitters and prompts are the submitters' own text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from teamrt.store import queue_tables as q
from teamrt.store.migrate import current_revision

QUEUE_REVISION = "0005"
"""The first schema revision with the queue's tables."""


@dataclass(frozen=True, slots=True)
class QueuePlace:
    """A run's place in the queue of a server database (``teamrt submit``); every field None (and
    ``attempt`` 0) for a run started by hand there."""

    submitter: str | None
    batch: str | None
    host: str | None
    """The worker host of the run's newest started attempt."""
    attempt: int


def has_queue(conn: Connection) -> bool:
    """Whether the database holds the queue's tables (a server database at revision 0005 or later)."""
    if conn.dialect.name != "postgresql":
        return False
    revision = current_revision(conn)
    return revision is not None and revision >= QUEUE_REVISION


@dataclass(frozen=True, slots=True)
class QueuedRun:
    """A ``queue_runs`` row with its newest attempt."""

    run_id: str
    submitter: str
    batch: str | None
    team_name: str | None
    prompt: str
    pool: str
    priority: int
    budget_usd: float | None
    submitted_at: float
    ended: bool
    end_status: str | None
    attempt: int  # the newest attempt's number; 0: none
    started: bool  # the newest attempt was picked up by a worker
    attempt_ended: bool
    host: str | None  # the newest started attempt's worker


def queued_runs(
    conn: Connection, *, open_only: bool = False, batch: str | None = None
) -> dict[str, QueuedRun]:
    """Every submitted run (only those not ended, with ``open_only``; of one batch, with ``batch``)."""
    runs = select(q.queue_runs)
    jobs = select(q.run_jobs).join(q.queue_runs, q.queue_runs.c.run_id == q.run_jobs.c.run_id)
    if open_only:
        runs = runs.where(q.queue_runs.c.ended_at.is_(None))
        jobs = jobs.where(q.queue_runs.c.ended_at.is_(None))
    if batch is not None:
        runs = runs.where(q.queue_runs.c.batch_id == batch)
        jobs = jobs.where(q.queue_runs.c.batch_id == batch)
    newest: dict[str, Any] = {}
    hosts: dict[str, str] = {}
    for job in conn.execute(jobs.order_by(q.run_jobs.c.run_id, q.run_jobs.c.attempt)):
        newest[job.run_id] = job
        if job.worker_host is not None:
            hosts[job.run_id] = job.worker_host
    found: dict[str, QueuedRun] = {}
    for row in conn.execute(runs):
        newest_job = newest.get(row.run_id)
        found[row.run_id] = QueuedRun(
            row.run_id, row.submitter, row.batch_id, row.team_name, row.prompt, row.pool, row.priority,
            row.budget_usd, row.submitted_at, row.ended_at is not None, row.end_status,
            newest_job.attempt if newest_job is not None else 0,
            newest_job is not None and newest_job.started_at is not None,
            newest_job is not None and newest_job.ended_at is not None, hosts.get(row.run_id),
        )  # fmt: skip
    return found


def waiting_text(run: QueuedRun) -> str:
    return f"waiting for a worker (attempt {run.attempt})"
