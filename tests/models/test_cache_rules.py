"""The simulator's prompt-cache rules, table-driven, and where the provider puts its breakpoints."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from teamrt.models import ModelRequest, ModelResponse, lookup, open_model
from teamrt.models.params import request_params
from teamrt.sim import CacheLedger, SimServer, render
from teamrt.sim.validate import SimInvalidRequest, validate

BLOCK_TEXT = "a" * 375  # with its JSON wrapping, a text block of exactly 100 tokens


def text(marker: str | None = None, fill: str = BLOCK_TEXT) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": fill}
    if marker is not None:
        block["cache_control"] = {"type": "ephemeral", **({"ttl": "1h"} if marker == "1h" else {})}
    return block


def body(*blocks: dict[str, Any], model: str = "sim") -> dict[str, Any]:
    return {"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": list(blocks)}]}


def blocks(n: int, *, marks: dict[int, str], change: int | None = None) -> list[dict[str, Any]]:
    """``n`` 100-token blocks, ``marks`` giving the breakpoints; block ``change`` altered by one byte."""
    out = [text(marks.get(i), BLOCK_TEXT[:-1] + ("b" if i == change else "a")) for i in range(n)]
    return out


@dataclass
class Step:
    """One request: its blocks, the clock, and the usage expected (read, 5m write, 1h write, input)."""

    n: int
    marks: dict[int, str]
    expect: tuple[int, int, int, int]
    at: float = 0.0
    change: int | None = None
    model: str = "sim"
    note: str = field(default="")


CASES: dict[str, list[Step]] = {
    "no breakpoint, nothing cached": [Step(12, {}, (0, 0, 0, 1200)), Step(12, {}, (0, 0, 0, 1200))],
    "write then read the same prefix": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0)),
        Step(12, {11: "5m"}, (1200, 0, 0, 0)),
    ],
    "under the minimum (512 for sim, Sonnet 5.5's) nothing is written": [
        Step(5, {4: "5m"}, (0, 0, 0, 500)),
        Step(5, {4: "5m"}, (0, 0, 0, 500)),
    ],
    "the minimum follows the model named after sim:": [
        Step(20, {19: "5m"}, (0, 0, 0, 2000), model="sim:claude-haiku-4-5"),
        Step(50, {49: "5m"}, (0, 5000, 0, 0), model="sim:claude-haiku-4-5"),
    ],
    "tokens after the last breakpoint are plain input": [
        Step(15, {11: "5m"}, (0, 1200, 0, 300)),
        Step(15, {11: "5m"}, (1200, 0, 0, 300)),
    ],
    "lookback finds an entry up to 20 blocks back": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0)),
        Step(32, {31: "5m"}, (1200, 2000, 0, 0)),
    ],
    "beyond 20 blocks back the entry is not found": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0)),
        Step(33, {32: "5m"}, (0, 3300, 0, 0)),
    ],
    "a second breakpoint reaches an entry the lookback cannot": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0)),
        Step(33, {11: "5m", 32: "5m"}, (1200, 2100, 0, 0)),
    ],
    "a changed byte before the entry misses it": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0)),
        Step(12, {11: "5m"}, (0, 1200, 0, 0), change=3),
    ],
    "a changed byte after a shorter entry reads that entry": [
        Step(14, {10: "5m", 13: "5m"}, (0, 1400, 0, 0)),
        Step(14, {10: "5m", 13: "5m"}, (1100, 300, 0, 0), change=12),
    ],
    "5-minute entries expire": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0), at=0),
        Step(12, {11: "5m"}, (1200, 0, 0, 0), at=299),
        Step(12, {11: "5m"}, (1200, 0, 0, 0), at=598),  # the read at 299 refreshed it
        Step(12, {11: "5m"}, (0, 1200, 0, 0), at=899),
    ],
    "1-hour entries outlive 5 minutes and are billed as 1h writes": [
        Step(12, {11: "1h"}, (0, 0, 1200, 0), at=0),
        Step(12, {11: "1h"}, (1200, 0, 0, 0), at=3000),
        Step(12, {11: "1h"}, (0, 0, 1200, 0), at=6601),
    ],
    "mixed lifetimes split the write by the breakpoint ending each stretch": [
        Step(14, {10: "1h", 13: "5m"}, (0, 300, 1100, 0)),
    ],
    "entries are per model": [
        Step(12, {11: "5m"}, (0, 1200, 0, 0), model="sim"),
        Step(12, {11: "5m"}, (0, 1200, 0, 0), model="sim:claude-opus-4-8"),
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_cache_rules(name: str) -> None:
    ledger = CacheLedger()
    for i, step in enumerate(CASES[name]):
        params = body(*blocks(step.n, marks=step.marks, change=step.change), model=step.model)
        validate(params)
        info = lookup(step.model)
        assert info is not None
        outcome = ledger.account(render(params), info.min_cache_tokens, step.at)
        ledger.begin(outcome, step.at)
        got = (outcome.cache_read, outcome.cache_write_5m, outcome.cache_write_1h, outcome.input_tokens)
        assert got == step.expect, f"{name}, request {i + 1}"


def test_a_text_block_of_the_fixture_is_100_tokens() -> None:
    assert render(body(text()))[-1].tokens_through == 100


def test_more_than_four_breakpoints_are_refused() -> None:
    with pytest.raises(SimInvalidRequest, match="maximum of 4"):
        validate(body(*blocks(5, marks={i: "5m" for i in range(5)})))


def test_a_1h_breakpoint_after_a_5m_one_is_refused() -> None:
    with pytest.raises(SimInvalidRequest, match="1h"):
        validate(body(*blocks(3, marks={0: "5m", 2: "1h"})))


def test_tool_choice_thinking_and_effort_change_the_conversation_not_the_system() -> None:
    system = [{"type": "text", "text": "s" * 5000, "cache_control": {"type": "ephemeral"}}]
    base = {**body(text("5m")), "system": system}
    keys = render(base)
    other = render({**base, "tool_choice": {"type": "any"}})
    assert keys[0].key == other[0].key, "the system entry survives"
    assert keys[-1].key != other[-1].key, "the conversation's entry does not"
    cheaper = render({**base, "output_config": {"effort": "low"}})  # a fork at a cheaper effort
    assert keys[0].key == cheaper[0].key and keys[-1].key != cheaper[-1].key, "effort is in the key too"


def _marked(params: dict[str, Any]) -> list[str]:
    found = []
    for i, b in enumerate(params.get("system", [])):
        if "cache_control" in b:
            found.append(f"system.{i}")
    for i, b in enumerate(params.get("tools", [])):
        if "cache_control" in b:
            found.append(f"tools.{i}")
    for i, m in enumerate(params["messages"]):
        for j, b in enumerate(m["content"] if isinstance(m["content"], list) else []):
            if "cache_control" in b:
                found.append(f"messages.{i}.{j}")
    return found


TOOL = {"name": "read", "description": "read a file", "input_schema": {"type": "object"}}


def test_breakpoints_cover_the_prefix_the_conversation_and_the_previous_turn() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    request = ModelRequest(model="sim", messages=messages, max_tokens=10, system="sys", tools=[TOOL])
    params = request_params(request)
    assert _marked(params) == ["system.0", "messages.0.0", "messages.2.0"]
    assert "cache_control" not in str(messages), "the request itself is never modified"
    assert request_params(request) == params, "placement is deterministic"


def test_breakpoints_skip_thinking_and_respect_existing_markers_and_the_limit() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [text("5m"), text("5m"), text("5m")]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}, {"type": "thinking", "thinking": "t"}],
        },
    ]
    params = request_params(ModelRequest(model="sim", messages=messages, max_tokens=10, system="sys"))
    assert _marked(params) == ["messages.0.0", "messages.0.1", "messages.0.2", "messages.1.0"]
    assert "cache_control" not in params["messages"][1]["content"][1], "thinking blocks carry no marker"


def test_without_system_the_tools_carry_the_prefix_breakpoint_and_1h_is_kept() -> None:
    request = ModelRequest(
        model="sim", messages=[{"role": "user", "content": "hi"}], max_tokens=10, tools=[TOOL], cache_ttl="1h"
    )
    params = request_params(request)
    assert _marked(params) == ["tools.0", "messages.0.0"]
    assert params["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_an_entry_is_invisible_to_others_until_the_writing_response_begins() -> None:
    ledger = CacheLedger()
    params = body(*blocks(12, marks={11: "5m"}))
    first = ledger.account(render(params), 1024, 0.0)
    second = ledger.account(render(params), 1024, 0.5)
    assert (first.cache_write_5m, second.cache_write_5m, second.cache_read) == (1200, 1200, 0)
    ledger.begin(first, 1.0)
    assert ledger.account(render(params), 1024, 1.5).cache_read == 1200
    failed = CacheLedger()
    failed.account(render(params), 1024, 0.0)  # its response never began (the request failed)
    assert failed.account(render(params), 1024, 1.0).cache_write_5m == 1200


def test_reading_a_longer_entry_refreshes_the_shorter_entries_it_covers() -> None:
    system = blocks(12, marks={11: "5m"})
    ledger = CacheLedger()

    def at(now: float, *conversation: dict[str, Any]) -> tuple[int, int]:
        outcome = ledger.account(render(body(*system, *conversation)), 1024, now)
        ledger.begin(outcome, now)
        return outcome.cache_read, outcome.cache_write_5m

    turn = text("5m", "t" * 375)
    assert at(0.0) == (0, 1200), "the system prompt's entry"
    assert at(100.0, turn) == (1200, 100), "the first turn's entry, reading the system's"
    assert at(350.0, turn) == (1300, 0), "the turn's entry read at 350 s"
    assert at(640.0, text("5m", "u" * 375)) == (1200, 100), "the system's entry was refreshed at 350 s"


def _burst_request(i: int) -> ModelRequest:
    """A teammate's first request: the shared system prompt (cached), then a task of its own."""
    return ModelRequest(
        model="sim", system="You review code. " * 400, max_tokens=50,
        messages=[{"role": "user", "content": f"Review part {i}."}],
    )  # fmt: skip


