"""The real anthropic SDK against the simulator: responses, tools, thinking, cache, errors."""

from __future__ import annotations

import http.client
import json
from typing import Any

import anthropic
import pytest

from teamrt.models import ModelBadRequest, ModelRequest, Reply
from teamrt.sim import SimRequest, SimServer
from tests.helpers.teams import complete

PREFIX = "You are a careful reviewer. " * 200  # ~1,400 tokens: over the 1,024 cache minimum


def request(messages: list[dict[str, Any]], *, system: str = PREFIX, **kw: Any) -> ModelRequest:
    return ModelRequest(
        model="sim", messages=messages, max_tokens=2048, system=system, agent="a1", role="worker", **kw
    )


READ = [{"name": "read", "description": "read a file", "input_schema": {"type": "object", "properties": {}}}]


def reader(req: SimRequest) -> Reply:
    """Reads a file, then reports what the read returned."""
    if not req.tool_outcomes:
        return Reply().think("I need the file first.").call("read", {"path": "notes.txt"})
    outcome = req.tool_outcomes[0]
    return Reply().say(f"notes.txt says {outcome.output!r}")


def test_plain_and_streamed_responses_through_the_sdk(sim: SimServer) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=sim.url, max_retries=0)
    body: dict[str, Any] = {
        "model": "sim",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "ping"}],
    }
    plain = client.messages.create(**body)
    assert plain.stop_reason == "end_turn"
    thought, said = plain.content  # sim (Sonnet 5.5) thinks by default: a thinking block comes first
    assert thought.type == "thinking" and "ping" in thought.thinking and thought.signature
    assert said.type == "text" and "ping" in said.text
    assert plain.usage.input_tokens > 0 and plain.usage.output_tokens > 0
    with client.messages.stream(**body) as stream:
        streamed_text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed_text == final.content[1].text == said.text  # type: ignore[union-attr]
    assert final.content[0].to_dict() == thought.to_dict()
    assert final.id == plain.id  # same request, same deterministic id
    assert client.messages.count_tokens(model="sim", messages=body["messages"]).input_tokens > 0
    client.close()


def test_text_streams_to_the_callback(sim: SimServer) -> None:
    sim.policies["worker"] = lambda req: Reply().say("word " * 100)
    pieces: list[str] = []
    response = complete(sim, request([{"role": "user", "content": "talk"}]), on_text=pieces.append)
    assert len(pieces) > 5, "a long text arrives in many deltas"
    assert "".join(pieces) == response.text == "word " * 100
    assert response.request_id is not None and response.request_id.startswith("req_sim_")
    assert response.cost_usd is not None and response.cost_usd > 0


def test_tool_use_round_trip(sim: SimServer) -> None:
    sim.policies["worker"] = reader
    first_messages: list[dict[str, Any]] = [{"role": "user", "content": "What is in notes.txt?"}]
    first = complete(sim, request(first_messages, tools=READ))
    assert first.stop_reason == "tool_use"
    [call] = first.tool_uses
    assert call["name"] == "read" and call["input"] == {"path": "notes.txt"}
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": "buy milk"}
    second = complete(
        sim,
        request(
            [
                *first_messages,
                {"role": "assistant", "content": first.content},
                {"role": "user", "content": [result]},
            ],
            tools=READ,
        ),
    )
    assert second.stop_reason == "end_turn"
    assert second.text == "notes.txt says 'buy milk'"


def test_a_missing_tool_result_is_rejected_like_the_api_does(sim: SimServer) -> None:
    sim.policies["worker"] = reader
    first_messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = complete(sim, request(first_messages, tools=READ))
    broken = [
        *first_messages,
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "hi"},
    ]
    with pytest.raises(ModelBadRequest) as caught:
        complete(sim, request(broken, tools=READ))
    assert caught.value.status == 400 and caught.value.error_type == "invalid_request_error"
    assert "without `tool_result`" in str(caught.value)


def test_thinking_blocks_come_back_unchanged_and_a_changed_byte_is_refused(sim: SimServer) -> None:
    sim.policies["worker"] = reader
    first_messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = complete(sim, request(first_messages, tools=READ))
    thinking = first.content[0]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "I need the file first."
    assert thinking["signature"]
    result = {"type": "tool_result", "tool_use_id": first.tool_uses[0]["id"], "content": "x"}
    history = [
        *first_messages,
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [result]},
    ]
    assert complete(sim, request(history, tools=READ)).stop_reason == "end_turn"  # the signature checks out
    tampered = [dict(b) for b in first.content]
    tampered[0]["thinking"] = "I need the file first!"
    history[1] = {"role": "assistant", "content": tampered}
    with pytest.raises(ModelBadRequest, match="signature"):
        complete(sim, request(history, tools=READ))


