"""PostgreSQL faults under a live run, on a real server of this module's own (so that stopping it stops no
other test): restarts (``fast``, ``immediate``), a stop shorter and one longer than the grace period, the
writer's session ended (``pg_terminate_backend``) while idle and while committing, and a host whose clock
is an hour off. A restart costs a pause, not a run: the run ends ``done`` with its rows whole (turns
numbered 1..n, every mail row once: ``chaos.inconsistencies``), ``logs -f`` follows it to its end, and
past the grace it stops in one line that a resume goes on from."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from teamrt import faults
from teamrt.demos.examples import team_file
from teamrt.store import RunOwned, RunTakenOver, create_store, open_reader, open_store, owner_alive
from teamrt.store.engine import GRACE_ENV, BadGrace, grace_s
from teamrt.store.ownership import HOST_ENV
from teamrt.testing import chaos
from teamrt.testing.pgserver import PgServer
from tests.helpers.events import marker
from tests.helpers.pg import pg_server_with_template
from tests.system.test_cross_host import sql

RUN = "r1"
TEMPLATE = "template"
GRACE_S = 10.0  # the tests' grace: long enough for a restart on a loaded machine, short past it
WAIT_S = 60.0  # a bound on a hang, never a timing
_databases = itertools.count(1)


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    """A server these tests may stop and restart (not the worker's shared one), with a template database
    at the newest schema."""
    with pg_server_with_template(TEMPLATE) as pg:
        yield pg


@pytest.fixture
def db(server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database as ``TEAMRT_DB`` (for this process and its children), with the tests' grace."""
    name = f"f{next(_databases)}"
    url = server.create_database(name, TEMPLATE)
    monkeypatch.setenv("TEAMRT_DB", url)
    monkeypatch.setenv(GRACE_ENV, f"{GRACE_S:g}")
    yield url
    if server._proc is None or server._proc.poll() is not None:  # a test that failed with it stopped
        server.launch()
    server.drop_database(name)


def end_writer(url: str) -> int:
    """``pg_terminate_backend`` of every run writer's session, waiting until each has ended; how many."""
    rows = sql(
        url,
        "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity"
        " WHERE application_name = 'teamrt writer' AND pid <> pg_backend_pid()",
    )
    return sum(bool(ended) for (ended,) in rows)


def wait_for(what: str, condition: Callable[[], bool], process: subprocess.Popen[str] | None = None) -> None:
    """Until ``condition()``; fails after ``WAIT_S``, or once ``process`` (the run) has ended, with what it
    said."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"{what}: the run ended first ({process.returncode}): {out}{err}")
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S:g} s"
        time.sleep(0.02)


def whole(run_dir: Path) -> list[str]:
    """What is wrong with the run's rows read back (``chaos.inconsistencies``), and any mail row there
    twice."""
    reader = open_reader(run_dir, run_dir.name)
    try:
        problems = chaos.inconsistencies(reader)
        rows = Counter((m.agent, m.id) for m in reader.mail())
    finally:
        reader.close()
    return problems + [f"mail {key} ingested {n} times" for key, n in rows.items() if n > 1]


# -- the writer ------------------------------------------------------------------------------------------


def test_a_group_whose_session_ends_as_it_commits_is_kept_exactly_once(db: str, run_dir: Path) -> None:
    """The writer's session is ended as it commits: once before the COMMIT reached the server (the group
    is run again on a new connection, the lease checked first), once after the server kept it but before
    the writer heard (the server is asked whether it was kept: it is not run again). Each write is in the
    store once, each caller hears once, and the store goes on."""
    store = create_store(run_dir, RUN, task="t", workdir="/")
    writer = store._writer
    ends = {"before": 1}

    def before_commit(_: str) -> None:
        if ends["before"]:
            ends["before"] -= 1
            assert end_writer(db) == 1

    real = writer._transact
    lose_answer = {"armed": False}

    def transact(group: list[Any]) -> None:
        real(group)  # committed
        if lose_answer["armed"]:
            lose_answer["armed"] = False
            assert end_writer(db) == 1
            assert writer._conn is not None
            writer._conn.exec_driver_sql("SELECT 1")  # the driver's own error for the lost session

    async def scene() -> list[int]:
        with faults.inject("store.before_commit", before_commit):
            first = await store.append_event(marker("lost.before_commit"), {"n": 1})
        writer._transact = transact  # type: ignore[method-assign]
        lose_answer["armed"] = True
        second = await store.append_event(marker("lost.after_commit"), {"n": 2})
        third = await store.append_event(marker("after"), {"n": 3})
        return [first, second, third]

    try:
        ids = asyncio.run(scene())
        assert store.failure is None and writer.reconnects == 2
        kinds = Counter(e.kind for e in store.reader.events())
        assert (kinds["lost.before_commit"], kinds["lost.after_commit"], kinds["after"]) == (1, 1, 1)
        assert ids == sorted(ids) and len(set(ids)) == 3
    finally:
        store.close()


def test_a_takeover_while_the_writer_was_cut_off_is_never_written_over(
    db: str, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """host-a's writer loses its session; meanwhile host-b takes the run (host-a's heartbeat is stale).
    host-a's writer connects again and its next write is refused by the lease, not written."""
    monkeypatch.setenv(HOST_ENV, "host-a")
    monkeypatch.setattr("teamrt.store.store.HEARTBEAT_S", 3600.0)  # no beat that would look alive

    async def scene() -> None:
        stale = create_store(run_dir, RUN, task="t", workdir="/")
        await stale.append_event(marker("a.before"))
        stale._lock.release()  # another host: its lock file is not this one's
        assert end_writer(db) == 1
        sql(db, "UPDATE runs SET heartbeat_at = heartbeat_at - 3600")
        monkeypatch.setenv(HOST_ENV, "host-b")
        with open_store(run_dir, RUN) as fresh:
            with pytest.raises(RunTakenOver, match="on host-b"):
                await stale.append_event(marker("a.after"))
            assert stale._writer.reconnects == 1, "refused after connecting again, by the lease"
            kinds = [e.kind for e in fresh.reader.events()]
        stale.close()
        assert "a.after" not in kinds and kinds.count("a.before") == 1

    asyncio.run(scene())


