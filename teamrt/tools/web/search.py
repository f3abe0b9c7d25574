"""The ``WebSearch`` tool: the Messages API's own server-side web search.

teamrt runs no search itself. The tool's ``tools`` entry (``api_param``) asks
the API to search for the model: a search arrives in the response as a
``server_tool_use`` block followed by its ``web_search_tool_result``, and the
loop keeps both, unchanged, with the rest of the turn; nothing is run locally.
On ``sim`` the simulator plays the same blocks from a small corpus.

Claude Code's tool is named ``WebSearch``, and that is the name agent files
and permission rules use; the model sees the API's name, ``web_search``.
Because the API runs each search inside one response, a search cannot be
asked about or denied call by call: an agent is offered the tool only when
its permissions do not deny ``WebSearch`` (the supervisor checks), and the
domains it may return come from the team file's ``[web]`` section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teamrt.sandbox.policy import WebPolicy
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema

API_TYPE = "web_search_20250305"
"""The tool version: the one every model with web search accepts."""
API_NAME = "web_search"
MAX_USES = 5
"""Searches the API may run for one response; a search beyond it gets a ``max_uses_exceeded`` result."""


@dataclass(frozen=True)
class WebSearch:
    policy: WebPolicy = field(default_factory=WebPolicy)
    max_uses: int = MAX_USES
    name = "WebSearch"
    description = "Search the web (the model API runs the search); results come with their titles and URLs."
    input_schema = object_schema({"query": {"type": "string", "description": "What to search for"}}, "query")
    read_only = True

    def api_param(self) -> dict[str, Any]:
        """The API's web search tool entry: at most ``max_uses`` searches a response, and the team's domain
        list (allowed or blocked; the API takes one or the other, and the team file allows only one)."""
        param: dict[str, Any] = {"type": API_TYPE, "name": API_NAME, "max_uses": self.max_uses}
        if self.policy.search_allowed_domains:
            param["allowed_domains"] = list(self.policy.search_allowed_domains)
        elif self.policy.search_blocked_domains:
            param["blocked_domains"] = list(self.policy.search_blocked_domains)
        return param

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Only a client call named ``WebSearch`` reaches here (the model searches as ``web_search``)."""
        raise ToolError("WebSearch is run by the model API, not called as a tool: use the web_search tool")
