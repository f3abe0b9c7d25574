"""Fault injection: the example teams killed (SIGKILL) at every named crash point and at random
points, resumed until they end, and compared with an uninterrupted run.

Every incarnation is forked from a server that has imported teamrt already
(``teamrt.testing.chaos``). Seeds make every kill reproducible: a failure names its seed.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from teamrt.demos.examples import team_file
from teamrt.models.reply import Reply
from teamrt.sim import SimServer
from teamrt.sim.policy import SimRequest
from teamrt.store import open_reader
from teamrt.testing import chaos
from tests.system.conftest import Finished

KILLS_PER_RUN = 5
RANDOM_KILLS = 32


@pytest.fixture(scope="module")
def ctx(chaos_ctx: Any) -> Any:
    return chaos_ctx


@pytest.fixture(scope="module")
def tree(chaos_tree: Path) -> Path:
    """The tree the research team surveys (the one the references surveyed)."""
    return chaos_tree


@pytest.fixture(scope="module")
def references(uninterrupted: Callable[[str], Finished]) -> dict[str, chaos.Reference]:
    return {example: uninterrupted(example).ref for example in ("coding", "research")}


def survive(
    example: str, kills: list[chaos.Kill], where: Path, ref: chaos.Reference, ctx: Any, tree: Path
) -> chaos.Result:
    project = chaos.prepare(example, where, tree)
    run_id, fired = chaos.run_through_crashes(example, where / "home", project, kills, ctx)
    result = chaos.check(example, where / "home", run_id, project, ref, fired)
    assert result.differences == [], f"{kills}: {result.differences}"
    assert (result.lost, result.duplicated, result.corrupted) == (0, 0, 0), f"{kills}: {result}"
    assert result.twice == [], f"{kills}: side-effecting calls ran twice: {result.twice}"
    assert result.resumes >= result.kills - 1, "every kill but one before the run existed was resumed"
    return result


@pytest.mark.parametrize("point", chaos.POINTS)
def test_a_kill_at_each_named_point_is_survived(
    point: str, tmp_path: Path, references: dict[str, chaos.Reference], ctx: Any, tree: Path
) -> None:
    """Twice at the point: half-way through the hits an uninterrupted run makes, then at the first."""
    example = "coding"
    ref = references[example]
    assert ref.hits[point] > 0, f"the {example} team never reaches {point}"
    kills = [chaos.Kill(point, hit=max(1, ref.hits[point] // 2)), chaos.Kill(point, hit=1)]
    result = survive(example, kills, tmp_path, ref, ctx, tree)
    assert result.kills == 2


def test_random_kills_are_survived(
    tmp_path: Path, references: dict[str, chaos.Reference], ctx: Any, tree: Path
) -> None:
    """Seeded runs of both teams in turn, five kills each (points and timers), until 32 kills have
    fired: with the 18 at named points, more than 50 in the suite."""
    fired, seed = 0, 0
    while fired < RANDOM_KILLS:
        example = ("research", "coding")[seed % 2]
        kills = chaos.kills_for(seed, KILLS_PER_RUN, references[example])
        result = survive(example, kills, tmp_path / f"seed-{seed}", references[example], ctx, tree)
        # how fast a resume is back is the chaos benchmark's figure; here 60 s only bounds a hang
        assert all(ms < 60_000 for ms in result.resume_ms), f"seed {seed}: {result.resume_ms}"
        fired += result.kills
        seed += 1
    assert seed <= 12, f"it took {seed} runs to reach {RANDOM_KILLS} kills"


def teamrt(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "teamrt", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "TEAMRT_HOME": str(home)}, timeout=120)  # fmt: skip


def start_run(example: str, where: Path, until: str) -> tuple[Path, Path, subprocess.Popen[bytes]]:
    """``teamrt run`` of an example in its own process, once ``until`` (a glob in the home) exists."""
    project, home = chaos.prepare(example, where), where / "home"
    team = team_file(example)
    owner = subprocess.Popen([sys.executable, "-P", "-m", "teamrt", "run", str(team)], cwd=project,
                             env={**os.environ, "TEAMRT_HOME": str(home)}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(home.glob(until)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return project, home, owner


@pytest.mark.usefixtures("store_db")
def test_teamrt_ls_marks_a_killed_run_crashed_and_resume_finishes_it(tmp_path: Path) -> None:
    project, home, owner = start_run("coding", tmp_path, "runs/*/worktrees/*")  # the coders are at work
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    [run_dir] = (home / "runs").iterdir()
    listed = teamrt("ls", cwd=project, home=home)
    assert f"{run_dir.name}  crashed" in listed.stdout, listed.stdout
    resumed = teamrt("resume", run_dir.name, "--quiet", cwd=project, home=home)
    assert resumed.returncode == 0, resumed.stderr
    assert "3 of 3 coders merged their fixes" in resumed.stdout
    again = teamrt("resume", run_dir.name, cwd=project, home=home)
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert "is done; only a crashed run can be resumed" in again.stderr
    detached = teamrt("resume", run_dir.name, "--detach", cwd=project, home=home)
    assert detached.returncode == 1 and "is done; only a crashed run can be resumed" in detached.stderr


def test_resume_detach_takes_a_crashed_run_over_in_the_background(tmp_path: Path) -> None:
    project, home, owner = start_run("coding", tmp_path, "runs/*/worktrees/*")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    [run_dir] = (home / "runs").iterdir()
    started = teamrt("resume", run_dir.name, "--detach", cwd=project, home=home)
    assert started.returncode == 0, started.stderr
    assert started.stdout == f"{run_dir.name}\n" and "teamrt logs" in started.stderr
    followed = teamrt("logs", run_dir.name, "-f", cwd=project, home=home)
    assert followed.returncode == 0, followed.stdout[-2000:]
    assert "run.resumed" in followed.stdout and f"run {run_dir.name} ended: done" in followed.stdout


def test_resuming_a_live_run_is_refused(tmp_path: Path, store_db: str) -> None:
    """The owner is held on a permission ask (for up to ten minutes) while the resume is tried; once the
    ask is answered, it ends the run itself."""

    def writes_once(request: SimRequest) -> Reply:
        if request.turns == 0:
            return Reply().call("Write", {"file_path": "NOTES.md", "content": "notes\n"})
        return Reply().say("wrote the notes")

    project, home = chaos.prepare("research", tmp_path), tmp_path / "home"
    team = project / "team.toml"
    team.write_text('[team]\nask_wait = 600\n[lead]\nagent = "coder"\npermission_mode = "default"\n')
    with SimServer(default=writes_once) as sim:
        env = {
            **os.environ,
            "TEAMRT_HOME": str(home),
            "ANTHROPIC_BASE_URL": sim.url,
            "ANTHROPIC_API_KEY": "k",
        }
        run = [sys.executable, "-P", "-m", "teamrt", "run", str(team), "--prompt", "write notes"]
        owner = subprocess.Popen(
            run, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        hang = threading.Timer(300, owner.kill)  # bounds a hang only: the ask waits ten minutes
        hang.start()
        try:
            asked = _line_with(owner, "answer it: teamrt answer")
            [run_dir] = (home / "runs").iterdir()
            refused = teamrt("resume", run_dir.name, cwd=project, home=home)
            assert owner.poll() is None, "the owner still waits on its ask"
            live = (
                f"teamrt: run {run_dir.name} is running (pid {owner.pid} on {socket.gethostname()});"
                " only a crashed run can be resumed\n"
            )
            assert (refused.returncode, refused.stderr) == (1, live)
            answer = asked.split("answer it: teamrt ", 1)[1].split()[:-1]
            answered = teamrt(*answer, "allow", cwd=project, home=home)
            assert answered.returncode == 0, answered.stderr
            out, err = owner.communicate(timeout=120)
        finally:
            hang.cancel()
            owner.kill()
    assert owner.returncode == 0, err
    assert out == "wrote the notes\n" and (project / "NOTES.md").read_text() == "notes\n"
    reader = open_reader(run_dir, run_dir.name)
    try:
        assert reader.run().status == "done"
        events = reader.events()
        assert [e.data["pid"] for e in events if e.kind == "run.owner"] == [owner.pid], "one owner, never two"
        assert "run.resumed" not in [e.kind for e in events]
    finally:
        reader.close()
    if store_db == "sqlite":
        with closing(sqlite3.connect(run_dir / "run.db")) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert teamrt("resume", "nosuchrun", cwd=project, home=home).stderr.startswith("teamrt: no run named")


def _line_with(process: subprocess.Popen[str], needle: str) -> str:
    """The first line of ``process``'s stderr with ``needle`` in it; fails if the process ends first."""
    assert process.stderr is not None
    for line in process.stderr:
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} never came; the process ended {process.wait()}")


