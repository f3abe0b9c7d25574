"""Workers on one machine: two ``teamrt worker`` processes (hosts w1 and w2), one PostgreSQL database, one
shared home, a bare git repository on disk as the remote (``teamrt.testing.fleet``).

The two workers are shared by the module's tests; a test that kills or stops one leaves it to the
``workers`` fixture to start it again. Recovery runs on the real intervals (``teamrt.queue.timing``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import insert, select, text

from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.models import BLOCK_ENV
from teamrt.queue.attempts import FAILED_REASON
from teamrt.queue.connect import DEFAULT_POOL, DRIVE_TASK, bound_app, psycopg_connection, queue_engine
from teamrt.queue.timing import MAX_ATTEMPTS, PULSE_LOST_S
from teamrt.settings import SETTINGS_ENV
from teamrt.store import open_reader
from teamrt.store import queue_tables as q
from teamrt.store import tables as t
from teamrt.testing import chaos
from teamrt.testing.fleet import TEAM, Fleet
from teamrt.testing.pgserver import PgServer
from tests.helpers.pg import PG_TEMPLATE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
HOSTS = ("w1", "w2")
WAIT_S = 240.0
T = TypeVar("T")


HELD_GATE = "while [ -e {hold} ]; do sleep 0.1; done; python3 -m unittest -q"
"""A merge gate that waits while the file ``hold`` exists (``/var/tmp``: the sandbox sees it, read-only):
a run kept at work for as long as a test needs."""


@pytest.fixture(scope="module")
def fleet(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("fleet")
    url = pg_server.create_database("workers", PG_TEMPLATE)
    isolated: dict[str, str | None] = {
        BLOCK_ENV: "1", SETTINGS_ENV: str(root / "no-settings.toml"), CONFIG_DIR_ENV: str(root / "no-claude"),
        "ANTHROPIC_API_KEY": None, "ANTHROPIC_AUTH_TOKEN": None, "ANTHROPIC_BASE_URL": None,
    }  # fmt: skip
    fleet = Fleet.create(root, url, isolated)
    try:
        yield fleet
    finally:
        fleet.close()
        pg_server.drop_database("workers")


@pytest.fixture
def workers(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    """The fleet with both its workers up (started again where a test killed one); this process reads the
    fleet's database and home."""
    monkeypatch.setenv("TEAMRT_DB", fleet.url)
    monkeypatch.setenv("TEAMRT_HOME", str(fleet.home))
    for host in HOSTS:
        worker = fleet.workers.get(host)
        if worker is None or worker.poll() is not None:
            fleet.workers.pop(host, None)
            fleet.start_worker(host)
    return fleet


def wait_for(what: str, check: Callable[[], T | None], timeout: float = WAIT_S, every: float = 0.1) -> T:
    """``check()``'s first truthy value; fails after ``timeout`` (a bound on a hang, not a timing)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(every)


def query(fleet: Fleet, statement: Any) -> list[Any]:
    engine = queue_engine(fleet.url)
    try:
        with engine.connect() as conn, conn.begin():
            return list(conn.execute(statement).all())
    finally:
        engine.dispose()


def attempts_of(fleet: Fleet, run_id: str) -> list[Any]:
    return query(
        fleet, select(q.run_jobs).where(q.run_jobs.c.run_id == run_id).order_by(q.run_jobs.c.attempt)
    )


def run_row(fleet: Fleet, run_id: str) -> Any:
    rows = query(fleet, select(t.runs).where(t.runs.c.id == run_id))
    return rows[0] if rows else None


def queue_row(fleet: Fleet, run_id: str) -> Any:
    return query(fleet, select(q.queue_runs).where(q.queue_runs.c.run_id == run_id))[0]


def mid_run(fleet: Fleet, run_id: str) -> tuple[str, int]:
    """Once the run's child owns it and a coder's worktree exists: the owner's host and pid."""

    def owner() -> tuple[str, int] | None:
        row = run_row(fleet, run_id)
        worktrees = fleet.home / "runs" / run_id / "worktrees"
        if row is None or row.owner_pid is None or not (worktrees.is_dir() and any(worktrees.iterdir())):
            return None
        return row.owner_host, row.owner_pid

    return wait_for(f"run {run_id} at work", owner, every=0.05)


