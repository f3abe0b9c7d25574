"""A queued run's child fences itself: its worker's pulse pipe closing kills its tools, then the child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, select, update
from sqlalchemy.pool import NullPool

from teamrt.queue.fence import FENCED_EXIT, PULSE_FD_ENV
from teamrt.store import ops
from teamrt.store import tables as t
from teamrt.testing.pgserver import PgServer
from tests.helpers.pg import PG_TEMPLATE
from tests.helpers.waiting import within

CHILD = """
import subprocess, sys, time
from teamrt.queue.fence import start_fence
start_fence("postgresql+psycopg://nobody@127.0.0.1:1/none", "r1")
tool = subprocess.Popen(["sleep", "300"], start_new_session=True)  # a tool in a group of its own
open(sys.argv[1], "w").write(str(tool.pid))
time.sleep(300)
"""


def test_a_child_whose_worker_is_gone_kills_its_tools_and_exits(tmp_path: Path) -> None:
    read, write = os.pipe()
    told = tmp_path / "tool.pid"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(told)], pass_fds=(read,), stderr=subprocess.PIPE, text=True,
        env={**os.environ, PULSE_FD_ENV: str(read)},
    )  # fmt: skip
    os.close(read)
    try:
        deadline = time.monotonic() + 60
        while not told.exists() or not told.read_text():
            assert time.monotonic() < deadline and child.poll() is None, "the child started its tool"
            time.sleep(0.05)
        tool = int(told.read_text())
        os.write(write, b".")
        os.close(write)  # the worker died
        assert within(30, child.wait) == FENCED_EXIT
        assert child.stderr is not None and "its worker is gone" in child.stderr.read()
        assert not Path(f"/proc/{tool}").exists() or b") Z" in Path(f"/proc/{tool}/stat").read_bytes()
    finally:
        child.kill()
        child.wait()


def test_a_child_whose_worker_is_gone_hands_its_lease_back(tmp_path: Path, pg_server: PgServer) -> None:
    """So that the sweeper need not wait for the lease to go stale: the owner is cleared and the token bumped
    (the dying child's own writer can write no more)."""
    url = pg_server.create_database("fence", PG_TEMPLATE)
    engine = create_engine(url, poolclass=NullPool)
    read, write = os.pipe()
    told = tmp_path / "tool.pid"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.replace("postgresql+psycopg://nobody@127.0.0.1:1/none", url), str(told)],
        pass_fds=(read,), env={**os.environ, PULSE_FD_ENV: str(read), "TEAMRT_HOST": "fencing"},
    )  # fmt: skip
    os.close(read)
    try:
        with engine.connect() as conn, conn.begin():
            ops.insert_run(conn, "r1", task="t", workdir=str(tmp_path), base_head=None, settings={},
                           budget_tokens=None, budget_usd=None)  # fmt: skip
            conn.execute(update(t.runs).values(owner_host="fencing", owner_pid=child.pid, owner_token=5,
                                               heartbeat_at=time.time()))  # fmt: skip
        deadline = time.monotonic() + 60
        while not told.exists() or not told.read_text():
            assert time.monotonic() < deadline and child.poll() is None, "the child started its tool"
            time.sleep(0.05)
        os.close(write)
        assert within(30, child.wait) == FENCED_EXIT
        with engine.connect() as conn:
            row = conn.execute(select(t.runs.c.owner_host, t.runs.c.owner_token)).one()
        assert (row.owner_host, row.owner_token) == (None, 6)
    finally:
        child.kill()
        child.wait()
        engine.dispose()
        pg_server.drop_database("fence")