def test_same_prefix_is_read_from_cache_and_a_changed_byte_is_not(sim: SimServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Summarise the rules."}]
    cold = complete(sim, request(messages)).usage
    assert cold.cache_read_input_tokens == 0 and cold.cache_creation_input_tokens > 1024
    warm = complete(sim, request(messages)).usage
    assert warm.cache_read_input_tokens == cold.cache_creation_input_tokens
    assert warm.cache_creation_input_tokens == 0
    changed = complete(sim, request(messages, system=PREFIX[:-2] + "X ")).usage
    assert changed.cache_read_input_tokens == 0, "one changed byte in the system prompt misses the cache"
    assert changed.cache_creation_input_tokens == cold.cache_creation_input_tokens


def test_a_growing_conversation_reads_the_previous_turn(sim: SimServer) -> None:
    """The provider's breakpoints make each call read everything the previous one wrote."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    previous_total = 0
    for turn in range(4):
        response = complete(sim, request(history))
        usage = response.usage
        if turn:
            assert usage.cache_read_input_tokens == previous_total
        previous_total = (
            usage.cache_read_input_tokens + usage.cache_creation_input_tokens + usage.input_tokens
        )
        history += [
            {"role": "assistant", "content": response.content},
            {"role": "user", "content": f"turn {turn}"},
        ]


def test_forks_share_the_parent_prefix(sim: SimServer) -> None:
    """Children built from one prefix, differing only in their directive, read the parent's entry."""
    parent: list[dict[str, Any]] = [{"role": "user", "content": "plan the work " * 50}]
    complete(sim, request(parent))
    spawn = {"type": "tool_use", "id": "toolu_spawn", "name": "spawn_agent", "input": {"n": 3}}
    reads = []
    for directive in ("check module a", "check module b", "check module c"):
        child = [
            *parent,
            {"role": "assistant", "content": [spawn]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_spawn", "content": "forked"},
                    {"type": "text", "text": directive},
                ],
            },
        ]
        reads.append(
            complete(sim, request(child, tools=[_tool("spawn_agent")])).usage.cache_read_input_tokens
        )
    assert reads[0] == 0, "the parent's request had no tools; the tools list changes the prefix"
    assert reads[1] == reads[2] > 1024, "siblings read the first sibling's prefix"


def _tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"the {name} tool",
        "input_schema": {"type": "object", "properties": {}},
    }


def test_errors_come_in_the_api_shape(sim: SimServer) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=sim.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="sim", max_tokens=10, messages=[])
    assert caught.value.type == "invalid_request_error"
    assert caught.value.request_id is not None and caught.value.request_id.startswith("req_sim_")
    client.close()
    connection = http.client.HTTPConnection("127.0.0.1", int(sim.url.rsplit(":", 1)[1]))
    connection.request("POST", "/v1/messages", body=b"{}", headers={"content-type": "application/json"})
    response = connection.getresponse()
    assert response.status == 401 and response.getheader("request-id", "").startswith("req_sim_")
    body = json.loads(response.read())
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    assert body["request_id"] == response.getheader("request-id")
    connection.close()


def test_a_policy_that_raises_is_a_server_error_and_is_recorded(sim: SimServer) -> None:
    def broken(req: SimRequest) -> Reply:
        raise KeyError("no such step")

    sim.policies["worker"] = broken
    with pytest.raises(Exception) as caught:
        complete(sim, request([{"role": "user", "content": "x"}]))
    assert getattr(caught.value, "status", None) == 500
    assert sim.policy_errors and "KeyError" in sim.policy_errors[0]
    assert len(sim.calls) == 1, "a policy bug is not retried"


def test_max_tokens_cuts_the_reply(sim: SimServer) -> None:
    sim.policies["worker"] = lambda req: Reply().say("long " * 500).call("read", {"path": "x"})
    req = ModelRequest(model="sim", messages=[{"role": "user", "content": "x"}], max_tokens=50, role="worker")
    response = complete(sim, req)
    assert response.stop_reason == "max_tokens"
    assert response.tool_uses == [] and 0 < response.usage.output_tokens <= 50
