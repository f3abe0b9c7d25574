"""The checks the real Messages API makes that catch an agent loop's mistakes.

Each failure is a ``SimInvalidRequest`` whose message follows the API's style
(``messages.3.content.0: ...``); the server answers it with the status and
error type the API uses (400 ``invalid_request_error``; an unknown model 404
``not_found_error``), so a bug in how teamrt builds its conversations fails
the same way offline as on Claude. Wording is the API's where it was found in
published errors; docs/simulator.md lists the few rules whose wording is ours.

Consecutive messages of the same role are one turn, as the API merges them.
"""

from __future__ import annotations

import re
from typing import Any

from teamrt.models.catalog import SIM_DEFAULT, ModelInfo, lookup, resolve
from teamrt.models.tokens import message_blocks, request_tokens
from teamrt.models.types import Block
from teamrt.sim.checks_params import check_breakpoints, check_params
from teamrt.sim.checks_thinking import check_thinking, check_thinking_turn
from teamrt.sim.context_management import check as check_context
from teamrt.sim.errors import SimInvalidRequest, SimNotFound
from teamrt.sim.servertools import SEARCH_TOOL_NAME, SEARCH_TOOL_TYPES, citation_index
from teamrt.sim.signing import read_signature, unseal

__all__ = ["SimInvalidRequest", "SimNotFound", "model_id", "model_info", "validate"]

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_COUNT_FIELDS = frozenset({
    "model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control", "output_config",
    "speed", "context_management", "compaction", "mcp_servers", "user_profile_id", "workspace_id",
})  # fmt: skip
_CREATE_FIELDS = _COUNT_FIELDS | {
    "max_tokens", "stream", "stop_sequences", "temperature", "top_p", "top_k", "metadata", "service_tier",
    "container", "diagnostics", "inference_geo",
}  # fmt: skip
"""The top-level fields of ``count_tokens`` and ``create`` requests (the SDK's parameters, with the
sampling parameters older models take)."""
_BLOCK_TYPES = (
    "text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use", "tool_result",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result",
    "container_upload", "compaction",
)  # fmt: skip
_BLOCK_FIELDS = {
    "text": {"type", "text", "cache_control", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller", "toolset_name"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
_THINKING = ("thinking", "redacted_thinking")
_SEARCH_ERRORS = frozenset({"invalid_tool_input", "unavailable", "max_uses_exceeded", "too_many_requests",
                            "query_too_long", "request_too_large"})  # fmt: skip
_SERVER_BLOCKS = frozenset({"server_tool_use", "web_search_tool_result"})
Turn = tuple[int, str, list[tuple[str, Block]]]


def validate(params: Any, *, count_only: bool = False, betas: frozenset[str] = frozenset()) -> None:
    """Raise ``SimInvalidRequest`` for what the API refuses in ``params`` (``betas``: the request's
    ``anthropic-beta`` names)."""
    if not isinstance(params, dict):
        raise SimInvalidRequest("the request body must be a JSON object")
    for field in params:
        if field not in (_COUNT_FIELDS if count_only else _CREATE_FIELDS):
            raise SimInvalidRequest(f"{field}: Extra inputs are not permitted")
    model = params.get("model")
    if not isinstance(model, str) or not model:
        raise SimInvalidRequest("model: field required")
    info = model_info(model)
    if not count_only:
        _check_max_tokens(model, info, params.get("max_tokens"))
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise SimInvalidRequest("messages: at least one message is required")
    searching = _check_tools(params.get("tools"))
    check_thinking(params, model_id(model), info, betas, count_only=count_only)
    check_params(params, info)
    check_context(params, model, info, betas)  # context editing, compaction and compaction blocks
    turns = _turns(messages, info)
    _check_messages(turns, searching, tools=bool(params.get("tools")))
    check_thinking_turn(params, turns)
    check_breakpoints(params)
    if not count_only and (tokens := request_tokens(params)) > info.context_window:
        raise SimInvalidRequest(f"prompt is too long: {tokens} tokens > {info.context_window} maximum")


def model_info(model: str) -> ModelInfo:
    """The catalog entry the sim follows for ``model`` (``sim``, ``sim:<model>``, an alias, or a Claude
    model id); an id it does not know is a 404, as on the API."""
    info = lookup(resolve(model))
    if info is None or info.retired:  # a retired model is answered as an unknown one
        raise SimNotFound(f"model: {model}")
    return info


def _check_max_tokens(model: str, info: ModelInfo, max_tokens: Any) -> None:
    """``0`` is valid: the API then only writes the prompt cache (the SDK documents it for pre-warming)."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise SimInvalidRequest("max_tokens: Input should be a valid integer, greater than or equal to 0")
    if max_tokens > info.max_output_tokens:
        raise SimInvalidRequest(
            f"max_tokens: {max_tokens} > {info.max_output_tokens}, which is the maximum allowed number of"
            f" output tokens for {model}"
        )


def model_id(model: str) -> str:
    """The Claude model ``model`` names (``sim`` alone: the sim's default)."""
    name = resolve(model)
    if name == "sim" or name.startswith("sim:"):
        return name[4:] or SIM_DEFAULT
    return name


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


def _check_messages(turns: list[Turn], searching: bool, *, tools: bool) -> None:
    pending: set[str] = set()  # tool_use ids of the previous assistant turn, awaiting results
    ids: set[str] = set()  # every tool_use id of the request
    for first, role, blocks in turns:
        for where, block in blocks:
            _check_block(where, block, tools)
        if role == "user":
            _check_results(first, blocks, pending)
            pending = set()
        elif role == "system":
            _check_system_message(first, blocks, pending)
        else:  # turns alternate, so the user turn before answered every call
            pending = _check_assistant(blocks, searching, ids)


def _turns(messages: list[Any], info: ModelInfo) -> list[Turn]:
    """The conversation's turns: (index of the first message, role, its blocks with where each is), runs
    of messages of one role merged into one turn, as the API merges them. ``system`` messages are taken
    on a model whose catalog entry says ``system_messages``, as the API takes them."""
    roles = ("user", "assistant", "system") if info.system_messages else ("user", "assistant")
    turns: list[Turn] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in roles:
            quoted = [f"'{r}'" for r in roles]
            expected = ", ".join(quoted[:-1]) + " or " + quoted[-1]
            raise SimInvalidRequest(f"messages.{i}.role: Input should be {expected}")
        if i == 0 and message["role"] != "user" and not _opens_with_compaction(message):
            raise SimInvalidRequest("messages.0.role: the first message must use the 'user' role")
        extra = sorted(message.keys() - {"role", "content"})
        if extra:
            raise SimInvalidRequest(f"messages.{i}.{extra[0]}: Extra inputs are not permitted")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise SimInvalidRequest(f"messages.{i}.content: must be a string or a list of blocks")
        if not content and not (i == len(messages) - 1 and message["role"] == "assistant"):
            raise SimInvalidRequest(
                f"messages.{i}: all messages must have non-empty content except for the optional final"
                " assistant message"
            )
        blocks = [(f"messages.{i}.content.{j}", block) for j, block in enumerate(message_blocks(message))]
        if turns and turns[-1][1] == message["role"]:
            turns[-1][2].extend(blocks)
        else:
            turns.append((i, message["role"], blocks))
    return turns


def _opens_with_compaction(message: dict[str, Any]) -> bool:
    """An assistant message opening with a compaction block may come first: a compaction's block is sent
    back in place of the messages it summarises."""
    blocks = message_blocks(message)
    first = blocks[0] if blocks else None
    return (
        message.get("role") == "assistant" and isinstance(first, dict) and first.get("type") == "compaction"
    )


def _check_system_message(i: int, blocks: list[tuple[str, Block]], pending: set[str]) -> None:
    """A ``system`` message mid-conversation: text only (``SystemMessageParam``), and not between a tool
    call and its result (the result must come in the next message)."""
    if pending:
        raise _unanswered(i - 1, pending)
    for where, block in blocks:
        if block["type"] != "text":
            raise SimInvalidRequest(f"{where}.type: a system message takes only text blocks")


def _check_block(where: str, block: Any, tools: bool) -> None:
    """One block's type, fields and text: what the API's schema refuses before any rule."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise SimInvalidRequest(f"{where}: a content block needs a 'type'")
    kind = block["type"]
    if kind not in _BLOCK_TYPES:
        expected = ", ".join(f"'{t}'" for t in _BLOCK_TYPES)
        raise SimInvalidRequest(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags:"
            f" {expected}"
        )
    extra = sorted(block.keys() - _BLOCK_FIELDS.get(kind, block.keys()))
    if extra:
        raise SimInvalidRequest(f"{where}.{kind}.{extra[0]}: Extra inputs are not permitted")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise SimInvalidRequest(f"{where}.text.text: Input should be a valid string")
        if not text:
            raise SimInvalidRequest("messages: text content blocks must be non-empty")
        if not text.strip():
            raise SimInvalidRequest("messages: text content blocks must contain non-whitespace text")
    if kind in ("tool_use", "tool_result") and not tools:
        raise SimInvalidRequest("Requests which include tool_use or tool_result blocks must define tools.")


def _check_results(i: int, blocks: list[tuple[str, Block]], pending: set[str]) -> None:
    answered: set[str] = set()
    seen_other = False
    for where, block in blocks:
        if block["type"] in (*_SERVER_BLOCKS, *_THINKING, "tool_use"):
            raise SimInvalidRequest(f"{where}: {block['type']} blocks belong in assistant messages")
        if block["type"] != "tool_result":
            seen_other = True
            continue
        tool_use_id = block.get("tool_use_id")
        if tool_use_id not in pending:
            raise SimInvalidRequest(
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks:"
                f" {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block"
                " in the previous message."
            )
        if seen_other:
            raise SimInvalidRequest(
                f"{where}: `tool_result` blocks must come first in the content of a user message"
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


def _check_assistant(blocks: list[tuple[str, Block]], searching: bool, ids: set[str]) -> set[str]:
    """Check an assistant turn; the ids of its tool calls (added to ``ids``, the request's)."""
    calls: set[str] = set()
    searches: dict[str, str] = {}  # server_tool_use ids of this turn awaiting their results
    for where, block in blocks:
        kind = block["type"]
        if kind == "tool_use":
            use_id = block.get("id")
            if not isinstance(use_id, str) or not _TOOL_USE_ID.match(use_id):
                raise SimInvalidRequest(
                    f"{where}.tool_use.id: String should match pattern '{_TOOL_USE_ID.pattern}'"
                )
            if use_id in ids:
                raise SimInvalidRequest(f"{where}: `tool_use` ids must be unique")
            if not isinstance(block.get("input"), dict) or not isinstance(block.get("name"), str):
                raise SimInvalidRequest(f"{where}: a tool_use block needs a name and an input object")
            ids.add(use_id)
            calls.add(use_id)
        elif kind in _THINKING and read_signature(block) is None:  # the model and prefix: binding.bind
            field = "signature" if kind == "thinking" else "data"
            raise SimInvalidRequest(f"{where}: Invalid `{field}` in `{kind}` block")
        elif kind == "tool_result":
            raise SimInvalidRequest(f"{where}: tool_result blocks belong in user messages")
        elif kind in _SERVER_BLOCKS and not searching:
            raise SimInvalidRequest(f"{where}: `{kind}` blocks need the web search tool in `tools`")
        elif kind == "server_tool_use":
            use_id = block.get("id")
            if (
                not isinstance(use_id, str)
                or not use_id.startswith("srvtoolu_")
                or not isinstance(block.get("input"), dict)
            ):
                raise SimInvalidRequest(
                    f"{where}: a server_tool_use block needs a srvtoolu_ id and an input object"
                )
            if block.get("name") != SEARCH_TOOL_NAME:
                raise SimInvalidRequest(f"{where}.name: unknown server tool {block.get('name')!r}")
            searches[use_id] = where
        elif kind == "web_search_tool_result":
            use_id = block.get("tool_use_id")
            if use_id not in searches:
                raise SimInvalidRequest(
                    f"{where}: `web_search_tool_result` block with `tool_use_id` {use_id}"
                    " has no corresponding `server_tool_use` block before it"
                )
            del searches[use_id]
            _check_search_content(where, block.get("content"))
        elif kind == "text" and block.get("citations"):
            _check_citations(where, block["citations"])
    for use_id, where in searches.items():
        raise SimInvalidRequest(
            f"{where.rsplit('.content.', 1)[0]}: `web_search` tool use with id `{use_id}` was found without a"
            " corresponding `web_search_tool_result` block"
        )
    return calls


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
            or "url" not in sealed  # a seal of another kind (a thinking signature) is not a page
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
