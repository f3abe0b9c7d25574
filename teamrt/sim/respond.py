"""A policy's ``Reply`` as a Messages API response: the whole message, or its stream events.

Ids are derived from the request (its full-prompt hash), so the same request
always gets the same message and tool-call ids. As the API does: a reply
longer than ``max_tokens`` is cut there with ``stop_reason: max_tokens`` and
``output_tokens == max_tokens`` (a tool call cut mid-way is returned with the
input written so far; streamed, its JSON ends unfinished); text reaching a
stop sequence ends before it with ``stop_reason: stop_sequence``; a refusal
carries its ``stop_details``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from teamrt.models.reply import Reply
from teamrt.models.tokens import BYTES_PER_TOKEN, bytes_tokens, canonical
from teamrt.models.types import Block
from teamrt.sim.cache import CacheOutcome
from teamrt.sim.servertools import citation_index
from teamrt.sim.signing import redacted_data, signature_for

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
    stop_sequences: list[str] | None = None,
) -> dict[str, Any]:
    """The message for ``reply``. ``web_searches``: the searches billed (None: the request had no web
    search tool, and usage says nothing of server tools). Search results are read by the model, so
    their tokens count as input, not output, as the API counts them."""
    stops = stop_sequences or []
    content, stop_reason, stop_sequence = _content(model, request_key, reply, max_tokens, stops)
    results = sum(bytes_tokens(canonical(b)) for b in content if b["type"] in _SERVER_RESULTS)
    usage: dict[str, Any] = {
        "input_tokens": outcome.input_tokens + results,
        "cache_creation_input_tokens": outcome.cache_creation,
        "cache_read_input_tokens": outcome.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": outcome.cache_write_5m,
            "ephemeral_1h_input_tokens": outcome.cache_write_1h,
        },
        "output_tokens": (
            max_tokens
            if stop_reason == "max_tokens"
            else sum(bytes_tokens(canonical(b)) for b in content if b["type"] not in _SERVER_RESULTS)
        ),
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
        "stop_sequence": stop_sequence,
        "stop_details": reply.stop_details if stop_reason == "refusal" else None,
        "usage": usage,
    }


def _content(
    model: str, request_key: bytes, reply: Reply, max_tokens: int, stop_sequences: list[str]
) -> tuple[list[Block], str, str | None]:
    """The response's blocks, its stop reason and the stop sequence that ended it."""
    if max_tokens == 0:  # the API only writes the prompt cache
        return [], "max_tokens", None
    content: list[Block] = []
    budget = max_tokens
    blocks = reply.content
    for index, block in enumerate(blocks):
        block = _finished(model, request_key, index, block)
        stop = _first_stop(block, stop_sequences)
        if stop is not None:
            block["text"] = block["text"][: block["text"].index(stop)]
        cost = 0 if block["type"] in _SERVER_RESULTS else bytes_tokens(canonical(block))
        if cost > budget or (cost == budget and (stop is not None or index < len(blocks) - 1)):
            cut = _cut(model, block, budget)
            if cut is not None:
                content.append(cut)
            return content, "max_tokens", None
        budget -= cost
        if stop is not None:
            if block["text"]:
                content.append(block)
            return content, "stop_sequence", stop
        content.append(block)
    return content, reply.final_stop_reason(), None


def _finished(model: str, request_key: bytes, index: int, block: Block) -> Block:
    """A reply's block as the API sends it: ids, signatures and sealed data filled in."""
    block = dict(block)
    if block["type"] == "tool_use":
        block.setdefault("id", "toolu_sim_" + hashlib.sha256(request_key + b"%d" % index).hexdigest()[:24])
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["input"]}
    if block["type"] == "thinking":
        block["signature"] = signature_for(model, block["thinking"])
    elif block["type"] == "redacted_thinking":
        return {"type": "redacted_thinking", "data": redacted_data(model, block["thinking"])}
    elif block["type"] == "text" and block.get("citations"):
        block["citations"] = [{**c, "encrypted_index": citation_index(c)} for c in block["citations"]]
    return block


def _first_stop(block: Block, stop_sequences: list[str]) -> str | None:
    """The stop sequence that occurs first in a text block, if any."""
    if block["type"] != "text":
        return None
    found = [(block["text"].find(s), s) for s in stop_sequences if s and s in block["text"]]
    return min(found)[1] if found else None


def _cut(model: str, block: Block, budget: int) -> Block | None:
    """What of ``block`` was written when the budget ran out (None: nothing worth sending). A tool call keeps
    the input fields it had finished (what the SDK's partial JSON parse of the stream gives)."""
    if budget <= 0:
        return None
    if block["type"] in ("text", "thinking"):
        field = block["type"]
        block[field] = block[field][: budget * BYTES_PER_TOKEN // 2]
        if field == "thinking":
            block["signature"] = signature_for(model, block["thinking"])
        return block if block[field] else None
    if block["type"] == "tool_use":
        items = list(block["input"].items())
        kept = 0
        while kept < len(items) and _tokens({**block, "input": dict(items[: kept + 1])}) < budget:
            kept += 1
        return {**block, "input": dict(items[:kept])}
    return None


def _tokens(block: Block) -> int:
    return bytes_tokens(canonical(block))


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
    last = len(message["content"]) - 1
    cut_call = last if message["stop_reason"] == "max_tokens" and last >= 0 else None
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
            if kind == "tool_use" and cut_call == index:
                raw = raw[:-1]  # the JSON was being written when max_tokens ran out
            elif corrupt and kind == "tool_use":
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
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": message["stop_sequence"],
                "stop_details": message["stop_details"],
            },
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
