"""Store benchmark: persisting a turn, alone and with 50 writers, against the sqlite3 floor.

Measured in one run, on the same disk:

- teamrt: ``Store.append_turn`` of a realistic turn (about 2 KB of content, two tool
  calls, one event, usage), awaited from an asyncio loop until it is committed.
- floor: the same rows written with the standard library's sqlite3 on one connection,
  with teamrt's pragmas (WAL, ``synchronous=FULL``): ``BEGIN IMMEDIATE``, next seq, the
  turn, its two tool calls, the agent's and the run's usage, the event, ``COMMIT``.
  That is what any durable transcript in SQLite must pay.
- throughput: 50 asyncio tasks, each appending turns to its own agent as fast as its
  commits return, through the writer's group commit; the floor's reference is one
  connection committing turn after turn.

Latencies alternate in blocks of the two series, since this disk's fsync time drifts from
one minute to the next. Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.store import NewEvent, Store, ToolUse, Usage, create_store
from teamrt.store.engine import BUSY_TIMEOUT_MS, DB_ENV, DB_FILE

RUN = "bench"
LEAD = "lead"
WRITERS = 50
TARGET_P50_MS = 1.0
TARGET_P50_RATIO = 3.0
TARGET_TURNS_PER_S = 2000.0
TEXT_CHARS = 1800  # with the two tool_use blocks, a turn's content is about 2 KB of JSON

SENTENCES = (
    "I read the module and the tests that cover it before changing anything.",
    "The failing case is the resume path, where a call journaled as running has no process.",
    "The writer commits a group only after every operation in it has run without raising.",
    "A read-only tool may run again after a crash, so its journal entry can move to running twice.",
    "Next I will run the focused tests, then the whole suite, and compare the timings.",
    "The schema keeps run_id on every table, so one server database can hold many runs.",
    "Nothing here needs a new dependency; the standard library and SQLAlchemy suffice.",
    "I will keep the change small and explain in the commit message why it is safe.",
)

_ids = itertools.count()


@dataclass(frozen=True, slots=True)
class Turn:
    """One realistic assistant turn, built before the clock starts."""

    content: list[Any]
    usage: Usage
    tool_uses: tuple[ToolUse, ToolUse]
    event: NewEvent


def make_turn() -> Turn:
    """A turn of about 2 KB: prose that differs a little each time, a read and a bash call."""
    n = next(_ids)
    text = f"Turn {n}. "
    i = n
    while len(text) < TEXT_CHARS:
        text += SENTENCES[i % len(SENTENCES)] + " "
        i += 3
    text = text[:TEXT_CHARS]
    read = ToolUse(f"toolu_{n:08d}_read", "read", {"path": "teamrt/store/ops.py", "offset": n % 400}, True)
    bash = ToolUse(
        f"toolu_{n:08d}_bash",
        "bash",
        {"command": f".venv/bin/pytest -q tests/test_store.py -k case_{n % 97}", "timeout": 120},
        False,
    )
    content: list[Any] = [{"type": "text", "text": text}] + [
        {"type": "tool_use", "id": use.id, "name": use.name, "input": use.input} for use in (read, bash)
    ]
    usage = Usage(
        input_tokens=1200 + n % 300,
        output_tokens=350 + n % 50,
        cache_creation_tokens=0,
        cache_read_tokens=18_000 + n % 1000,
        cost_usd=0.0123,
    )
    event = NewEvent("turn", {"seq_hint": n, "tools": ["read", "bash"], "stop_reason": "tool_use"})
    return Turn(content, usage, (read, bash), event)


async def append(store: Store, agent: str, epoch: int, turn: Turn) -> None:
    await store.append_turn(
        agent,
        epoch=epoch,
        role="assistant",
        content=turn.content,
        stop_reason="tool_use",
        model="sim",
        usage=turn.usage,
        tool_uses=turn.tool_uses,
        events=[turn.event],
    )


# -- floor: the same rows through the standard library's sqlite3 ------------

USAGE = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens", "cost_usd")
NEXT_SEQ = "SELECT coalesce(max(seq), 0) + 1 FROM turns WHERE run_id = ? AND agent = ?"
INSERT_TURN = (
    "INSERT INTO turns (run_id, agent, seq, epoch, role, content, stop_reason, model, created_at, "
    + ", ".join(USAGE)
    + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_TOOL_CALL = (
    "INSERT INTO tool_calls (run_id, id, agent, turn_id, epoch, name, input, read_only, status, "
    "result, is_error, created_at, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
ADD_AGENT_USAGE = (
    "UPDATE agents SET " + ", ".join(f"{c} = {c} + ?" for c in USAGE) + " WHERE run_id = ? AND name = ?"
)
ADD_RUN_USAGE = "UPDATE runs SET " + ", ".join(f"{c} = {c} + ?" for c in USAGE) + " WHERE id = ?"
INSERT_EVENT = "INSERT INTO events (run_id, at, agent, kind, data) VALUES (?, ?, ?, ?, ?)"


def floor_connect(path: Path) -> sqlite3.Connection:
    """A connection set up as teamrt's writer is: autocommit off to sqlite3, WAL, synchronous=FULL."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def floor_append(db: sqlite3.Connection, agent: str, epoch: int, turn: Turn) -> None:
    """One turn in one transaction, as ``ops.append_turn`` writes it."""
    now = time.time()
    deltas = [getattr(turn.usage, c) for c in USAGE]
    db.execute("BEGIN IMMEDIATE")
    seq = db.execute(NEXT_SEQ, (RUN, agent)).fetchone()[0]
    turn_id = db.execute(
        INSERT_TURN,
        (RUN, agent, seq, epoch, "assistant", json.dumps(turn.content), "tool_use", "sim", now, *deltas),
    ).lastrowid
    db.executemany(
        INSERT_TOOL_CALL,
        [
            (
                RUN,
                u.id,
                agent,
                turn_id,
                epoch,
                u.name,
                json.dumps(u.input),
                u.read_only,
                "pending",
                "null",  # SQLAlchemy's JSON column stores None as JSON null, not SQL NULL
                False,
                now,
                None,
                None,
            )
            for u in turn.tool_uses
        ],
    )
    db.execute(ADD_AGENT_USAGE, (*deltas, RUN, agent))
    db.execute(ADD_RUN_USAGE, (*deltas, RUN))
    db.execute(INSERT_EVENT, (RUN, time.time(), agent, turn.event.kind, json.dumps(turn.event.data)))
    db.execute("COMMIT")


