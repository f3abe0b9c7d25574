"""Rate-limit pacing: read the API's ``anthropic-ratelimit-*`` headers and hold a call back until the
account's buckets can take it, so a fan-out of many agents waits its turn instead of meeting 429s.

The API limits requests, input tokens and output tokens per minute with token buckets that refill
continuously (platform.claude.com/docs/en/api/rate-limits). Every response says, per bucket, its
``-limit``, its ``-remaining`` (tokens rounded to the nearest thousand) and its ``-reset`` (RFC 3339: when
the bucket is full again). Input tokens count the uncached input and the cache writes, not cache reads;
output tokens are reserved at ``max_tokens`` when a request starts and settled when it ends.

``Pacer`` (one per account and server in the process, from ``pacer_for``) keeps the newest figures and,
before each call, waits until the buckets hold the call's estimate (its input tokens and ``max_tokens``):
the time the deficit takes to refill at the rate the figures imply, never past the bucket's reset. Calls
admitted but not yet answered are debited locally, all of them (one sent before the call whose figures the
pacer holds may reach the server after it), so a burst of concurrent calls is paced among themselves.
Before the first figures arrive, calls go while together they stay within the API's smallest published
limits (``FLOOR``: what any account may send at once); the rest wait for the figures of the first (its
headers come back as its response starts). A wait is bounded by ``MAX_WAIT_S`` (then the call goes,
logged, and the SDK's own retries honour ``retry-after``) and is cancelled with the task that waits (a
stopped agent stops waiting).

The key is never kept: a pacer is found by a fingerprint of it. Headers are read tolerantly: a value that
is malformed, out of range or hostile is ignored, never raised on.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0
"""The longest one call is held back: a per-minute bucket refills whole within a minute, so a longer wait
means figures the pacer cannot trust (or a hostile server)."""
PROBE_WAIT_S = 15.0
"""How long calls wait for the first call's figures before going anyway."""
FLOOR = (50, 30_000, 8_000)
"""Requests, input tokens and output tokens a minute of the API's lowest tier (Tier 1, Sonnet and Opus;
platform.claude.com/docs/en/api/rate-limits): what any account takes before its own figures are known."""
ROUNDING = 500
"""The API rounds token figures to the nearest thousand: up to this many fewer may really remain."""
_MAX_COUNT = 10**15
_MAX_HEADER_CHARS = 64
_INT = re.compile(r"\d{1,16}")
_DIMENSIONS = ("requests", "input-tokens", "output-tokens", "tokens")


@dataclass(frozen=True)
class Bucket:
    """One limit as a response reported it; a field the response did not give (or gave malformed) is None."""

    limit: int | None = None
    remaining: int | None = None
    reset: datetime | None = None
    """When the bucket is full again (timezone-aware)."""


@dataclass(frozen=True)
class RateLimits:
    """The ``anthropic-ratelimit-*`` figures (and ``retry-after``) of one response."""

    requests: Bucket = Bucket()
    input_tokens: Bucket = Bucket()
    output_tokens: Bucket = Bucket()
    tokens: Bucket = Bucket()
    """The most restrictive token limit in effect (the API's ``anthropic-ratelimit-tokens-*``)."""
    retry_after: float | None = None
    """Seconds to wait before retrying (sent with a 429)."""
    observed: datetime | None = None
    """When the headers were read (the clock ``reset`` is compared with)."""

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], *, now: datetime | None = None) -> RateLimits | None:
        """The figures of ``headers`` (any mapping; names compared without case); None when it has none.
        Never raises: a value that does not parse, or is out of range, counts as absent."""
        try:
            items = {str(k).lower(): str(v) for k, v in headers.items()}
        except Exception:  # a mapping that fails to iterate is a mapping with no figures
            return None
        buckets = {}
        for name in _DIMENSIONS:
            prefix = f"anthropic-ratelimit-{name}-"
            buckets[name] = Bucket(
                _count(items.get(prefix + "limit")),
                _count(items.get(prefix + "remaining")),
                _time(items.get(prefix + "reset")),
            )
        retry_after = _seconds(items.get("retry-after"))
        if retry_after is None and all(b == Bucket() for b in buckets.values()):
            return None
        return cls(
            buckets["requests"], buckets["input-tokens"], buckets["output-tokens"], buckets["tokens"],
            retry_after, now or datetime.now(UTC),
        )  # fmt: skip


def _count(value: str | None) -> int | None:
    if value is None or len(value) > _MAX_HEADER_CHARS:
        return None
    value = value.strip()
    if not _INT.fullmatch(value):
        return None
    number = int(value)
    return number if number <= _MAX_COUNT else None


