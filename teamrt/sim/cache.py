"""Prompt-cache accounting that follows the Messages API's rules.

- The prompt is rendered tools -> system -> messages; every content block is a
  position, and a position's key is a hash of the model and everything up to
  and including it. ``tool_choice``, ``thinking`` and ``output_config`` (the
  effort) enter the key where the messages begin: changing them loses the
  conversation's entries, not the tools' or the system's.
- A block with ``cache_control`` is a breakpoint (at most 4); a top-level
  ``cache_control`` marks the last cacheable block (not a thinking block) and
  takes one of the 4 unless that block is marked already. For each
  breakpoint, the position itself and up to 20 positions before it are
  looked up; the longest live entry found is read.
- Every breakpoint after the read position whose prefix reaches the model's
  minimum cacheable length is written, with its lifetime (5 minutes, or 1 hour
  with ``ttl: "1h"``). Reading an entry refreshes its lifetime and that of
  every shorter live entry the read prefix covers (the system prompt's).
- A written entry is usable by other requests only once the writing request's
  response has begun (``begin``): requests accounted before then miss it and
  write their own, so a burst of same-prefix requests is billed as writes.
- Usage: ``cache_read`` is the read prefix; ``cache_creation`` the tokens from
  there to the last written breakpoint, split by the lifetime of the
  breakpoint that ends each stretch; ``input`` the rest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from teamrt.models.prefixes import keyed_fields
from teamrt.models.tokens import bytes_tokens, canonical, message_blocks, system_blocks

LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True)
class Position:
    key: bytes
    tokens_through: int
    breakpoint: str | None
    """The lifetime ("5m" / "1h") when the block carries ``cache_control``."""


@dataclass(frozen=True)
class CacheOutcome:
    input_tokens: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    pending: tuple[Position, ...] = field(default=(), compare=False, repr=False)
    """The entries this request writes, invisible to others until ``CacheLedger.begin``."""

    @property
    def cache_creation(self) -> int:
        return self.cache_write_5m + self.cache_write_1h


def render(params: dict[str, Any]) -> list[Position]:
    """The positions of a request body, in the API's order."""
    digest = hashlib.sha256(str(params.get("model", "")).encode())
    positions: list[Position] = []
    cacheable = -1  # the last position a top-level cache_control may mark
    tokens = 0

    def add(tag: bytes, block: dict[str, Any]) -> None:
        nonlocal tokens, cacheable
        data = canonical(block)
        digest.update(tag + len(data).to_bytes(8, "big") + data)
        tokens += bytes_tokens(data)
        positions.append(Position(digest.copy().digest(), tokens, _ttl(block)))
        if block.get("type") not in ("thinking", "redacted_thinking"):
            cacheable = len(positions) - 1

    for tool in params.get("tools") or []:
        add(b"T", tool)
    for block in system_blocks(params.get("system")):
        add(b"S", block)
    digest.update(b"P" + canonical(keyed_fields(params)))
    for message in params.get("messages") or []:
        tag = _ROLE_TAGS.get(message.get("role"), b"A")
        for block in message_blocks(message):
            add(tag, block)
    automatic = params.get("cache_control")
    if isinstance(automatic, dict) and cacheable >= 0 and positions[cacheable].breakpoint is None:
        ttl = _ttl({"cache_control": automatic})
        positions[cacheable] = Position(positions[cacheable].key, positions[cacheable].tokens_through, ttl)
    return positions


_ROLE_TAGS = {"user": b"U", "assistant": b"A", "system": b"Y"}
"""A ``system`` message mid-conversation is a position of its own role (not the system prompt's ``S``)."""


def _ttl(block: dict[str, Any]) -> str | None:
    marker = block.get("cache_control")
    if not isinstance(marker, dict):
        return None
    return "1h" if marker.get("ttl") == "1h" else "5m"


class CacheLedger:
    """Live cache entries of one simulated account: key -> (expiry, lifetime).

    ``account`` bills a request against the visible entries and returns the entries it writes as
    pending; ``begin`` makes them visible when that request's response begins. A request whose
    response never begins (it failed first) writes nothing.
    """

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[float, str]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def account(self, positions: list[Position], min_tokens: int, now: float) -> CacheOutcome:
        total = positions[-1].tokens_through if positions else 0
        breakpoints = [i for i, p in enumerate(positions) if p.breakpoint is not None]
        read_at = self._longest_hit(positions, breakpoints, now)
        read = positions[read_at].tokens_through if read_at >= 0 else 0
        written = {"5m": 0, "1h": 0}
        pending: list[Position] = []
        done = read
        for i in breakpoints:
            position = positions[i]
            if i <= read_at or position.tokens_through < min_tokens:
                continue
            assert position.breakpoint is not None
            written[position.breakpoint] += position.tokens_through - done
            done = position.tokens_through
            pending.append(position)
        return CacheOutcome(total - done, read, written["5m"], written["1h"], tuple(pending))

    def begin(self, outcome: CacheOutcome, now: float) -> None:
        """The response of the request billed ``outcome`` has begun: its written entries become visible,
        their lifetimes counted from ``now``."""
        for position in outcome.pending:
            assert position.breakpoint is not None
            self._entries[position.key] = (now + TTL_SECONDS[position.breakpoint], position.breakpoint)
        if len(self._entries) > 4096:
            self._entries = {k: v for k, v in self._entries.items() if v[0] > now}

    def _longest_hit(self, positions: list[Position], breakpoints: list[int], now: float) -> int:
        best = -1
        for b in breakpoints:
            for i in range(b, max(b - LOOKBACK_BLOCKS, 0) - 1, -1):
                if i <= best:
                    break
                entry = self._entries.get(positions[i].key)
                if entry is not None and entry[0] > now:
                    best = i
                    break
        self._refresh(positions[: best + 1], now)
        return best

    def _refresh(self, covered: list[Position], now: float) -> None:
        """A read refreshes the entry read and every shorter live entry of its prefix."""
        for position in covered:
            entry = self._entries.get(position.key)
            if entry is not None and entry[0] > now:
                self._entries[position.key] = (now + TTL_SECONDS[entry[1]], entry[1])