def test_a_burst_with_the_same_prefix_is_billed_as_writes_until_a_response_begins(sim: SimServer) -> None:
    """Five requests with the same prefix at one moment each write it, as on the API; a sixth, sent after
    their responses began, reads it. Holding the responses makes "at one moment" exact."""

    async def go() -> tuple[list[ModelResponse], ModelResponse]:
        model = open_model("sim", sim=sim)
        try:
            sim.hold_responses()
            burst = asyncio.gather(*(model.complete(_burst_request(i)) for i in range(5)))
            deadline = time.monotonic() + 30  # bounds a hang only
            while len(sim.calls) < 5:
                assert time.monotonic() < deadline, f"{len(sim.calls)} of 5 requests arrived"
                await asyncio.sleep(0.005)
            sim.release_responses()
            return await burst, await model.complete(_burst_request(5))
        finally:
            await model.aclose()

    burst, after = asyncio.run(go())
    system, own = after.usage.cache_read_input_tokens, after.usage.cache_creation_input_tokens
    assert system > 1024 and own > 0, "the sixth reads the system prompt and writes its own task"
    assert [(r.usage.cache_read_input_tokens, r.usage.cache_creation_input_tokens) for r in burst] == [
        (0, system + own)
    ] * 5, "each of the five writes the system prompt"