def owners(fleet: Fleet, run_id: str) -> list[dict[str, Any]]:
    reader = open_reader(fleet.home / "runs" / run_id, run_id)
    try:
        return [{**e.data, "at": e.at} for e in reader.events(kinds=("run.owner",))]
    finally:
        reader.close()


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie its stopped parent cannot reap counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] == b"Z"


def teamrt(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args], cwd=fleet.root, env=fleet.env(), capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("count", [6, pytest.param(20, marks=pytest.mark.proof)])
def test_runs_on_two_workers_each_end_once_with_their_branch_pushed(workers: Fleet, count: int) -> None:
    """Twenty runs under ``make bench`` (``-m proof``); six, its smaller twin, in ``make test``."""
    fleet = workers
    runs = [fleet.submit() for _ in range(count)]
    assert fleet.wait_ended(runs) == {run: "done" for run in runs}
    hosts = set()
    for run in runs:
        [attempt] = attempts_of(fleet, run)
        assert (attempt.attempt, attempt.outcome) == (1, "ended")
        hosts.add(attempt.worker_host)
        assert run_row(fleet, run).status == "done"
        assert len(owners(fleet, run)) == 1, "one owner, never resumed"
        pushed = fleet.branch(run)
        assert pushed is not None, f"run {run}'s integration branch was pushed"
        clone = fleet.home / "runs" / run / "project"
        tip = subprocess.run(["git", "rev-parse", f"teamrt/{run}"], cwd=clone, capture_output=True, text=True)
        assert pushed == tip.stdout.strip(), "the remote has the run's last merge"
    assert hosts == set(HOSTS), "both workers took runs"


def test_a_killed_worker_s_run_is_resumed_by_the_other_with_nothing_lost_or_doubled(workers: Fleet) -> None:
    fleet = workers
    reference = fleet.submit()
    assert fleet.wait_ended([reference]) == {reference: "done"}
    run = fleet.submit()
    host, child = mid_run(fleet, run)
    fleet.signal_worker(host, signal.SIGKILL)
    wait_for("the orphaned child fences itself", lambda: gone(child), timeout=30)
    assert fleet.wait_ended([run]) == {run: "done"}
    first, second = attempts_of(fleet, run)
    assert (first.worker_host, first.outcome) == (host, "worker lost")
    assert second.worker_host != host and second.outcome == "ended"
    assert [o["host"] for o in owners(fleet, run)] == [host, second.worker_host]
    observed = chaos.observe("coding", fleet.home, reference, fleet.home / "runs" / reference / "project")
    ref = chaos.Reference(*observed, hits={}, seconds=0.0)
    result = chaos.check("coding", fleet.home, run, fleet.home / "runs" / run / "project", ref, kills=1)
    assert result.differences == [] and result.silent == [], result
    assert (result.lost, result.duplicated, result.corrupted) == (0, 0, 0), result
    assert fleet.branch(run) is not None


@pytest.fixture
def hold() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="teamrt-hold-", dir="/var/tmp")) / "hold"
    path.touch()
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def test_a_stopped_worker_s_child_fences_itself_before_the_other_worker_takes_over(
    workers: Fleet, hold: Path
) -> None:
    fleet = workers
    gate = HELD_GATE.format(hold=hold)
    run = fleet.submit(team=TEAM.replace('gates = ["python3 -m unittest -q"]', f"gates = [{gate!r}]"))
    host, child = mid_run(fleet, run)  # its merge waits on the held gate until it has been taken over
    stopped_at = time.time()
    fleet.signal_worker(host, signal.SIGSTOP)
    try:
        wait_for("the child fences itself", lambda: gone(child), timeout=60, every=0.05)
        fenced_at = time.time()
        assert fenced_at - stopped_at < PULSE_LOST_S + 5, "fenced on the missing pulse"
        [old, new] = wait_for(
            "the other worker takes over", lambda: owners(fleet, run)[1:] and owners(fleet, run)
        )
        assert (old["host"], old["pid"]) == (host, child) and new["host"] != host
        assert new["at"] > fenced_at, "the old child was gone before the run was taken over"
    finally:
        hold.unlink()
        fleet.signal_worker(host, signal.SIGCONT)
    assert fleet.wait_ended([run]) == {run: "done"}
    wait_for(
        "the woken worker gives up its attempt", lambda: "Result: superseded" in fleet.log(host), timeout=60
    )
    assert fleet.workers[host].poll() is None, "the woken worker goes on working"
    first, second = attempts_of(fleet, run)
    assert (first.outcome, second.outcome) == ("worker lost", "ended")
    [status] = query(
        fleet, text("SELECT status FROM procrastinate_jobs WHERE id = :id").bindparams(id=first.job_id)
    )
    assert status[0] == "failed", "its late finish met a job the sweeper had ended"
    assert queue_row(fleet, run).end_status == "done" and len(owners(fleet, run)) == 2


