"""The checks the real Messages API makes that catch an agent loop's mistakes.

Each failure is a ``SimInvalidRequest`` whose message follows the API's style
(``messages.3.content.0: ...``); the server answers it with a 400
``invalid_request_error``, as the API would, so a bug in how teamrt builds its
conversations fails the same way offline as on Claude.
"""

from __future__ import annotations

import re
from typing import Any

from ..tokens import message_blocks, system_blocks
from .servertools import SEARCH_TOOL_NAME, SEARCH_TOOL_TYPES, citation_index
from .signing import signature_for, unseal

MAX_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_SEARCH_ERRORS = frozenset({"invalid_tool_input", "unavailable", "max_uses_exceeded", "too_many_requests",
                            "query_too_long", "request_too_large"})  # fmt: skip
_SERVER_BLOCKS = frozenset({"server_tool_use", "web_search_tool_result"})


class SimInvalidRequest(ValueError):
    pass


def validate(params: Any, *, count_only: bool = False) -> None:
    if not isinstance(params, dict):
        raise SimInvalidRequest("the request body must be a JSON object")
    model = params.get("model")
    if not isinstance(model, str) or not model:
        raise SimInvalidRequest("model: field required")
    if not count_only:
        max_tokens = params.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise SimInvalidRequest("max_tokens: must be a whole number of 1 or more")
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise SimInvalidRequest("messages: at least one message is required")
    searching = _check_tools(params.get("tools"))
    _check_thinking(params, count_only)
    _check_messages(model, messages, searching)
    _check_breakpoints(params)