async def floor_store(run_dir: Path) -> Path:
    """A store file made by teamrt, at its schema with the lead agent, then handed to sqlite3."""
    run_dir.mkdir()
    store = create_store(run_dir, RUN, task="benchmark floor", workdir=str(run_dir))
    try:
        await store.add_agent(LEAD, kind="lead", model="sim")
        await store.begin_epoch(LEAD)
    finally:
        store.close()
    return run_dir / DB_FILE


# -- the measurements ---------------------------------------------------------


async def paired_latency(
    store: Store, epoch: int, db: sqlite3.Connection, blocks: int, block: int, warmup: int
) -> tuple[list[float], list[float]]:
    """Latency samples (ms) of teamrt and of the floor, taken in alternating blocks."""
    ours: list[float] = []
    floor: list[float] = []

    async def ours_block(count: int, into: list[float] | None) -> None:
        for _ in range(count):
            turn = make_turn()
            t0 = time.perf_counter()
            await append(store, LEAD, epoch, turn)
            if into is not None:
                into.append((time.perf_counter() - t0) * 1e3)

    async def floor_block(count: int, into: list[float] | None) -> None:
        for _ in range(count):
            turn = make_turn()
            t0 = time.perf_counter()
            floor_append(db, LEAD, 1, turn)  # blocks the loop: that is the floor
            if into is not None:
                into.append((time.perf_counter() - t0) * 1e3)

    await ours_block(warmup, None)
    await floor_block(warmup, None)
    for b in range(blocks):
        if b % 2:
            await floor_block(block, floor)
            await ours_block(block, ours)
        else:
            await ours_block(block, ours)
            await floor_block(block, floor)
    return ours, floor


async def throughput(store: Store, per_writer: int) -> tuple[int, float, int]:
    """Turns, seconds and group commits for 50 writers, each on its own agent, all at once."""
    names = [f"w{i:02d}" for i in range(WRITERS)]

    async def ready(name: str) -> int:
        await store.add_agent(name, kind="team", model="sim", parent=LEAD)
        return await store.begin_epoch(name)

    epochs = await asyncio.gather(*(ready(name) for name in names))
    turns = {name: [make_turn() for _ in range(per_writer)] for name in names}

    async def writer(name: str, epoch: int) -> None:
        for turn in turns[name]:
            await append(store, name, epoch, turn)

    commits = store.commits
    start = time.perf_counter()
    await asyncio.gather(*(writer(name, epoch) for name, epoch in zip(names, epochs, strict=True)))
    seconds = time.perf_counter() - start
    return WRITERS * per_writer, seconds, store.commits - commits


