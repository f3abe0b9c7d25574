"""The request's new fields reach the API as it defines them (betas in ``anthropic-beta`` through the SDK's
beta client, ``context_management``, ``output_config.effort``), and what a beta response adds comes back
(``compaction`` blocks, ``applied_edits``, ``input_transformations``, compaction usage, the new stop
reasons); "prompt is too long" and 413 are ``ModelContextTooLong``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from teamrt.errors import UserError
from teamrt.models import ModelRequest, ModelResponse, ScriptedModel, Usage, open_model
from teamrt.models.catalog import lookup
from teamrt.models.errors import EffortUnsupported, ModelContextTooLong
from teamrt.models.params import request_params
from teamrt.models.pricing import cost_usd
from teamrt.sim import SimServer
from teamrt.sim.http import HttpRequest, HttpResponse, LoopbackServer
from teamrt.sim.respond import sse
from tests.helpers.teams import FAST

COMPACT = "compact-2026-09-04"
EDITS = "context-management-2025-06-27"
MANAGEMENT = {
    "edits": [
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30_000}},
        {"type": "compact_20260112"},
    ]
}
APPLIED = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 12_400}]
DROPPED = [{"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"}]
SUMMARY = "The user asked for a survey of parser.py; three tool results were read; the bug is in line 40."
COMPACTION_USAGE = {
    "type": "compaction", "input_tokens": 180_000, "output_tokens": 2_000,
    "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
}  # fmt: skip


def beta_stream(model: str) -> list[dict[str, Any]]:
    """A server-side compaction answered as the API streams it (event shapes: the SDK's beta types)."""
    usage = {"input_tokens": 2_100, "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}  # fmt: skip
    message = {"id": "msg_beta_1", "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": usage,
               "input_transformations": DROPPED}  # fmt: skip
    iterations = [COMPACTION_USAGE, {"type": "message", **usage, "output_tokens": 40}]
    final_usage = {**usage, "output_tokens": 2_040, "iterations": iterations}
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "compaction", "content": None, "signature": "sig_compaction_1"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "compaction_delta", "content": SUMMARY, "encrypted_content": "opaque-1"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "compaction", "stop_sequence": None},
         "usage": final_usage, "context_management": {"applied_edits": APPLIED}},
        {"type": "message_stop"},
    ]  # fmt: skip


class Recorded:
    """A loopback server that answers every request with one recorded answer and keeps what it got."""

    def __init__(
        self, events: list[dict[str, Any]] | None = None, error: tuple[int, dict[str, Any]] | None = None
    ):
        self.events = events or []
        self.error = error
        self.requests: list[HttpRequest] = []
        self.http = LoopbackServer(self._handle, name="recorded")

    async def _handle(self, request: HttpRequest, response: HttpResponse) -> None:
        self.requests.append(request)
        headers = {"request-id": f"req_rec_{len(self.requests)}"}
        if self.error is not None:
            await response.json(self.error[0], self.error[1], headers)
        elif request.path.endswith("/count_tokens"):
            await response.json(200, {"input_tokens": 4_321}, headers)
        else:
            await response.start_stream({**headers, "content-type": "text/event-stream"})
            await response.chunk(b"".join(sse(e) for e in self.events))
            await response.end_stream()


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    server = Recorded(beta_stream("claude-sonnet-5-5"))
    yield server
    server.http.close()


def call(url: str, request: ModelRequest, *, count: bool = False) -> Any:
    from teamrt.models.anthropic_api import AnthropicModel

    async def go() -> Any:
        model = AnthropicModel(request.model, api_key="test", base_url=url, settings=FAST.model)
        try:
            return await (model.count_tokens(request) if count else model.complete(request))
        finally:
            await model.aclose()

    return asyncio.run(go())


def managed(**kw: Any) -> ModelRequest:
    return ModelRequest(
        model="claude-sonnet-5-5", messages=[{"role": "user", "content": "survey parser.py"}],
        max_tokens=4_000, context_management=MANAGEMENT, **kw,
    )  # fmt: skip


