"""Seeing the queue: ``teamrt ls`` with queued runs and who, which batch and where; ``ls --batch`` with the
batch's spend against its budget; ``teamrt queue`` with workers and jobs; quotas. Submitters' text
(names, prompts, team names) reaches the terminal made inert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert

from teamrt.queue import ledger
from teamrt.store import queue_tables as q
from tests.helpers.queued import cli, db, one, queue_db, runs_row, submit

__all__ = ["db", "queue_db"]  # fixtures


def test_ls_shows_queued_runs_with_submitter_batch_and_host(
    db: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    queued = submit(
        capsys, "--prompt", "first task", "--batch", "b1", "--batch-budget-usd", "9", "--budget-usd", "3"
    )
    monkeypatch.setenv("TEAMRT_USER", "bob")
    running = submit(capsys, "--prompt", "second task")
    with db.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE run_jobs SET started_at = 1, worker_host = 'w2' WHERE run_id = %(r)s", {"r": running}
        )
    runs_row(db, running, heartbeat_age_s=0)  # its owner beats on host w2's child
    (tmp_path / "home" / "runs" / queued / "project").mkdir(parents=True)  # a worker's clone, before its row

    status, out, err = cli(capsys, "ls")
    assert (status, err) == (0, "")
    header, *lines = out.splitlines()
    assert len(lines) == 2 and "no run store here" not in out
    assert header.split() == [
        "RUN",
        "STATUS",
        "AGE",
        "AGENTS",
        "COST",
        "TOKENS",
        "SUBMITTER",
        "BATCH",
        "HOST",
        "TASK",
    ]
    by_run = {line.split()[0]: line for line in lines}
    assert by_run[queued].split()[1] == "queued" and "alice" in by_run[queued] and " b1 " in by_run[queued]
    assert "first task" in by_run[queued] and "$0.0000/$3.00" in by_run[queued]
    assert (
        by_run[running].split()[1] == "running" and " bob " in by_run[running] and " w2 " in by_run[running]
    )

    status, out, _ = cli(capsys, "ls", "--json")
    shown = {r["id"]: r for r in json.loads(out)}
    assert {k: shown[queued][k] for k in ("status", "submitter", "batch", "host", "attempt", "task")} == {
        "status": "queued", "submitter": "alice", "batch": "b1", "host": None, "attempt": 1,
        "task": "first task",
    }  # fmt: skip
    assert (shown[running]["submitter"], shown[running]["host"]) == ("bob", "w2")


def test_ls_batch_shows_its_spend_against_its_budget(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    done = submit(capsys, "--prompt", "a", "--batch", "b1", "--batch-budget-usd", "10", "--budget-usd", "4")
    waiting = submit(capsys, "--prompt", "b", "--batch", "b1", "--budget-usd", "4")
    other = submit(capsys, "--prompt", "c")
    runs_row(db, done, status="done", cost_usd=1.25)
    with db.begin() as conn:
        ledger.end_queued_run(conn, done, "done", "answered")

    status, out, err = cli(capsys, "ls", "--batch", "b1")
    assert (status, err) == (0, "")
    first, *table = out.splitlines()
    assert first == "batch b1 (alice): $1.2500 spent, $4.00 reserved by runs not ended, of $10.00; $4.75 left"
    assert {line.split()[0] for line in table[1:]} == {done, waiting} and other not in out

    status, out, _ = cli(capsys, "ls", "--batch", "b1", "--json")
    shown = json.loads(out)
    assert shown["batch"] == {
        "id": "b1",
        "submitter": "alice",
        "budget_usd": 10,
        "reserved_usd": 4,
        "spent_usd": 1.25,
    }
    assert {r["id"] for r in shown["runs"]} == {done, waiting}
    assert cli(capsys, "ls", "--batch", "nope") == (1, "", "teamrt: no batch 'nope' in the queue\n")


def test_ls_of_a_run_home_without_a_server_database_is_unchanged(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "runs" / "r1").mkdir(parents=True)
    status, out, _ = cli(capsys, "ls")
    assert status == 0 and "SUBMITTER" not in out
    status, out, _ = cli(capsys, "ls", "--json")
    assert "submitter" not in json.loads(out)[0]
    said = "teamrt: the queue needs a PostgreSQL server database: set TEAMRT_DB=postgresql://USER@HOST/DATABASE\n"
    assert cli(capsys, "ls", "--batch", "b") == (1, "", said)


def test_queue_shows_workers_jobs_and_runs_not_ended(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    first = submit(capsys, "--prompt", "one", "--priority", "3")
    second = submit(capsys, "--prompt", "two", "--queue", "gpu")
    with db.begin() as conn:
        conn.exec_driver_sql("SELECT procrastinate_register_worker_v1()")
    assert cli(capsys, "stop", second)[0] == 0

    status, out, err = cli(capsys, "queue")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "workers: 1" and lines[1].split() == ["WORKER", "HEARTBEAT"]
    assert "jobs: 2" in lines
    counts = {
        line.split()[0]: line.split()[1:]
        for line in lines
        if line.startswith("  gpu") or line.startswith("  teamrt")
    }
    assert counts == {"gpu": ["0", "0", "0", "0", "1", "0"], "teamrt": ["1", "0", "0", "0", "0", "0"]}
    assert "runs not ended: 1" in lines
    assert any(line.split()[:2] == [first, "queued"] and "one" in line for line in lines)

    status, out, _ = cli(capsys, "queue", "--json")
    shown = json.loads(out)
    assert len(shown["workers"]) == 1 and shown["workers"][0]["heartbeat_age_s"] < 60
    assert {(j["queue"], j["status"], j["count"]) for j in shown["jobs"]} == {
        ("gpu", "cancelled", 1),
        ("teamrt", "todo", 1),
    }
    assert [(r["id"], r["state"], r["priority"]) for r in shown["runs"]] == [(first, "queued", 3)]


def test_quotas_are_set_removed_and_counted(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "queue", "--quota", "alice=2") == (0, "alice may run at most 2 runs at once\n", "")
    assert cli(capsys, "queue", "--quota", "alice=1") == (0, "alice may run at most 1 run at once\n", "")
    running = submit(capsys, "--prompt", "p")
    submit(capsys, "--prompt", "q")
    with db.begin() as conn:
        assert ledger.quota_of(conn, "alice") == 1 and ledger.quota_of(conn, "bob") is None
        assert ledger.running_count(conn, "alice") == 0
        conn.exec_driver_sql("UPDATE run_jobs SET started_at = 1 WHERE run_id = %(r)s", {"r": running})
        assert ledger.running_count(conn, "alice") == 1 and ledger.attempts(conn, running) == 1
    assert "quotas: alice 1 running" in cli(capsys, "queue")[1]
    assert cli(capsys, "queue", "--quota", "alice=0") == (0, "alice may run any number of runs at once\n", "")
    with db.begin() as conn:
        assert ledger.quota_of(conn, "alice") is None
    status, _, err = cli(capsys, "queue", "--quota", "alice")
    assert status == 2 and "expected USER=N" in err


# -- attacks ------------------------------------------------------------------------


@pytest.mark.hostile
def test_submitters_text_is_shown_inert(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows another submitter's teamrt (or a hand) wrote: a name, prompt and team name with escapes."""
    evil = "\x1b]0;owned\x07\x1b[2J\x9b31m"
    with db.begin() as conn:
        conn.execute(
            insert(q.queue_runs).values(
                run_id="r-evil", submitter=f"eve{evil}", team_name=f"team{evil}", prompt=f"do{evil}\nrm -rf",
                pool="teamrt", priority=0, submitted_at=1.0, batch_id=None,
            )
        )  # fmt: skip
    for argv in (["ls"], ["queue"], ["ls", "--json"], ["queue", "--json"]):
        status, out, err = cli(capsys, *argv)
        assert status == 0 and err == ""
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, argv
    assert "eve" in cli(capsys, "ls")[1] and "r-evil" in cli(capsys, "queue")[1]


@pytest.mark.hostile
@pytest.mark.parametrize("quota", ["eve\x1b[2J=1", "-x=1", "a b=1"])
def test_a_hostile_quota_user_is_refused(db: Engine, capsys: pytest.CaptureFixture[str], quota: str) -> None:
    status, out, err = cli(capsys, "queue", f"--quota={quota}")
    assert (status, out) == (1, "") and "is not a user name" in err and "\x1b" not in err
    assert one(db, "SELECT count(*) AS n FROM user_quotas").n == 0
