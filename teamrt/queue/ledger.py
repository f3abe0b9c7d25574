"""The queue's books: how a queued run ends, its batch settled, and what a submitter has running.

Each function works inside the caller's transaction (a SQLAlchemy ``Connection``
on the runs' server database), so a run's end and its batch settlement commit together.
"""

from __future__ import annotations

from sqlalchemy import Connection, func, select, update

from teamrt.store import queue_tables as q
from teamrt.store import tables as t
from teamrt.store.ownership import now_in_database


def end_queued_run(conn: Connection, run_id: str, status: str, reason: str) -> bool:
    """End the run's queue record, once: False when it had ended already (or was never submitted).
    Its batch, if any, gets back the run's reservation and is charged what the run spent."""
    ended = conn.execute(
        update(q.queue_runs)
        .where(q.queue_runs.c.run_id == run_id, q.queue_runs.c.ended_at.is_(None))
        .values(ended_at=now_in_database(conn), end_status=status, end_reason=reason)
        .returning(q.queue_runs.c.batch_id, q.queue_runs.c.budget_usd)
    ).first()
    if ended is None:
        return False
    if ended.batch_id is not None:
        cost = conn.execute(select(t.runs.c.cost_usd).where(t.runs.c.id == run_id)).scalar() or 0.0
        conn.execute(
            update(q.batches)
            .where(q.batches.c.id == ended.batch_id)
            .values(
                reserved_usd=q.batches.c.reserved_usd - (ended.budget_usd or 0.0),
                spent_usd=q.batches.c.spent_usd + cost,
            )
        )
    return True


def end_run_row(conn: Connection, run_id: str, status: str, reason: str) -> None:
    """End a run whose ``runs`` row exists but whose owner is gone: its status, reason and finish time,
    with the lease's token bumped (under the row's lock, as a take is), so that a late old owner's next
    write is refused (``ownership.check_lease``)."""
    token = conn.execute(
        select(t.runs.c.owner_token).where(t.runs.c.id == run_id).with_for_update()
    ).scalar_one_or_none()
    if token is None:
        return
    conn.execute(
        update(t.runs)
        .where(t.runs.c.id == run_id, t.runs.c.owner_token == token)
        .values(
            status=status, status_reason=reason, finished_at=now_in_database(conn), owner_token=token + 1,
            owner_host=None, owner_pid=None, owner_start_time=None, owner_since=None,
        )
    )  # fmt: skip


def running_count(conn: Connection, submitter: str) -> int:
    """The submitter's runs with an attempt started and not ended (their queue record still open)."""
    return int(
        conn.execute(
            select(func.count(func.distinct(q.run_jobs.c.run_id)))
            .select_from(q.run_jobs.join(q.queue_runs, q.queue_runs.c.run_id == q.run_jobs.c.run_id))
            .where(
                q.queue_runs.c.submitter == submitter,
                q.queue_runs.c.ended_at.is_(None),
                q.run_jobs.c.started_at.is_not(None),
                q.run_jobs.c.ended_at.is_(None),
            )
        ).scalar_one()
    )


def quota_of(conn: Connection, submitter: str) -> int | None:
    """How many runs the submitter may have running at once; None: no limit."""
    return conn.execute(
        select(q.user_quotas.c.max_running).where(q.user_quotas.c.submitter == submitter)
    ).scalar_one_or_none()


def attempts(conn: Connection, run_id: str) -> int:
    """The run's newest attempt number (0 before its first)."""
    return int(
        conn.execute(
            select(func.coalesce(func.max(q.run_jobs.c.attempt), 0)).where(q.run_jobs.c.run_id == run_id)
        ).scalar_one()
    )
