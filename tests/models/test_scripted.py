"""The scripted model: answers from its steps, and fails loudly when they run out or are left over."""

from __future__ import annotations

import asyncio

import pytest

from teamrt.models import ModelRequest, ModelResponse, Reply, ScriptedModel, ScriptError, Usage

REQUEST = ModelRequest(
    model="scripted", messages=[{"role": "user", "content": "go"}], max_tokens=100, agent="a1"
)


def test_steps_answer_in_order_with_ids_usage_and_streamed_text() -> None:
    fixed = ModelResponse(
        id="m", model="x", content=[{"type": "text", "text": "fixed"}], stop_reason="end_turn", usage=Usage()
    )
    model = ScriptedModel(
        [
            Reply().think("hm").call("read", {"path": "a"}),
            lambda req: Reply().say(f"{len(req.messages)} message(s)"),
            fixed,
        ]
    )
    shown: list[str] = []

    async def go() -> list[ModelResponse]:
        out = [await model.complete(REQUEST, on_text=shown.append) for _ in range(3)]
        await model.aclose()
        return out

    first, second, third = asyncio.run(go())
    assert first.stop_reason == "tool_use" and first.tool_uses[0]["id"].startswith("toolu_scripted_")
    assert first.content[0]["signature"] and first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    assert second.text == "1 message(s)" and second.stop_reason == "end_turn"
    assert third is fixed
    assert shown == ["1 message(s)", "fixed"]
    assert model.requests == [REQUEST] * 3


def test_running_out_of_steps_fails() -> None:
    model = ScriptedModel([Reply().say("only")])

    async def go() -> None:
        await model.complete(REQUEST)
        await model.complete(REQUEST)

    with pytest.raises(ScriptError, match="no step left for call 2"):
        asyncio.run(go())


def test_steps_left_over_fail_at_close() -> None:
    model = ScriptedModel([Reply().say("one"), Reply().say("two")])

    async def go() -> None:
        await model.complete(REQUEST)
        await model.aclose()

    with pytest.raises(ScriptError, match="1 step\\(s\\) left over"):
        asyncio.run(go())


def test_an_exception_step_is_raised() -> None:
    model = ScriptedModel([TimeoutError("boom")])
    with pytest.raises(TimeoutError, match="boom"):
        asyncio.run(model.complete(REQUEST))
    model.check_done()