def _time(value: str | None) -> datetime | None:
    if value is None or len(value) > _MAX_HEADER_CHARS:
        return None
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _seconds(value: str | None) -> float | None:
    if value is None or len(value) > _MAX_HEADER_CHARS:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds <= 86_400 else None


@dataclass
class _Level:
    """A bucket as last reported, on the monotonic clock: ``remaining`` at ``at``, refilling at ``rate``
    per second up to ``limit``."""

    limit: int
    remaining: float
    at: float
    rate: float

    def available(self, now: float) -> float:
        return min(float(self.limit), self.remaining + self.rate * max(0.0, now - self.at))


@dataclass(frozen=True)
class Ticket:
    """A call the pacer let through; hand it back with ``observe`` and ``release``."""

    seq: int
    need: tuple[int, int, int]
    """(requests, input tokens, output tokens)."""
    sent: float | None = None
    """The wall-clock time the call was let through: the server answered after it."""


class Pacer:
    """Paces the calls of one account on one server (see the module's docstring). Thread-safe; its waits
    run on whichever event loop awaits ``admit``."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        max_wait: float = MAX_WAIT_S,
        probe_wait: float = PROBE_WAIT_S,
    ) -> None:
        self._clock = clock
        self._wall = wall
        self.max_wait = max_wait
        self.probe_wait = probe_wait
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._levels: dict[str, _Level] | None = None
        """None: nothing observed yet; {}: the server reports no limits."""
        self._observed_seq = 0
        self._pending: dict[int, Ticket] = {}
        """Admitted calls whose figures have not come back (the server may not have counted them)."""
        self._wakeups: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.waited_s = 0.0
        """Seconds calls have been held back in all (for tests and reports)."""

    async def admit(self, input_tokens: int, output_tokens: int) -> Ticket:
        """Wait until the buckets can take a call of this size, then debit it. Cancellable."""
        need = (1, max(0, input_tokens), max(0, output_tokens))
        started = self._clock()
        warned = False
        while True:
            with self._lock:
                wait = self._wait_for(need, self._clock() - started)
                if wait <= 0:
                    ticket = Ticket(next(self._seq), need, self._wall())
                    self._pending[ticket.seq] = ticket
                    self.waited_s += self._clock() - started
                    return ticket
            left = self.max_wait - (self._clock() - started)
            if left <= 0:
                log.warning(
                    "rate limits: a call of %d input and %d output tokens waited %.0fs (the most it waits);"
                    " sending it anyway", need[1], need[2], self.max_wait,
                )  # fmt: skip
                with self._lock:
                    ticket = Ticket(next(self._seq), need, self._wall())
                    self._pending[ticket.seq] = ticket
                    self.waited_s += self._clock() - started
                return ticket
            if not warned and wait >= 1.0:
                warned = True
                log.info("rate limits: holding a call back %.1fs until the account's buckets refill", wait)
            await self._sleep(min(wait, left))

    def observe(self, ticket: Ticket | None, limits: RateLimits | None) -> None:
        """The figures a response to ``ticket``'s call carried (None: it carried none). Figures older than
        ones already taken are ignored."""
        with self._lock:
            seq = ticket.seq if ticket is not None else self._observed_seq
            if ticket is not None:
                self._pending.pop(ticket.seq, None)
            if seq < self._observed_seq:
                # Newer figures are held, from a call admitted after this one that may have reached the
                # server first: they may not count this call, which no longer counts as in flight. So it
                # is debited from them now; if they did count it, that only waits longer.
                self._debit(ticket.need if ticket is not None else (0, 0, 0))
                self._wake()
                return
            self._observed_seq = seq
            sent = ticket.sent if ticket is not None else None
            self._levels = {} if limits is None else self._levels_of(limits, sent)
            self._wake()

    def _debit(self, need: tuple[int, int, int]) -> None:
        """Take ``need`` out of the buckets as they stand now; called with the lock held."""
        if not self._levels:
            return
        now = self._clock()
        amounts = {"requests": need[0], "input": need[1], "output": need[2], "tokens": need[1] + need[2]}
        for name, level in self._levels.items():
            level.remaining = max(0.0, level.available(now) - amounts[name])
            level.at = now

    def release(self, ticket: Ticket) -> None:
        """The call is over (answered, failed or cancelled); its figures, if any, were observed."""
        with self._lock:
            if self._pending.pop(ticket.seq, None) is not None:
                self._wake()

    def _levels_of(self, limits: RateLimits, sent: float | None = None) -> dict[str, _Level]:
        """The buckets as ``limits`` report them. A bucket's refill rate is what it lacks over the time to its
        reset, counted from when the call was ``sent`` where known: the server wrote the figures between
        then and now, and the earlier start only lowers the rate (a response read late, on a loaded
        machine, would otherwise make the buckets look as if they refill faster than they do)."""
        now = self._clock()
        observed = limits.observed.timestamp() if limits.observed is not None else self._wall()
        if sent is not None:
            observed = min(observed, sent)
        levels: dict[str, _Level] = {}
        named = {"requests": limits.requests, "input": limits.input_tokens, "output": limits.output_tokens}
        if limits.input_tokens.limit is None and limits.output_tokens.limit is None:
            named["tokens"] = limits.tokens  # only a server that reports no split is paced on the total
        for name, bucket in named.items():
            if bucket.limit is None or bucket.remaining is None or bucket.limit == 0:
                continue
            margin = 0 if name == "requests" else ROUNDING
            remaining = max(0, min(bucket.remaining, bucket.limit) - margin)
            until_full = (bucket.reset.timestamp() - observed) if bucket.reset is not None else None
            missing = bucket.limit - remaining
            if until_full is not None and until_full > 0 and missing > 0:
                rate = missing / min(until_full, self.max_wait * 10)
            else:
                rate = bucket.limit / 60.0  # per-minute limits refill whole within a minute
            levels[name] = _Level(bucket.limit, float(remaining), now, max(rate, bucket.limit / 3600.0))
        return levels

    def _wait_for(self, need: tuple[int, int, int], waited: float) -> float:
        """Seconds until ``need`` fits (0: now), for a call that has waited ``waited``; called with the
        lock held. Before any figures, calls within ``FLOOR`` go and the rest wait for the first figures
        (``probe_wait`` at most)."""
        if self._levels is None:
            sent = [t.need for t in self._pending.values()]
            within = all(sum(d[i] for d in sent) + need[i] <= FLOOR[i] for i in range(3))
            return 0.0 if not sent or within else max(0.0, self.probe_wait - waited)
        now = self._clock()
        # every call still in flight is debited, even one admitted before the call whose figures these are:
        # it may reach the server after that call (a slow connection, a loaded machine), and the figures
        # would not count it yet; counting a call twice only waits longer, counting it never meets a 429
        debits = [t.need for t in self._pending.values()]
        wanted = {
            "requests": (need[0], sum(d[0] for d in debits)),
            "input": (need[1], sum(d[1] for d in debits)),
            "output": (need[2], sum(d[2] for d in debits)),
            "tokens": (need[1] + need[2], sum(d[1] + d[2] for d in debits)),
        }
        wait = 0.0
        for name, level in self._levels.items():
            amount, debit = wanted[name]
            if amount > level.limit:
                continue  # more than the whole bucket: no wait makes it fit; the server decides
            deficit = amount + debit - level.available(now)
            if deficit > 0:
                wait = max(wait, deficit / level.rate)
        return wait

    async def _sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` or until new figures (or a finished call) may let the call through sooner."""
        loop = asyncio.get_running_loop()
        wakeup: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._wakeups.append((loop, wakeup))
        try:
            await asyncio.wait({wakeup}, timeout=seconds)
        finally:
            with self._lock:
                self._wakeups = [(lp, f) for lp, f in self._wakeups if f is not wakeup]

    def _wake(self) -> None:
        for loop, wakeup in self._wakeups:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_set, wakeup)
        self._wakeups = []


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_pacers: dict[tuple[str, str], Pacer] = {}
_pacers_lock = threading.Lock()
_MAX_PACERS = 256


def fingerprint(key: str | None) -> str:
    """A short digest naming an account without keeping its key."""
    return hashlib.sha256((key or "").encode("utf-8", "surrogatepass")).hexdigest()[:16]


def pacer_for(base_url: str, key: str | None) -> Pacer:
    """The process's pacer for the account ``key`` on ``base_url``: every model of the process calling
    with the same key shares it, as they share the account's buckets."""
    name = (base_url.rstrip("/"), fingerprint(key))
    with _pacers_lock:
        pacer = _pacers.get(name)
        if pacer is None:
            if len(_pacers) >= _MAX_PACERS:  # servers come and go in long test runs; forget the oldest
                del _pacers[next(iter(_pacers))]
            pacer = _pacers[name] = Pacer()
        return pacer
