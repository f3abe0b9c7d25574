"""Rate limits end to end, through the real SDK: the sim's buckets, headers and 429s as the API's, and a
fan-out paced by the provider before it meets them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import anthropic
import pytest

from teamrt.models import ModelRateLimited, ModelRequest, ModelResponse, open_model
from teamrt.models.pacing import RateLimits, pacer_for
from teamrt.settings import ModelSettings, Settings
from teamrt.sim import SimServer
from teamrt.sim.ratelimits import RateLimiter, SimRateLimits

NO_RETRIES = Settings(
    model=ModelSettings(stall_seconds=5, stream_retries=0, stream_retry_delay=0.01, sdk_retries=0)
)
TIGHT = SimRateLimits(input_tokens_per_minute=30_000, minute_s=0.5)
"""The API's smallest input limit (Tier 1), in a half-second minute: six of the burst's calls, not ten."""
BURST = 10


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def prompt(i: int) -> str:
    """Under 5,000 tokens of system prompt, different for each call (so none is read from the cache)."""
    return f"Agent {i} of the burst. " + "Survey the repository and report. " * 570


def request(i: int) -> ModelRequest:
    return ModelRequest(
        model="sim", system=prompt(i), messages=[{"role": "user", "content": "go"}], max_tokens=64,
        agent=f"a{i}",
    )  # fmt: skip


def test_every_answer_carries_the_api_s_rate_limit_headers(sim: SimServer) -> None:
    async def go() -> ModelResponse:
        model = open_model("sim", sim=sim, settings=NO_RETRIES)
        try:
            return await model.complete(request(0))
        finally:
            await model.aclose()

    response = asyncio.run(go())
    figures = response.rate_limits
    assert figures is not None and figures.observed is not None
    for bucket in (figures.requests, figures.input_tokens, figures.output_tokens, figures.tokens):
        assert bucket.limit and bucket.remaining is not None and bucket.reset is not None
    requests, tokens = figures.requests, figures.input_tokens
    assert requests.limit is not None and requests.remaining == requests.limit - 1
    assert tokens.remaining is not None and tokens.remaining % 1000 == 0  # rounded, as the API rounds it


def test_a_burst_over_the_input_limit_meets_429s_when_nothing_paces_it() -> None:
    """The limit bites: the same burst the paced test sends, sent straight through the SDK."""

    async def go(sim: SimServer) -> list[BaseException | None]:
        client = anthropic.AsyncAnthropic(api_key="sim", base_url=sim.url, max_retries=0)

        async def one(i: int) -> BaseException | None:
            try:
                await client.messages.create(
                    model="sim", system=prompt(i), max_tokens=64, messages=[{"role": "user", "content": "go"}]
                )
            except anthropic.RateLimitError as e:
                return e
            return None

        try:
            return await asyncio.gather(*(one(i) for i in range(BURST)))
        finally:
            await client.close()

    with SimServer(rate_limits=TIGHT, clock=Clock()) as sim:  # the clock stands still: the burst is instant
        outcomes = asyncio.run(go(sim))
        statuses = sorted(c.status for c in sim.calls)
    refused = [e for e in outcomes if e is not None]
    assert statuses == [200] * 6 + [429] * 4
    error = refused[0]
    assert isinstance(error, anthropic.RateLimitError)
    assert (error.api_message or "").startswith(
        "This request would exceed your organization's rate limit of 30,000 input"
    )
    assert int(error.response.headers["retry-after"]) >= 1
    figures = RateLimits.from_headers(error.response.headers)
    assert figures is not None and figures.input_tokens.limit == 30_000


def test_a_paced_fan_out_meets_no_429() -> None:
    """Ten agents' models (one per agent, as a run opens them) share the account's pacer: all ten
    answered, none refused, with no retry to hide a refusal."""

    async def go(sim: SimServer) -> list[ModelResponse]:
        models = [open_model("sim", sim=sim, settings=NO_RETRIES) for _ in range(BURST)]
        try:
            return await asyncio.gather(*(m.complete(request(i)) for i, m in enumerate(models)))
        finally:
            for m in models:
                await m.aclose()

    with SimServer(rate_limits=TIGHT) as sim:
        responses = asyncio.run(asyncio.wait_for(go(sim), 10))
        statuses = [c.status for c in sim.calls]
    assert statuses == [200] * BURST
    assert pacer_for(sim.url, "sim").waited_s > 0.1  # held back: pacing, not luck, kept them under the limit
    assert all(
        4_800 < r.usage.prompt_tokens < 5_000 for r in responses
    )  # the calls were as big as the limit says


def test_a_429_after_the_sdk_s_retries_is_rate_limited() -> None:
    async def go(sim: SimServer) -> None:
        model = open_model("sim", sim=sim, settings=NO_RETRIES)
        try:
            await model.complete(request(0))
        finally:
            await model.aclose()

    tight = SimRateLimits(input_tokens_per_minute=1_000)
    too_big = pytest.raises(ModelRateLimited, match="rate limit of 1,000 input tokens per minute")
    with SimServer(rate_limits=tight) as sim, too_big:
        asyncio.run(go(sim))  # one call bigger than the whole bucket: the pacer lets the server decide


def test_the_sim_s_buckets_refill_on_its_clock_and_output_is_settled_to_what_was_written() -> None:
    clock = Clock()
    wall = datetime(2026, 9, 1, 12, 0, tzinfo=UTC).timestamp()
    limiter = RateLimiter(
        SimRateLimits(requests_per_minute=2, input_tokens_per_minute=10_000, output_tokens_per_minute=4_000),
        clock, lambda: wall,
    )  # fmt: skip
    first = limiter.admit("m", 6_000, 3_000)
    assert first.refusal is None
    assert first.headers["anthropic-ratelimit-input-tokens-remaining"] == "4000"
    assert first.headers["anthropic-ratelimit-output-tokens-remaining"] == "1000"
    assert first.headers["anthropic-ratelimit-requests-remaining"] == "1"
    # 6,000 missing at 10,000 a minute: full again 36 s later
    assert first.headers["anthropic-ratelimit-input-tokens-reset"] == "2026-09-01T12:00:36.000Z"
    assert first.headers["anthropic-ratelimit-tokens-limit"] == "4000"  # output is the tighter bucket
    refused = limiter.admit("m", 6_000, 100)
    assert refused.refusal is not None and "10,000 input tokens per minute" in refused.refusal
    assert refused.headers["retry-after"] == "12"  # 2,000 missing at 10,000 a minute
    limiter.settle(first, 200)  # wrote 200 of the 3,000 it reserved
    assert limiter.admit("m", 0, 3_700).refusal is None
    clock.now += 12
    assert limiter.admit("m", 6_000, 0).refusal is not None  # three requests in 12 s: two a minute
    clock.now += 30
    assert limiter.admit("m", 6_000, 0).refusal is None
    assert limiter.admit("other-model", 6_000, 0).refusal is None  # buckets are per model


@pytest.mark.hostile
@pytest.mark.parametrize(
    "bad",
    [{"requests_per_minute": 0}, {"input_tokens_per_minute": -1}, {"minute_s": float("nan")}, {"minute_s": 0},
     {"output_tokens_per_minute": True}],
)  # fmt: skip
def test_sim_limits_that_make_no_sense_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="SimRateLimits"):
        SimRateLimits(**bad)  # type: ignore[arg-type]


def test_a_fan_out_reading_its_prefix_from_the_cache_is_not_held_for_it() -> None:
    """The input limit does not count cache reads: six children of one 20,000-token prefix fit in what a
    30,000-token minute has left after the parent wrote it, and the pacer, knowing the prefix is cached,
    sends them at once."""
    shared = "You survey one part of the repository and report what you find. " * 1_230

    def child(i: int) -> ModelRequest:
        return ModelRequest(model="sim", system=shared, messages=[{"role": "user", "content": f"Part {i}."}],
                            max_tokens=64, agent=f"c{i}")  # fmt: skip

    async def go(sim: SimServer) -> list[ModelResponse]:
        models = [open_model("sim", sim=sim, settings=NO_RETRIES) for _ in range(7)]
        try:
            parent = await models[0].complete(child(0))
            assert parent.usage.cache_creation_input_tokens > 19_000
            return await asyncio.gather(*(m.complete(child(i)) for i, m in enumerate(models[1:], 1)))
        finally:
            for m in models:
                await m.aclose()

    with SimServer(rate_limits=SimRateLimits(input_tokens_per_minute=30_000)) as sim:
        children = asyncio.run(asyncio.wait_for(go(sim), 10))
        statuses = [c.status for c in sim.calls]
        waited = pacer_for(sim.url, "sim").waited_s
    assert statuses == [200] * 7 and waited < 0.5
    assert all(r.usage.cache_read_input_tokens > 19_000 for r in children)