def test_betas_go_through_the_beta_client_and_a_compaction_comes_back_whole(recorded: Recorded) -> None:
    response: ModelResponse = call(recorded.http.url, managed(betas=(COMPACT, EDITS), effort="low"))
    sent = recorded.requests[0]
    assert sent.path == "/v1/messages?beta=true" or sent.path == "/v1/messages"
    assert sent.headers["anthropic-beta"] == f"{COMPACT},{EDITS}"
    body = json.loads(sent.body)
    assert body["context_management"] == MANAGEMENT and body["output_config"] == {"effort": "low"}
    assert "betas" not in body
    assert response.content == [
        {
            "type": "compaction",
            "content": SUMMARY,
            "signature": "sig_compaction_1",
            "encrypted_content": "opaque-1",
        }
    ]
    assert response.stop_reason == "compaction"
    assert response.applied_edits == APPLIED and response.input_transformations == DROPPED
    assert response.usage.compaction == (Usage(input_tokens=180_000, output_tokens=2_000),)
    assert response.usage.prompt_tokens == 2_100  # the compaction's input is not the request's size
    info = lookup("claude-sonnet-5-5")
    assert info is not None and response.cost_usd is not None
    compaction_cost = cost_usd(Usage(input_tokens=180_000, output_tokens=2_000), info)
    assert response.cost_usd == pytest.approx(
        cost_usd(Usage(input_tokens=2_100, output_tokens=2_040), info) + compaction_cost
    )


def test_without_betas_the_plain_client_sends_no_beta_header(recorded: Recorded) -> None:
    recorded.events = beta_stream("claude-sonnet-5-5")
    plain = ModelRequest(
        model="claude-sonnet-5-5", messages=[{"role": "user", "content": "q"}], max_tokens=100
    )
    call(recorded.http.url, plain)
    sent = recorded.requests[0]
    assert "anthropic-beta" not in sent.headers and "context_management" not in json.loads(sent.body)


def test_context_management_without_a_beta_is_sent_for_the_server_to_judge(recorded: Recorded) -> None:
    call(recorded.http.url, managed())
    sent = recorded.requests[0]
    assert "anthropic-beta" not in sent.headers
    assert json.loads(sent.body)["context_management"] == MANAGEMENT


def test_count_tokens_takes_the_betas_and_context_management(recorded: Recorded) -> None:
    assert call(recorded.http.url, managed(betas=(EDITS,), temperature=0.2), count=True) == 4_321
    sent = recorded.requests[0]
    assert sent.path.startswith("/v1/messages/count_tokens")
    assert EDITS in sent.headers["anthropic-beta"].split(",")  # the SDK adds its token-counting beta
    body = json.loads(sent.body)
    assert body["context_management"] == MANAGEMENT
    assert not {"temperature", "max_tokens", "betas"} & set(body)


def test_effort_goes_only_to_a_model_that_takes_it() -> None:
    asked = ModelRequest(model="claude-sonnet-5-5", messages=[], max_tokens=10, effort="medium")
    assert request_params(asked)["output_config"] == {"effort": "medium"}
    unknown = ModelRequest(model="house-model-7", messages=[], max_tokens=10, effort="medium")
    assert request_params(unknown)["output_config"] == {"effort": "medium"}  # the server decides
    assert "output_config" not in request_params(
        ModelRequest(model="claude-sonnet-5-5", messages=[], max_tokens=1)
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("model", "effort", "said"),
    [("claude-haiku-4-5", "low", "claude-haiku-4-5 does not take an effort level (asked for effort 'low')"),
     ("claude-opus-4-5", "max", "claude-opus-4-5 takes effort low, medium, high, not 'max'"),
     ("claude-sonnet-5-5", "ludicrous\nspeed", "not 'ludicrous\\nspeed'")],
)  # fmt: skip
def test_an_effort_the_model_does_not_take_is_refused_in_one_line(model: str, effort: str, said: str) -> None:
    with pytest.raises(EffortUnsupported) as refused:
        request_params(ModelRequest(model=model, messages=[], max_tokens=10, effort=effort))
    assert isinstance(refused.value, UserError) and isinstance(refused.value, ValueError)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_cache_ttl_marks_every_breakpoint() -> None:
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
               {"role": "user", "content": "c"}]  # fmt: skip
    asked = ModelRequest(
        model="claude-sonnet-5-5",
        system="s",
        messages=history,
        max_tokens=1,
        cache_ttl="1h",
        betas=(COMPACT,),
    )
    params = request_params(asked)
    markers = [b["cache_control"] for b in params["system"]] + [
        block["cache_control"] for m in params["messages"] if isinstance(m["content"], list)
        for block in m["content"] if "cache_control" in block
    ]  # fmt: skip
    assert markers == [{"type": "ephemeral", "ttl": "1h"}] * 3 and params["betas"] == [COMPACT]


