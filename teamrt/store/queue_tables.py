"""The queue's own tables, beside the library's (``procrastinate_*``) in the runs' server database.

They live in a ``MetaData`` of their own, not the store's: a run's SQLite file
never holds them (there is no queue without a server database), and the
migration that creates them (0005) does so on PostgreSQL only. Times are Unix
seconds in the database's clock (``ownership.database_now``).

- ``queue_runs``: one row per submitted run, written by ``teamrt submit`` before
  its job is deferred. It holds what a worker needs to start the run on a machine
  that cannot read the submitter's files (the team file's text, the prompt, the
  repository and ref) and how the run ended as the queue sees it. The run's own
  ``runs`` row is made by the run's first start, as for every run, so a queued
  run that never started has none.
- ``run_jobs``: one row per attempt (a job of the library), with no foreign key
  into the library's tables, which may delete finished jobs.
- ``batches``: a budget shared by the runs submitted with ``--batch``: each run's
  whole budget is reserved at admission and what it did not spend goes back at
  its end.
- ``user_quotas``: how many runs a submitter may have running at once.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

queue_runs = Table(
    "queue_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("submitter", String(128), nullable=False),
    Column("batch_id", String(128), ForeignKey("batches.id"), nullable=True),
    Column("team_file", Text, nullable=True),  # the team file's text; None: the built-in team
    Column("team_name", String(255), nullable=True),  # what the submitter named (a path or --team NAME)
    Column("prompt", Text, nullable=False),
    Column("model", String(128), nullable=True),
    Column("repo_url", Text, nullable=True),
    Column("repo_ref", String(255), nullable=True),
    Column("pool", String(64), nullable=False),  # the library's queue name
    Column("priority", Integer, nullable=False, server_default="0"),
    Column("budget_usd", Double, nullable=True),
    Column("idem_key", String(255), nullable=True, unique=True),
    Column("submitted_at", Double, nullable=False),
    Column("stop_requested_at", Double, nullable=True),
    # How the run ended as the queue sees it: None while queued, running or waiting for a worker; else the
    # run's end ("done", "failed", "stopped", ...) and why. The run's own row says the same once it has one.
    Column("ended_at", Double, nullable=True),
    Column("end_status", String(16), nullable=True),
    Column("end_reason", Text, nullable=True),
    Index("ix_queue_runs_submitter_ended", "submitter", "ended_at"),
    Index("ix_queue_runs_batch", "batch_id"),
)

run_jobs = Table(
    "run_jobs",
    metadata,
    Column("run_id", String(64), ForeignKey("queue_runs.run_id"), primary_key=True),
    Column("attempt", Integer, primary_key=True),  # 1, 2, ...
    Column(
        "job_id", BigInteger, nullable=True
    ),  # procrastinate_jobs.id once deferred; no foreign key (see above)
    Column("worker_host", String(255), nullable=True),  # set when a worker starts the attempt's child
    Column("started_at", Double, nullable=True),
    Column("ended_at", Double, nullable=True),
    # None while pending or running; "ended" (the run reached an end), "crashed" (its child died without
    # one), "worker lost" (the sweeper found the worker dead), "stopped", "cancelled"
    Column("outcome", String(32), nullable=True),
    Index("ix_run_jobs_job", "job_id"),
)

batches = Table(
    "batches",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("submitter", String(128), nullable=False),
    Column("budget_usd", Double, nullable=False),
    Column("reserved_usd", Double, nullable=False, server_default="0"),  # held by runs not yet settled
    Column("spent_usd", Double, nullable=False, server_default="0"),  # settled runs' cost
    Column("created_at", Double, nullable=False),
)

user_quotas = Table(
    "user_quotas",
    metadata,
    Column("submitter", String(128), primary_key=True),
    Column("max_running", Integer, nullable=False),
)


def not_started(url: str, run_id: str) -> str | None:
    """Why run ``run_id``, which has no ``runs`` row in the server database ``url``, was never started,
    when it is a submitted run: queued, or ended before it started (said by ``show``, ``logs``, the TUI);
    None when the queue does not know it either (or the database has no queue)."""
    from sqlalchemy import inspect, select

    from teamrt.store.engine import reader_engine

    engine = reader_engine(url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name != "postgresql" or not inspect(conn).has_table(queue_runs.name):
                return None
            row = conn.execute(
                select(queue_runs.c.ended_at, queue_runs.c.end_status, queue_runs.c.end_reason).where(
                    queue_runs.c.run_id == run_id
                )
            ).first()
    finally:
        engine.dispose()
    if row is None:
        return None
    if row.ended_at is None:
        return f"run {run_id} is queued: no worker has started it yet (teamrt stop {run_id} cancels it)"
    return f"run {run_id} ended before a worker started it: {row.end_reason or row.end_status}"
