"""Faults the simulator injects into its responses, on request or at random with a seed.

Kinds, and what the client sees:

- ``rate_limit``: 429 ``rate_limit_error`` with ``retry-after`` (seconds,
  default 1).
- ``overloaded``: 529 ``overloaded_error``.
- ``server_error``: 500 ``api_error``.

The last two carry ``retry-after`` only when the fault sets one (tests do, to
keep the SDK's backoff short).
- ``slow``: the stream is sent with ``delay`` seconds between events.
- ``stall``: the stream stops after ``after_events`` events and stays silent
  for ``seconds`` with the connection open.
- ``cut``: the connection is reset after ``after_events`` events.
- ``stream_error``: an ``overloaded_error`` event ends the stream after
  ``after_events`` events, as the API does when it is overloaded mid-response.
- ``bad_tool_input``: the first tool call's streamed input is not valid JSON.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from dataclasses import dataclass

KINDS = ("rate_limit", "overloaded", "server_error", "slow", "stall", "cut", "stream_error", "bad_tool_input")
STATUS_FAULTS = {"rate_limit": (429, "rate_limit_error"), "overloaded": (529, "overloaded_error"),
                 "server_error": (500, "api_error")}  # fmt: skip


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: float | None = None
    delay: float = 0.05
    after_events: int = 3
    seconds: float = 3600.0
    agent: str | None = None
    """Only requests from this agent take the fault (None: any)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault {self.kind!r}; known: {', '.join(KINDS)}")


class FaultPlan:
    """Faults queued for the next requests, then random ones at ``rate`` from a seeded generator.

    Thread-safe: tests queue faults from their own thread while the server runs.
    """

    def __init__(self) -> None:
        self._queue: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._rate = 0.0
        self._kinds: tuple[str, ...] = ()
        self._rng = random.Random(0)
        self._template = Fault("cut")

    def add(self, fault: Fault | str, *, times: int = 1) -> None:
        """Give the next ``times`` requests ``fault`` (a kind, or a ``Fault`` with its parameters)."""
        fault = Fault(fault) if isinstance(fault, str) else fault
        with self._lock:
            self._queue.extend([fault] * times)

    def at_random(
        self, rate: float, *, seed: int, kinds: tuple[str, ...] = KINDS, like: Fault | None = None
    ) -> None:
        """From now on, each request takes one of ``kinds`` with probability ``rate``,
        with the parameters of ``like``."""
        for kind in kinds:
            Fault(kind)
        with self._lock:
            self._rate, self._kinds, self._rng = rate, kinds, random.Random(seed)
            self._template = like or Fault("cut")

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._rate = 0.0

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    def take(self, agent: str) -> Fault | None:
        """The fault for the next request from ``agent``, if any."""
        with self._lock:
            for i, fault in enumerate(self._queue):
                if fault.agent is None or fault.agent == agent:
                    del self._queue[i]
                    return fault
            if self._rate and self._rng.random() < self._rate:
                kind = self._rng.choice(self._kinds)
                t = self._template
                return Fault(kind, t.retry_after, t.delay, t.after_events, t.seconds)
        return None
