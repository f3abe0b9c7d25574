"""teamrt's token approximation, used by the simulator and the scripted model.

It is deterministic and documented, not the real tokenizer: a piece of text
costs ``ceil(utf8_bytes / 4)`` tokens, and a content block (a tool definition,
a system block, a message block) costs the tokens of its canonical JSON
(sorted keys, no spaces, ``cache_control`` left out). A request's input is the
sum over its blocks, rendered in the API's order: tools, then system, then
messages.
"""

from __future__ import annotations

import json
from typing import Any

from teamrt.models.types import Block

BYTES_PER_TOKEN = 4


def text_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


def canonical(block: Block) -> bytes:
    """The block's bytes for counting and cache keys: ``cache_control`` does not change a prefix. A lone
    surrogate (a model may send one) is counted as its three bytes rather than raising."""
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    text = json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def bytes_tokens(data: bytes) -> int:
    return -(-len(data) // BYTES_PER_TOKEN)


def system_blocks(system: Any) -> list[Block]:
    """``system`` as the list of text blocks the API treats it as."""
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system or [])


def message_blocks(message: dict[str, Any]) -> list[Block]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def request_tokens(params: dict[str, Any]) -> int:
    """The input tokens of a Messages API request body (what ``count_tokens`` answers)."""
    blocks = [*params.get("tools", []), *system_blocks(params.get("system"))]
    for message in params.get("messages", []):
        blocks.extend(message_blocks(message))
    return sum(bytes_tokens(canonical(b)) for b in blocks)


def output_tokens(content: list[Block]) -> int:
    return sum(bytes_tokens(canonical(b)) for b in content)


def message_tokens(message: dict[str, Any]) -> int:
    return sum(bytes_tokens(canonical(b)) for b in message_blocks(message))


class TokenCounter:
    """``request_tokens`` for a conversation that only grows: earlier messages are not counted again.

    It trusts that the messages it counted last time are still the same
    objects at the same places (checked at the first and last of them); a
    conversation rebuilt some other way must use a new counter.
    """

    def __init__(self) -> None:
        self._counted: list[dict[str, Any]] = []
        self._total = 0

    def count(self, tools: list[Block], system: Any, messages: list[dict[str, Any]]) -> int:
        known = len(self._counted)
        if not (known <= len(messages) and (known == 0 or (
            messages[0] is self._counted[0] and messages[known - 1] is self._counted[-1]
        ))):  # fmt: skip
            self._counted, self._total, known = [], 0, 0
        for message in messages[known:]:
            self._total += message_tokens(message)
            self._counted.append(message)
        return sum(bytes_tokens(canonical(b)) for b in [*tools, *system_blocks(system)]) + self._total