def test_a_second_delivery_of_a_running_attempt_follows_it_and_the_run_ends_once(workers: Fleet) -> None:
    fleet = workers
    run = fleet.submit()
    mid_run(fleet, run)
    engine = queue_engine(fleet.url)
    try:
        with engine.connect() as conn, conn.begin():  # as if the library delivered the job twice
            bound_app().configure_task(
                DRIVE_TASK, queue=DEFAULT_POOL, connection=psycopg_connection(conn)
            ).defer(run_id=run, attempt=1)
    finally:
        engine.dispose()
    assert fleet.wait_ended([run]) == {run: "done"}
    wait_for(
        "the second delivery ends", lambda: "followed another delivery" in fleet.log("w1") + fleet.log("w2")
    )
    assert len(owners(fleet, run)) == 1, "one child owned the run"
    [attempt] = attempts_of(fleet, run)
    assert attempt.outcome == "ended"


def test_a_quota_of_two_holds_a_third_run_back_until_one_ends(workers: Fleet) -> None:
    fleet = workers
    set_quota(fleet, "carol", 2)
    runs = [fleet.submit(submitter="carol") for _ in range(3)]
    assert fleet.wait_ended(runs) == {run: "done" for run in runs}
    spans = [(a.started_at, a.ended_at) for run in runs for a in attempts_of(fleet, run)]
    assert len(spans) == 3, "waiting is not an attempt"
    most = max(sum(start <= at < end for start, end in spans) for at, _ in spans)
    assert most == 2, f"at most two of carol's runs at once: {spans}"


def test_stop_while_queued_running_and_waiting_for_a_worker(workers: Fleet, hold: Path) -> None:
    fleet = workers
    held = "dave"
    set_quota(fleet, held, 0)  # dave's runs are held back while this lasts
    queued = fleet.submit(submitter=held)
    wait_for(
        "the held run is tried", lambda: "quota" in fleet.log("w1") + fleet.log("w2") or None, timeout=30
    )
    said = teamrt(fleet, "stop", queued)
    assert said.returncode == 0, said.stderr
    assert fleet.wait_ended([queued]) == {queued: "stopped"}
    assert (
        run_row(fleet, queued) is None and queue_row(fleet, queued).end_reason == "stopped before it started"
    )

    gate = HELD_GATE.format(hold=hold)  # the run stays at work until it is stopped
    running = fleet.submit(team=TEAM.replace('gates = ["python3 -m unittest -q"]', f"gates = [{gate!r}]"))
    mid_run(fleet, running)
    said = teamrt(fleet, "stop", running)
    assert said.returncode == 0, said.stderr
    assert fleet.wait_ended([running]) == {running: "stopped"}
    assert run_row(fleet, running).status == "stopped"

    waiting = fleet.submit(submitter="erin")
    _, child = mid_run(fleet, waiting)
    set_quota(fleet, "erin", 0)
    os.kill(child, signal.SIGKILL)  # its next attempt waits on erin's quota
    wait_for("the next attempt waits", lambda: len(attempts_of(fleet, waiting)) == 2, timeout=60)
    listed = teamrt(fleet, "ls")
    assert "waiting for a worker (attempt 2)" in listed.stdout, listed.stdout
    said = teamrt(fleet, "stop", waiting)
    assert said.returncode == 0, said.stderr
    assert fleet.wait_ended([waiting]) == {waiting: "stopped"}
    assert run_row(fleet, waiting).status == "stopped"
    crashed, held = attempts_of(fleet, waiting)
    # its job cancelled by the stop; or, when a worker held it just then to try the quota again, the stop
    # recorded and honoured by that worker: either way the attempt never started
    assert (crashed.outcome, held.started_at) == ("crashed", None)
    assert held.outcome in ("cancelled", "stopped"), held.outcome


