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
from .signing import signature_for

MAX_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


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
    _check_tools(params.get("tools"))
    _check_thinking(params, count_only)
    _check_messages(model, messages)
    _check_breakpoints(params)


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
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
        if "type" not in tool and not isinstance(tool.get("input_schema"), dict):
            raise SimInvalidRequest(f"tools.{i}.input_schema: field required")


def _check_thinking(params: dict[str, Any], count_only: bool) -> None:
    thinking = params.get("thinking")
    if thinking is None or not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
        raise SimInvalidRequest(f"thinking.budget_tokens: must be at least {MIN_THINKING_BUDGET}")
    if not count_only and budget >= params["max_tokens"]:
        raise SimInvalidRequest("max_tokens: must be greater than thinking.budget_tokens")


def _check_messages(model: str, messages: list[Any]) -> None:
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
            pending = _check_assistant(model, i, blocks)


def _check_results(i: int, blocks: list[dict[str, Any]], pending: set[str]) -> None:
    answered: set[str] = set()
    seen_other = False
    for j, block in enumerate(blocks):
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


def _check_assistant(model: str, i: int, blocks: list[dict[str, Any]]) -> set[str]:
    ids: set[str] = set()
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
    return ids


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
