"""Agent-loop benchmark: the runtime's cost per turn, every step persisted, against the store's floor.

The model is ``ScriptedModel`` with zero latency and the tool a trivial read-only one,
so what is timed is teamrt itself: build the request, persist the assistant turn with its
tool call (pending), journal the call (done), run it, persist the results as the next
user turn, ingest nothing, repeat. Every write is committed (WAL, ``synchronous=FULL``)
before the loop goes on.

- one agent: the time between successive model calls, p50 and p99;
- 50 agents at once on one run: turns per second, through the store's group commit;
- the floor, in the same run: one turn written with the standard library's sqlite3,
  as in ``benchmarks/store.py``.

Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from benchmarks.store import LEAD, floor_append, floor_connect, floor_store, make_turn
from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.runtime.agent import AgentEnv, AgentSpec
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.loop import AgentLoop
from teamrt.store import Store, create_store
from teamrt.store.engine import DB_ENV
from teamrt.tools.base import ToolContext, ToolResult
from teamrt.tools.permissions import Permissions

RUN = "bench"
AGENTS = 50
TARGET_P50_MS = 2.0
TARGET_TURNS_PER_S = 300.0


class Noop:
    """A read-only tool that answers at once."""

    name = "read"
    description = "read a file"
    input_schema: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}  # noqa: RUF012
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(f"contents of {input.get('path')}")


def scripted(turns: int, stamps: list[float]) -> ScriptedModel:
    def step(request: ModelRequest) -> Reply:
        stamps.append(time.perf_counter())
        return Reply().say("Reading the next file.").call("read", {"path": f"src/m{len(stamps)}.py"})

    return ScriptedModel([*([step] * (turns - 1)), Reply().say("Done.")])


async def run_agent(store: Store, name: str, workspace: Path, turns: int, stamps: list[float]) -> None:
    await store.add_agent(name, kind="team", model="scripted")
    epoch = await store.begin_epoch(name)
    spec = AgentSpec(
        name=name,
        model=scripted(turns, stamps),
        model_name="scripted",
        system="You are a benchmark agent.",
        tools={"read": Noop()},
        permissions=Permissions("bypassPermissions"),
    )
    env = AgentEnv(
        store=store,
        tools=ToolContext(workspace=workspace, run_dir=workspace),
        spill_dir=workspace / "spill",
        asker=policy_asker("deny"),
        budgets=[],
    )
    outcome = await AgentLoop(spec, env, epoch=epoch).run("Read every module.")
    assert outcome.status == "done", outcome


async def measure(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    (base / "teamrt").mkdir()
    store = create_store(base / "teamrt", RUN, task="benchmark", workdir=str(base))
    db = floor_connect(await floor_store(base / "floor"))
    try:
        stamps: list[float] = []
        await run_agent(store, "solo", base, args.turns, stamps)
        per_turn = [
            (b - a) * 1000 for a, b in zip(stamps[args.warmup :], stamps[args.warmup + 1 :], strict=False)
        ]
        floor = []
        for _ in range(len(per_turn)):
            turn = make_turn()
            start = time.perf_counter()
            floor_append(db, LEAD, 1, turn)
            floor.append((time.perf_counter() - start) * 1000)
        crowd: list[float] = []
        start = time.perf_counter()
        await asyncio.gather(
            *(run_agent(store, f"agent{i}", base, args.per_agent, crowd) for i in range(AGENTS))
        )
        seconds = time.perf_counter() - start
    finally:
        store.close()
        db.close()
    result: dict[str, Any] = {
        "p50_ms_1": round(statistics.median(per_turn), 3),
        "p99_ms_1": round(statistics.quantiles(per_turn, n=100)[98], 3),
        "turns_per_s_50": round(AGENTS * args.per_agent / seconds),
        "floor_p50_ms": round(statistics.median(floor), 3),
        "floor_p99_ms": round(statistics.quantiles(floor, n=100)[98], 3),
        "samples_1": len(per_turn),
        "turns_50": AGENTS * args.per_agent,
    }
    result["p50_vs_floor"] = round(result["p50_ms_1"] / result["floor_p50_ms"], 2)
    result["targets"] = {"p50_ms_1": f"<= {TARGET_P50_MS}", "turns_per_s_50": f">= {TARGET_TURNS_PER_S:.0f}"}
    result["targets_met"] = (
        result["p50_ms_1"] <= TARGET_P50_MS and result["turns_per_s_50"] >= TARGET_TURNS_PER_S
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument("--turns", type=int, default=600, help="turns of the single agent")
    parser.add_argument("--warmup", type=int, default=50, help="of those, the first ones not timed")
    parser.add_argument("--per-agent", type=int, default=40, help=f"turns of each of the {AGENTS} agents")
    args = parser.parse_args()
    os.environ.pop(DB_ENV, None)
    with tempfile.TemporaryDirectory(prefix="teamrt-bench-", dir=os.environ.get("TMPDIR")) as tmp:
        result = asyncio.run(measure(Path(tmp), args))
    print(f"{'':34}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'teamrt loop, one turn':34}{result['p50_ms_1']:>10}{result['p99_ms_1']:>10}")
    print(f"{'floor: a turn in stdlib sqlite3':34}{result['floor_p50_ms']:>10}{result['floor_p99_ms']:>10}")
    print(
        f"{AGENTS} agents at once: {result['turns_per_s_50']} turns/s (target >= {TARGET_TURNS_PER_S:.0f});"
        f" one agent p50 {result['p50_ms_1']} ms per turn (target <= {TARGET_P50_MS}):"
        f" {'met' if result['targets_met'] else 'NOT met'}"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
