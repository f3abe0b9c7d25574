"""Assemble a response from the Messages API's raw stream events.

The SDK's own accumulator (``MessageStream``) raises on a tool input that is
not valid JSON and yields pydantic objects; teamrt needs plain blocks kept byte
for byte and a bad tool input reported rather than fatal, so it assembles the
raw events itself. Thinking text and signatures are concatenated from their
deltas exactly as sent. Server-tool blocks come whole: a ``server_tool_use``
with its input streamed like a tool call's, a ``web_search_tool_result`` in its
``content_block_start``, citations of the text after it as ``citations_delta``.

Beta responses (``client.beta.messages``) add: a ``compaction`` block (server-side
compaction), started with its fields and filled by ``compaction_delta`` events whose
fields replace the block's, as the SDK's own accumulator does; the API's context
editing report (``context_management.applied_edits``, in ``message_delta``, or in the
message of ``message_start``); ``input_transformations`` (final in ``message_start``,
replaced by the last ``message_delta`` that carries it, after a server-side fallback);
and ``usage.iterations``, whose ``compaction`` entries are billed on top of the
top-level usage.

The SDK's pydantic objects are read with ``to_dict(warnings=False)``: a server may send a field
malformed (the SDK keeps it as it came), and what teamrt reads of it is checked here instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from teamrt.models.types import Block, OnText, Usage

if TYPE_CHECKING:
    from anthropic.types import RawMessageStreamEvent

_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_USAGE_PARTS = ("cache_creation", "server_tool_use", "iterations")


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
        self.applied_edits: list[dict[str, Any]] = []
        self.input_transformations: list[dict[str, Any]] = []
        self.complete = False
        self._usage: dict[str, Any] = {}
        self._parts: dict[int, list[str]] = {}

    def add(self, event: RawMessageStreamEvent) -> None:
        if event.type == "message_start":
            self.id, self.model = event.message.id, event.message.model
            self._take_usage(event.message.usage.to_dict(warnings=False))
            self._take_reports(event.message.to_dict(warnings=False))
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
            self._take_usage(event.usage.to_dict(warnings=False))
            self._take_reports(event.to_dict(warnings=False))
        elif event.type == "message_stop":
            self.complete = True

    def usage(self) -> Usage:
        split = self._usage.get("cache_creation")
        split = split if isinstance(split, dict) else {}
        server = self._usage.get("server_tool_use")
        server = server if isinstance(server, dict) else {}
        return Usage(
            input_tokens=_int(self._usage.get("input_tokens")),
            output_tokens=_int(self._usage.get("output_tokens")),
            cache_creation_input_tokens=_int(self._usage.get("cache_creation_input_tokens")),
            cache_read_input_tokens=_int(self._usage.get("cache_read_input_tokens")),
            cache_write_5m=_int(split.get("ephemeral_5m_input_tokens")),
            cache_write_1h=_int(split.get("ephemeral_1h_input_tokens")),
            web_search_requests=_int(server.get("web_search_requests")),
            compaction=tuple(_iteration(i) for i in self._iterations() if i.get("type") == "compaction"),
        )

    def _iterations(self) -> list[dict[str, Any]]:
        iterations = self._usage.get("iterations")
        return [i for i in iterations if isinstance(i, dict)] if isinstance(iterations, list) else []

    def _take_reports(self, payload: dict[str, Any]) -> None:
        """``context_management`` and ``input_transformations`` of a message or a ``message_delta``; an
        event that leaves them out (or null) keeps what came before."""
        managed = payload.get("context_management")
        if isinstance(managed, dict) and isinstance(managed.get("applied_edits"), list):
            self.applied_edits = [e for e in managed["applied_edits"] if isinstance(e, dict)]
        transformations = payload.get("input_transformations")
        if isinstance(transformations, list):
            self.input_transformations = [t for t in transformations if isinstance(t, dict)]

    def _take_usage(self, usage: dict[str, Any]) -> None:
        """``message_delta`` carries cumulative figures; a field it leaves null keeps its value."""
        for key, value in usage.items():
            if value is not None and (key in _USAGE_FIELDS or key in _USAGE_PARTS):
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
        elif delta.type == "compaction_delta":
            block.update({k: v for k, v in delta.to_dict().items() if k != "type"})

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


def _iteration(entry: dict[str, Any]) -> Usage:
    """One ``usage.iterations`` entry as ``Usage`` (a field it lacks, or gives malformed, counts 0)."""
    split = entry.get("cache_creation")
    split = split if isinstance(split, dict) else {}
    return Usage(
        input_tokens=_int(entry.get("input_tokens")),
        output_tokens=_int(entry.get("output_tokens")),
        cache_creation_input_tokens=_int(entry.get("cache_creation_input_tokens")),
        cache_read_input_tokens=_int(entry.get("cache_read_input_tokens")),
        cache_write_5m=_int(split.get("ephemeral_5m_input_tokens")),
        cache_write_1h=_int(split.get("ephemeral_1h_input_tokens")),
    )


def _int(value: Any) -> int:
    """A count the server sent; anything but a positive whole number (a hostile or malformed value) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
