"""``teamrt submit``: a run recorded and its first job deferred in one transaction, duplicates refused,
batch budgets reserved all or nothing and settled once; what a worker would hand git checked first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine

from teamrt.queue import jobs, ledger
from tests.helpers.queued import cli, db, one, queue_db, rows, runs_row, submit

__all__ = ["db", "queue_db"]  # fixtures

TEAM = """\
[team]
name = "pair"
model = "sim"

[lead]
agent = "lead"
"""


def test_submit_records_the_run_and_defers_its_first_attempt(
    db: Engine, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    team = tmp_path / "pair.toml"
    team.write_text(TEAM)
    status, out, err = cli(
        capsys, "submit", str(team), "--prompt", "fix the tests", "--priority", "7", "--queue", "gpu",
        "--budget-usd", "2.5", "--model", "sim", "--repo", "https://example.org/r.git", "--ref", "main",
    )  # fmt: skip
    assert status == 0, err
    run = out.strip()
    assert out == f"{run}\n" and err == f"teamrt: queued run {run} (job 1, queue gpu, priority 7)\n"
    queued = one(db, "SELECT * FROM queue_runs")
    assert (queued.run_id, queued.submitter, queued.team_file, queued.team_name) == (
        run,
        "alice",
        TEAM,
        str(team),
    )
    assert (queued.prompt, queued.model, queued.repo_url, queued.repo_ref) == (
        "fix the tests", "sim", "https://example.org/r.git", "main"
    )  # fmt: skip
    assert (queued.pool, queued.priority, queued.budget_usd, queued.ended_at) == ("gpu", 7, 2.5, None)
    job = one(db, "SELECT * FROM procrastinate_jobs")
    assert (job.task_name, job.queue_name, job.priority, job.status) == ("teamrt.drive_run", "gpu", 7, "todo")
    assert job.lock == job.queueing_lock == f"run:{run}"
    assert job.args == {"run_id": run, "attempt": 1}
    attempt = one(db, "SELECT * FROM run_jobs")
    assert (attempt.run_id, attempt.attempt, attempt.job_id, attempt.started_at) == (run, 1, job.id, None)
    assert not rows(db, "SELECT 1 FROM runs")  # the run's first start makes its row


def test_submit_without_a_team_names_the_built_in_one(db: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    submit(capsys, "--prompt", "p")
    submit(capsys, "--team", "default", "--prompt", "q")
    assert [(r.team_file, r.team_name) for r in rows(db, "SELECT * FROM queue_runs")] == [
        (None, "default"),
        (None, "default"),
    ]


def test_a_duplicate_key_is_refused_naming_the_first_run(
    db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    first = submit(capsys, "--prompt", "p", "--key", "nightly-42")
    status, out, err = cli(capsys, "submit", "--prompt", "p again", "--key", "nightly-42")
    assert (status, out) == (1, "")
    assert err == f"teamrt: --key 'nightly-42' was used already, by run {first}\n"
    assert len(rows(db, "SELECT 1 FROM queue_runs")) == 1
    assert len(rows(db, "SELECT 1 FROM procrastinate_jobs")) == 1


def test_the_queueing_lock_refuses_a_second_waiting_attempt(
    queue_db: str, db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    run = submit(capsys, "--prompt", "p")
    with pytest.raises(jobs.AlreadyQueued, match="already has an attempt waiting"):
        jobs.defer_attempt(queue_db, run, 2)
    with pytest.raises(jobs.AlreadyQueued, match=r"attempt 1 .* was deferred already"):
        jobs.defer_attempt(queue_db, run, 1)
    assert [r.attempt for r in rows(db, "SELECT attempt FROM run_jobs")] == [1]  # nothing of attempt 2 kept
    assert len(rows(db, "SELECT 1 FROM procrastinate_jobs")) == 1
    with pytest.raises(jobs.NotQueued):
        jobs.defer_attempt(queue_db, "never-submitted", 1)


def test_a_resumed_attempt_goes_before_every_run_not_started_yet(
    queue_db: str, db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker's death must not put its runs behind a long queue: attempt 2 of the lowest-priority run
    is fetched before a fresh run of the highest priority."""
    low = submit(capsys, "--prompt", "p", "--priority", str(-jobs.MAX_PRIORITY))
    with db.begin() as conn:  # its first attempt's job ended (as the sweeper ends a dead worker's)
        conn.exec_driver_sql("UPDATE procrastinate_jobs SET status = 'failed'")
    high = submit(capsys, "--prompt", "q", "--priority", str(jobs.MAX_PRIORITY))
    resumed = jobs.defer_attempt(queue_db, low, 2)
    fresh = one(db, "SELECT id, priority FROM procrastinate_jobs WHERE args->>'run_id' = :r", r=high)
    again = one(db, "SELECT priority FROM procrastinate_jobs WHERE id = :i", i=resumed)
    assert again.priority == -jobs.MAX_PRIORITY + jobs.RESUMED_FIRST > fresh.priority
    fetched = one(
        db,
        "SELECT id FROM procrastinate_jobs WHERE status = 'todo' ORDER BY priority DESC, id ASC LIMIT 1",
    )  # the library's own order (procrastinate_fetch_job)
    assert fetched.id == resumed


