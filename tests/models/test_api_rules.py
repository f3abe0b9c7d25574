"""The simulator refuses what the Messages API refuses, with its status and error type, and accepts what it
accepts; it truncates, stops at stop sequences and refuses as the API does. Every request goes through the
real SDK."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.models.catalog import CATALOG, lookup
from teamrt.models.params import request_params
from teamrt.runtime.history import rebuild, replayable
from teamrt.sim import SimServer
from teamrt.sim.validate import validate
from teamrt.store import TurnRecord, Usage
from tests.helpers.teams import complete
from tests.runtime import test_loop as test_loop
from tests.runtime.test_loop import AGENT, FakeTool, Rig

TOOLS = [{"name": "read", "description": "read a file", "input_schema": {"type": "object", "properties": {}}}]
HI: dict[str, Any] = {"role": "user", "content": "hi"}
THINKING = {"type": "enabled", "budget_tokens": 1024}
rig = test_loop.rig  # the loop tests' fixture: a store, a mailbox and a workspace for one agent
MANUAL_THINKING_MODEL = "sim:claude-sonnet-4-5"
"""A model that takes manual thinking (Sonnet 5.x refuses it)."""
QUIET_MODEL = "sim:claude-sonnet-4-5"
"""A model that does not think unless asked (``sim``, Sonnet 5.5, thinks by default: its replies open with a
thinking block)."""


@pytest.fixture
def client(sim: SimServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="k", base_url=sim.url, max_retries=0) as client:
        yield client


def create(client: anthropic.Anthropic, **body: Any) -> Any:
    """``messages.create`` with defaults; keys the SDK does not take go in the body as they are."""
    known = {"model": "sim", "max_tokens": 100, "messages": [HI], **body}
    extra = {k: known.pop(k) for k in ("temperature", "top_p", "top_k", "colour") if k in known}
    return client.messages.create(**known, extra_body=extra or None)


def streamed(client: anthropic.Anthropic, **body: Any) -> Any:
    """The final message of ``messages.stream`` with ``create``'s defaults."""
    with client.messages.stream(**{"model": "sim", "max_tokens": 100, "messages": [HI], **body}) as stream:
        return stream.get_final_message()


def refused(client: anthropic.Anthropic, *, status: int = 400, **body: Any) -> str:
    """The message of the API error ``create`` gets, checked to be ``status`` with its error type."""
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    with pytest.raises(anthropic.APIStatusError) as caught:
        create(client, **body)
    error = caught.value
    assert (error.status_code, error.type) == (status, kind), error
    return str(error.body["error"]["message"])  # type: ignore[index]


def call(tool_id: str = "toolu_01", name: str = "read") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def result(tool_id: str = "toolu_01") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


def after_call(*assistant: dict[str, Any], tool_id: str = "toolu_01") -> list[dict[str, Any]]:
    return [
        HI,
        {"role": "assistant", "content": list(assistant)},
        {"role": "user", "content": [result(tool_id)]},
    ]


# -- refused -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "text content blocks must be non-empty"),
        (" \n\t", "text content blocks must contain non-whitespace"),
    ],
)
def test_empty_or_whitespace_text_blocks_are_refused(
    client: anthropic.Anthropic, text: str, match: str
) -> None:
    assert match in refused(client, messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])
    replayed = [
        HI,
        {"role": "assistant", "content": [{"type": "text", "text": text}]},
        {"role": "user", "content": "go"},
    ]
    assert match in refused(client, messages=replayed)


def test_a_tool_call_in_history_needs_tools(client: anthropic.Anthropic) -> None:
    assert "must define tools" in refused(client, messages=after_call(call()))
    assert create(client, messages=after_call(call()), tools=TOOLS).stop_reason == "end_turn"


@pytest.mark.parametrize("model", ["claude-nonesuch-9", "sim:claude-nonesuch-9", "sim:opuss"])
def test_an_unknown_model_is_not_found(client: anthropic.Anthropic, model: str) -> None:
    assert f"model: {model}" in refused(client, status=404, model=model)


@pytest.mark.parametrize("model", ["sim", "sim:claude-haiku-4-5", "sim:opus", "claude-haiku-4-5-20251001"])
def test_the_names_sim_users_send_are_known(client: anthropic.Anthropic, model: str) -> None:
    assert create(client, model=model).model == model


