"""Run ownership: a live owner is exclusive, a dead one's run is taken over, the heartbeat tells which."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teamrt.store import RunOwned, create_store, open_reader, open_store, owner_alive

RUN = "r1"

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
        assert store.commits > commits, "the writer beat by itself"


def test_owner_on_another_machine_is_refused_while_its_heartbeat_is_fresh(run_dir: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()
    db = run_dir / "run.db"

    def pretend_owner(heartbeat_age: float) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute(
                "UPDATE runs SET owner_host='build-7', owner_pid=99, owner_start_time=1, owner_since=0,"
                " heartbeat_at=?",
                (time.time() - heartbeat_age,),
            )

    pretend_owner(1.0)
    with pytest.raises(RunOwned, match="owned by pid 99 on build-7, heartbeat 1 s ago"):
        open_store(run_dir, RUN)
    pretend_owner(3600.0)
    with open_store(run_dir, RUN) as store:
        assert store.reader.events()[-1].data["previous"] == {"host": "build-7", "pid": 99}