@pytest.mark.usefixtures("store_db")
def test_a_full_disk_stops_the_run_clearly_and_resume_goes_on_when_space_returns(
    tmp_path: Path, references: dict[str, chaos.Reference], ctx: Any, tree: Path
) -> None:
    ref = references["research"]
    project = chaos.prepare("research", tmp_path, tree)
    home = tmp_path / "home"
    run_id = "20261122-000000-full"
    full = chaos.Kill("store.before_commit", hit=ref.hits["store.before_commit"] // 2, disk_full=True)
    for kill, first in ((full, True), (None, False)):
        exitcode = chaos.incarnate(ctx, "research", home, project, run_id, kill, first=first)
        if first:
            assert exitcode == 1, "the run stopped on the full disk"
            said = (home / f"{run_id}.{chaos.ERROR}").read_text()
            assert said.startswith("StoreWriteFailed:") and "no space left on device" in said, said
            assert "then resume the run" in said
            assert chaos.status_of(home, run_id) == "running", "nothing after the last commit was kept"
    assert exitcode == 0, "resumed once space returned"
    result = chaos.check("research", home, run_id, project, ref, kills=0)
    assert result.differences == [] and (result.lost, result.duplicated, result.corrupted) == (0, 0, 0), (
        result
    )


def test_processes_a_crashed_run_left_are_killed_and_a_reused_pid_is_spared(tmp_path: Path) -> None:
    import asyncio

    from teamrt.procs import is_running, process_start_time
    from teamrt.runtime.restore import kill_leftovers
    from teamrt.store import ProcessRecord, ToolCallRecord

    left = subprocess.Popen(["sleep", "300"], start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        start = process_start_time(left.pid)
        assert start is not None

        def call(pid: int, start_time: int) -> ToolCallRecord:
            process = ProcessRecord(pid, start_time, 0.0)
            return ToolCallRecord(
                id="toolu_1", agent="lead", turn_id=1, epoch=1, name="bash", input={}, read_only=False,
                status="running", result=None, is_error=False, created_at=0.0, started_at=0.0,
                finished_at=None, processes=(process,),
            )  # fmt: skip

        wrong = (process_start_time(other.pid) or 0) + 1  # the pid now belongs to someone else
        killed = asyncio.run(kill_leftovers([call(left.pid, start), call(other.pid, wrong)]))
        assert killed == 1
        assert left.wait(10) is not None
        assert is_running(other.pid, process_start_time(other.pid) or 0), "a process that is not ours lives"
    finally:
        for p in (left, other):
            p.kill()
            p.wait()


@pytest.mark.usefixtures("store_db")
def test_a_worktree_lost_with_the_crash_is_made_again_and_the_run_ends(
    tmp_path: Path, references: dict[str, chaos.Reference], ctx: Any, tree: Path
) -> None:
    import shutil

    project = chaos.prepare("coding", tmp_path, tree)
    home = tmp_path / "home"
    run_id = "20261122-000000-lost"
    plan = ((chaos.Kill("merge.merged", hit=1), True), (None, False))
    for kill, first in plan:
        exitcode = chaos.incarnate(ctx, "coding", home, project, run_id, kill, first=first)
        if first:
            assert exitcode == -signal.SIGKILL
            worktrees = sorted((home / "runs" / run_id / "worktrees").iterdir())
            assert worktrees, "the coders were at work"
            shutil.rmtree(worktrees[0])  # lost with the machine, say
    assert exitcode == 0
    result = chaos.check("coding", home, run_id, project, references["coding"], kills=1)
    assert (result.lost, result.duplicated, result.corrupted) == (0, 0, 0), result
    log = ["git", "log", "--format=%s", f"teamrt/{run_id}"]
    ended = subprocess.run(log, cwd=project, capture_output=True, text=True, check=True).stdout
    assert ended.count("Merge coder") == 3, "every coder's work was merged, the lost worktree's too"
