"""A policy's ``Reply`` as a Messages API response: the whole message, or its stream events.

Ids are derived from the request (its full-prompt hash), so the same request
always gets the same message and tool-call ids. As the API does: a reply
longer than ``max_tokens`` is cut there with ``stop_reason: max_tokens`` and
``output_tokens == max_tokens``, or where input and output fill the context
window first, with ``model_context_window_exceeded`` (a tool call cut mid-way
is returned with the input written so far; streamed, its JSON ends
unfinished); text reaching a stop sequence ends before it with
``stop_reason: stop_sequence``; a refusal carries its ``stop_details``. Each
thinking block is signed over its prefix (``teamrt.sim.binding``); a model
that thinks gets a thinking block first when its policy wrote none.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from teamrt.models.reply import Reply
from teamrt.models.tokens import BYTES_PER_TOKEN, bytes_tokens, canonical
from teamrt.models.types import Block
from teamrt.sim.binding import PrefixChain
from teamrt.sim.cache import CacheOutcome
from teamrt.sim.servertools import citation_index
from teamrt.sim.signing import redacted_data, signature_for

DELTA_CHARS = 48
"""Text, thinking and tool-input deltas carry this many characters each."""
_SERVER_RESULTS = frozenset({"web_search_tool_result"})


@dataclass
class Shape:
    """How the response is made around the policy's reply: who signs its thinking, after what prefix,
    whether the model thinks first, how much room the context window leaves, and what the API reports
    of the request (its dropped thinking, its context edits, a compaction block to put first)."""

    model: str
    """The Claude model that writes the response (its thinking is signed with it)."""
    chain: PrefixChain
    """The request's prefix chain: each response block's prefix continues it."""
    thought: str | None = None
    """The thinking to put first when the reply has none (None: the model does not think first)."""
    display: str = "summarized"
    room: int | None = None
    """Output tokens left before input + output fill the context window (None: no limit but max_tokens)."""
    lead: list[Block] = field(default_factory=list)
    """Blocks the response begins with before the reply's (a compaction block)."""
    stop: bool = False
    """The response is ``lead`` alone, ended with ``stop_reason: compaction``."""
    input_transformations: list[dict[str, Any]] = field(default_factory=list)
    applied_edits: list[dict[str, Any]] | None = None
    """``context_management.applied_edits`` (None: the request sent no ``context_management``)."""