def test_max_tokens_above_the_model_s_output_limit_is_refused(client: anthropic.Anthropic) -> None:
    served = [m for m in CATALOG if CATALOG[m].retired is None]  # a retired model is a 404, not a 400
    name = min(served, key=lambda m: CATALOG[m].max_output_tokens)
    model, limit = f"sim:{name}", CATALOG[name].max_output_tokens
    assert f"max_tokens: {limit + 1} > {limit}, which is the maximum" in refused(
        client, model=model, max_tokens=limit + 1, timeout=60
    )
    assert streamed(client, model=model, max_tokens=limit).stop_reason == "end_turn"


def test_a_retired_model_is_not_found(client: anthropic.Anthropic) -> None:
    name = next(m for m in CATALOG if CATALOG[m].retired)
    assert refused(client, status=404, model=f"sim:{name}") == f"model: sim:{name}"


def test_a_prompt_over_the_context_window_is_refused(client: anthropic.Anthropic) -> None:
    name = min((m for m in CATALOG if CATALOG[m].retired is None), key=lambda m: CATALOG[m].context_window)
    window = CATALOG[name].context_window
    prompt = "word " * (window * 4 // 5 + 10)  # 4 bytes a token: just over the window
    assert f"> {window} maximum" in refused(
        client, model=f"sim:{name}", messages=[{"role": "user", "content": prompt}]
    )
    assert create(client, model=f"sim:{name}", messages=[{"role": "user", "content": prompt[:window]}])


def test_malformed_or_duplicate_tool_ids_are_refused(client: anthropic.Anthropic) -> None:
    assert "tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'" in refused(
        client, messages=after_call(call("toolu.01"), tool_id="toolu.01"), tools=TOOLS
    )
    twice = [
        *after_call(call()),
        {"role": "assistant", "content": [call()]},
        {"role": "user", "content": [result()]},
    ]
    assert "messages.3.content.0: `tool_use` ids must be unique" in refused(
        client, messages=twice, tools=TOOLS
    )


def test_unknown_fields_and_block_types_are_refused(client: anthropic.Anthropic) -> None:
    assert "colour: Extra inputs are not permitted" in refused(client, colour="blue")
    banana = [{"role": "user", "content": [{"type": "banana", "text": "x"}]}]
    assert "Input tag 'banana' found using 'type' does not match any of the expected tags" in refused(
        client, messages=banana
    )
    extra = [{"role": "user", "content": [{"type": "text", "text": "x", "colour": "blue"}]}]
    assert "messages.0.content.0.text.colour: Extra inputs are not permitted" in refused(
        client, messages=extra
    )


def test_redacted_thinking_must_be_the_api_s_own(sim: SimServer, client: anthropic.Anthropic) -> None:
    junk = {"type": "redacted_thinking", "data": "not what the API sent"}
    assert "Invalid `data` in `redacted_thinking` block" in refused(
        client, messages=after_call(junk, call()), tools=TOOLS
    )
    sim.policies["worker"] = lambda req: Reply().redacted("hidden").call("read", {})
    first = create(client, tools=TOOLS, extra_headers={"teamrt-role": "worker"})
    sealed, used = (b.to_dict() for b in first.content)
    assert sealed["type"] == "redacted_thinking" and "hidden" not in sealed["data"]
    assert create(client, messages=after_call(sealed, used, tool_id=used["id"]), tools=TOOLS)
    other = create(  # another model may not read it: the API drops it, without an error
        client,
        model="sim:claude-haiku-4-5",
        messages=after_call(sealed, used, tool_id=used["id"]),
        tools=TOOLS,
    )
    assert other.to_dict()["input_transformations"] == [
        {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "model_binding_mismatch"}
    ]
    forged = {**sealed, "data": sealed["data"][:-2] + "AA"}
    assert "Invalid `data`" in refused(
        client,
        model="sim:claude-haiku-4-5",
        messages=after_call(forged, used, tool_id=used["id"]),
        tools=TOOLS,
    )


def test_with_thinking_on_a_tool_using_turn_starts_with_thinking(
    sim: SimServer, client: anthropic.Anthropic
) -> None:
    sim.policies["worker"] = lambda req: Reply().think("Read it first.").call("read", {})
    body: dict[str, Any] = {
        "model": MANUAL_THINKING_MODEL,
        "max_tokens": 2048,
        "thinking": THINKING,
        "tools": TOOLS,
    }
    first = create(client, **body, extra_headers={"teamrt-role": "worker"})
    thought, used = (b.to_dict() for b in first.content)
    assert (
        create(client, messages=after_call(thought, used, tool_id=used["id"]), **body).stop_reason
        == "end_turn"
    )
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in refused(
        client, messages=after_call(used, tool_id=used["id"]), **body
    )
    without = {k: v for k, v in body.items() if k != "thinking"}
    assert create(client, messages=after_call(used, tool_id=used["id"]), **without).stop_reason == "end_turn"


# -- accepted ------------------------------------------------------------------------------------------------


def test_consecutive_messages_of_one_role_are_one_turn(client: anthropic.Anthropic) -> None:
    users = [HI, {"role": "user", "content": "and more"}]
    assert create(client, messages=users).stop_reason == "end_turn"
    split = [
        HI,
        {"role": "assistant", "content": [{"type": "text", "text": "Reading."}]},
        {"role": "assistant", "content": [call()]},
        {"role": "user", "content": [result()]},
        {"role": "user", "content": "thanks"},
    ]
    assert create(client, messages=split, tools=TOOLS).stop_reason == "end_turn"


def test_max_tokens_zero_only_writes_the_cache(client: anthropic.Anthropic) -> None:
    system = [{"type": "text", "text": "You review code. " * 400, "cache_control": {"type": "ephemeral"}}]
    warm = create(client, max_tokens=0, system=system)
    assert warm.content == [] and warm.stop_reason == "max_tokens" and warm.usage.output_tokens == 0
    assert warm.usage.cache_creation_input_tokens > 0
    assert (
        create(client, system=system).usage.cache_read_input_tokens == warm.usage.cache_creation_input_tokens
    )


# -- Sonnet 5.x ----------------------------------------------------------------------------------------------


def test_a_model_without_sampling_refuses_non_default_sampling(client: anthropic.Anthropic) -> None:
    model = "sim:claude-sonnet-5-5"
    assert not lookup(model).sampling  # type: ignore[union-attr]
    assert "`temperature` is deprecated for this model." in refused(client, model=model, temperature=0.2)
    assert "`top_p` is deprecated for this model." in refused(client, model=model, top_p=0.9)
    assert create(client, model=model, temperature=1).stop_reason == "end_turn"
    assert create(client, model="sim:claude-sonnet-4-5", temperature=0.2).stop_reason == "end_turn"


def test_sonnet_5_refuses_manual_thinking_and_thinking_refuses_a_forced_tool(
    client: anthropic.Anthropic,
) -> None:
    assert "thinking.type.enabled" in refused(
        client, model="sim:claude-sonnet-5-5", max_tokens=2048, thinking=THINKING
    )
    forced = {"type": "tool", "name": "read"}
    assert "Thinking may not be enabled when tool_choice forces tool use." in refused(
        client, model="sim:claude-sonnet-5", thinking={"type": "adaptive"}, tools=TOOLS, tool_choice=forced
    )
    assert "(forced tool use) is not supported on this model" in refused(  # Sonnet 5.5: thinking or not
        client, model="sim:claude-sonnet-5-5", tools=TOOLS, tool_choice=forced
    )
    assert create(client, model="sim:claude-sonnet-5-5", thinking={"type": "adaptive"})


# -- how a response ends -------------------------------------------------------------------------------------


def worker(sim: SimServer, reply: Reply) -> dict[str, str]:
    sim.policies["worker"] = lambda req: Reply(list(reply.content), reply.stop_reason, reply.stop_details)
    return {"teamrt-role": "worker"}


def test_a_cut_reply_uses_all_of_max_tokens(sim: SimServer, client: anthropic.Anthropic) -> None:
    headers = worker(sim, Reply().say("long " * 500))
    cut = create(client, max_tokens=50, extra_headers=headers)
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 50
    final = streamed(client, max_tokens=50, extra_headers=headers)
    assert final.usage.output_tokens == 50 and [b.to_dict() for b in final.content] == [
        b.to_dict() for b in cut.content
    ]


def test_a_tool_call_cut_mid_way_comes_back_incomplete(sim: SimServer, client: anthropic.Anthropic) -> None:
    headers = worker(sim, Reply().call("read", {"path": "notes.txt", "body": "x" * 2000}))
    body: dict[str, Any] = {"model": QUIET_MODEL, "max_tokens": 40, "tools": TOOLS, "extra_headers": headers}
    cut = create(client, **body)
    assert cut.stop_reason == "max_tokens"
    [block] = cut.content
    assert block.type == "tool_use" and block.input == {"path": "notes.txt"}
    assert streamed(client, **body).content[0].input == {"path": "notes.txt"}
    request = ModelRequest(model=QUIET_MODEL, messages=[HI], max_tokens=40, tools=TOOLS, role="worker")
    response = complete(sim, request)
    assert response.stop_reason == "max_tokens" and response.invalid_tool_inputs, (
        "teamrt sees the JSON unfinished"
    )


def test_stop_sequences_end_the_text_before_them(sim: SimServer, client: anthropic.Anthropic) -> None:
    headers = worker(sim, Reply().say("alpha STOP beta").call("read", {}))
    body: dict[str, Any] = {"model": QUIET_MODEL, "tools": TOOLS, "extra_headers": headers}
    stopped = create(client, stop_sequences=["never", "STOP"], **body)
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", "STOP")
    assert [b.to_dict() for b in stopped.content] == [{"type": "text", "text": "alpha "}]
    assert streamed(client, stop_sequences=["STOP"], **body).stop_sequence == "STOP"
    assert create(client, **body).stop_reason == "tool_use"


def test_a_refusal_says_why(sim: SimServer, client: anthropic.Anthropic) -> None:
    headers = worker(sim, Reply().say("I can't help").refuse("cyber", "could enable malware"))
    refusal = create(client, extra_headers=headers)
    assert refusal.stop_reason == "refusal" and refusal.stop_details is not None
    assert (refusal.stop_details.type, refusal.stop_details.category) == ("refusal", "cyber")
    assert streamed(client, extra_headers=headers).stop_details.category == "cyber"  # from message_delta
    assert create(client).stop_details is None


# -- the loop sends nothing the API refuses ------------------------------------------------------------------


def turn(seq: int, role: str, content: list[dict[str, Any]]) -> TurnRecord:
    return TurnRecord(seq, "a1", seq, 0, role, content, None, None, Usage(), 0.0)


def test_replayed_content_drops_empty_text_blocks_only(client: anthropic.Anthropic) -> None:
    thinking = {"type": "thinking", "thinking": "x", "signature": "s"}
    content = [thinking, {"type": "text", "text": " \n"}, {"type": "text", "text": ""}, call()]
    assert replayable(content) == [thinking, call()]
    kept = [{"type": "text", "text": "fine"}, call()]
    assert replayable(kept) is kept
    turns = [
        turn(1, "user", [{"type": "text", "text": "hi"}]),
        turn(2, "assistant", [{"type": "text", "text": "  "}]),
        turn(3, "user", [{"type": "text", "text": "again"}]),
        turn(4, "assistant", [{"type": "text", "text": ""}, call()]),
        turn(5, "user", [result()]),
    ]
    messages = rebuild(turns)
    assert [m["role"] for m in messages] == ["user", "user", "assistant", "user"]
    assert create(client, messages=messages, tools=TOOLS).stop_reason == "end_turn"


def test_the_loop_sends_a_reply_back_without_its_empty_text(rig: Rig) -> None:
    def checked(reply: Reply) -> Callable[[ModelRequest], Reply]:
        def step(request: ModelRequest) -> Reply:
            validate({**request_params(request), "model": "sim"})  # what the API would refuse, raised
            return reply

        return step

    model = ScriptedModel(
        [checked(Reply().say(" \n").call("read", {}, id="toolu_1")), checked(Reply().say("ok"))]
    )
    outcome = asyncio.run(rig.loop(model, [FakeTool("read")]).run("go"))
    assert (outcome.status, outcome.answer) == ("done", "ok")
    assert model.requests[1].messages[1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}
    ]
    assert rig.store.reader.turns(AGENT)[1].content[0] == {"type": "text", "text": " \n"}, "kept as it came"
