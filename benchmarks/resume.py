"""Resume benchmark: a crashed run of 50 agents with 100 kept turns each, taken over and restarted.

A child process builds the run (a lead and 49 teammates, each with 100 turns,
all idle but the lead) and exits without ending it: a crash. This process,
with teamrt already imported, then times ``resume_run`` from its start to the
``run.resumed`` event, committed once every agent has been rebuilt from its
turns, given a new epoch and started again. The floor, in the same run: reading
every agent's turns from the store with the reader, which any resume must do.

Prints a table, then one JSON object as the last line with ``--json``; key
``resume_ms`` (target <= 1,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import teamrt.models.anthropic_api  # noqa: F401  - imports are not what is timed
from teamrt.runtime.teamrun import resume_run
from teamrt.store import create_store, open_reader
from teamrt.team import Role, Team, team_to_json

AGENTS = 50
TURNS = 100
TARGET_MS = 1_000.0
RUN = "20261122-000000-bnch"


def build(home: str) -> None:
    """The crashed run: made, filled, and left without an end (this process just exits)."""
    os.environ["TEAMRT_HOME"] = home
    lead = Role("lead", "lead", None, None, None, None, None)
    mate = Role("mate", "reviewer", None, None, None, None, None)
    team = Team(path=Path(home), name="bench", lead=lead, roles={"mate": mate}, max_agents=AGENTS + 1,
                    max_concurrent=AGENTS + 1)  # fmt: skip
    run_dir = Path(home) / "runs" / RUN
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, RUN, task="bench", workdir=home, settings={"team": team_to_json(team)})

    async def fill(name: str) -> None:
        for i in range(TURNS // 2):
            await store.append_turn(name, epoch=1, role="user", content=[{"type": "text", "text": f"do {i}"}])
            await store.append_turn(
                name, epoch=1, role="assistant", content=[{"type": "text", "text": f"done {i}"}]
            )

    async def go() -> None:
        await store.add_agent("lead", kind="lead", model="sim", role="lead")
        mates = [f"mate-{i}" for i in range(AGENTS - 1)]
        for name in mates:
            await store.add_agent(name, kind="team", model="sim", parent="lead", role="mate")
            await store.begin_epoch(name)
        await store.begin_epoch("lead")
        await asyncio.gather(*(fill(n) for n in ["lead", *mates]))
        for name in mates:
            await store.set_agent_status(name, "idle")
        await store.set_agent_status("lead", "running")

    asyncio.run(go())
    os._exit(0)  # no close, no end: the run is left as a crash leaves it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="teamrt-resume-") as home:
        started = time.monotonic()
        child = multiprocessing.get_context("fork").Process(target=build, args=(home,))
        child.start()
        child.join()
        built_s = time.monotonic() - started
        os.environ["TEAMRT_HOME"] = home
        run_dir = Path(home) / "runs" / RUN
        floor_start = time.perf_counter()
        reader = open_reader(run_dir, RUN)
        turns = sum(len(reader.turns(a.name)) for a in reader.agents())
        reader.close()
        floor_ms = (time.perf_counter() - floor_start) * 1000
        wall = time.time()
        summary = asyncio.run(resume_run(RUN))
        reader = open_reader(run_dir, RUN)
        resumed = [e.at for e in reader.events() if e.kind == "run.resumed"]
        epochs = {a.epoch for a in reader.agents()}
        reader.close()
    resume_ms = (resumed[0] - wall) * 1000
    print(f"built {AGENTS} agents x {TURNS} turns ({turns:,} turns) in {built_s:.1f} s")
    print(f"after the resume the run ended {summary.outcome.status}, every agent at epoch {sorted(epochs)}")
    print(f"resume to every agent running again: {resume_ms:.0f} ms (target <= {TARGET_MS:,.0f});"
          f" floor, reading every turn: {floor_ms:.0f} ms (x{resume_ms / floor_ms:.1f})")  # fmt: skip
    if args.json:
        print(json.dumps({
            "resume_ms": round(resume_ms, 1), "floor_read_turns_ms": round(floor_ms, 1),
            "resume_vs_floor": round(resume_ms / floor_ms, 2), "agents": AGENTS, "turns": turns,
            "target_ms": TARGET_MS, "met": resume_ms <= TARGET_MS,
        }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
