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

from .types import Block

BYTES_PER_TOKEN = 4


def text_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def canonical(block: Block) -> bytes:
    """The block's bytes for counting and cache keys: ``cache_control`` does not change a prefix."""
    if "cache_control" in block:
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


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
