"""``Reply``: what a simulator policy or a scripted step answers, built block by block.

    Reply().think("the tests fail in parser.py").say("Reading it.").call("Read", {"file_path": "parser.py"})

Ids of tool calls and signatures of thinking blocks are filled in by whoever
turns the reply into a response (the simulator derives them from the request,
so the same request always gets the same ids).

    Reply().say("Looking it up.").search("sqlite wal mode")

asks the simulator's server-side web search (a reply that searches ends with
its searches; the policy is asked again with the results, as the API's
server-side loop does); ``cite`` writes text citing a result it found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teamrt.models.types import Block


@dataclass
class Reply:
    content: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    """None: ``tool_use`` when the reply calls a tool, else ``end_turn``."""
    stop_details: dict[str, Any] | None = None
    """What the API says of a refusal (``refuse``)."""

    def say(self, text: str) -> Reply:
        self.content.append({"type": "text", "text": text})
        return self

    def think(self, thinking: str) -> Reply:
        self.content.append({"type": "thinking", "thinking": thinking})
        return self

    def redacted(self, thinking: str) -> Reply:
        """A ``redacted_thinking`` block (its ``data`` sealed by whoever turns the reply into a response)."""
        self.content.append({"type": "redacted_thinking", "thinking": thinking})
        return self

    def refuse(self, category: str | None = None, explanation: str | None = None) -> Reply:
        """End with ``stop_reason: refusal``, as the API's classifiers do, after what the reply holds so far.
        ``category``: ``cyber``, ``bio``, ``frontier_llm``, ``reasoning_extraction``, ``general_harms`` or
        None."""
        self.stop_reason = "refusal"
        self.stop_details = {"type": "refusal", "category": category, "explanation": explanation}
        return self

    def call(self, name: str, input: dict[str, Any], *, id: str | None = None) -> Reply:
        block: Block = {"type": "tool_use", "name": name, "input": input}
        if id is not None:
            block["id"] = id
        self.content.append(block)
        return self

    def search(self, query: str) -> Reply:
        """A web search (a ``server_tool_use`` block), run by the server that answers."""
        self.content.append({"type": "server_tool_use", "name": "web_search", "input": {"query": query}})
        return self

    def cite(self, text: str, *, url: str, title: str, quote: str) -> Reply:
        """``text`` citing ``quote`` from the search result at ``url`` (its ``encrypted_index`` is filled
        in by the server)."""
        citation = {"type": "web_search_result_location", "url": url, "title": title, "cited_text": quote}
        self.content.append({"type": "text", "text": text, "citations": [citation]})
        return self

    def final_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(b["type"] == "tool_use" for b in self.content) else "end_turn"
