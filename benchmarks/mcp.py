"""MCP benchmark: a tool call through a stdio MCP server against calling the same function in-process.

- **through MCP**: ``mcp__bench__echo`` of tests/helpers/procs/mcp_server.py, started as a run starts it
  (in the sandbox when bubblewrap is installed, in a process group of its own), called as the agent loop calls
  a tool: ``McpTool.run``, a JSON-RPC request over the server's stdin and its answer over its stdout,
  the result turned into the tool's result.
- **in-process (the floor)**: the server's own ``echo`` function, called directly.

Both alternate call by call after an untimed warm-up. The overhead is the difference of the p50s.
Target: overhead p50 under 5 ms. Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from teamrt.mcp.config import McpConfig, parse_entry
from teamrt.mcp.servers import McpServers
from teamrt.tools.base import ToolContext

SERVER = Path(__file__).resolve().parents[1] / "tests" / "helpers" / "procs" / "mcp_server.py"
TARGET_MS = 5.0


async def measure(calls: int) -> dict[str, Any]:
    sys.path.insert(0, str(SERVER.parent))
    from mcp_server import echo  # type: ignore[import-not-found]  # a script beside the tests, on sys.path here

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        ctx = ToolContext(workspace=ws, run_dir=ws / ".teamrt" / "runs" / "bench")
        config = parse_entry(
            "bench", {"command": sys.executable, "args": [str(SERVER)]}, scope="team", source="-"
        )
        servers = McpServers(McpConfig({"bench": config}), ctx.confinement)
        began = time.perf_counter()
        await servers.prepare(["bench"])
        start_ms = (time.perf_counter() - began) * 1000
        state, error = servers.state("bench")
        if state != "running":
            raise SystemExit(f"the benchmark's server did not start: {error}")
        [tool] = [t for t in servers.tools(["bench"]) if t.name == "mcp__bench__echo"]
        try:
            for _ in range(20):  # warm-up
                await tool.run({"text": "warm"}, ctx)
            through, floor = [], []
            for i in range(calls):
                text = f"call {i}"
                began = time.perf_counter()
                result = await tool.run({"text": text}, ctx)
                through.append((time.perf_counter() - began) * 1000)
                assert result.content == text, result
                began = time.perf_counter()
                assert echo(text) == text
                floor.append((time.perf_counter() - began) * 1000)
        finally:
            await servers.close()
    p50, floor_p50 = statistics.median(through), statistics.median(floor)
    return {
        "calls": calls,
        "p50_ms": round(p50, 3),
        "p90_ms": round(sorted(through)[int(calls * 0.9)], 3),
        "floor_p50_ms": round(floor_p50, 4),
        "overhead_p50_ms": round(p50 - floor_p50, 3),
        "ratio": round(p50 / floor_p50, 1) if floor_p50 else None,
        "start_ms": round(start_ms, 1),
        "target_overhead_ms": TARGET_MS,
        "met": p50 - floor_p50 < TARGET_MS,
    }


def main() -> None:
    here = Path(__file__).resolve().parent  # this file is named mcp.py: it must not hide the mcp package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    args = parser.parse_args()
    result = asyncio.run(asyncio.wait_for(measure(args.calls), 55))
    print(f"server start and tool listing: {result['start_ms']:.0f} ms")
    print(f"{'':<22}{'p50 ms':>10}{'p90 ms':>10}")
    print(f"{'through stdio MCP':<22}{result['p50_ms']:>10.3f}{result['p90_ms']:>10.3f}")
    print(f"{'in-process (floor)':<22}{result['floor_p50_ms']:>10.4f}")
    print(
        f"overhead p50 {result['overhead_p50_ms']:.3f} ms (target < {TARGET_MS:g} ms: "
        f"{'met' if result['met'] else 'NOT met'}); {result['ratio']}x the in-process call"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