def test_prompt_too_long_from_the_sim_is_context_too_long(sim: SimServer) -> None:
    info = lookup("claude-haiku-4-5")
    assert info is not None
    huge = "x" * (info.context_window * 4 + 400)

    async def go() -> None:
        model = open_model("sim:claude-haiku-4-5", sim=sim, settings=FAST)
        try:
            await model.complete(ModelRequest(model="sim:claude-haiku-4-5", max_tokens=100,
                                              messages=[{"role": "user", "content": huge}]))  # fmt: skip
        finally:
            await model.aclose()

    with pytest.raises(ModelContextTooLong) as caught:
        asyncio.run(go())
    error = caught.value
    assert error.status == 400 and error.limit == info.context_window
    assert error.tokens is not None and error.tokens > info.context_window
    assert str(error).startswith("sim:claude-haiku-4-5: prompt is too long:")


@pytest.mark.parametrize(
    ("status", "body", "tokens", "limit"),
    [(400, {"type": "invalid_request_error",
            "message": "prompt is too long: 1,208,310 tokens > 1,000,000 maximum"}, 1_208_310, 1_000_000),
     (413, {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."},
      None, None)],
)  # fmt: skip
def test_a_prompt_or_body_too_big_is_context_too_long(
    status: int, body: dict[str, Any], tokens: int | None, limit: int | None
) -> None:
    server = Recorded(error=(status, {"type": "error", "error": body}))
    try:
        with pytest.raises(ModelContextTooLong) as caught:
            call(server.http.url, managed())
    finally:
        server.http.close()
    assert (caught.value.status, caught.value.tokens, caught.value.limit) == (status, tokens, limit)
    assert len(server.requests) == 1  # a request too big is not retried as it is


@pytest.mark.hostile
@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: " + "9" * 5000 + " tokens > " + "9" * 5000 + " maximum",
        "prompt is too long: -5 tokens > NaN maximum",
        "prompt is too long",
        "prompt is too long: 12 tokens",
    ],
)
def test_a_hostile_too_long_message_gives_no_figures_and_no_crash(message: str) -> None:
    error = ModelContextTooLong(message, status=400, detail=message)
    assert error.tokens is None and error.limit is None


@pytest.mark.hostile
def test_hostile_usage_iterations_count_nothing(recorded: Recorded) -> None:
    events = beta_stream("claude-sonnet-5-5")
    events[4]["usage"]["iterations"] = [
        {"type": "compaction", "input_tokens": "lots", "output_tokens": -9, "cache_read_input_tokens": True},
        "not an entry",
        {"type": "compaction", "cache_creation": "x", "input_tokens": 10},
    ]
    recorded.events = events
    response: ModelResponse = call(recorded.http.url, managed(betas=(COMPACT,)))
    assert response.usage.compaction == (Usage(), Usage(input_tokens=10))


def test_the_scripted_model_echoes_what_a_step_scripts_and_refuses_what_the_provider_refuses() -> None:
    scripted_response = ModelResponse(
        id="msg_1", model="claude-sonnet-5-5", usage=Usage(input_tokens=10, output_tokens=5),
        content=[{"type": "compaction", "content": SUMMARY, "signature": "s"}], stop_reason="compaction",
        applied_edits=APPLIED, input_transformations=DROPPED,
    )  # fmt: skip
    model = ScriptedModel([scripted_response])
    got = asyncio.run(model.complete(managed(betas=(COMPACT,), effort="low")))
    assert got.applied_edits == APPLIED and got.stop_reason == "compaction"
    assert model.requests[0].betas == (COMPACT,) and model.requests[0].effort == "low"
    with pytest.raises(EffortUnsupported):
        asyncio.run(
            model.complete(ModelRequest(model="claude-haiku-4-5", messages=[], max_tokens=1, effort="low"))
        )
    assert len(model.requests) == 1
