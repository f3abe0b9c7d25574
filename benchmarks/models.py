"""Model-path benchmark: the simulator's overhead on a 20,000-token request, through the real SDK.

Measured in one run, from one asyncio loop, with teamrt's ``anthropic`` provider
(``AsyncAnthropic``, streaming) as the client in both series:

- sim: ``SimServer`` answering a realistic 20,000-token request (system, tools and
  a 31-message conversation whose last message changes each time): validation,
  cache accounting over every block, the policy, and the streamed response.
- floor: a trivial server on the same loopback HTTP layer that reads the request
  and returns one fixed minimal stream. What remains there is the SDK's own cost
  (building and sending 80 KB, parsing the events) plus the loopback round trip.

The difference of the two medians is the simulator's overhead. Requests alternate
in blocks between the two series, so drift on the shared machine hits both alike.
Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from teamrt.models import ModelRequest, Reply
from teamrt.models.anthropic_api import AnthropicModel
from teamrt.models.params import request_params
from teamrt.models.tokens import request_tokens
from teamrt.settings import ModelSettings
from teamrt.sim import SimServer
from teamrt.sim.http import HttpRequest, HttpResponse, LoopbackServer
from teamrt.sim.respond import sse

TARGET_OVERHEAD_P50_MS = 5.0
REQUEST_TOKENS = 20_000
WORDS = ("the", "agent", "reads", "module", "tests", "cache", "prefix", "merge", "queue", "worktree", "mail")

FLOOR_EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {"id": "msg_floor", "type": "message", "role": "assistant",
     "model": "floor", "content": [], "stop_reason": None, "stop_sequence": None,
     "usage": {"input_tokens": 1, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
     "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]  # fmt: skip
FLOOR_BODY = b"".join(sse(e) for e in FLOOR_EVENTS)


async def floor_handler(request: HttpRequest, response: HttpResponse) -> None:
    await response.start_stream({"content-type": "text/event-stream", "request-id": "req_floor"})
    await response.chunk(FLOOR_BODY, flush=False)
    await response.end_stream()


def prose(words: int, seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(words))


def make_request(turn: int) -> ModelRequest:
    """About 20,000 tokens: a long system prompt, 5 tools, 31 messages; the last one names ``turn``."""
    tools = [
        {"name": f"tool_{i}", "description": prose(120, i),
         "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
        for i in range(5)
    ]  # fmt: skip
    messages: list[dict[str, Any]] = []
    for i in range(29):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": prose(255, i)}]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Next step."}]})
    messages.append({"role": "user", "content": f"Turn {turn}: go on."})
    return ModelRequest(model="sim", system=prose(4700, 99), tools=tools, messages=messages, max_tokens=4096)


def reply(request: Any) -> Reply:
    return Reply().say("I will read the parser and its tests next.").call("tool_0", {"path": "src/parser.py"})


async def timed(model: AnthropicModel, request: ModelRequest) -> float:
    start = time.perf_counter()
    await model.complete(request)
    return (time.perf_counter() - start) * 1000


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    settings = ModelSettings(sdk_retries=0, stream_retries=0)
    sim = SimServer(default=reply)
    floor = LoopbackServer(floor_handler, name="teamrt-floor")
    ours_model = AnthropicModel("sim", api_key="bench", base_url=sim.url, settings=settings)
    floor_model = AnthropicModel("sim", api_key="bench", base_url=floor.url, settings=settings)
    ours: list[float] = []
    base: list[float] = []
    turn = 0
    try:
        for _ in range(args.warmup):
            turn += 1
            await timed(ours_model, make_request(turn))
            await timed(floor_model, make_request(turn))
        for _ in range(args.blocks):
            for series, model in ((ours, ours_model), (base, floor_model)):
                for _ in range(args.block):
                    turn += 1
                    series.append(await timed(model, make_request(turn)))
        cached = sim.calls[-1].cache_read
    finally:
        await ours_model.aclose()
        await floor_model.aclose()
        sim.close()
        floor.close()
    result: dict[str, Any] = {
        "p50_ms": round(statistics.median(ours), 3),
        "p99_ms": round(statistics.quantiles(ours, n=100)[98], 3),
        "http_floor_p50_ms": round(statistics.median(base), 3),
        "http_floor_p99_ms": round(statistics.quantiles(base, n=100)[98], 3),
        "request_tokens": request_tokens(request_params(make_request(0))),
        "cache_read_tokens": cached,
        "samples": len(ours),
    }
    result["overhead_p50_ms"] = round(result["p50_ms"] - result["http_floor_p50_ms"], 3)
    result["p50_vs_floor"] = round(result["p50_ms"] / result["http_floor_p50_ms"], 2)
    result["targets"] = {"overhead_p50_ms": f"<= {TARGET_OVERHEAD_P50_MS}"}
    result["targets_met"] = result["overhead_p50_ms"] <= TARGET_OVERHEAD_P50_MS
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument("--blocks", type=int, default=10, help="blocks per series, alternating")
    parser.add_argument("--block", type=int, default=30, help="requests per block")
    parser.add_argument("--warmup", type=int, default=20, help="requests per series before timing, discarded")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    print(f"{'':32}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'sim (teamrt simulator)':32}{result['p50_ms']:>10}{result['p99_ms']:>10}")
    print(
        f"{'floor (fixed minimal response)':32}"
        f"{result['http_floor_p50_ms']:>10}{result['http_floor_p99_ms']:>10}"
    )
    print(
        f"{result['samples']} requests of {result['request_tokens']} tokens per series"
        f" through AsyncAnthropic (streaming); sim read {result['cache_read_tokens']} from its cache"
        " on the last one. "
        f"Overhead p50 {result['overhead_p50_ms']} ms (target <= {TARGET_OVERHEAD_P50_MS}): "
        f"{'met' if result['targets_met'] else 'NOT met'}"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
