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
one minute to the next.

Then the same on PostgreSQL, beside SQLite's figures: a throwaway server
(``teamrt.testing.pgserver``) started for the run, durable (``fsync=on``) as a
production server is, so its commits pay a flush as SQLite's do and group commit
has something to share. teamrt's ``Store`` reaches it through ``TEAMRT_DB``, with
every write transaction's lease check; its floor is the same rows written with
raw psycopg on one connection, one transaction per turn (``SELECT`` the next seq,
the inserts, the two usage updates, ``COMMIT``). Each has a database of its
own on the server, and the series alternate in blocks as on SQLite. Keys
``pg_*``; where PostgreSQL is not installed, ``pg_skipped`` says why and the
SQLite figures stand alone. ``--no-pg`` skips it on purpose.

Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from teamrt.events import EventKind
from teamrt.store import NewEvent, Store, ToolUse, Usage, create_store
from teamrt.store.engine import BUSY_TIMEOUT_MS, DB_ENV, DB_FILE
from teamrt.testing.pgserver import NoServer, PgServer

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
    # "turn": a kind no run records (the event is measured, not read); NewEvent takes an EventKind
    event = NewEvent(
        cast(EventKind, "turn"), {"seq_hint": n, "tools": ["read", "bash"], "stop_reason": "tool_use"}
    )
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


FloorAppend = Callable[[str, int, Turn], None]
"""One turn written by a floor, on its own connection: agent, epoch, turn."""