def build_message(
    model: str,
    request_key: bytes,
    reply: Reply,
    outcome: CacheOutcome,
    max_tokens: int,
    *,
    shape: Shape,
    web_searches: int | None = None,
    stop_sequences: list[str] | None = None,
) -> dict[str, Any]:
    """The message for ``reply``. ``web_searches``: the searches billed (None: the request had no web
    search tool, and usage says nothing of server tools). Search results are read by the model, so
    their tokens count as input, not output, as the API counts them."""
    stops = stop_sequences or []
    content, stop_reason, stop_sequence = _content(request_key, reply, max_tokens, stops, shape)
    results = sum(bytes_tokens(canonical(b)) for b in content if b["type"] in _SERVER_RESULTS)
    written = sum(_cost(b) for b in content)
    usage: dict[str, Any] = {
        "input_tokens": outcome.input_tokens + results,
        "cache_creation_input_tokens": outcome.cache_creation,
        "cache_read_input_tokens": outcome.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": outcome.cache_write_5m,
            "ephemeral_1h_input_tokens": outcome.cache_write_1h,
        },
        "output_tokens": _limit(max_tokens, shape) if stop_reason in _CUT_REASONS else written,
    }
    if web_searches is not None:
        usage["server_tool_use"] = {"web_search_requests": web_searches, "web_fetch_requests": 0}
    message: dict[str, Any] = {
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
    if shape.applied_edits is not None:
        message["context_management"] = {"applied_edits": shape.applied_edits}
    if shape.input_transformations:
        message["input_transformations"] = shape.input_transformations
    return message


_CUT_REASONS = ("max_tokens", "model_context_window_exceeded")


def _cost(block: Block) -> int:
    """The output tokens of a block: its canonical JSON, a thinking block's signature left out (the API
    bills the thinking, not its signature); search results are input."""
    if block["type"] in _SERVER_RESULTS:
        return 0
    if block["type"] == "thinking":
        block = {k: v for k, v in block.items() if k != "signature"}
    return bytes_tokens(canonical(block))


def _limit(max_tokens: int, shape: Shape) -> int:
    return max_tokens if shape.room is None else max(0, min(max_tokens, shape.room))


def _content(
    request_key: bytes, reply: Reply, max_tokens: int, stop_sequences: list[str], shape: Shape
) -> tuple[list[Block], str, str | None]:
    """The response's blocks, its stop reason and the stop sequence that ended it. A reply cut where the
    context window fills (before ``max_tokens``) ends with ``model_context_window_exceeded``."""
    if max_tokens == 0:  # the API only writes the prompt cache
        return [], "max_tokens", None
    content: list[Block] = []
    for block in shape.lead:
        content.append(_signed(shape, dict(block)))
    if shape.stop:
        return content, "compaction", None
    budget = _limit(max_tokens, shape)
    cut_reason = "max_tokens" if budget == max_tokens else "model_context_window_exceeded"
    blocks = list(reply.content)
    if shape.thought is not None and (
        not blocks or blocks[0]["type"] not in ("thinking", "redacted_thinking")
    ):
        blocks.insert(0, {"type": "thinking", "thinking": shape.thought})
    for index, block in enumerate(blocks):
        block = _finished(request_key, index, block, shape)
        stop = _first_stop(block, stop_sequences)
        if stop is not None:
            block["text"] = block["text"][: block["text"].index(stop)]
        sent = _signed(shape, block, add=False)
        cost = _cost(sent)
        if cost > budget or (cost == budget and (stop is not None or index < len(blocks) - 1)):
            cut = _cut(sent, budget)
            if cut is not None:
                content.append(_signed(shape, cut))
            return content, cut_reason, None
        budget -= cost
        if stop is not None:
            if sent["text"]:
                content.append(_signed(shape, sent))
            return content, "stop_sequence", stop
        content.append(_signed(shape, sent))
    return content, reply.final_stop_reason(), None


def _signed(shape: Shape, block: Block, *, add: bool = True) -> Block:
    """``block`` as sent: a thinking block signed, a redacted one's hidden text sealed, over its prefix;
    with ``add`` it then joins the prefix of the blocks after it."""
    block = dict(block)
    hidden = block.pop("hidden", None)
    if block["type"] == "thinking":
        block["signature"] = signature_for(shape.model, block["thinking"], shape.chain.end())
    elif block["type"] == "redacted_thinking" and hidden is not None:
        block["data"] = redacted_data(shape.model, hidden, shape.chain.end())
    if add:
        shape.chain.add("assistant", block)
    return block


def _finished(request_key: bytes, index: int, block: Block, shape: Shape) -> Block:
    """A reply's block as the API sends it: ids filled in, hidden thinking held for sealing, the thinking
    text left out when ``display`` is ``omitted``."""
    block = dict(block)
    if block["type"] == "tool_use":
        block.setdefault("id", "toolu_sim_" + hashlib.sha256(request_key + b"%d" % index).hexdigest()[:24])
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["input"]}
    if block["type"] == "thinking" and shape.display == "omitted":
        block["thinking"] = ""
    elif block["type"] == "redacted_thinking":
        return {"type": "redacted_thinking", "hidden": block["thinking"]}
    elif block["type"] == "text" and block.get("citations"):
        block["citations"] = [{**c, "encrypted_index": citation_index(c)} for c in block["citations"]]
    return block


def _first_stop(block: Block, stop_sequences: list[str]) -> str | None:
    """The stop sequence that occurs first in a text block, if any."""
    if block["type"] != "text":
        return None
    found = [(block["text"].find(s), s) for s in stop_sequences if s and s in block["text"]]
    return min(found)[1] if found else None


def _cut(block: Block, budget: int) -> Block | None:
    """What of ``block`` was written when the budget ran out (None: nothing worth sending). A tool call keeps
    the input fields it had finished (what the SDK's partial JSON parse of the stream gives)."""
    if budget <= 0:
        return None
    if block["type"] in ("text", "thinking"):
        field = block["type"]
        block[field] = block[field][: budget * BYTES_PER_TOKEN // 2]
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
    start.pop("context_management", None)  # it comes with the message_delta, as the API sends it
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    corrupt = bad_tool_input
    last = len(message["content"]) - 1
    cut_call = last if message["stop_reason"] in _CUT_REASONS and last >= 0 else None
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
        elif kind == "compaction":  # the summary comes whole in one compaction_delta
            events.append(_start(index, {**block, "content": None}))
            summary = {"type": "compaction_delta", "content": block["content"], "encrypted_content": None}
            events.append(_delta(index, summary))
        else:
            events.append(_start(index, block))
        events.append({"type": "content_block_stop", "index": index})
    usage = dict(message["usage"])
    usage.pop("cache_creation")
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {
            "stop_reason": message["stop_reason"],
            "stop_sequence": message["stop_sequence"],
            "stop_details": message["stop_details"],
        },
        "usage": usage,
    }
    if "context_management" in message:
        delta["context_management"] = message["context_management"]
    events.append(delta)
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