def set_quota(fleet: Fleet, submitter: str, most: int) -> None:
    engine = queue_engine(fleet.url)
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(q.user_quotas.delete().where(q.user_quotas.c.submitter == submitter))
            conn.execute(insert(q.user_quotas).values(submitter=submitter, max_running=most))
    finally:
        engine.dispose()


def test_a_run_that_crashes_every_worker_ends_failed_after_three_attempts(workers: Fleet) -> None:
    fleet = workers
    run = fleet.submit()
    killed: list[int] = []

    def kill_the_child() -> bool:
        row = run_row(fleet, run)
        if row is not None and row.owner_pid is not None and row.owner_pid not in killed:
            os.kill(row.owner_pid, signal.SIGKILL)  # an OOM, say: the child dies each time it starts
            killed.append(row.owner_pid)
        return bool(fleet.ended([run]))

    wait_for("the run ends", kill_the_child, every=0.02)
    assert fleet.ended([run]) == {run: "failed"}
    assert len(killed) == MAX_ATTEMPTS
    assert [a.outcome for a in attempts_of(fleet, run)] == ["crashed"] * MAX_ATTEMPTS
    assert queue_row(fleet, run).end_reason == FAILED_REASON
    row = run_row(fleet, run)
    assert (row.status, row.status_reason) == ("failed", FAILED_REASON)


HOOKS = (
    "pre-receive", "update", "post-receive", "post-update", "reference-transaction", "push-to-checkout",
    "proc-receive", "pre-push", "post-checkout", "post-merge", "pre-commit", "post-commit",
    "fsmonitor-watchman",
)  # fmt: skip


def plant_hooks(where: Path, marker: Path) -> None:
    """Every hook git may run, in ``where``, each leaving ``marker`` behind."""
    where.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = where / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        hook.chmod(0o755)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.hostile
def test_a_worker_refuses_urls_and_refs_that_would_make_git_run_a_command(
    workers: Fleet, tmp_path: Path
) -> None:
    """Rows past ``teamrt submit``'s own checks (written straight into the database): the worker checks
    again, and each run ends failed, naming the refusal; nothing ran."""
    from teamrt.queue.jobs import defer_in

    fleet = workers
    marker = tmp_path / "pwned"
    cases = {
        f"ext::sh -c touch% {marker}": "main",
        "ext::sh": "main",
        f"--upload-pack=touch {marker}": "main",
        "fd::17": "main",
        str(fleet.remote): f"--upload-pack=touch {marker}",
        f"{fleet.remote}\n": "main",
    }
    runs = []
    engine = queue_engine(fleet.url)
    try:
        for n, (url, ref) in enumerate(cases.items()):
            run = f"20261129-000000-bad{n}"
            with engine.connect() as conn, conn.begin():
                conn.execute(insert(q.queue_runs).values(
                    run_id=run, submitter="mallory", team_file=TEAM, team_name="t", prompt="go", repo_url=url,
                    repo_ref=ref, pool=DEFAULT_POOL, submitted_at=time.time(),
                ))  # fmt: skip
                defer_in(conn, run, 1)
            runs.append(run)
    finally:
        engine.dispose()
    assert fleet.wait_ended(runs) == {run: "failed" for run in runs}
    for run in runs:
        assert "is refused" in queue_row(fleet, run).end_reason, queue_row(fleet, run).end_reason
        assert run_row(fleet, run) is None, "no run began"
    assert not marker.exists()


