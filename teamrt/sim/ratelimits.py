"""The simulator's rate limits: the API's token buckets, its ``anthropic-ratelimit-*`` headers and its 429.

The API (platform.claude.com/docs/en/api/rate-limits) limits requests, input tokens and output tokens
per minute with token buckets that refill continuously up to the limit. The sim follows it:

- A request is admitted when every bucket holds what it needs: one request; its input tokens as the API
  counts them for the limit (the uncached input plus the cache writes, not cache reads); ``max_tokens``
  of output, reserved at the start and settled to the tokens really written at the end.
- Every response it admits or refuses carries, per bucket, ``-limit``, ``-remaining`` (token figures
  rounded to the nearest thousand, as the API rounds them) and ``-reset`` (RFC 3339, when the bucket is
  full again; with milliseconds, so that a test's short minute stays exact), and
  ``anthropic-ratelimit-tokens-*``, the most restrictive of the two token buckets.
- A request a bucket cannot take gets 429 ``rate_limit_error`` with ``retry-after`` (whole seconds,
  until the bucket holds it) and the API's wording for input tokens, as the API sends it. The wording
  for requests and output tokens is ours, built the same way (we found it nowhere published).

Departures, deliberate: buckets are per model name (the API pools a model class: every Sonnet shares
one); ``minute_s`` lets a test shorten the minute; the bucket clock is the ``SimServer``'s, so tests
can drive it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

RATE_LIMITS_DOC = "https://docs.claude.com/en/api/rate-limits"


@dataclass(frozen=True)
class SimRateLimits:
    """The limits of the simulated account, per model. The defaults are generous: no test meets them."""

    requests_per_minute: int = 1_000_000
    input_tokens_per_minute: int = 10_000_000_000
    output_tokens_per_minute: int = 1_000_000_000
    minute_s: float = 60.0
    """How long the limiter's minute lasts (tests shorten it)."""

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SimRateLimits.{name} must be a whole number of 1 or more")
        if not (math.isfinite(self.minute_s) and self.minute_s > 0):
            raise ValueError("SimRateLimits.minute_s must be a positive number of seconds")


class _Bucket:
    def __init__(self, capacity: int, minute_s: float, now: float) -> None:
        self.capacity = capacity
        self.rate = capacity / minute_s
        self.level = float(capacity)
        self.at = now

    def refill(self, now: float) -> None:
        self.level = min(float(self.capacity), self.level + self.rate * max(0.0, now - self.at))
        self.at = max(self.at, now)

    def seconds_until(self, amount: float) -> float:
        """Seconds until the bucket holds ``amount`` (a whole minute for more than it can ever hold)."""
        if amount > self.capacity:
            return self.capacity / self.rate
        return max(0.0, (amount - self.level) / self.rate)

    def seconds_to_full(self) -> float:
        return (self.capacity - self.level) / self.rate


@dataclass(frozen=True)
class Grant:
    """What the limiter said of one request: the headers to send, and the refusal (None: admitted)."""

    headers: dict[str, str]
    refusal: str | None = None
    model: str = ""
    reserved_output: int = 0


_UNITS = {"requests": "requests", "input-tokens": "input tokens", "output-tokens": "output tokens"}


class RateLimiter:
    """The buckets of each model, on ``clock`` (seconds); ``wall`` turns a moment into RFC 3339."""

    def __init__(
        self,
        limits: SimRateLimits,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._wall = wall
        self._buckets: dict[str, dict[str, _Bucket]] = {}

    def admit(self, model: str, input_tokens: int, max_tokens: int) -> Grant:
        """Take a request of ``input_tokens`` (as the limit counts them) asking for ``max_tokens``, or
        refuse it; either way, with the headers its response carries."""
        now = self._clock()
        buckets = self._of(model, now)
        need = {"requests": 1, "input-tokens": max(0, input_tokens), "output-tokens": max(0, max_tokens)}
        short = [name for name, amount in need.items() if buckets[name].level < amount]
        if short:
            wait = max(buckets[name].seconds_until(need[name]) for name in short)
            name = short[0]
            refusal = (
                f"This request would exceed your organization's rate limit of"
                f" {buckets[name].capacity:,} {_UNITS[name]} per minute (org: sim, model: {model})."
                f" For details, refer to: {RATE_LIMITS_DOC}. You can see the response headers for current"
                " usage. Please reduce the prompt length or the maximum tokens requested, or try again later."
            )
            headers = self._headers(buckets)
            headers["retry-after"] = str(max(1, math.ceil(wait)))
            return Grant(headers, refusal, model)
        for name, amount in need.items():
            buckets[name].level -= amount
        return Grant(self._headers(buckets), None, model, need["output-tokens"])

    def settle(self, grant: Grant, output_tokens: int) -> None:
        """The admitted request wrote ``output_tokens``: what it reserved beyond them is given back."""
        if grant.refusal is not None or grant.model not in self._buckets:
            return
        bucket = self._buckets[grant.model]["output-tokens"]
        bucket.refill(self._clock())
        unused = max(0, grant.reserved_output - max(0, output_tokens))
        bucket.level = min(float(bucket.capacity), bucket.level + unused)

    def _of(self, model: str, now: float) -> dict[str, _Bucket]:
        buckets = self._buckets.get(model)
        if buckets is None:
            limits, minute = self.limits, self.limits.minute_s
            buckets = self._buckets[model] = {
                "requests": _Bucket(limits.requests_per_minute, minute, now),
                "input-tokens": _Bucket(limits.input_tokens_per_minute, minute, now),
                "output-tokens": _Bucket(limits.output_tokens_per_minute, minute, now),
            }
        for bucket in buckets.values():
            bucket.refill(now)
        return buckets

    def _headers(self, buckets: dict[str, _Bucket]) -> dict[str, str]:
        wall = self._wall()
        headers: dict[str, str] = {}
        for name, bucket in buckets.items():
            headers.update(_bucket_headers(name, bucket, wall))
        tighter = min(("input-tokens", "output-tokens"), key=lambda n: buckets[n].level / buckets[n].capacity)
        headers.update(_bucket_headers("tokens", buckets[tighter], wall))
        return headers


def _bucket_headers(name: str, bucket: _Bucket, wall: float) -> dict[str, str]:
    remaining = max(0, math.floor(bucket.level))
    if name != "requests":
        remaining = (remaining + 500) // 1000 * 1000  # the API rounds token figures to the nearest thousand
    reset = datetime.fromtimestamp(wall + bucket.seconds_to_full(), UTC)
    prefix = f"anthropic-ratelimit-{name}-"
    return {
        prefix + "limit": str(bucket.capacity),
        prefix + "remaining": str(min(remaining, bucket.capacity)),
        prefix + "reset": reset.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
