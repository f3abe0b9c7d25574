"""``teamrt stop`` of a run no owner runs: queued (its job cancelled, the run ended ``stopped``, its batch
reservation released) or crashed and waiting for a worker (also its run row ended, its lease's token
bumped); a running run goes the usual way, by mail; every stop is recorded for racing workers."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from teamrt.queue import jobs
from teamrt.queue.stopping import stop_if_queued
from tests.helpers.queued import cli, db, one, queue_db, rows, runs_row, submit

__all__ = ["db", "queue_db"]  # fixtures


def _worker_takes(db: Engine, run: str, attempt: int, host: str = "w1") -> int:
    """A worker fetches the run's waiting job and starts the attempt, as a worker does; the job's id."""
    with db.begin() as conn:
        worker = conn.exec_driver_sql("SELECT worker_id FROM procrastinate_register_worker_v1()").scalar()
        job = conn.exec_driver_sql(
            "SELECT id FROM procrastinate_fetch_job_v2(NULL::varchar[], %(w)s)", {"w": worker}
        ).scalar()
        conn.exec_driver_sql(
            "UPDATE run_jobs SET started_at = 1, worker_host = %(h)s"
            " WHERE run_id = %(r)s AND attempt = %(a)s",
            {"h": host, "r": run, "a": attempt},
        )
    assert job is not None
    return int(job)


def test_stop_while_queued_cancels_the_job_and_releases_the_reservation(
    db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    run = submit(capsys, "--prompt", "p", "--batch", "b", "--batch-budget-usd", "5", "--budget-usd", "3")
    assert cli(capsys, "stop", run) == (0, f"stopped run {run} before it started\n", "")
    assert one(db, "SELECT status FROM procrastinate_jobs").status == "cancelled"
    queued = one(db, "SELECT * FROM queue_runs")
    assert (queued.end_status, queued.end_reason) == ("stopped", "stopped before it started")
    assert queued.stop_requested_at is not None and queued.ended_at is not None
    assert one(db, "SELECT outcome FROM run_jobs").outcome == "cancelled"
    assert tuple(one(db, "SELECT reserved_usd, spent_usd FROM batches")) == (0, 0)
    status, out, err = cli(capsys, "stop", run)
    assert (status, out, err) == (1, "", f"teamrt: run '{run}' is stopped; there is nothing to stop\n")
    status, out, _ = cli(capsys, "ls")
    assert status == 0 and f"{run}  stopped" in out


def test_stop_while_waiting_for_a_worker_ends_the_run_and_fences_its_old_owner(
    queue_db: str, db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    run = submit(capsys, "--prompt", "p")
    first = _worker_takes(db, run, 1)
    runs_row(db, run, heartbeat_age_s=60)  # its child started the run, then the worker died
    with db.begin() as conn:
        conn.exec_driver_sql("SELECT procrastinate_finish_job_v1(%(j)s, 'failed', false)", {"j": first})
        conn.exec_driver_sql("UPDATE run_jobs SET ended_at = 2, outcome = 'worker lost' WHERE attempt = 1")
    second = jobs.defer_attempt(queue_db, run, 2)
    status, out, _ = cli(capsys, "ls")
    assert status == 0 and "waiting for a worker (attempt 2)" in out and "  w1  " in out

    assert cli(capsys, "stop", run) == (0, f"stopped run {run}, which was waiting for a worker\n", "")
    assert one(db, "SELECT status FROM procrastinate_jobs WHERE id = :j", j=second).status == "cancelled"
    ran = one(db, "SELECT * FROM runs")
    assert (ran.status, ran.status_reason, ran.owner_token, ran.owner_host) == (
        "stopped", "stopped while waiting for a worker", 2, None
    )  # fmt: skip
    assert ran.finished_at is not None
    queued = one(db, "SELECT * FROM queue_runs")
    assert (queued.end_status, queued.end_reason) == ("stopped", "stopped while waiting for a worker")
    assert [r.outcome for r in rows(db, "SELECT outcome FROM run_jobs ORDER BY attempt")] == [
        "worker lost", "cancelled"
    ]  # fmt: skip


def test_a_running_run_is_left_to_its_supervisor_with_the_request_recorded(
    db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    run = submit(capsys, "--prompt", "p")
    _worker_takes(db, run, 1)
    runs_row(db, run, heartbeat_age_s=0)  # its owner on another host beats
    assert stop_if_queued(run, None) is None  # teamrt stop goes on to mail it
    queued = one(db, "SELECT * FROM queue_runs")
    assert queued.stop_requested_at is not None and queued.ended_at is None
    assert one(db, "SELECT status FROM procrastinate_jobs").status == "doing"
    assert one(db, "SELECT status FROM runs").status == "running"


def test_a_job_a_worker_fetched_first_is_asked_to_stop_as_it_starts(
    db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    said = "is being started by a worker; it was asked to stop and will as it starts\n"
    fetched = submit(capsys, "--prompt", "p")
    _worker_takes(db, fetched, 1)  # no runs row yet: the child is starting
    assert cli(capsys, "stop", fetched) == (0, f"run {fetched} {said}", "")
    unmarked = submit(capsys, "--prompt", "q")
    with db.begin() as conn:  # fetched, its attempt not yet marked started
        conn.exec_driver_sql(
            "UPDATE procrastinate_jobs SET status = 'doing' WHERE args->>'run_id' = %(r)s", {"r": unmarked}
        )
    assert cli(capsys, "stop", unmarked) == (0, f"run {unmarked} {said}", "")
    for queued in rows(db, "SELECT * FROM queue_runs"):
        assert queued.stop_requested_at is not None and queued.ended_at is None


def test_stopping_an_agent_of_a_queued_run_is_refused(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    run = submit(capsys, "--prompt", "p")
    said = f"teamrt: run '{run}' is not running; stop the whole run: teamrt stop {run}\n"
    assert cli(capsys, "stop", run, "lead") == (1, "", said)
    assert one(db, "SELECT status FROM procrastinate_jobs").status == "todo"


def test_a_run_not_submitted_goes_the_usual_way(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "stop", "not-a-queued-run")
    assert (status, out) == (1, "") and err.startswith("teamrt: no run named 'not-a-queued-run'")


def test_show_and_logs_of_a_run_no_worker_started_say_so_in_one_line(
    db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """A submitted run has no store until a worker starts it: ``show`` and ``logs`` say it is queued (or
    ended before it started), not that there is no such run."""
    run = submit(capsys, "--prompt", "p")
    queued = f"teamrt: run {run} is queued: no worker has started it yet (teamrt stop {run} cancels it)\n"
    assert cli(capsys, "show", run) == (1, "", queued)
    assert cli(capsys, "logs", run) == (1, "", queued)
    assert cli(capsys, "stop", run)[0] == 0
    ended = f"teamrt: run {run} ended before a worker started it: stopped before it started\n"
    assert cli(capsys, "show", run) == (1, "", ended)
    status, _, said = cli(capsys, "show", "20261129-000000-none")
    assert status == 1 and said.startswith("teamrt: no run named '20261129-000000-none'"), said