def test_the_run_view_reads_on_through_a_stop_shorter_than_the_grace(
    db: str, server: PgServer, run_dir: Path
) -> None:
    """The TUI's run view reads while the server is down for a second: the read waits for it instead of
    failing, and a commit made after it is back is heard (the listener connected again) and read."""
    from teamrt.tui.state import RunFollower

    store = create_store(run_dir, RUN, task="t", workdir="/")
    follower = RunFollower(run_dir, RUN)
    back = threading.Timer(1.0, server.launch)
    try:
        assert follower.read(None).status == "running"
        server.halt("fast")
        back.start()
        assert follower.read(None).status == "running"
        asyncio.run(store.append_event(marker("after.restart")))
        wait_for("the commit heard", lambda: follower.changed(None))
        assert "after.restart" in [e.kind for e in follower.read(None).events]
    finally:
        back.join()
        follower.close()
        store.close()


# -- the database's clock ---------------------------------------------------------------------------------


def test_a_host_whose_clock_is_an_hour_off_neither_takes_a_live_run_nor_loses_its_own(
    db: str, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """host-a owns a run with its clock an hour behind; host-b, its clock an hour ahead, is refused the
    run while host-a beats (on the local clocks the heartbeat looked two hours old). Once host-a is gone, a
    host whose clock is an hour behind still takes the run over (its heartbeat looked an hour young)."""
    real = time.time
    monkeypatch.setattr("teamrt.store.store.HEARTBEAT_S", 0.05)
    monkeypatch.setenv(HOST_ENV, "host-a")
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    owner = create_store(run_dir, RUN, task="t", workdir="/")
    try:
        beats = owner.commits
        wait_for("a heartbeat", lambda: owner.commits > beats + 1)
        owner._lock.release()  # another host: its lock file is not this one's
        monkeypatch.setenv(HOST_ENV, "host-b")
        monkeypatch.setattr(time, "time", lambda: real() + 3600)
        with pytest.raises(RunOwned, match=r"owned by pid \d+ on host-a, heartbeat \d s ago"):
            open_store(run_dir, RUN)
        reader = open_reader(run_dir, RUN)
        try:
            assert owner_alive(reader.run(), reader.now()), "live by the database's clock"
        finally:
            reader.close()
    finally:
        owner._writer.close()  # host-a dies: it beats no more, and its ownership stays recorded
        owner.reader.close()
        owner._engine.dispose()
    sql(db, "UPDATE runs SET heartbeat_at = heartbeat_at - 60")  # a minute ago
    monkeypatch.setenv(HOST_ENV, "host-c")
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    with open_store(run_dir, RUN) as taken:
        assert taken.token == 2


def test_the_grace_is_a_setting_and_a_bad_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GRACE_ENV, raising=False)
    assert grace_s() == 30.0
    monkeypatch.setenv(GRACE_ENV, "2.5")
    assert grace_s() == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(GRACE_ENV, bad)
        with pytest.raises(BadGrace, match=f"^{GRACE_ENV}='{bad}' is not a number of seconds"):
            grace_s()