def floor_throughput(db: sqlite3.Connection, n: int) -> float:
    """Turns per second of one connection committing turn after turn."""
    turns = [make_turn() for _ in range(n)]
    start = time.perf_counter()
    for turn in turns:
        floor_append(db, LEAD, 1, turn)
    return n / (time.perf_counter() - start)


# -- report ------------------------------------------------------------------


async def measure(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    db = floor_connect(await floor_store(base / "floor"))
    (base / "teamrt").mkdir()
    store = create_store(base / "teamrt", RUN, task="benchmark", workdir=str(base))
    try:
        await store.add_agent(LEAD, kind="lead", model="sim")
        epoch = await store.begin_epoch(LEAD)
        ours, floor = await paired_latency(store, epoch, db, args.blocks, args.block, args.warmup)
        turns, seconds, commits = await throughput(store, args.per_writer)
        floor_tp = floor_throughput(db, args.floor_n)
    finally:
        store.close()
        db.close()

    result: dict[str, Any] = {
        "p50_ms": round(statistics.median(ours), 3),
        "p99_ms": round(statistics.quantiles(ours, n=100)[98], 3),
        "floor_p50_ms": round(statistics.median(floor), 3),
        "floor_p99_ms": round(statistics.quantiles(floor, n=100)[98], 3),
        "turns_per_s_50": round(turns / seconds),
        "commits_50": commits,
        "mean_group_50": round(turns / commits, 1),
        "floor_turns_per_s": round(floor_tp),
        "samples": len(ours),
        "content_bytes": len(json.dumps(make_turn().content)),
    }
    result["p50_vs_floor"] = round(result["p50_ms"] / result["floor_p50_ms"], 2)
    result["targets"] = {
        "p50_ms": f"<= {TARGET_P50_MS}",
        "p50_vs_floor": f"<= {TARGET_P50_RATIO}",
        "turns_per_s_50": f">= {TARGET_TURNS_PER_S:.0f}",
    }
    result["targets_met"] = (
        result["p50_ms"] <= TARGET_P50_MS
        and result["p50_vs_floor"] <= TARGET_P50_RATIO
        and result["turns_per_s_50"] >= TARGET_TURNS_PER_S
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument("--blocks", type=int, default=20, help="latency blocks per series, alternating")
    parser.add_argument("--block", type=int, default=100, help="turns per latency block")
    parser.add_argument("--warmup", type=int, default=50, help="turns per series before timing, discarded")
    parser.add_argument(
        "--per-writer", type=int, default=200, help=f"turns per writer, {WRITERS} writers at once"
    )
    parser.add_argument("--floor-n", type=int, default=5000, help="turns for the floor's throughput")
    args = parser.parse_args()

    os.environ.pop(DB_ENV, None)  # one SQLite file per run, in the temporary directory
    with tempfile.TemporaryDirectory(prefix="teamrt-bench-", dir=os.environ.get("TMPDIR")) as tmp:
        result = asyncio.run(measure(Path(tmp), args))

    print(f"{'':24}{'p50 ms':>10}{'p99 ms':>10}{'turns/s':>10}")
    print(
        f"{'teamrt append_turn':24}{result['p50_ms']:>10}{result['p99_ms']:>10}"
        f"{result['turns_per_s_50']:>10}  ({WRITERS} writers, {result['commits_50']} commits, "
        f"{result['mean_group_50']} turns each)"
    )
    print(
        f"{'floor (stdlib sqlite3)':24}{result['floor_p50_ms']:>10}{result['floor_p99_ms']:>10}"
        f"{result['floor_turns_per_s']:>10}  (1 connection, a commit per turn)"
    )
    print(
        f"{result['samples']} turns of {result['content_bytes']} bytes of content per series; "
        f"p50 {result['p50_ms']} ms (target <= {TARGET_P50_MS}), {result['p50_vs_floor']}x floor "
        f"(target <= {TARGET_P50_RATIO}), {result['turns_per_s_50']} turns/s with {WRITERS} writers "
        f"(target >= {TARGET_TURNS_PER_S:.0f}): {'met' if result['targets_met'] else 'NOT met'}"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
