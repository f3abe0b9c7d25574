"""The queue as a person sees it: the runs' places in it (``teamrt ls``), a batch's books
(``ls --batch``), the workers and jobs (``teamrt queue``), and quotas (``queue --quota``).

Everything here reads the server database only; what it returns is shown through
``clean_line`` by the caller's table (submitters, prompts and team names are the
submitters' own text). The library's tables are read, never written.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from teamrt.queue.connect import queue_url, reaching
from teamrt.queue.jobs import QueueError
from teamrt.runs.query import RunSummary, list_runs
from teamrt.runs.queued import QueuedRun, has_queue, queued_runs, waiting_text
from teamrt.runs.render import age_text, clip, table
from teamrt.store import queue_tables as q
from teamrt.store.ownership import database_now

TASK_CHARS = 50


# -- a batch -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Batch:
    id: str
    submitter: str
    budget_usd: float
    reserved_usd: float
    spent_usd: float


class NoBatch(QueueError):
    pass


def read_batch(conn: Connection, batch_id: str) -> Batch:
    row = (
        conn.execute(select(q.batches).where(q.batches.c.id == batch_id)).first() if has_queue(conn) else None
    )
    if row is None:
        raise NoBatch(f"no batch {clip(batch_id, 60)!r} in the queue")
    return Batch(row.id, row.submitter, row.budget_usd, row.reserved_usd, row.spent_usd)


def batch_runs(runs_dir: Path, batch_id: str) -> tuple[Batch, list[RunSummary]]:
    """``ls --batch``: the batch, and its runs as ``ls`` lists them."""
    with reaching(queue_url()) as engine, engine.connect() as conn:
        batch = read_batch(conn, batch_id)
    return batch, list_runs(runs_dir, batch=batch_id)


def batch_line(batch: Batch) -> str:
    """``batch B (alice): $1.2345 spent, $10.00 reserved by runs not ended, of $50.00; $38.77 left``."""
    left = batch.budget_usd - batch.reserved_usd - batch.spent_usd
    return (
        f"batch {batch.id} ({batch.submitter}): ${batch.spent_usd:.4f} spent, ${batch.reserved_usd:.2f}"
        f" reserved by runs not ended, of ${batch.budget_usd:.2f}; ${max(0.0, left):.2f} left"
    )


def batch_json(batch: Batch) -> dict[str, Any]:
    return dataclasses.asdict(batch)


# -- teamrt queue ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fleet:
    workers: list[tuple[int, float]]  # id, seconds since its last heartbeat
    jobs: list[tuple[str, str, int]]  # queue, status, count
    runs: list[QueuedRun]  # not ended, oldest first
    quotas: list[tuple[str, int]]
    now: float


JOB_STATUSES = ("todo", "doing", "succeeded", "failed", "cancelled", "aborted")


def read_fleet(url: str) -> Fleet:
    """The queue's workers, job counts and open runs, read in one snapshot."""
    snapshot = {"isolation_level": "REPEATABLE READ"}
    with reaching(url) as engine, engine.connect().execution_options(**snapshot) as conn, conn.begin():
        if not has_queue(conn):
            return Fleet([], [], [], [], time.time())
        now = database_now(conn)
        workers = [
            (int(r.id), float(r.age))
            for r in conn.execute(
                text(
                    "SELECT id, extract(epoch FROM clock_timestamp() - last_heartbeat) AS age"
                    " FROM procrastinate_workers ORDER BY id"
                )
            )
        ]
        jobs = [
            (str(r.queue_name), str(r.status), int(r.n))
            for r in conn.execute(
                text(
                    "SELECT queue_name, status::text AS status, count(*) AS n FROM procrastinate_jobs"
                    " GROUP BY queue_name, status ORDER BY queue_name, status"
                )
            )
        ]
        runs = sorted(queued_runs(conn, open_only=True).values(), key=lambda r: (r.submitted_at, r.run_id))
        quotas = [
            (r.submitter, r.max_running)
            for r in conn.execute(select(q.user_quotas).order_by(q.user_quotas.c.submitter))
        ]
        return Fleet(workers, jobs, runs, quotas, now)


