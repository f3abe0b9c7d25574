"""Run ownership: a live owner is exclusive, a dead one's run is taken over, the heartbeat tells which;
the lease's fencing token refuses every write of an owner that was taken over from. Each test runs on
per-run SQLite files and on PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from teamrt.store import (
    RunOwned,
    RunTakenOver,
    StoreWriteFailed,
    create_store,
    open_reader,
    open_store,
    owner_alive,
)
from teamrt.store.engine import store_url
from teamrt.store.ownership import HOST_ENV, BadHost, host_identity
from tests.helpers.events import marker

RUN = "r1"
pytestmark = pytest.mark.usefixtures("store_db")


def execute(run_dir: Path, sql: str, **params: object) -> None:
    """A statement on the run's database from outside teamrt (a test playing another host or the clock)."""
    engine = create_engine(store_url(run_dir), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


OWNER_SCRIPT = """
import sys, time
from pathlib import Path
from teamrt.store import open_store
store = open_store(Path(sys.argv[1]), "r1")
print("owning", flush=True)
time.sleep(120)
"""


def start_owner(run_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "owning\n", proc.stderr.read() if proc.stderr else line
    return proc


def test_a_second_owner_in_this_process_is_refused(run_dir: Path) -> None:
    with create_store(run_dir, RUN, task="t", workdir="/"), pytest.raises(RunOwned) as info:
        open_store(run_dir, RUN)
    assert info.value.pid == os.getpid()
    assert f"run 'r1' is live: owned by pid {os.getpid()}" in str(info.value)


def test_a_live_owner_process_is_refused_and_a_killed_one_taken_over(run_dir: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()
    owner = start_owner(run_dir)
    try:
        with pytest.raises(RunOwned) as info:
            open_store(run_dir, RUN)
        assert info.value.pid == owner.pid
        reader = open_reader(run_dir, RUN)
        assert owner_alive(reader.run())
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert not owner_alive(reader.run())  # the process is gone, however fresh its heartbeat
        reader.close()

        async def take_over() -> None:
            with open_store(run_dir, RUN) as store:
                run = store.reader.run()
                assert run.owner is not None and run.owner.pid == os.getpid()
                assert owner_alive(run)
                event = store.reader.events()[-1]
                assert event.kind == "run.owner"
                assert event.data["previous"]["pid"] == owner.pid

        asyncio.run(take_over())
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_clean_close_gives_up_ownership(run_dir: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()
    reader = open_reader(run_dir, RUN)
    run = reader.run()
    reader.close()
    assert run.owner is None and not owner_alive(run)


def test_heartbeat_beats_while_idle(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("teamrt.store.store.HEARTBEAT_S", 0.05)
    with create_store(run_dir, RUN, task="t", workdir="/") as store:
        first = store.reader.run().heartbeat_at
        assert first is not None
        commits = store.commits
        deadline = time.monotonic() + 30
        while (later := store.reader.run().heartbeat_at) == first:  # with nothing else written
            assert time.monotonic() < deadline, "no heartbeat in 30 s"
            time.sleep(0.02)
        assert later is not None and later > first
        # The writer counts a group just after its commit is visible: give the count its moment.
        while store.commits == commits and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.commits > commits, "the writer beat by itself"


def test_owner_on_another_machine_is_refused_while_its_heartbeat_is_fresh(run_dir: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()

    def pretend_owner(heartbeat_age: float) -> None:
        execute(
            run_dir,
            "UPDATE runs SET owner_host='build-7', owner_pid=99, owner_start_time=1, owner_since=0,"
            " heartbeat_at=:at",
            at=time.time() - heartbeat_age,
        )

    pretend_owner(1.0)
    with pytest.raises(RunOwned, match="owned by pid 99 on build-7, heartbeat 1 s ago"):
        open_store(run_dir, RUN)
    pretend_owner(3600.0)
    with open_store(run_dir, RUN) as store:
        assert store.reader.events()[-1].data["previous"] == {"host": "build-7", "pid": 99}


def test_every_take_bumps_the_lease_and_a_race_for_one_run_has_one_winner(run_dir: Path) -> None:
    with create_store(run_dir, RUN, task="t", workdir="/") as store:
        assert store.token == store.reader.run().owner_token == 1
    with open_store(run_dir, RUN) as store:
        assert store.token == 2
        assert store.reader.events()[-1].data["lease"] == 2
    # two takers that read the run at the same moment: the compare-and-set lets only one through
    from teamrt.store import ops
    from teamrt.store.engine import writer_engine
    from teamrt.store.records import Owner

    engine = writer_engine(store_url(run_dir))
    try:
        with engine.begin() as conn:
            seen = ops.read_run(conn, RUN)
        assert seen is not None and seen.owner_token == 2
        with engine.begin() as conn:
            assert ops.take_ownership(conn, seen, Owner("host-a", 1, 1, time.time())) == 3
        with pytest.raises(RunOwned, match="owned by pid 1 on host-a"), engine.begin() as conn:
            ops.take_ownership(conn, seen, Owner("host-b", 2, 2, time.time()))
    finally:
        engine.dispose()


def test_an_owner_taken_over_from_has_every_later_write_refused(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split brain in one process: host-a is wedged long enough for host-b to take the run (the flock
    does not span hosts, so none stops it); host-a's next write, and every one after, is refused, and
    nothing it tried is in the store."""
    monkeypatch.setenv(HOST_ENV, "host-a")

    async def scene() -> None:
        stale = create_store(run_dir, RUN, task="t", workdir="/")
        await stale.append_event(marker("a.before"))
        stale._lock.release()  # another host: its lock file is not this one's
        execute(run_dir, "UPDATE runs SET heartbeat_at = heartbeat_at - 3600")  # wedged past its lease
        monkeypatch.setenv(HOST_ENV, "host-b")
        with open_store(run_dir, RUN) as fresh:
            assert fresh.token == stale.token + 1
            with pytest.raises(RunTakenOver) as refused:
                await stale.append_event(marker("a.after"))
            said = str(refused.value)
            assert f"was taken over by pid {os.getpid()} on host-b (lease 2, this process held 1)" in said
            assert isinstance(stale.failure, StoreWriteFailed)
            with pytest.raises(RunTakenOver):
                await stale.set_run_status("done")  # the store stays stopped
            await fresh.append_event(marker("b.after"))
            kinds = [e.kind for e in fresh.reader.events()]
        stale.close()  # gives up nothing: the run is host-b's, and host-b closed cleanly
        assert kinds.count("a.before") == 1 and "a.after" not in kinds and kinds[-1] == "b.after"
        reader = open_reader(run_dir, RUN)
        try:
            run = reader.run()
            assert run.status == "running" and run.owner is None and run.owner_token == 2
        finally:
            reader.close()

    asyncio.run(scene())


def test_a_host_name_that_is_not_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_ENV, "../../etc/passwd")
    with pytest.raises(BadHost, match=re.escape("TEAMRT_HOST='../../etc/passwd' is not a host name")):
        host_identity()
    monkeypatch.setenv(HOST_ENV, "worker-3.example")
    assert host_identity() == "worker-3.example"
