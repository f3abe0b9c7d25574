"""A policy's ``Reply`` as a Messages API response: the whole message, or its stream events.

Ids are derived from the request (its full-prompt hash), so the same request
always gets the same message and tool-call ids. A reply longer than
``max_tokens`` is cut there with ``stop_reason: max_tokens``, as the API does.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..reply import Reply
from ..tokens import BYTES_PER_TOKEN, bytes_tokens, canonical
from ..types import Block
from .cache import CacheOutcome
from .servertools import citation_index
from .signing import signature_for

DELTA_CHARS = 48
"""Text, thinking and tool-input deltas carry this many characters each."""
_SERVER_RESULTS = frozenset({"web_search_tool_result"})


def build_message(
    model: str,
    request_key: bytes,
    reply: Reply,
    outcome: CacheOutcome,
    max_tokens: int,
    *,
    web_searches: int | None = None,
) -> dict[str, Any]:
    """The message for ``reply``. ``web_searches``: the searches billed (None: the request had no web
    search tool, and usage says nothing of server tools). Search results are read by the model, so
    their tokens count as input, not output, as the API counts them."""
    content, stop_reason = _content(model, request_key, reply, max_tokens)
    results = sum(bytes_tokens(canonical(b)) for b in content if b["type"] in _SERVER_RESULTS)
    usage: dict[str, Any] = {
        "input_tokens": outcome.input_tokens + results,
        "cache_creation_input_tokens": outcome.cache_creation,
        "cache_read_input_tokens": outcome.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": outcome.cache_write_5m,
            "ephemeral_1h_input_tokens": outcome.cache_write_1h,
        },
        "output_tokens": sum(bytes_tokens(canonical(b)) for b in content if b["type"] not in _SERVER_RESULTS),
    }
    if web_searches is not None:
        usage["server_tool_use"] = {"web_search_requests": web_searches, "web_fetch_requests": 0}
    return {
        "id": "msg_sim_" + hashlib.sha256(request_key + b"msg").hexdigest()[:24],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _content(model: str, request_key: bytes, reply: Reply, max_tokens: int) -> tuple[list[Block], str]:
    content: list[Block] = []
    budget = max_tokens
    for index, block in enumerate(reply.content):
        block = dict(block)
        if block["type"] == "tool_use":
            block.setdefault(
                "id", "toolu_sim_" + hashlib.sha256(request_key + b"%d" % index).hexdigest()[:24]
            )
            block = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["input"]}
        elif block["type"] == "thinking":
            block["signature"] = signature_for(model, block["thinking"])
        elif block["type"] == "text" and block.get("citations"):
            block["citations"] = [{**c, "encrypted_index": citation_index(c)} for c in block["citations"]]
        cost = 0 if block["type"] in _SERVER_RESULTS else bytes_tokens(canonical(block))
        if cost > budget:
            field = {"text": "text", "thinking": "thinking"}.get(block["type"])
            if field is not None and budget > 0:
                block[field] = block[field][: budget * BYTES_PER_TOKEN // 2]
                if field == "thinking":
                    block["signature"] = signature_for(model, block["thinking"])
                content.append(block)
            return content, "max_tokens"
        budget -= cost
        content.append(block)
    return content, reply.final_stop_reason()


def sse(event: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (
        event["type"].encode(),
        json.dumps(event, separators=(",", ":")).encode(),
    )


def stream_events(message: dict[str, Any], *, bad_tool_input: bool = False) -> list[dict[str, Any]]:
    """The API's event sequence for ``message``."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    corrupt = bad_tool_input
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(_start(index, {"type": "text", "text": ""}))
            for citation in block.get("citations") or []:
                events.append(_delta(index, {"type": "citations_delta", "citation": citation}))
            events.extend(_deltas(index, "text_delta", "text", block["text"]))
        elif kind == "thinking":
            events.append(_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
            events.extend(_deltas(index, "thinking_delta", "thinking", block["thinking"]))
            events.append(_delta(index, {"type": "signature_delta", "signature": block["signature"]}))
        elif kind in ("tool_use", "server_tool_use"):
            events.append(
                _start(index, {"type": kind, "id": block["id"], "name": block["name"], "input": {}})
            )
            raw = json.dumps(block["input"], separators=(",", ":"))
            if corrupt and kind == "tool_use":
                raw, corrupt = raw[:-1] + ',"', False
            events.append(_delta(index, {"type": "input_json_delta", "partial_json": ""}))
            events.extend(_deltas(index, "input_json_delta", "partial_json", raw))
        else:
            events.append(_start(index, block))
        events.append({"type": "content_block_stop", "index": index})
    usage = dict(message["usage"])
    usage.pop("cache_creation")
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
            "usage": usage,
        }
    )
    events.append({"type": "message_stop"})
    return events


def _start(index: int, block: Block) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _deltas(index: int, kind: str, field: str, text: str) -> list[dict[str, Any]]:
    return [
        _delta(index, {"type": kind, field: text[i : i + DELTA_CHARS]})
        for i in range(0, len(text), DELTA_CHARS)
    ]