async def paired_latency(
    store: Store, epoch: int, floor_append: FloorAppend, blocks: int, block: int, warmup: int
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
            floor_append(LEAD, 1, turn)  # blocks the loop: that is the floor
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


def floor_throughput(floor_append: FloorAppend, n: int) -> float:
    """Turns per second of one connection committing turn after turn."""
    turns = [make_turn() for _ in range(n)]
    start = time.perf_counter()
    for turn in turns:
        floor_append(LEAD, 1, turn)
    return n / (time.perf_counter() - start)


# -- PostgreSQL: teamrt's Store through TEAMRT_DB, and raw psycopg as the floor ------------


def pg_floor_append(conn: Any, agent: str, epoch: int, turn: Turn) -> None:
    """One turn in one transaction on a psycopg connection (autocommit off), as ``ops.append_turn``
    writes it on PostgreSQL."""
    now = time.time()
    deltas = [getattr(turn.usage, c) for c in USAGE]
    with conn.cursor() as cur:
        cur.execute(PG_NEXT_SEQ, (RUN, agent))
        seq = cur.fetchone()[0]
        cur.execute(
            PG_INSERT_TURN,
            (RUN, agent, seq, epoch, "assistant", json.dumps(turn.content), "tool_use", "sim", now, *deltas),
        )
        turn_id = cur.fetchone()[0]
        cur.executemany(
            PG_INSERT_TOOL_CALL,
            [
                (RUN, u.id, agent, turn_id, epoch, u.name, json.dumps(u.input), u.read_only, "pending",
                 "null", False, now, None, None)
                for u in turn.tool_uses
            ],
        )  # fmt: skip
        cur.execute(PG_ADD_AGENT_USAGE, (*deltas, RUN, agent))
        cur.execute(PG_ADD_RUN_USAGE, (*deltas, RUN))
        cur.execute(PG_INSERT_EVENT, (RUN, time.time(), agent, turn.event.kind, json.dumps(turn.event.data)))
    conn.commit()


PG_NEXT_SEQ, PG_INSERT_TOOL_CALL, PG_ADD_AGENT_USAGE, PG_ADD_RUN_USAGE, PG_INSERT_EVENT = (
    q.replace("?", "%s") for q in (NEXT_SEQ, INSERT_TOOL_CALL, ADD_AGENT_USAGE, ADD_RUN_USAGE, INSERT_EVENT)
)
PG_INSERT_TURN = INSERT_TURN.replace("?", "%s") + " RETURNING id"


async def pg_new_run(run_dir: Path, task: str) -> tuple[Store, int]:
    """A run made by teamrt in the database ``TEAMRT_DB`` names, with the lead agent in its first epoch."""
    run_dir.mkdir()
    store = create_store(run_dir, RUN, task=task, workdir=str(run_dir))
    try:
        await store.add_agent(LEAD, kind="lead", model="sim")
        return store, await store.begin_epoch(LEAD)
    except BaseException:
        store.close()
        raise


def psycopg_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def analyze(*urls: str) -> None:
    """``ANALYZE`` the databases, as autovacuum does a minute or so after a table grows: a fresh database's
    statistics say its tables are empty, and on them the planner reads every turn of an agent to find
    the next seq (``max(seq)``) instead of the index's last entry, a cost that grows with the transcript."""
    import psycopg

    for url in urls:
        with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
            conn.execute("ANALYZE")


async def pg_measure(base: Path, server: PgServer, args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    floor_url = os.environ[DB_ENV] = server.create_database("floor")
    (await pg_new_run(base / "pg-floor", "benchmark floor"))[0].close()
    conn = psycopg.connect(psycopg_url(floor_url))
    ours_url = os.environ[DB_ENV] = server.create_database("teamrt")
    store, epoch = await pg_new_run(base / "pg-teamrt", "benchmark")
    try:
        floor = functools.partial(pg_floor_append, conn)
        analyze(floor_url, ours_url)
        ours, floor_ms = await paired_latency(store, epoch, floor, args.pg_blocks, args.block, args.warmup)
        analyze(floor_url, ours_url)
        turns, seconds, commits = await throughput(store, args.pg_per_writer)
        floor_tp = floor_throughput(floor, args.pg_floor_n)
    finally:
        store.close()
        conn.close()
        os.environ.pop(DB_ENV, None)
    result: dict[str, Any] = {
        "pg_append_p50_ms": round(statistics.median(ours), 3),
        "pg_append_p99_ms": round(statistics.quantiles(ours, n=100)[98], 3),
        "pg_floor_p50_ms": round(statistics.median(floor_ms), 3),
        "pg_floor_p99_ms": round(statistics.quantiles(floor_ms, n=100)[98], 3),
        "pg_throughput_per_s": round(turns / seconds),
        "pg_commits": commits,
        "pg_mean_group": round(turns / commits, 1),
        "pg_floor_throughput_per_s": round(floor_tp),
        "pg_samples": len(ours),
    }
    result["pg_ratio_p50"] = round(result["pg_append_p50_ms"] / result["pg_floor_p50_ms"], 2)
    result["pg_ratio_throughput"] = round(
        result["pg_throughput_per_s"] / result["pg_floor_throughput_per_s"], 2
    )
    return result


def postgres(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The ``pg_*`` figures, or ``pg_skipped`` with the reason."""
    if args.no_pg:
        return {"pg_skipped": "--no-pg"}
    try:
        server = PgServer(durable=True)
    except NoServer as e:
        return {"pg_skipped": str(e)}
    started = time.monotonic()
    with server:
        result = asyncio.run(pg_measure(base, server, args))
    return {**result, "pg_fsync": "on", "pg_seconds": round(time.monotonic() - started, 1)}


# -- report ------------------------------------------------------------------


async def measure(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    db = floor_connect(await floor_store(base / "floor"))
    (base / "teamrt").mkdir()
    store = create_store(base / "teamrt", RUN, task="benchmark", workdir=str(base))
    try:
        await store.add_agent(LEAD, kind="lead", model="sim")
        epoch = await store.begin_epoch(LEAD)
        floor = functools.partial(floor_append, db)
        ours, floor_ms = await paired_latency(store, epoch, floor, args.blocks, args.block, args.warmup)
        turns, seconds, commits = await throughput(store, args.per_writer)
        floor_tp = floor_throughput(floor, args.floor_n)
    finally:
        store.close()
        db.close()

    result: dict[str, Any] = {
        "p50_ms": round(statistics.median(ours), 3),
        "p99_ms": round(statistics.quantiles(ours, n=100)[98], 3),
        "floor_p50_ms": round(statistics.median(floor_ms), 3),
        "floor_p99_ms": round(statistics.quantiles(floor_ms, n=100)[98], 3),
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
    parser.add_argument("--no-pg", action="store_true", help="SQLite only: skip the PostgreSQL figures")
    parser.add_argument("--pg-blocks", type=int, default=8, help="latency blocks per series on PostgreSQL")
    parser.add_argument("--pg-per-writer", type=int, default=40, help="turns per writer on PostgreSQL")
    parser.add_argument(
        "--pg-floor-n", type=int, default=1000, help="turns for PostgreSQL's floor's throughput"
    )
    args = parser.parse_args()

    os.environ.pop(DB_ENV, None)  # one SQLite file per run, in the temporary directory
    with tempfile.TemporaryDirectory(prefix="teamrt-bench-", dir=os.environ.get("TMPDIR")) as tmp:
        result = asyncio.run(measure(Path(tmp), args))
        result.update(postgres(Path(tmp), args))

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
    if "pg_skipped" in result:
        print(f"PostgreSQL skipped: {result['pg_skipped']}")
    else:
        print(f"{'PostgreSQL (fsync on)':24}{'p50 ms':>10}{'p99 ms':>10}{'turns/s':>10}")
        print(
            f"{'teamrt append_turn':24}{result['pg_append_p50_ms']:>10}{result['pg_append_p99_ms']:>10}"
            f"{result['pg_throughput_per_s']:>10}  ({WRITERS} writers, {result['pg_commits']} commits, "
            f"{result['pg_mean_group']} turns each)"
        )
        print(
            f"{'floor (raw psycopg)':24}{result['pg_floor_p50_ms']:>10}{result['pg_floor_p99_ms']:>10}"
            f"{result['pg_floor_throughput_per_s']:>10}  (1 connection, a commit per turn)"
        )
        print(f"p50 {result['pg_ratio_p50']}x floor, {result['pg_ratio_throughput']}x floor's turns/s")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