# -- a team run ---------------------------------------------------------------------------------------------

HOLD_ENV = "TEAMRT_TEST_HOLD"
"""A file: while it exists, the simulator of a run started by ``start_coding`` holds its answers."""


def teamrt_process(*argv: str, project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``argv`` run by this Python in ``project``; this file run as a script imports ``tests.helpers``, so the
    checkout is on its path."""
    env = {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(
        [sys.executable, *argv], cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip


class Lines:
    """A process's stdout, read on a thread, so that a test can wait for a line without blocking."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert process.stdout is not None
        stream = process.stdout
        self._thread = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._thread.start()

    def text(self) -> str:
        return "".join(self.lines)


def coding_run(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, str]]:
    """The coding example's project, home and hold file, and the environment that runs it."""
    project = chaos.prepare("coding", tmp_path)
    home, hold = tmp_path / "home", tmp_path / "hold"
    return project, home, hold, {**os.environ, "TEAMRT_HOME": str(home), HOLD_ENV: str(hold)}


def start_coding(project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``teamrt run`` of the coding team on the simulator, by this file run as a script (``main``)."""
    return teamrt_process(__file__, "run", str(team_file("coding")), "--quiet", project=project, env=env)


def the_run(home: Path) -> Path:
    wait_for("the run's directory", lambda: (home / "runs").is_dir() and any((home / "runs").iterdir()))
    [run_dir] = (home / "runs").iterdir()
    return run_dir


_holds = itertools.count(1)


def pause_answers(path: Path) -> None:
    """From now on the simulator holds each answer (until ``path`` is removed or another hold begins)."""
    path.with_suffix(".waiting").unlink(missing_ok=True)
    path.write_text(str(next(_holds)))


def hold(path: Path, run: subprocess.Popen[str]) -> None:
    """Hold the simulator's answers from now on, once a model call waits."""
    pause_answers(path)
    wait_for("a model call in flight", path.with_suffix(".waiting").exists, run)


def held(path: Path, run: subprocess.Popen[str], fault: Callable[[], object]) -> None:
    """``fault`` while a model call waits (the writer idles, heartbeating; agents are mid-turn)."""
    hold(path, run)
    try:
        fault()
    finally:
        path.unlink()


def short_stop(server: PgServer) -> None:
    """The server stopped for a while shorter than the grace."""
    server.halt("fast")
    time.sleep(3)
    server.launch()


@pytest.mark.slow
def test_a_team_run_goes_on_through_restarts_a_short_stop_and_its_writer_ended(
    db: str, server: PgServer, tmp_path: Path
) -> None:
    """The coding team on PostgreSQL through ``restart -m immediate``, ``restart -m fast``, its writer's
    session ended, and a stop shorter than the grace: it ends ``done`` with its rows whole, as an
    uninterrupted run; ``teamrt logs -f``, started before the faults, follows it to its end."""
    project, home, pause, env = coding_run(tmp_path)
    pause_answers(pause)  # the lead's first call waits until logs -f follows
    run = start_coding(project, env)
    follower: subprocess.Popen[str] | None = None
    try:
        run_dir = the_run(home)
        wait_for("the lead's first call", pause.with_suffix(".waiting").exists, run)
        follower = teamrt_process("-m", "teamrt", "logs", "-f", run_dir.name, project=project, env=env)
        followed = Lines(follower)
        wait_for("logs -f following", lambda: "agent.added" in followed.text())
        server.restart("immediate")
        pause.unlink()
        wait_for("the coders at work", lambda: len(list(run_dir.glob("worktrees/*"))) >= 1, run)
        held(pause, run, lambda: server.restart("fast"))
        held(pause, run, lambda: end_writer(db))
        held(pause, run, lambda: short_stop(server))
        out, err = run.communicate(timeout=120)
        assert follower.wait(timeout=60) == 0, followed.text()
    finally:
        pause.unlink(missing_ok=True)
        for process in (run, follower):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert run.returncode == 0 and "Traceback" not in err, err
    assert "3 of 3 coders merged their fixes" in out, out
    said = followed.text()
    assert said.splitlines()[-1] == f"run {run_dir.name} ended: done", said
    assert "run.status" in said and "merge.merged" in said
    assert whole(run_dir) == []


def test_a_stop_past_the_grace_ends_the_run_in_one_line_with_its_rows_whole(
    db: str, server: PgServer, tmp_path: Path
) -> None:
    """The server goes down while the lead's model call is in flight and stays down past the grace: the
    run stops with the store's one line (the run's end does not read the stopped store: no traceback), and
    its rows are whole and still ``running``, for a resume."""
    project, home, pause, env = coding_run(tmp_path)
    env[GRACE_ENV] = "2"
    pause_answers(pause)
    run = teamrt_process(__file__, "run", "--prompt", "hello", "--model", "sim", "--quiet", project=project,
                         env=env)  # fmt: skip
    try:
        run_dir = the_run(home)
        wait_for("the lead's call", pause.with_suffix(".waiting").exists, run)
        server.halt("fast")
        pause.unlink()  # the lead's answer is to be written now
        _, err = run.communicate(timeout=120)
    finally:
        pause.unlink(missing_ok=True)
        if run.poll() is None:
            run.kill()
            run.wait()
        server.launch()
    assert run.returncode != 0 and "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith("teamrt: the run store postgresql"), err
    assert "(out of reach for 2 s)" in err and err.endswith("then resume the run\n"), err
    reader = open_reader(run_dir, run_dir.name)
    try:
        assert reader.run().status == "running", "nothing after the last commit was kept"
    finally:
        reader.close()
    assert whole(run_dir) == []


def main() -> int:
    """This file run as a script: teamrt's command line, its simulator holding each answer while the file
    ``TEAMRT_TEST_HOLD`` names exists (a ``.waiting`` file beside it says a call waits)."""
    from teamrt.cli import main as cli
    from teamrt.sim.server import SimServer

    pause = Path(os.environ[HOLD_ENV])

    def hold_now() -> str | None:
        try:
            return pause.read_text()
        except FileNotFoundError:
            return None

    async def held(_: SimServer) -> None:
        this = hold_now()
        if this is not None:
            pause.with_suffix(".waiting").touch()
            while hold_now() == this:  # a hold released and taken again at once is another hold
                await asyncio.sleep(0.02)

    SimServer._held = held  # type: ignore[method-assign,assignment]
    return cli(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
