"""Assemble a response from the Messages API's raw stream events.

The SDK's own accumulator (``MessageStream``) raises on a tool input that is
not valid JSON and yields pydantic objects; teamrt needs plain blocks kept byte
for byte and a bad tool input reported rather than fatal, so it assembles the
raw events itself. Thinking text and signatures are concatenated from their
deltas exactly as sent. Server-tool blocks come whole: a ``server_tool_use``
with its input streamed like a tool call's, a ``web_search_tool_result`` in its
``content_block_start``, citations of the text after it as ``citations_delta``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from teamrt.models.types import Block, OnText, Usage

if TYPE_CHECKING:
    from anthropic.types import RawMessageStreamEvent

_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class StreamAssembler:
    """Feed it every event of one attempt; ``complete`` turns True at ``message_stop``."""

    def __init__(self, on_text: OnText | None = None) -> None:
        self._on_text = on_text
        self.id = ""
        self.model = ""
        self.content: list[Block] = []
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.invalid_tool_inputs: dict[str, str] = {}
        self.complete = False
        self._usage: dict[str, Any] = {}
        self._parts: dict[int, list[str]] = {}

    def add(self, event: RawMessageStreamEvent) -> None:
        if event.type == "message_start":
            self.id, self.model = event.message.id, event.message.model
            self._take_usage(event.message.usage.to_dict())
        elif event.type == "content_block_start":
            self.content.append(event.content_block.to_dict())
            self._parts[event.index] = []
        elif event.type == "content_block_delta":
            self._delta(event.index, event.delta)
        elif event.type == "content_block_stop":
            self._finish_block(event.index)
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason
            self.stop_sequence = event.delta.stop_sequence
            self._take_usage(event.usage.to_dict())
        elif event.type == "message_stop":
            self.complete = True

    def usage(self) -> Usage:
        split = self._usage.get("cache_creation")
        split = split if isinstance(split, dict) else {}
        server = self._usage.get("server_tool_use")
        server = server if isinstance(server, dict) else {}
        return Usage(
            input_tokens=int(self._usage.get("input_tokens") or 0),
            output_tokens=int(self._usage.get("output_tokens") or 0),
            cache_creation_input_tokens=int(self._usage.get("cache_creation_input_tokens") or 0),
            cache_read_input_tokens=int(self._usage.get("cache_read_input_tokens") or 0),
            cache_write_5m=int(split.get("ephemeral_5m_input_tokens") or 0),
            cache_write_1h=int(split.get("ephemeral_1h_input_tokens") or 0),
            web_search_requests=int(server.get("web_search_requests") or 0),
        )

    def _take_usage(self, usage: dict[str, Any]) -> None:
        """``message_delta`` carries cumulative figures; a field it leaves null keeps its value."""
        for key, value in usage.items():
            if value is not None and (key in _USAGE_FIELDS or key in ("cache_creation", "server_tool_use")):
                self._usage[key] = value

    def _delta(self, index: int, delta: Any) -> None:
        block = self.content[index]
        if delta.type == "text_delta":
            self._parts[index].append(delta.text)
            if self._on_text is not None:
                self._on_text(delta.text)
        elif delta.type == "thinking_delta":
            self._parts[index].append(delta.thinking)
        elif delta.type == "input_json_delta":
            self._parts[index].append(delta.partial_json)
        elif delta.type == "signature_delta":
            block["signature"] = delta.signature
        elif delta.type == "citations_delta":
            block.setdefault("citations", []).append(delta.citation.to_dict())

    def _finish_block(self, index: int) -> None:
        block = self.content[index]
        joined = "".join(self._parts.pop(index, []))
        kind = block.get("type")
        if kind == "text":
            block["text"] = block.get("text", "") + joined
        elif kind == "thinking":
            block["thinking"] = block.get("thinking", "") + joined
        elif kind in ("tool_use", "server_tool_use") and joined:
            try:
                value = json.loads(joined)
                if not isinstance(value, dict):
                    raise ValueError(f"expected a JSON object, got {type(value).__name__}")
            except ValueError as e:
                self.invalid_tool_inputs[block["id"]] = (
                    f"the tool input was not valid JSON ({e}): {joined[:200]}"
                )
                value = {}
            block["input"] = value
