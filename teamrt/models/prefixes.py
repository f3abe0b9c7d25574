"""What of a request the prompt cache will likely serve, for pacing: the API's input-token limit does not
count cache reads, so a fork fan-out that reads its parent's prefix costs the limit only its directives.

``prompt_shape`` walks a request's blocks in the API's order (tools, system, messages) once, counting
tokens (``teamrt.models.tokens``) and fingerprinting the prefix at each ``cache_control`` breakpoint.
``PrefixMemory`` keeps the breakpoints of the account's recent calls with their lifetimes; a new
request's likely cache read is its longest breakpoint prefix still alive there. It is an estimate for
pacing only: the response's ``usage`` says what was really read.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from teamrt.models.pacing import fingerprint
from teamrt.models.tokens import bytes_tokens, canonical, message_blocks, system_blocks

_LIFETIMES = {"5m": 300.0, "1h": 3600.0}
_MAX_ENTRIES = 4096


@dataclass(frozen=True)
class Breakpoint:
    key: bytes
    tokens: int
    """Tokens of the prefix up to and including the marked block."""
    lifetime: float


@dataclass(frozen=True)
class PromptShape:
    tokens: int
    breakpoints: tuple[Breakpoint, ...]


def prompt_shape(params: dict[str, Any]) -> PromptShape:
    """The tokens of a request's prompt and the fingerprint of each breakpoint's prefix. ``thinking`` and
    ``tool_choice`` enter the fingerprint where the messages begin, as they enter the API's cache key."""
    digest = hashlib.sha256(str(params.get("model", "")).encode())
    tokens = 0
    marks: list[Breakpoint] = []

    def add(tag: bytes, block: dict[str, Any]) -> None:
        nonlocal tokens
        data = canonical(block)
        digest.update(tag + len(data).to_bytes(8, "big") + data)
        tokens += bytes_tokens(data)
        marker = block.get("cache_control")
        if isinstance(marker, dict):
            lifetime = _LIFETIMES["1h" if marker.get("ttl") == "1h" else "5m"]
            marks.append(Breakpoint(digest.copy().digest(), tokens, lifetime))

    for tool in params.get("tools") or []:
        add(b"T", tool)
    for block in system_blocks(params.get("system")):
        add(b"S", block)
    digest.update(b"P" + canonical(keyed_fields(params)))
    for message in params.get("messages") or []:
        for block in message_blocks(message):
            add(b"U" if message.get("role") == "user" else b"A", block)
    return PromptShape(tokens, tuple(marks))


class PrefixMemory:
    """The breakpoint prefixes an account's calls wrote or read lately, with when each expires."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[bytes, float] = {}

    def cached(self, shape: PromptShape, min_tokens: int) -> int:
        """Tokens of ``shape``'s longest breakpoint prefix still alive (0: none)."""
        now = self._clock()
        with self._lock:
            alive = [b.tokens for b in shape.breakpoints if self._entries.get(b.key, 0.0) > now]
        best = max(alive, default=0)
        return best if best >= min_tokens else 0

    def remember(self, shape: PromptShape, min_tokens: int) -> None:
        """A call with ``shape`` began its response: its prefixes are in the cache for their lifetimes."""
        now = self._clock()
        with self._lock:
            for b in shape.breakpoints:
                if b.tokens >= min_tokens:
                    self._entries[b.key] = max(self._entries.get(b.key, 0.0), now + b.lifetime)
            if len(self._entries) > _MAX_ENTRIES:
                self._entries = {k: v for k, v in self._entries.items() if v > now}
                while len(self._entries) > _MAX_ENTRIES:
                    del self._entries[next(iter(self._entries))]


_memories: dict[tuple[str, str], PrefixMemory] = {}
_memories_lock = threading.Lock()


def memory_for(base_url: str, key: str | None) -> PrefixMemory:
    """The process's memory for the account ``key`` on ``base_url`` (the cache is the account's, shared by
    all its callers, as the pacer is); the key is kept only as ``pacing.fingerprint``."""
    name = (base_url.rstrip("/"), fingerprint(key))
    with _memories_lock:
        memory = _memories.get(name)
        if memory is None:
            if len(_memories) >= 256:
                del _memories[next(iter(_memories))]
            memory = _memories[name] = PrefixMemory()
        return memory


def keyed_fields(params: dict[str, Any]) -> dict[str, Any]:
    """The request fields the cache's key takes in besides the blocks: ``thinking`` and ``tool_choice``, and
    ``output_config`` when it is sent (the API keys the prefix on the top-level effort: docs, "Per-message
    effort")."""
    keyed = {"thinking": params.get("thinking"), "tool_choice": params.get("tool_choice")}
    if params.get("output_config") is not None:
        keyed["output_config"] = params["output_config"]
    return keyed
