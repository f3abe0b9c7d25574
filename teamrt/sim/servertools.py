"""The API's server-side web search, played by the simulator.

A policy asks for a search by ending its reply with ``Reply.search``. As the
API's server-side loop does, the simulator then runs the search (on its
corpus), appends a ``server_tool_use`` block and its ``web_search_tool_result``
to the response, and asks the policy again, which now sees the results
(``SimRequest.search_results``) and goes on: more searches, text citing them,
client tool calls, or the end of the turn. After ``SERVER_LOOP_LIMIT`` rounds,
or when a policy says so, the response ends with ``stop_reason: pause_turn``;
the client sends it back as it is and the turn goes on.

Results carry sealed ``encrypted_content`` (the page, checked when a request
replays it); ``max_uses`` and the domain lists of the request's tool apply.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from teamrt.models.reply import Reply
from teamrt.models.types import Block
from teamrt.sim.corpus import Corpus, Page
from teamrt.sim.policy import Policy, SimRequest
from teamrt.sim.signing import seal

SEARCH_TOOL_TYPES = ("web_search_20250305", "web_search_20260209")
SEARCH_TOOL_NAME = "web_search"
SERVER_LOOP_LIMIT = 10
"""Rounds of server-side searching in one response before the API pauses the turn."""
SNIPPET_CHARS = 4000
"""The most of a page's text a result carries."""


@dataclass(frozen=True)
class SearchTool:
    """The web search tool of a request, as its ``tools`` entry configures it."""

    max_uses: int | None = None
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()


def search_tool(tools: Any) -> SearchTool | None:
    """The request's web search tool (its ``tools`` already validated), or None when it has none."""
    for tool in tools or []:
        if tool.get("type") in SEARCH_TOOL_TYPES:
            return SearchTool(
                tool.get("max_uses"),
                tuple(tool.get("allowed_domains") or ()),
                tuple(tool.get("blocked_domains") or ()),
            )
    return None


def play(policy: Policy, request: SimRequest, corpus: Corpus, request_key: bytes) -> tuple[Reply, int | None]:
    """The policy's whole response to ``request``, its searches run; and how many searches were billed
    (None when the request has no web search tool)."""
    tool = search_tool(request.params.get("tools"))
    blocks: list[Block] = []
    billed = 0
    for round_ in range(SERVER_LOOP_LIMIT):
        reply = policy(dataclasses.replace(request, turn_so_far=tuple(blocks)))
        if not isinstance(reply, Reply):
            raise TypeError(f"a policy must return a Reply, not {type(reply).__name__}")
        written, asked = _split(reply.content)
        blocks += written
        if not asked or reply.stop_reason == "pause_turn":
            return Reply(blocks, reply.stop_reason, reply.stop_details), None if tool is None else billed
        if tool is None:
            raise ValueError("the policy asked for a web search, but the request has no web_search tool")
        for n, ask in enumerate(asked):
            use_id = (
                "srvtoolu_sim_" + hashlib.sha256(request_key + b"srv%d.%d" % (round_, n)).hexdigest()[:24]
            )
            query = ask["input"].get("query")
            content, ran = _search(tool, corpus, query, billed)
            billed += ran
            blocks.append(
                {"type": "server_tool_use", "id": use_id, "name": SEARCH_TOOL_NAME, "input": {"query": query}}
            )
            blocks.append({"type": "web_search_tool_result", "tool_use_id": use_id, "content": content})
    return Reply(blocks, "pause_turn"), None if tool is None else billed


def _split(content: list[Block]) -> tuple[list[Block], list[Block]]:
    """A reply's blocks before its searches, and its searches (which must end it)."""
    first = next((i for i, b in enumerate(content) if b["type"] == "server_tool_use"), len(content))
    asked = content[first:]
    if any(b["type"] != "server_tool_use" for b in asked):
        raise ValueError("a reply that searches must end with its searches (the policy is asked again after)")
    return content[:first], asked


def _search(tool: SearchTool, corpus: Corpus, query: Any, billed: int) -> tuple[Any, int]:
    """The result content of one search, and 1 if it counts as a billed search."""
    if not isinstance(query, str) or not query.strip():
        return _error("invalid_tool_input"), 0
    if tool.max_uses is not None and billed >= tool.max_uses:
        return _error("max_uses_exceeded"), 0
    pages = corpus.search(query, allowed=tool.allowed_domains, blocked=tool.blocked_domains)
    return [result_block(page) for page in pages], 1


def result_block(page: Page) -> Block:
    snippet = page.text[:SNIPPET_CHARS]
    sealed = seal({"url": page.url, "title": page.title, "text": snippet, "page_age": page.page_age})
    return {"type": "web_search_result", "title": page.title, "url": page.url, "encrypted_content": sealed,
            "page_age": page.page_age}  # fmt: skip


def _error(code: str) -> Block:
    return {"type": "web_search_tool_result_error", "error_code": code}


def citation_index(citation: Block) -> str:
    """The ``encrypted_index`` of a ``web_search_result_location`` citation."""
    return seal(
        {"url": citation.get("url"), "title": citation.get("title"), "cited": citation.get("cited_text")}
    )


def searcher(request: SimRequest) -> Reply:
    """A policy for tests and demos: searches for the last user text, then cites the first page found."""
    if not request.searches:
        return Reply().say("Searching the web.").search(request.last_user_text.strip()[:200])
    if not request.search_results:
        return Reply().say("The search found nothing.")
    top = request.search_results[0]
    quote = top.text.split(". ")[0][:200]
    return Reply().cite(f"{top.title}: {quote}", url=top.url, title=top.title, quote=quote)
