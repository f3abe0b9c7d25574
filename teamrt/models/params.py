"""A ``ModelRequest`` as Messages API parameters, with prompt-cache breakpoints placed.

The request is never modified: blocks that get a ``cache_control`` marker are
copies, so what the agent persists (and what a fork copies) stays free of
markers and byte-identical from call to call.

Breakpoints (at most 4, the API's limit; markers already in the request count
and are kept), in this order of priority:

1. the end of the last message: the whole conversation so far is written;
2. the end of the system prompt (or of the tools list, with no system): the
   stable prefix survives any change to the conversation;
3. the end of the user message before the last assistant turn: exactly where
   the previous call put breakpoint 1, so that call's entry is read even when
   the new turn adds more than the API's 20-block lookback. For a fork, this is
   the end of its parent's prefix.

Thinking blocks and empty text blocks cannot carry a marker; the nearest
block before them in the same message does.

``temperature`` goes only to a model that takes it (the catalog's ``sampling``;
a model it does not know is assumed to), and in ``extra_body``: the SDK's
``messages.create`` has no ``temperature`` argument since anthropic 2.13, while
the API still reads the field.

``effort`` goes as ``output_config.effort``. A level the catalog says the
model does not take raises ``EffortUnsupported`` (one line, before any call)
rather than being dropped: a role set to ``low`` to save money must not run at
the model's default in silence. A model the catalog does not know gets it as
asked (the server decides).

``betas`` comes back as the ``betas`` argument of ``client.beta.messages.create``
(the SDK sends it as the ``anthropic-beta`` header); the provider takes the
beta client when it is present. ``context_management`` goes as the beta
method's argument, or, with no beta named, in ``extra_body`` (the plain method
has no such argument) for the server to refuse or take.
"""

from __future__ import annotations

from typing import Any

from teamrt.models.catalog import ModelInfo, lookup
from teamrt.models.errors import EffortUnsupported
from teamrt.models.tokens import message_blocks, system_blocks
from teamrt.models.types import Block, ModelRequest

MAX_BREAKPOINTS = 4
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def request_params(request: ModelRequest, info: ModelInfo | None = None) -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (``beta.messages.create`` when they hold ``betas``),
    without ``stream``; ``info`` (default: the catalog's entry for the request's model) says whether the
    model takes ``temperature`` and which ``effort`` levels. Raises ``EffortUnsupported``."""
    system = system_blocks(request.system)
    tools = list(request.tools)
    messages = [dict(m) for m in request.messages]
    marker = {"type": "ephemeral"} if request.cache_ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}
    free = MAX_BREAKPOINTS - _count_markers(system, tools, messages)
    for place in _breakpoint_places(system, tools, messages):
        if free <= 0:
            break
        if _mark(place, system, tools, messages, marker):
            free -= 1
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens, "messages": messages}
    if system:
        params["system"] = system
    if tools:
        params["tools"] = tools
    optional = {
        "thinking": request.thinking,
        "tool_choice": request.tool_choice,
        "stop_sequences": request.stop_sequences or None,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    info = lookup(request.model) if info is None else info
    extra: dict[str, Any] = {}
    if request.temperature is not None and (info is None or info.sampling):
        extra["temperature"] = request.temperature
    if request.effort is not None:
        _check_effort(request.model, request.effort, info)
        params["output_config"] = {"effort": request.effort}
    if request.context_management is not None:
        if request.betas:
            params["context_management"] = request.context_management
        else:
            extra["context_management"] = request.context_management
    if request.compaction is not None:  # a compaction request (on demand): its beta is named by the caller
        if request.betas:
            params["compaction"] = request.compaction
        else:
            extra["compaction"] = request.compaction
    if request.betas:
        params["betas"] = list(request.betas)
    if extra:
        params["extra_body"] = extra
    return params


def _check_effort(model: str, effort: str, info: ModelInfo | None) -> None:
    if info is None:
        return
    if not info.effort:
        raise EffortUnsupported(f"{model} does not take an effort level (asked for effort {effort!r})")
    if effort not in info.effort:
        raise EffortUnsupported(f"{model} takes effort {', '.join(info.effort)}, not {effort!r}")


def _count_markers(system: list[Block], tools: list[Block], messages: list[dict[str, Any]]) -> int:
    blocks = [*system, *tools]
    for m in messages:
        blocks.extend(message_blocks(m))
    return sum(1 for b in blocks if "cache_control" in b)


def _breakpoint_places(
    system: list[Block], tools: list[Block], messages: list[dict[str, Any]]
) -> list[tuple[str, int]]:
    """``("message", i)``, ``("system", 0)`` or ``("tools", 0)``, by priority."""
    places: list[tuple[str, int]] = []
    if messages:
        places.append(("message", len(messages) - 1))
    places.append(("system", 0) if system else ("tools", 0))
    assistant_turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if assistant_turns and assistant_turns[-1] > 0:
        previous_user = assistant_turns[-1] - 1
        if ("message", previous_user) not in places:
            places.append(("message", previous_user))
    return places


def _mark(
    place: tuple[str, int],
    system: list[Block],
    tools: list[Block],
    messages: list[dict[str, Any]],
    marker: Block,
) -> bool:
    """Put ``marker`` on the last markable block of ``place``; False if it has none or is marked."""
    kind, index = place
    if kind == "system":
        blocks = system
    elif kind == "tools":
        blocks = tools
    else:
        blocks = message_blocks(messages[index])
    for i in range(len(blocks) - 1, -1, -1):
        block = blocks[i]
        if "cache_control" in block:
            return False
        if block.get("type") in _UNMARKABLE or (block.get("type") == "text" and not block.get("text")):
            continue
        blocks[i] = {**block, "cache_control": marker}
        if kind == "message":
            messages[index]["content"] = blocks
        return True
    return False
