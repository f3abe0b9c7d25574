"""The simulator's request rules for parameter values, cache markers, request size, the context window and
mid-conversation system messages, each through the real SDK with the API's status and wording."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from teamrt.models import Reply
from teamrt.models.catalog import CATALOG
from teamrt.sim import SimRequest, SimServer

TOOLS = [{"name": "read", "description": "read a file", "input_schema": {"type": "object", "properties": {}}}]
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def client(sim: SimServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="k", base_url=sim.url, max_retries=0) as client:
        yield client


def create(client: anthropic.Anthropic, **body: Any) -> Any:
    known = {"model": "sim", "max_tokens": 300, "messages": HI, **body}
    extra = {k: known.pop(k) for k in ("service_tier", "cache_control") if k in known}
    return client.messages.create(**known, extra_body=extra or None)


def refused(client: anthropic.Anthropic, **body: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, **body)
    assert caught.value.type == "invalid_request_error"
    return str(caught.value.body["error"]["message"])  # type: ignore[index]


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("thinking", "message"),
    [
        (
            {"type": "deep"},
            "thinking: Input tag 'deep' found using 'type' does not match any of the expected tags",
        ),
        ({"type": "adaptive", "budget_tokens": 2048}, "thinking.adaptive.budget_tokens: Extra inputs"),
        ({"type": "adaptive", "display": "full"}, "thinking.adaptive.display: Input should be 'summarized'"),
        ({"type": "disabled", "display": "omitted"}, "thinking.disabled.display: Extra inputs"),
        ({"type": "enabled", "budget_tokens": 2048}, "thinking.type.enabled: manual extended thinking"),
        ("adaptive", "thinking: Input should be a valid dictionary"),
    ],
)
def test_thinking_values_are_the_sdk_s(client: anthropic.Anthropic, thinking: Any, message: str) -> None:
    assert message in refused(client, thinking=thinking, max_tokens=4000)


def test_disabled_is_refused_where_between_tools_turns_thinking_off(client: anthropic.Anthropic) -> None:
    assert "send thinking.type 'between_tools' to turn off up-front thinking" in refused(
        client, thinking={"type": "disabled"}
    )
    no_thinking = create(client, model="sim:claude-opus-5-5", thinking={"type": "disabled"})
    assert [b.type for b in no_thinking.content] == ["text"]


def test_between_tools_is_for_the_models_that_think_by_default(client: anthropic.Anthropic) -> None:
    assert create(client, thinking={"type": "between_tools"}).content[0].type == "text"
    assert "'between_tools' is not supported" in refused(
        client, model="sim:claude-sonnet-4-5", thinking={"type": "between_tools"}
    )
    assert "cannot be used with effort 'max'" in refused(
        client, thinking={"type": "between_tools"}, output_config={"effort": "max"}
    )


@pytest.mark.parametrize(
    ("model", "effort", "message"),
    [
        ("sim", "extreme", "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"),
        ("sim:claude-sonnet-4-5", "low", "output_config.effort: this model does not support the effort"),
        ("sim:claude-opus-4-5", "xhigh", "output_config.effort: 'xhigh' is not supported on this model"),
    ],
)
def test_effort_is_one_of_the_model_s_levels(
    client: anthropic.Anthropic, model: str, effort: str, message: str
) -> None:
    assert message in refused(client, model=model, output_config={"effort": effort})


def test_effort_levels_the_model_takes_pass(client: anthropic.Anthropic) -> None:
    assert create(client, output_config={"effort": "low"}).stop_reason == "end_turn"
    assert (
        create(client, model="sim:claude-opus-4-5", output_config={"effort": "high"}).stop_reason
        == "end_turn"
    )


def test_service_tier_takes_auto_or_standard_only(client: anthropic.Anthropic) -> None:
    assert "service_tier: Input should be 'auto' or 'standard_only'" in refused(
        client, service_tier="priority"
    )
    assert create(client, service_tier="standard_only").stop_reason == "end_turn"


def test_a_forced_tool_choice_and_thinking_by_default(client: anthropic.Anthropic) -> None:
    forced = {"type": "any"}
    assert "(forced tool use) is not supported on this model" in refused(
        client, tools=TOOLS, tool_choice=forced
    )
    # Haiku 5.5 takes a forced choice, but thinks by default: thinking must be turned off for it
    haiku = "sim:claude-haiku-5-5"
    assert "Thinking may not be enabled when tool_choice forces tool use." in refused(
        client, model=haiku, tools=TOOLS, tool_choice=forced
    )
    assert create(client, model=haiku, tools=TOOLS, tool_choice=forced, thinking={"type": "disabled"})


@pytest.mark.hostile
def test_an_unknown_beta_is_refused_with_the_api_s_wording(client: anthropic.Anthropic) -> None:
    message = refused(client, extra_headers={"anthropic-beta": "sneaky-2099-01-01"})
    assert message == (
        "Unexpected value(s) `sneaky-2099-01-01` for the `anthropic-beta` header. Please consult our"
        " documentation at docs.claude.com or try again without the header."
    )


# -- cache markers ---------------------------------------------------------------------------------------


def test_top_level_cache_control_caches_the_last_cacheable_block(
    sim: SimServer, client: anthropic.Anthropic
) -> None:
    long = [{"role": "user", "content": "Summarise the rules. " * 400}]
    auto = {"type": "ephemeral"}
    cold = create(client, model="sim:claude-sonnet-4-5", messages=long, cache_control=auto).usage
    warm = create(client, model="sim:claude-sonnet-4-5", messages=long, cache_control=auto).usage
    assert (
        cold.cache_creation_input_tokens > 1024
        and warm.cache_read_input_tokens == cold.cache_creation_input_tokens
    )
    plain = create(client, model="sim:claude-sonnet-4-5", messages=long).usage
    assert plain.cache_read_input_tokens == plain.cache_creation_input_tokens == 0


def test_top_level_cache_control_takes_one_of_the_four_breakpoints(client: anthropic.Anthropic) -> None:
    marked = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": marked} for i in range(4)]
    blocks.append({"type": "text", "text": "the last, unmarked"})
    messages = [{"role": "user", "content": blocks}]
    assert create(client, messages=messages).stop_reason == "end_turn"
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in refused(
        client, messages=messages, cache_control=marked
    )
    blocks[-1]["cache_control"] = marked  # already marked: the top-level marker takes no fifth slot
    assert "Found 5" in refused(client, messages=messages)


@pytest.mark.hostile
@pytest.mark.parametrize("ttl", ["10m", "1d", 3600, ""])
def test_a_ttl_other_than_5m_or_1h_is_refused(client: anthropic.Anthropic, ttl: Any) -> None:
    assert "cache_control.ttl: Input should be '5m' or '1h'" in refused(
        client, cache_control={"type": "ephemeral", "ttl": ttl}
    )
    block = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": ttl}}
    assert "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'" in refused(
        client, messages=[{"role": "user", "content": [block]}]
    )
    assert create(client, cache_control={"type": "ephemeral", "ttl": "1h"}).stop_reason == "end_turn"


# -- size and window -------------------------------------------------------------------------------------


@pytest.mark.hostile
def test_a_body_over_32_mb_is_413_request_too_large(client: anthropic.Anthropic) -> None:
    huge = [{"role": "user", "content": "x" * (32 * 1024 * 1024 + 1)}]
    with pytest.raises(anthropic.APIStatusError) as caught:
        create(client, messages=huge)
    assert caught.value.status_code == 413
    assert caught.value.body == {
        "type": "error",
        "error": {
            "type": "request_too_large",
            "message": "Request exceeds the maximum allowed number of bytes.",
        },
    }


def test_output_past_the_context_window_stops_with_model_context_window_exceeded(
    sim: SimServer, client: anthropic.Anthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "claude-sonnet-4-5"
    monkeypatch.setitem(CATALOG, name, dataclasses.replace(CATALOG[name], context_window=1000))
    sim.policies["worker"] = lambda request: Reply().say("long " * 2000)
    body: dict[str, Any] = {
        "model": f"sim:{name}",
        "max_tokens": 900,
        "extra_headers": {"teamrt-role": "worker"},
    }
    prompt: list[Any] = [{"role": "user", "content": "word " * 480}]  # ~600 tokens in: 400 left
    full = create(client, messages=prompt, **body)
    assert full.stop_reason == "model_context_window_exceeded"
    assert full.usage.output_tokens == 1000 - full.usage.input_tokens
    with client.messages.stream(
        model=f"sim:{name}", max_tokens=900, messages=prompt, extra_headers=body["extra_headers"]
    ) as stream:
        assert stream.get_final_message().stop_reason == "model_context_window_exceeded"
    assert create(client, messages=HI, **body).stop_reason == "max_tokens", "room enough: max_tokens cuts it"
    assert "prompt is too long" in refused(
        client, messages=[{"role": "user", "content": "word " * 900}], **body
    )


# -- system messages mid-conversation --------------------------------------------------------------------


def test_system_messages_mid_conversation_on_the_models_that_take_them(
    sim: SimServer, client: anthropic.Anthropic
) -> None:
    seen: list[str] = []

    def worker(request: SimRequest) -> Reply:
        seen.append(request.system)
        return Reply().say("ok")

    sim.policies["worker"] = worker
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "From now on, answer in French."},
        {"role": "user", "content": "and now?"},
    ]
    headers = {"teamrt-role": "worker"}
    assert (
        create(client, messages=messages, system="Be brief.", extra_headers=headers).stop_reason == "end_turn"
    )
    assert seen == ["Be brief.\nFrom now on, answer in French."], "the model reads it as system text"
    with_system = client.messages.count_tokens(model="sim", messages=messages).input_tokens
    without = client.messages.count_tokens(model="sim", messages=[*messages[:2], messages[3]]).input_tokens
    assert with_system > without
    assert "messages.2.role: Input should be 'user' or 'assistant'" in refused(
        client, model="sim:claude-sonnet-4-5", messages=messages
    )


@pytest.mark.hostile
def test_a_system_message_cannot_sit_between_a_call_and_its_result(client: anthropic.Anthropic) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [call]},
        {"role": "system", "content": "Ignore the result."},
        {"role": "user", "content": [result]},
    ]
    assert "`tool_use` ids were found without `tool_result` blocks immediately after" in refused(
        client, model="sim:claude-sonnet-5-5", messages=messages, tools=TOOLS
    )
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    assert "a system message takes only text blocks" in refused(
        client, messages=[*HI, {"role": "assistant", "content": "ok"}, {"role": "system", "content": [image]}]
    )
