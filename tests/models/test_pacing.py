"""The pacer: the API's rate-limit headers read tolerantly, calls held back until the buckets can take
them (bounded, cancellable), one pacer per account shared by every model of the process."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from teamrt.models.pacing import FLOOR, Bucket, Pacer, RateLimits, fingerprint, pacer_for
from teamrt.models.prefixes import PrefixMemory, prompt_shape

NOW = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)

# A response of the API, as recorded (values as the API sends them: tokens rounded to thousands, RFC 3339).
API_HEADERS = {
    "Anthropic-Ratelimit-Input-Tokens-Limit": "80000",
    "anthropic-ratelimit-input-tokens-remaining": "79000",
    "anthropic-ratelimit-input-tokens-reset": "2026-09-01T12:00:01Z",
    "anthropic-ratelimit-output-tokens-limit": "16000",
    "anthropic-ratelimit-output-tokens-remaining": "16000",
    "anthropic-ratelimit-output-tokens-reset": "2026-09-01T12:00:00Z",
    "anthropic-ratelimit-requests-limit": "1000",
    "anthropic-ratelimit-requests-remaining": "999",
    "anthropic-ratelimit-requests-reset": "2026-09-01T12:00:00.060Z",
    "anthropic-ratelimit-tokens-limit": "96000",
    "anthropic-ratelimit-tokens-remaining": "95000",
    "anthropic-ratelimit-tokens-reset": "2026-09-01T12:00:01+00:00",
    "request-id": "req_011CSLsW7mFqvHHnzrKdKjAE",
}


def limits(remaining: int, *, limit: int = 10_000, reset_in: float = 0.2) -> RateLimits:
    """Figures whose input bucket holds ``remaining`` of ``limit``, full again in ``reset_in`` seconds."""
    now = datetime.now(UTC)
    bucket = Bucket(limit, remaining, now + timedelta(seconds=reset_in))
    return RateLimits(input_tokens=bucket, observed=now)


def test_the_api_s_headers_are_read() -> None:
    read = RateLimits.from_headers(API_HEADERS, now=NOW)
    assert read is not None
    assert read.input_tokens == Bucket(80_000, 79_000, datetime(2026, 9, 1, 12, 0, 1, tzinfo=UTC))
    assert read.output_tokens.remaining == 16_000 and read.requests.remaining == 999
    assert read.requests.reset == datetime(2026, 9, 1, 12, 0, 0, 60_000, tzinfo=UTC)
    assert read.tokens.limit == 96_000 and read.retry_after is None and read.observed == NOW
    assert RateLimits.from_headers({"retry-after": "7"}, now=NOW) == RateLimits(retry_after=7.0, observed=NOW)


def test_a_response_without_figures_has_none() -> None:
    assert RateLimits.from_headers({"request-id": "req_1", "content-type": "text/event-stream"}) is None


@pytest.mark.hostile
@pytest.mark.parametrize(
    "value",
    ["", "-5", "1e9", "NaN", "inf", "0x10", " 12 34", "12;drop", "9" * 17, "9" * 5000, "٣٣", "1_000",
     "5, 6", "\x00", "2026-09-01T12:00:00", "9999-99-99T00:00:00Z", "tomorrow"],
)  # fmt: skip
def test_a_hostile_header_is_ignored_never_raised_on(value: str) -> None:
    headers = {f"anthropic-ratelimit-{d}-{f}": value for d in ("requests", "input-tokens") for f in
               ("limit", "remaining", "reset")} | {"retry-after": value}  # fmt: skip
    read = RateLimits.from_headers(headers)
    if read is not None:  # only a value that is well-formed somewhere counts
        for bucket in (read.requests, read.input_tokens):
            assert bucket.limit is None or 0 <= bucket.limit <= 10**15
            assert bucket.reset is None or bucket.reset.tzinfo is not None
        assert read.retry_after is None or 0 <= read.retry_after <= 86_400


@pytest.mark.hostile
def test_a_mapping_that_fails_is_no_figures() -> None:
    class Broken(dict[str, str]):
        def items(self) -> Any:
            raise RuntimeError("hostile")

    assert RateLimits.from_headers(Broken()) is None


def test_a_call_waits_only_as_long_as_the_bucket_takes_to_refill() -> None:
    async def go() -> tuple[float, float]:
        pacer = Pacer()
        pacer.observe(await pacer.admit(0, 0), limits(remaining=1_000, reset_in=0.3))
        # 500 of the 1,000 may be rounding: 500 held; 9,500 missing refill in 0.3 s, so 2,500 more take 0.08 s
        started = asyncio.get_running_loop().time()
        pacer.release(await pacer.admit(3_000, 0))
        return asyncio.get_running_loop().time() - started, pacer.waited_s

    elapsed, waited = asyncio.run(go())
    assert 0.05 < elapsed < 0.3 and waited == pytest.approx(elapsed, abs=0.05)


def test_calls_in_flight_are_debited_until_their_figures_come_back() -> None:
    async def go() -> list[bool]:
        pacer = Pacer()
        pacer.observe(await pacer.admit(0, 0), limits(remaining=10_000, reset_in=60))
        first = await pacer.admit(6_000, 0)  # fits; the server has not counted it yet
        second = asyncio.ensure_future(pacer.admit(6_000, 0))
        await asyncio.sleep(0.05)
        held = not second.done()
        pacer.observe(first, limits(remaining=10_000, reset_in=0.01))  # the server refilled meanwhile
        ticket = await asyncio.wait_for(second, 1)
        pacer.release(ticket)
        return [held, ticket.seq > first.seq]

    assert asyncio.run(go()) == [True, True]


def test_a_call_whose_figures_come_back_after_newer_ones_stays_debited() -> None:
    """Two calls in flight; the later one reaches the server first (a loaded machine) and its figures come
    back first. The earlier call's figures, older, are not taken, but the newer ones may not count it: it
    stays debited, so a third call that only fits if it were not counted waits."""

    async def go() -> bool:
        pacer = Pacer()
        pacer.observe(await pacer.admit(0, 0), limits(remaining=10_000, reset_in=60))
        first = await pacer.admit(4_000, 0)
        second = await pacer.admit(4_000, 0)
        pacer.observe(second, limits(remaining=6_000, reset_in=60))  # the server counted only the second
        pacer.observe(first, limits(remaining=10_000, reset_in=60))  # older figures: not taken
        third = asyncio.ensure_future(pacer.admit(4_000, 0))  # 6,000 - 500 rounding - 4,000 leaves 1,500
        await asyncio.sleep(0.1)
        held = not third.done()
        third.cancel()
        return held

    assert asyncio.run(go()), "the earlier call is still debited"


def test_before_any_figures_calls_within_the_api_s_floor_go_and_the_rest_wait_for_the_first_figures() -> None:
    async def go() -> tuple[int, bool, bool]:
        pacer = Pacer()
        first = await pacer.admit(12_000, 1_000)
        others = [asyncio.ensure_future(pacer.admit(12_000, 1_000)) for _ in range(3)]
        await asyncio.sleep(0.05)
        gone = sum(o.done() for o in others)  # 24,000 of FLOOR's 30,000 input tokens a minute
        pacer.observe(first, None)  # a server that reports no limits: nothing is paced after
        await asyncio.wait_for(asyncio.gather(*others), 1)
        return gone, pacer.waited_s < 1, FLOOR[1] == 30_000

    assert asyncio.run(go()) == (1, True, True)


def test_a_stopped_agent_stops_waiting() -> None:
    async def go() -> int:
        pacer = Pacer()
        pacer.observe(await pacer.admit(0, 0), limits(remaining=0, reset_in=30))
        waiter = asyncio.ensure_future(pacer.admit(5_000, 0))
        await asyncio.sleep(0.02)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return len(pacer._pending)

    assert asyncio.run(asyncio.wait_for(go(), 2)) == 0


@pytest.mark.hostile
def test_a_reset_in_the_far_future_holds_a_call_no_longer_than_the_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hostile = RateLimits.from_headers({
        "anthropic-ratelimit-input-tokens-limit": "1000000",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "9999-12-31T23:59:59Z",
    })  # fmt: skip

    async def go() -> float:
        pacer = Pacer(max_wait=0.2)
        pacer.observe(await pacer.admit(0, 0), hostile)
        started = asyncio.get_running_loop().time()
        pacer.release(await pacer.admit(900_000, 0))
        return asyncio.get_running_loop().time() - started

    with caplog.at_level(logging.WARNING, logger="teamrt.models.pacing"):
        elapsed = asyncio.run(go())
    assert 0.15 < elapsed < 1.0
    assert "sending it anyway" in caplog.text


def test_a_call_bigger_than_the_whole_bucket_is_not_held() -> None:
    async def go() -> float:
        pacer = Pacer()
        pacer.observe(await pacer.admit(0, 0), limits(remaining=0, limit=10_000, reset_in=30))
        started = asyncio.get_running_loop().time()
        pacer.release(await pacer.admit(50_000, 0))  # no wait makes it fit: the server decides
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(go()) < 0.1


def test_one_pacer_per_account_and_server_and_the_key_is_not_kept() -> None:
    key = "sk-ant-secret-key-for-pacing-test"
    pacer = pacer_for("http://127.0.0.1:9/", key)
    assert pacer_for("http://127.0.0.1:9", key) is pacer
    assert pacer_for("http://127.0.0.1:9", key + "x") is not pacer
    assert pacer_for("http://127.0.0.1:10", key) is not pacer
    from teamrt.models import pacing

    assert all(key not in name for names in pacing._pacers for name in names)
    assert fingerprint(key) != fingerprint(None) and key not in fingerprint(key)


def test_the_prefix_memory_counts_only_live_cacheable_prefixes() -> None:
    now = [0.0]
    memory = PrefixMemory(clock=lambda: now[0])
    marked = {"type": "text", "text": "x" * 8_000, "cache_control": {"type": "ephemeral"}}
    shape = prompt_shape({"model": "m", "system": [marked], "messages": [{"role": "user", "content": "hi"}]})
    assert shape.tokens == 2_014 and [b.tokens for b in shape.breakpoints] == [2_007]  # the block's JSON
    assert memory.cached(shape, 1_024) == 0
    memory.remember(shape, 4_096)  # under the model's minimum: the API writes nothing
    assert memory.cached(shape, 1_024) == 0
    memory.remember(shape, 1_024)
    assert memory.cached(shape, 1_024) == 2_007
    other = prompt_shape({"model": "m2", "system": [marked], "messages": []})
    assert memory.cached(other, 1_024) == 0  # another model's entry is not this one's
    now[0] = 301.0
    assert memory.cached(shape, 1_024) == 0  # the 5-minute entry expired