@pytest.mark.hostile
def test_a_local_repository_s_hooks_never_run_on_the_worker(workers: Fleet, tmp_path: Path) -> None:
    """The remote is a path on the worker's machine: cloning and pushing run git there, whose hooks (its
    ``hooks/`` and a ``core.hooksPath`` its config names) would run as the worker."""
    fleet = workers
    marker = tmp_path / "pwned"
    remote = tmp_path / "hooked.git"
    git("clone", "-q", "--bare", str(fleet.remote), str(remote), cwd=tmp_path)
    plant_hooks(remote / "hooks", marker)
    plant_hooks(tmp_path / "elsewhere", marker)
    git("config", "core.hooksPath", str(tmp_path / "elsewhere"), cwd=remote)
    runs = [fleet.submit(repo=str(remote)), fleet.submit(repo=f"file://{remote}")]
    assert fleet.wait_ended(runs) == {run: "done" for run in runs}
    for run in runs:
        assert git("rev-parse", f"teamrt/{run}", cwd=remote), "the branch was pushed"
    assert not marker.exists(), marker.read_text()


@pytest.mark.hostile
def test_a_repository_s_top_level_modules_are_never_imported_by_the_run_s_child(
    workers: Fleet, tmp_path: Path
) -> None:
    """The child runs in the clone, and ``python -m`` would put its directory first on ``sys.path``: a
    repository's ``queue.py`` or ``json/`` would be imported in place of the standard library's, by the
    child, outside the sandbox. The child starts with ``-P``."""
    fleet = workers
    marker = tmp_path / "imported"
    work = tmp_path / "work"
    git("clone", "-q", str(fleet.remote), str(work), cwd=tmp_path)
    trap = f"import pathlib\npathlib.Path({str(marker)!r}).write_text(__name__)\n"
    (work / "queue.py").write_text(trap)
    (work / "json").mkdir()
    (work / "json" / "__init__.py").write_text(trap)
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "modules", cwd=work)
    remote = tmp_path / "trapped.git"
    git("clone", "-q", "--bare", str(work), str(remote), cwd=tmp_path)
    run = fleet.submit(repo=str(remote))
    assert fleet.wait_ended([run]) == {run: "done"}
    assert not marker.exists(), f"{marker.read_text()} was imported from the repository"


@pytest.mark.hostile
def test_an_agent_s_changes_to_the_clone_s_git_config_never_redirect_the_push(
    workers: Fleet, hold: Path, tmp_path: Path
) -> None:
    """What an agent can write in the clone's ``.git`` (another remote URL, ``insteadOf`` rewrites of the
    submitted one, hooks, a ``core.hooksPath``) is never read by the push: it goes to the submitted URL
    only, and runs no hook."""
    fleet = workers
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.git"
    git("init", "-q", "--bare", str(evil), cwd=tmp_path)
    gate = HELD_GATE.format(hold=hold)
    run = fleet.submit(team=TEAM.replace('gates = ["python3 -m unittest -q"]', f"gates = [{gate!r}]"))
    clone = fleet.home / "runs" / run / "project"
    mid_run(fleet, run)  # the merge waits on the held gate: nothing is pushed yet
    plant_hooks(clone / ".git" / "hooks", marker)
    plant_hooks(tmp_path / "agent-hooks", marker)
    for key, value in (
        ("remote.origin.url", str(evil)), ("remote.origin.pushurl", str(evil)),
        (f"url.{evil}.insteadOf", str(fleet.remote)), (f"url.{evil}.pushInsteadOf", str(fleet.remote)),
        ("core.hooksPath", str(tmp_path / "agent-hooks")),
    ):  # fmt: skip
        git("config", "--file", str(clone / ".git" / "config"), key, value, cwd=tmp_path)
    hold.unlink()
    assert fleet.wait_ended([run]) == {run: "done"}
    assert fleet.branch(run) is not None, "pushed to the submitted URL"
    assert git("for-each-ref", cwd=evil) == "", "nothing went to the agent's remote"
    assert not marker.exists(), marker.read_text()


def test_a_run_whose_team_cannot_start_ends_failed_at_once_saying_why(workers: Fleet) -> None:
    fleet = workers
    bad = fleet.submit(team="[nonsense]\n")
    taken = fleet.submit(team=TEAM.replace("[merge]\n", '[merge]\nintegration_branch = "main"\n'))
    assert fleet.wait_ended([bad, taken]) == {bad: "failed", taken: "failed"}
    assert "nonsense" in queue_row(fleet, bad).end_reason
    assert "'main' exists already" in queue_row(fleet, taken).end_reason
    for run in (bad, taken):
        assert [a.outcome for a in attempts_of(fleet, run)] == ["ended"], "no attempt was tried again"
        assert run_row(fleet, run) is None
