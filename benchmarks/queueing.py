"""Queue benchmark: runs through ``teamrt worker`` processes on one machine; recovery from a killed worker.

(Run as ``benchmarks/queue.py``, a shim: a script named ``queue.py`` shadows the standard library's
``queue``; see that file.)

The baseline, in the same run: the same runs started by hand (``teamrt run``, each in its own clone
and SQLite store), as many at a time as one worker has slots; ``queue_over_direct`` is the queue's
throughput on one worker over it (what the queue costs), ``two_over_one`` what a second worker adds.

On a throwaway PostgreSQL server (``teamrt.testing.pgserver``; exits 2 with one line when
PostgreSQL is not installed), a fleet (``teamrt.testing.fleet``: one database, one home, a
bare repository as the remote, workers with distinct ``TEAMRT_HOST``) runs ``--runs``
sim runs on one worker, then ``--runs`` more on two, each run a lead and one worktree
coder whose fix merges and is pushed. Then, ``--kills`` times, a run's worker is
killed (SIGKILL) mid-run and the time until another worker starts its next attempt is
measured; each such run is checked against an uninterrupted one (``teamrt.testing.chaos``).

``lost`` counts runs that did not end done or, after a kill, lost mail or work;
``duplicated`` counts runs resumed without a kill, or with mail or work doubled.
Prints one line a phase, then one JSON object as the last line with ``--json``; keys
``runs``, ``workers``, ``slots``, ``runs_per_min_direct``, ``runs_per_min_1``, ``runs_per_min_2``,
``queue_over_direct``, ``two_over_one``, ``recovery_s_p50``, ``lost``, ``duplicated``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Row, select
from sqlalchemy.sql import Executable

from teamrt.models import BLOCK_ENV
from teamrt.queue.connect import queue_engine
from teamrt.store import queue_tables as q
from teamrt.store import tables as t
from teamrt.testing import chaos
from teamrt.testing.fleet import PROMPT, TEAM, Fleet
from teamrt.testing.pgserver import NoServer, PgServer

ISOLATED: dict[str, str | None] = {BLOCK_ENV: "1", "ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None}
T = TypeVar("T")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per throughput phase (default: 3)")
    parser.add_argument("--slots", type=int, default=2, help="slots per worker (default: 2)")
    parser.add_argument("--kills", type=int, default=1, help="workers killed mid-run (default: 1)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    args = parser.parse_args()
    try:
        server = PgServer().start()
    except NoServer as e:
        print(f"queue benchmark: {e}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="teamrt-queue-bench-"))
    fleet: Fleet | None = None
    try:
        url = server.create_database("bench")
        _migrate(url)
        fleet = Fleet.create(root, url, dict(ISOLATED))
        os.environ |= {"TEAMRT_DB": url, "TEAMRT_HOME": str(fleet.home)}  # the checks read the runs back
        result = _measure(fleet, args)
    finally:
        if fleet is not None:
            fleet.close()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    for key, value in result.items():
        print(f"{key:>16}: {value}")
    if args.json:
        print(json.dumps(result))
    return 0


def _migrate(url: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from teamrt.store import migrate

    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as conn:
        migrate.upgrade(conn, "benchmark")
    engine.dispose()


def _direct(fleet: Fleet, runs: int, at_once: int) -> float:
    """The baseline: the same runs started by hand (``teamrt run`` of the fleet's team in a clone of its
    remote, each on its own SQLite store), ``at_once`` at a time, as one worker's slots run them; runs per
    minute."""
    team = fleet.root / "direct-team.toml"
    team.write_text(TEAM)
    env = fleet.env()
    env.pop("TEAMRT_DB")
    started = time.monotonic()
    pending = list(range(runs))
    live: list[subprocess.Popen[bytes]] = []
    while pending or live:
        while pending and len(live) < at_once:
            project = fleet.root / f"direct-{pending.pop()}"
            subprocess.run(["git", "clone", "-q", str(fleet.remote), str(project)], check=True)
            live.append(subprocess.Popen(
                [sys.executable, "-m", "teamrt", "run", str(team), "--prompt", PROMPT, "--quiet"],
                cwd=project, env={**env, "TEAMRT_HOME": str(project / ".teamrt")},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
        for process in [p for p in live if p.poll() is not None]:
            if process.returncode != 0:
                raise RuntimeError(f"a run started by hand failed (exit {process.returncode})")
            live.remove(process)
        time.sleep(0.05)
    rate = round(runs / ((time.monotonic() - started) / 60), 1)
    print(f"by hand, {at_once} at a time: {runs} runs at {rate} runs/min", file=sys.stderr)
    return rate


def _measure(fleet: Fleet, args: argparse.Namespace) -> dict[str, object]:
    lost = duplicated = 0
    direct = _direct(fleet, args.runs, args.slots)
    fleet.start_worker("w1", args.slots)
    rates = []
    runs: list[str] = []
    for workers in (1, 2):
        if workers == 2:
            fleet.start_worker("w2", args.slots)
        started = time.monotonic()
        batch = [fleet.submit() for _ in range(args.runs)]
        ended = fleet.wait_ended(batch)
        rates.append(round(len(batch) / ((time.monotonic() - started) / 60), 1))
        print(f"{workers} worker(s): {len(batch)} runs at {rates[-1]} runs/min", file=sys.stderr)
        lost += sum(status != "done" for status in ended.values())
        duplicated += sum(_attempts(fleet, run) != 1 for run in batch)
        runs += batch
    reference = chaos.Reference(
        *chaos.observe("coding", fleet.home, runs[0], fleet.home / "runs" / runs[0] / "project"),
        hits={}, seconds=0.0,
    )  # fmt: skip
    recoveries = []
    for _ in range(args.kills):
        run = fleet.submit()
        host = _at_work(fleet, run)
        killed = time.time()
        fleet.signal_worker(host, signal.SIGKILL)
        fleet.workers.pop(host).wait()
        resumed = _wait(lambda run=run: _second_start(fleet, run))  # type: ignore[misc]
        recoveries.append(resumed - killed)
        print(f"killed {host}: run {run} resumed elsewhere after {recoveries[-1]:.1f} s", file=sys.stderr)
        fleet.start_worker(host, args.slots)
        status = fleet.wait_ended([run])[run]
        found = chaos.check(
            "coding", fleet.home, run, fleet.home / "runs" / run / "project", reference, kills=1
        )
        lost += (status != "done") or bool(found.lost or found.differences)
        duplicated += bool(found.duplicated or found.twice)
    return {
        "runs": 2 * args.runs, "workers": 2, "slots": args.slots, "runs_per_min_direct": direct,
        "runs_per_min_1": rates[0], "runs_per_min_2": rates[1],
        "queue_over_direct": round(rates[0] / direct, 2), "two_over_one": round(rates[1] / rates[0], 2),
        "lost": lost, "duplicated": duplicated,
        "recovery_s_p50": round(statistics.median(recoveries), 1) if recoveries else None,
    }  # fmt: skip


def _attempts(fleet: Fleet, run: str) -> int:
    return len(_query(fleet, select(q.run_jobs.c.attempt).where(q.run_jobs.c.run_id == run)))


def _second_start(fleet: Fleet, run: str) -> float | None:
    rows = _query(
        fleet, select(q.run_jobs.c.started_at).where(q.run_jobs.c.run_id == run, q.run_jobs.c.attempt == 2)
    )
    return float(rows[0][0]) if rows and rows[0][0] is not None else None


def _at_work(fleet: Fleet, run: str) -> str:
    """The host of the worker running ``run``, once a coder's worktree exists."""

    def owner() -> str | None:
        rows = _query(fleet, select(t.runs.c.owner_host).where(t.runs.c.id == run))
        worktrees = fleet.home / "runs" / run / "worktrees"
        if rows and rows[0][0] and worktrees.is_dir() and any(worktrees.iterdir()):
            return str(rows[0][0])
        return None

    return _wait(owner)


def _wait(check: Callable[[], T | None], timeout: float = 300.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError("the fleet did not get there in time")
        time.sleep(0.05)


def _query(fleet: Fleet, statement: Executable) -> list[Row[Any]]:
    engine = queue_engine(fleet.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(statement).all())
    finally:
        engine.dispose()


if __name__ == "__main__":
    os.environ.pop("TEAMRT_DB", None)
    sys.exit(main())