def test_a_batch_reserves_whole_budgets_all_or_nothing_and_settles_once(
    db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    first = submit(capsys, "--prompt", "a", "--batch", "b1", "--batch-budget-usd", "10", "--budget-usd", "4")
    second = submit(capsys, "--prompt", "b", "--batch", "b1", "--budget-usd", "4")
    status, out, err = cli(capsys, "submit", "--prompt", "c", "--batch", "b1", "--budget-usd", "4")
    assert (status, out) == (1, "")
    assert err == (
        "teamrt: batch 'b1' cannot cover this run's $4.00: $2.00 of its $10.00 is left ($8.00 reserved,"
        " $0.00 spent)\n"
    )
    assert len(rows(db, "SELECT 1 FROM queue_runs")) == 2  # the refused run left nothing
    assert len(rows(db, "SELECT 1 FROM procrastinate_jobs")) == 2
    batch = one(db, "SELECT * FROM batches")
    assert (batch.submitter, batch.budget_usd, batch.reserved_usd, batch.spent_usd) == ("alice", 10, 8, 0)

    runs_row(db, first, status="done", cost_usd=1.5)
    with db.begin() as conn:
        assert ledger.end_queued_run(conn, first, "done", "the lead answered")
    with db.begin() as conn:
        assert not ledger.end_queued_run(conn, first, "done", "again")  # exactly once
    with db.begin() as conn:
        assert ledger.end_queued_run(conn, second, "stopped", "never started")  # no runs row: cost 0
    batch = one(db, "SELECT * FROM batches")
    assert (batch.reserved_usd, batch.spent_usd) == (0, 1.5)
    ended = one(db, "SELECT end_status, end_reason FROM queue_runs WHERE run_id = :r", r=first)
    assert tuple(ended) == ("done", "the lead answered")
    third = submit(capsys, "--prompt", "c", "--batch", "b1", "--budget-usd", "8.5")  # 10 - 1.5 spent
    assert one(db, "SELECT reserved_usd FROM batches").reserved_usd == 8.5 and third


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--batch", "b"], "--batch needs --budget-usd: each run's whole budget is reserved from the batch"),
        (["--batch-budget-usd", "3"], "--batch-budget-usd goes with --batch"),
        (
            ["--batch", "nope", "--budget-usd", "1"],
            "no batch 'nope': the first run of a batch gives --batch-budget-usd",
        ),
        (["--team", "nope"], "no built-in team 'nope' (built-in: default)"),
        (["--team", "../teams/default"], "no built-in team '../teams/default' (built-in: default)"),
        (["--ref", "main"], "--ref goes with --repo: the ref of which repository?"),
        (["--prompt", " "], "--prompt is empty: say what the team should do"),
    ],
)  # fmt: skip
def test_a_request_that_cannot_run_is_refused_in_one_line(
    db: Engine, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    status, out, err = cli(capsys, "submit", "--prompt", "p", *argv)
    assert (status, out, err) == (1, "", f"teamrt: {said}\n")
    assert not rows(db, "SELECT 1 FROM queue_runs") and not rows(db, "SELECT 1 FROM batches")


def test_a_batch_is_its_submitters_own(
    db: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    submit(capsys, "--prompt", "a", "--batch", "b1", "--batch-budget-usd", "10", "--budget-usd", "1")
    monkeypatch.setenv("TEAMRT_USER", "mallory")
    status, _, err = cli(capsys, "submit", "--prompt", "b", "--batch", "b1", "--budget-usd", "1")
    assert (status, err) == (1, "teamrt: batch 'b1' is alice's; name a batch of your own\n")


def test_a_team_file_is_checked_by_the_team_file_parser(
    db: Engine, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[team]\nmodle = 'sim'\n")
    status, out, err = cli(capsys, "submit", str(bad), "--prompt", "p")
    assert (status, out) == (1, "") and err.startswith(f"teamrt: {bad}: ") and "modle" in err
    assert err.count("\n") == 1
    status, _, err = cli(capsys, "submit", str(tmp_path / "missing.toml"), "--prompt", "p")
    assert status == 1 and err.startswith(f"teamrt: {tmp_path / 'missing.toml'}: cannot read")
    own_agent = tmp_path / "own.toml"  # an agent the repository defines: the worker's clone has it
    own_agent.write_text('[team]\nmodel = "sim"\nprompt = "the default"\n[lead]\nagent = "repo-lead"\n')
    run = submit(capsys, str(own_agent), "--prompt", "p")
    assert one(db, "SELECT run_id FROM queue_runs").run_id == run
    assert not rows(db, "SELECT 1 FROM queue_runs WHERE team_file IS NULL")


def test_submit_needs_a_server_database(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    said = "teamrt: the queue needs a PostgreSQL server database: set TEAMRT_DB=postgresql://USER@HOST/DATABASE\n"
    assert cli(capsys, "submit", "--prompt", "p") == (1, "", said)
    monkeypatch.setenv("TEAMRT_DB", f"sqlite:///{tmp_path / 'runs.db'}")
    assert cli(capsys, "submit", "--prompt", "p") == (1, "", said)
    assert cli(capsys, "queue") == (1, "", said)


def test_submit_as_a_process_prints_the_run_id_and_imports_the_library_only_then(queue_db: str) -> None:
    env = {**os.environ, "TEAMRT_DB": queue_db}
    done = subprocess.run(
        [sys.executable, "-m", "teamrt", "submit", "--prompt", "p"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = done.stdout.strip()
    assert done.stderr == f"teamrt: queued run {run} (job 1, queue teamrt, priority 0)\n"
    lazy = "import sys, teamrt.cli.parser, teamrt.cli.queue; print('procrastinate' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", lazy], capture_output=True, text=True).stdout == "False\n"


# -- attacks ------------------------------------------------------------------------


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--repo=-uevil"], "--repo '-uevil': not a repository URL (it would be read as an option)"),
        (["--repo=--upload-pack=touch /tmp/x"], "not a repository URL (it would be read as an option)"),
        (["--repo", "ext::sh -c touch% /tmp/x"], "git remote helpers (such as ext:: and fd::) are refused"),
        (["--repo", "fd::3"], "git remote helpers (such as ext:: and fd::) are refused"),
        (["--repo", "EXT::sh"], "git remote helpers (such as ext:: and fd::) are refused"),
        (["--repo", "gopher://x/r"], "scheme 'gopher' refused (one of https, http, ssh, git, file)"),
        (["--repo", "https://x/r\x1b]0;owned\x07"], "with no control characters"),
        (["--repo", "https://x/r\nexample"], "with no control characters"),
        (["--repo", "https://x/" + "a" * 3000], "a URL of at most 2048 characters"),
        (["--repo", "https://x/r", "--ref=-x"], "--ref '-x': not a branch, tag or commit name"),
        (["--repo", "https://x/r", "--ref=--output=/tmp/x"], "not a branch, tag or commit name"),
        (["--repo", "https://x/r", "--ref", "main\x1b[2J"], "not a branch, tag or commit name"),
        (["--repo", "https://x/r", "--ref", "a..b"], "not a branch, tag or commit name"),
        (["--repo", "https://x/r", "--ref", "m" * 300], "not a branch, tag or commit name"),
        (["--queue", "q\x1b[31m"], "a queue name is letters, digits"),
        (["--key", "k\x00"], "--key: 1 to 255 characters, with no control characters"),
        (["--model", "sim\x1b[2J"], "not a model name"),
        (["--priority", "99999999999"], "--priority 99999999999: from -1_000_000 to 1_000_000"),
    ],
)  # fmt: skip
def test_hostile_submissions_are_refused_before_anything_is_stored(
    db: Engine, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    status, out, err = cli(capsys, "submit", "--prompt", "p", *argv)
    assert (status, out) == (1, "")
    assert said in err and err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err
    assert not rows(db, "SELECT 1 FROM queue_runs") and not rows(db, "SELECT 1 FROM procrastinate_jobs")


@pytest.mark.hostile
def test_a_hostile_submitter_name_is_refused(
    db: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRT_USER", "eve\x1b]0;owned\x07")
    status, out, err = cli(capsys, "submit", "--prompt", "p")
    assert (status, out) == (1, "") and "is not a user name" in err and "\x1b" not in err
    assert not rows(db, "SELECT 1 FROM queue_runs")


@pytest.mark.hostile
def test_a_team_file_that_is_not_a_file_is_refused_without_blocking(
    db: Engine, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "team.fifo"
    os.mkfifo(fifo)
    status, _, err = cli(capsys, "submit", str(fifo), "--prompt", "p")
    assert (status, err) == (1, f"teamrt: {fifo}: not a regular file\n")
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (2 * 1024 * 1024))
    status, _, err = cli(capsys, "submit", str(big), "--prompt", "p")
    assert status == 1 and "a team file is a short TOML file" in err
    assert not rows(db, "SELECT 1 FROM queue_runs")


def test_a_database_out_of_reach_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TEAMRT_DB", "postgresql://teamrt:secret@127.0.0.1:1/nowhere")
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    for argv in (["submit", "--prompt", "p"], ["queue"], ["stop", "r1"], ["queue", "--quota", "bob=1"]):
        status, out, err = cli(capsys, *argv)
        assert (status, out) == (1, "") and err.count("\n") == 1, argv
        assert err.startswith("teamrt: the queue in postgresql+psycopg://teamrt:***@127.0.0.1:1/nowhere: ")


def test_concurrent_submissions_never_reserve_more_than_the_batch(
    queue_db: str, db: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from teamrt.home import new_run_id
    from teamrt.queue import admission

    submit(capsys, "--prompt", "p", "--batch", "b", "--batch-budget-usd", "10", "--budget-usd", "1")
    request = admission.Request("alice", "p", None, "default", batch="b", budget_usd=3.0)

    def one_submission(n: int) -> bool:
        try:
            admission.submit(queue_db, f"{new_run_id()}-{n}", request)
        except admission.Refused:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        admitted = list(pool.map(one_submission, range(8)))
    assert sum(admitted) == 3  # 1 + 3 * 3 = 10
    assert one(db, "SELECT reserved_usd FROM batches").reserved_usd == 10
    assert len(rows(db, "SELECT 1 FROM queue_runs")) == len(rows(db, "SELECT 1 FROM procrastinate_jobs")) == 4