def _check_tools(tools: Any) -> bool:
    """Check the request's tools; whether they include the web search tool."""
    if tools is None:
        return False
    if not isinstance(tools, list):
        raise SimInvalidRequest("tools: must be a list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise SimInvalidRequest(f"tools.{i}.name: must match {_TOOL_NAME.pattern}")
        if name in names:
            raise SimInvalidRequest(f"tools: tool names must be unique ({name!r} repeats)")
        names.add(name)
        kind = tool.get("type", "custom")
        if kind in SEARCH_TOOL_TYPES:
            _check_search_tool(i, tool)
        elif kind != "custom":
            raise SimInvalidRequest(
                f"tools.{i}: Input tag {kind!r} found using 'type' does not match any of the expected tags"
            )
        elif not isinstance(tool.get("input_schema"), dict):
            raise SimInvalidRequest(f"tools.{i}.input_schema: field required")
    return any(isinstance(t, dict) and t.get("type") in SEARCH_TOOL_TYPES for t in tools)


def _check_search_tool(i: int, tool: dict[str, Any]) -> None:
    if tool["name"] != SEARCH_TOOL_NAME:
        raise SimInvalidRequest(f"tools.{i}.name: the web search tool must be named {SEARCH_TOOL_NAME!r}")
    uses = tool.get("max_uses")
    if uses is not None and (isinstance(uses, bool) or not isinstance(uses, int) or uses < 1):
        raise SimInvalidRequest(f"tools.{i}.max_uses: must be a whole number of 1 or more")
    lists = [key for key in ("allowed_domains", "blocked_domains") if tool.get(key) is not None]
    if len(lists) == 2:
        raise SimInvalidRequest(f"tools.{i}: allowed_domains and blocked_domains cannot be used together")
    for key in lists:
        domains = tool[key]
        if not isinstance(domains, list) or not all(isinstance(d, str) and d for d in domains):
            raise SimInvalidRequest(f"tools.{i}.{key}: must be a list of domain names")
        for domain in domains:
            if "://" in domain:
                raise SimInvalidRequest(
                    f"tools.{i}.{key}: {domain!r}: a domain must not include the HTTP/HTTPS scheme"
                )


def _check_thinking(params: dict[str, Any], count_only: bool) -> None:
    thinking = params.get("thinking")
    if thinking is None or not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
        raise SimInvalidRequest(f"thinking.budget_tokens: must be at least {MIN_THINKING_BUDGET}")
    if not count_only and budget >= params["max_tokens"]:
        raise SimInvalidRequest("max_tokens: must be greater than thinking.budget_tokens")


def _check_messages(model: str, messages: list[Any], searching: bool) -> None:
    pending: set[str] = set()  # tool_use ids of the previous assistant turn, awaiting results
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise SimInvalidRequest(f"messages.{i}.role: must be 'user' or 'assistant'")
        if i == 0 and message["role"] != "user":
            raise SimInvalidRequest("messages.0.role: the first message must use the 'user' role")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise SimInvalidRequest(f"messages.{i}.content: must be a string or a list of blocks")
        blocks = message_blocks(message)
        for j, block in enumerate(blocks):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise SimInvalidRequest(f"messages.{i}.content.{j}: a content block needs a 'type'")
        if message["role"] == "user":
            _check_results(i, blocks, pending)
            pending = set()
        else:
            if pending:
                raise _unanswered(i - 1, pending)
            pending = _check_assistant(model, i, blocks, searching)


def _check_results(i: int, blocks: list[dict[str, Any]], pending: set[str]) -> None:
    answered: set[str] = set()
    seen_other = False
    for j, block in enumerate(blocks):
        if block["type"] in _SERVER_BLOCKS:
            raise SimInvalidRequest(
                f"messages.{i}.content.{j}: {block['type']} blocks belong in assistant messages"
            )
        if block["type"] != "tool_result":
            seen_other = True
            continue
        tool_use_id = block.get("tool_use_id")
        if tool_use_id not in pending:
            raise SimInvalidRequest(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks:"
                f" {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block"
                " in the previous message."
            )
        if seen_other:
            raise SimInvalidRequest(
                f"messages.{i}.content.{j}: `tool_result` blocks must come first"
                " in the content of a user message"
            )
        answered.add(tool_use_id)
    if pending - answered:
        raise _unanswered(i - 1, pending - answered)


def _unanswered(i: int, ids: set[str]) -> SimInvalidRequest:
    return SimInvalidRequest(
        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after:"
        f" {', '.join(sorted(ids))}. Each `tool_use` block must have a corresponding `tool_result` block"
        " in the next message."
    )


def _check_assistant(model: str, i: int, blocks: list[dict[str, Any]], searching: bool) -> set[str]:
    ids: set[str] = set()
    searches: dict[str, int] = {}  # server_tool_use ids of this message awaiting their results
    for j, block in enumerate(blocks):
        kind = block["type"]
        if kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("input"), dict):
                raise SimInvalidRequest(
                    f"messages.{i}.content.{j}: a tool_use block needs an id and an input object"
                )
            ids.add(block["id"])
        elif kind == "thinking":
            if block.get("signature") != signature_for(model, str(block.get("thinking", ""))):
                raise SimInvalidRequest(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
        elif kind in ("tool_result",):
            raise SimInvalidRequest(f"messages.{i}.content.{j}: tool_result blocks belong in user messages")
        elif kind in _SERVER_BLOCKS and not searching:
            raise SimInvalidRequest(
                f"messages.{i}.content.{j}: `{kind}` blocks need the web search tool in `tools`"
            )
        elif kind == "server_tool_use":
            use_id = block.get("id")
            if (
                not isinstance(use_id, str)
                or not use_id.startswith("srvtoolu_")
                or not isinstance(block.get("input"), dict)
            ):
                raise SimInvalidRequest(
                    f"messages.{i}.content.{j}: a server_tool_use block needs a srvtoolu_ id and an input"
                    " object"
                )
            if block.get("name") != SEARCH_TOOL_NAME:
                raise SimInvalidRequest(
                    f"messages.{i}.content.{j}.name: unknown server tool {block.get('name')!r}"
                )
            searches[use_id] = j
        elif kind == "web_search_tool_result":
            use_id = block.get("tool_use_id")
            if use_id not in searches:
                raise SimInvalidRequest(
                    f"messages.{i}.content.{j}: `web_search_tool_result` block with `tool_use_id` {use_id}"
                    " has no corresponding `server_tool_use` block before it"
                )
            del searches[use_id]
            _check_search_content(f"messages.{i}.content.{j}", block.get("content"))
        elif kind == "text" and block.get("citations"):
            _check_citations(f"messages.{i}.content.{j}", block["citations"])
    for use_id in searches:
        raise SimInvalidRequest(
            f"messages.{i}: `web_search` tool use with id `{use_id}` was found without a corresponding"
            " `web_search_tool_result` block"
        )
    return ids


def _check_search_content(where: str, content: Any) -> None:
    """A replayed search result: every page as the API sent it (its sealed content unchanged, its url and
    title those sealed in it), or an error the API reports."""
    if isinstance(content, dict):
        if (
            content.get("type") != "web_search_tool_result_error"
            or content.get("error_code") not in _SEARCH_ERRORS
        ):
            raise SimInvalidRequest(f"{where}.content: not a web search result or error")
        return
    if not isinstance(content, list):
        raise SimInvalidRequest(f"{where}.content: must be a list of web_search_result blocks or an error")
    for k, result in enumerate(content):
        sealed = unseal(result.get("encrypted_content")) if isinstance(result, dict) else None
        if (
            sealed is None
            or result.get("type") != "web_search_result"
            or (sealed.get("url"), sealed.get("title")) != (result.get("url"), result.get("title"))
        ):
            raise SimInvalidRequest(
                f"{where}.content.{k}: Invalid `encrypted_content` in `web_search_result` block"
            )


def _check_citations(where: str, citations: Any) -> None:
    if not isinstance(citations, list):
        raise SimInvalidRequest(f"{where}.citations: must be a list")
    for k, citation in enumerate(citations):
        searched = isinstance(citation, dict) and citation.get("type") == "web_search_result_location"
        if searched and citation.get("encrypted_index") != citation_index(citation):
            raise SimInvalidRequest(
                f"{where}.citations.{k}: Invalid `encrypted_index` in `web_search_result_location` citation"
            )


def _check_breakpoints(params: dict[str, Any]) -> None:
    blocks = [*(params.get("tools") or []), *system_blocks(params.get("system"))]
    for message in params["messages"]:
        blocks.extend(message_blocks(message))
    ttls = []
    for block in blocks:
        marker = block.get("cache_control")
        if marker is None:
            continue
        if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
            raise SimInvalidRequest("cache_control: type must be 'ephemeral'")
        if block.get("type") in ("thinking", "redacted_thinking"):
            raise SimInvalidRequest("cache_control cannot be set on thinking blocks")
        ttls.append(marker.get("ttl", "5m"))
    if len(ttls) > MAX_BREAKPOINTS:
        raise SimInvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(ttls)}."
        )
    if "1h" in ttls and "5m" in ttls[: len(ttls) - ttls[::-1].index("1h")]:
        raise SimInvalidRequest("cache_control: a ttl='1h' entry must not come after a ttl='5m' entry")