def run_state(run: QueuedRun) -> str:
    """Where a run not ended stands, as the queue sees it."""
    if run.attempt == 0:
        return "queued (no job yet)"
    if not run.started:
        return "queued" if run.attempt == 1 else waiting_text(run)
    if not run.attempt_ended:
        return f"running (attempt {run.attempt})"
    return f"between attempts (attempt {run.attempt} ended)"


def render_fleet(fleet: Fleet) -> list[str]:
    lines = [f"workers: {len(fleet.workers)}"]
    if fleet.workers:
        lines += table(
            [("  WORKER", "HEARTBEAT"), *((f"  {i}", f"{age_text(a)} ago") for i, a in fleet.workers)]
        )
    counts: dict[str, dict[str, int]] = {}
    for queue, status, n in fleet.jobs:
        counts.setdefault(queue, {})[status] = n
    lines.append(f"jobs: {sum(n for _, _, n in fleet.jobs)}")
    if counts:
        header = ("  QUEUE", *(s.upper() for s in JOB_STATUSES))
        rows = [(f"  {queue}", *(str(c.get(s, 0)) for s in JOB_STATUSES)) for queue, c in counts.items()]
        lines += table([header, *rows], right=tuple(range(1, len(JOB_STATUSES) + 1)))
    lines.append(f"runs not ended: {len(fleet.runs)}")
    if fleet.runs:
        rows = [("  RUN", "STATE", "SUBMITTER", "BATCH", "QUEUE", "PRIORITY", "HOST", "AGE", "TASK")]
        rows += [_run_row(r, fleet.now) for r in fleet.runs]
        lines += table(rows, right=(5,))
    if fleet.quotas:
        lines.append("quotas: " + ", ".join(f"{user} {n} running" for user, n in fleet.quotas))
    return lines


def _run_row(r: QueuedRun, now: float) -> tuple[str, ...]:
    task = clip((r.prompt.splitlines() or [""])[0], TASK_CHARS)
    age = age_text(now - r.submitted_at)
    return (
        f"  {r.run_id}",
        run_state(r),
        r.submitter,
        r.batch or "",
        r.pool,
        str(r.priority),
        r.host or "",
        age,
        task,
    )


def fleet_json(fleet: Fleet) -> dict[str, Any]:
    return {
        "workers": [{"id": i, "heartbeat_age_s": round(a, 3)} for i, a in fleet.workers],
        "jobs": [{"queue": queue, "status": status, "count": n} for queue, status, n in fleet.jobs],
        "runs": [_run_json(r, fleet.now) for r in fleet.runs],
        "quotas": [{"submitter": user, "max_running": n} for user, n in fleet.quotas],
    }


def _run_json(r: QueuedRun, now: float) -> dict[str, Any]:
    return {
        "id": r.run_id, "state": run_state(r), "submitter": r.submitter, "batch": r.batch, "queue": r.pool,
        "priority": r.priority, "attempt": r.attempt, "host": r.host,
        "submitted_age_s": round(now - r.submitted_at, 3), "task": r.prompt,
    }  # fmt: skip


def set_quota(url: str, user: str, limit: int) -> str:
    """Let ``user`` have at most ``limit`` runs running at once (0: no limit); says what was done."""
    from teamrt.queue.admission import NAME

    if not NAME.fullmatch(user):
        raise QueueError(f"{clip(user, 60)!r} is not a user name (letters, digits, '.', '_', '@', '-')")
    with reaching(url) as engine, engine.connect() as conn, conn.begin():
        if not has_queue(conn):
            raise QueueError("this database has no queue yet: submit a run first (teamrt submit)")
        if limit == 0:
            conn.execute(delete(q.user_quotas).where(q.user_quotas.c.submitter == user))
            return f"{user} may run any number of runs at once"
        conn.execute(
            pg_insert(q.user_quotas)
            .values(submitter=user, max_running=limit)
            .on_conflict_do_update(index_elements=["submitter"], set_={"max_running": limit})
        )
        return f"{user} may run at most {limit} run{'s' if limit != 1 else ''} at once"
