"""The API's server-side context management, in the simulator: context editing and compaction.

NOTE for the owner of validate.py / server.py / respond.py (the integration points):
- ``check`` and ``check_compaction_block`` raise ``InvalidContext``, a ``SimInvalidRequest``
  (``teamrt.sim.errors``, so validate may import this module without a cycle).
- ``check`` already runs ``check_compaction_block`` on every ``compaction`` block of ``messages`` (and
  checks the beta and that the block is in an assistant message); validate must accept the
  ``compaction`` block type, and a first message that is an assistant message starting with one (a
  compaction on demand's block is sent back first in ``messages``, in place of what it summarises).
- ``Managed.summarised`` (added, defaulted): the request the summary was written from when compaction
  ran, for the ``compaction`` entry of ``usage.iterations`` (its tokens are not in the top-level usage).
- Streamed, a compaction block is ``content_block_start`` with ``{"type": "compaction", "content": null,
  "signature": ...}``, then one ``compaction_delta`` with the whole ``content`` (and ``encrypted_content:
  null``: the SDK's accumulator copies both fields from the delta), then ``content_block_stop``.
- ``count_tokens``: ``counted(params, model, info, betas)`` gives the body (clearing edits applied,
  ``context_management.original_input_tokens``; compaction neither runs nor is counted there).

The shapes (SDK 2.14, ``anthropic.types.beta``), with the documented defaults:

    context_management: {"edits": [edit, ...]}
      {"type": "clear_tool_uses_20250919",                      beta context-management-2025-06-27
       "trigger": {"type": "input_tokens" | "tool_uses", "value": n >= 1},   default input_tokens 100,000
       "keep": {"type": "tool_uses", "value": n >= 0},                       default 3
       "clear_at_least": {"type": "input_tokens", "value": n >= 0} | null,
       "exclude_tools": [name, ...] | null, "clear_tool_inputs": bool | [name, ...] | null}
      {"type": "clear_thinking_20251015",                       beta context-management-2025-06-27
       "keep": {"type": "thinking_turns", "value": n >= 1} | {"type": "all"} | "all"}   default 1 turn
      {"type": "compact_20260112",                              beta compact-2026-01-12
       "trigger": {"type": "input_tokens", "value": n >= 50,000} | null,     default 150,000
       "instructions": str | null, "pause_after_compaction": bool}
    compaction: {"type": "summarize", "instructions": str | null}   beta compact-2026-09-04; on demand:
      the response is the compaction block alone, stop_reason "compaction"; not with context_management
    block: {"type": "compaction", "content": str | null, "signature": str, "encrypted_content": null,
            "cache_control"?, "tool_changes": null}
    response: context_management.applied_edits: [{"type": "clear_tool_uses_20250919",
      "cleared_tool_uses": n, "cleared_input_tokens": n}, {"type": "clear_thinking_20251015",
      "cleared_thinking_turns": n, "cleared_input_tokens": n}]

The rules: each edit type once; ``clear_thinking_20251015`` first when combined, and only with thinking
on (a ``thinking`` of type enabled or adaptive, or none on a model that thinks by default); a model
whose catalog entry lacks ``context_editing`` / ``server_compaction`` / ``compaction_on_demand`` refuses
the edits / the ``compact_20260112`` edit / the ``compaction`` parameter;
``compaction`` and ``context_management`` not together; a compaction block's ``content`` non-empty or
null (null: a failed compaction, a no-op). Wording is ours except where the SDK or docs give it
(docs/simulator.md lists these). Counts above 2**31 - 1 are refused (ours: no sane request sends them).

``manage`` gives what the model reads: messages before the newest compaction block dropped and the
block read as a user turn holding its summary; then the edits in the order listed. With thinking on and
no ``clear_thinking_20251015`` edit, a request with ``context_management`` keeps only the last turn's
thinking (the documented default) unless the model preserves thinking (``binds_thinking``: the
preserved-thinking page keeps usable blocks in context). Compaction runs when the input tokens reach the
trigger: ``teamrt.sim.summariser`` writes the summary, sealed with the model (``signing.seal``), so a
changed summary, signature or model is a 400 when the block comes back. ``instructions`` are accepted
and not followed: the summariser is not a model.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from teamrt.models.catalog import SIM_DEFAULT, ModelInfo, resolve
from teamrt.models.tokens import message_blocks, request_tokens
from teamrt.sim.binding import compaction_seal
from teamrt.sim.clearing import CLEAR_THINKING, CLEAR_TOOL_USES, clear_thinking, clear_tool_uses
from teamrt.sim.errors import SimInvalidRequest
from teamrt.sim.signing import seal, unseal
from teamrt.sim.summariser import summarise

COMPACT = "compact_20260112"
CONTEXT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
ON_DEMAND_BETA = "compact-2026-09-04"
DEFAULT_COMPACT_TRIGGER = 150_000
MIN_COMPACT_TRIGGER = 50_000
MAX_COUNT = 2**31 - 1
_BETAS = {CLEAR_TOOL_USES: CONTEXT_BETA, CLEAR_THINKING: CONTEXT_BETA, COMPACT: COMPACT_BETA}
_FIELDS = {
    CLEAR_TOOL_USES: {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"},
    CLEAR_THINKING: {"type", "keep"},
    COMPACT: {"type", "trigger", "instructions", "pause_after_compaction"},
}
_BLOCK_FIELDS = {"type", "content", "signature", "encrypted_content", "cache_control", "tool_changes"}
_KEEP_ONE = {"type": "thinking_turns", "value": 1}
"""``clear_thinking_20251015``'s default: the thinking of the last assistant turn only."""
_SNAPSHOT = re.compile(r"(-0)?(-\d{8})?(-latest)?$")


class InvalidContext(SimInvalidRequest):
    """A request's context management or compaction the API refuses (a 400 invalid_request_error)."""


@dataclass(frozen=True)
class Managed:
    params: dict[str, Any]
    """The request as the model reads it: edits applied, messages before the newest compaction block
    dropped, ``context_management`` and ``compaction`` handled (and removed)."""
    applied_edits: list[dict[str, Any]]
    """``response["context_management"]["applied_edits"]``."""
    compaction: dict[str, Any] | None
    """A signed compaction block to put first in the response content."""
    stop: bool
    """True: the response is the compaction block alone, with ``stop_reason: "compaction"``."""
    summarised: dict[str, Any] | None = None
    """When compaction ran: the request the summary was written from (the compaction iteration's input)."""


def thinking_on(params: dict[str, Any], info: ModelInfo) -> bool:
    thinking = params.get("thinking")
    if isinstance(thinking, dict):
        return thinking.get("type") in ("enabled", "adaptive")
    return thinking is None and info.thinking_default is not None


def check(params: dict[str, Any], model: str, info: ModelInfo, betas: frozenset[str]) -> None:
    """Refuse what the API refuses in ``context_management``, ``compaction`` and compaction blocks."""
    management, compaction = params.get("context_management"), params.get("compaction")
    if management is not None and compaction is not None:
        raise InvalidContext("compaction: cannot be combined with `context_management`")
    if management is not None:
        _check_management(management, model, info, betas, thinking_on(params, info))
    if compaction is not None:
        _check_on_demand(compaction, model, info, betas)
    for i, message in enumerate(params.get("messages") or []):
        if not isinstance(message, dict):
            continue
        for j, block in enumerate(message_blocks(message)):
            if isinstance(block, dict) and block.get("type") == "compaction":
                where = f"messages.{i}.content.{j}"
                if not betas & {COMPACT_BETA, ON_DEMAND_BETA}:
                    raise InvalidContext(f"{where}: `compaction` blocks require the `{COMPACT_BETA}` or"
                                         f" `{ON_DEMAND_BETA}` beta")  # fmt: skip
                if message.get("role") != "assistant":
                    raise InvalidContext(f"{where}: compaction blocks belong in assistant messages")
                check_compaction_block(where, block, model)


def check_compaction_block(where: str, block: dict[str, Any], model: str) -> None:
    """A compaction block sent back: as the simulator wrote it for ``model``, or with null content."""
    extra = sorted(block.keys() - _BLOCK_FIELDS)
    if extra:
        raise InvalidContext(f"{where}.compaction.{extra[0]}: Extra inputs are not permitted")
    content = block.get("content")
    if content is not None and not isinstance(content, str):
        raise InvalidContext(f"{where}.compaction.content: Input should be a valid string")
    if content == "":
        raise InvalidContext(f"{where}.compaction.content: empty content is not allowed; send null for a"
                             " failed compaction")  # fmt: skip
    for name in ("encrypted_content", "tool_changes"):  # the simulator sends neither: changed if present
        if block.get(name) is not None:
            raise InvalidContext(f"{where}: Invalid `{name}` in `compaction` block")
    signature = block.get("signature")
    if content is None:
        if signature is not None and not isinstance(signature, str):
            raise InvalidContext(f"{where}.compaction.signature: Input should be a valid string")
        return  # a failed compaction: the server treats it as a no-op
    fields = unseal(signature)
    if fields is None or fields.get("kind") != "compaction" or fields.get("content") != _digest(content):
        raise InvalidContext(f"{where}: Invalid `signature` in `compaction` block")
    if fields.get("model") != claude_id(model):
        raise InvalidContext(
            f"{where}: Invalid `signature` in `compaction` block: it was written by {fields.get('model')},"
            f" not {claude_id(model)}"
        )


def compaction_block(model: str, summary: str, summarised: dict[str, str] | None = None) -> dict[str, Any]:
    """The block the simulator returns for ``summary``, signed for ``model``; ``summarised``: what it seals
    of the request it summarised (on demand, ``binding.compaction_seal``)."""
    fields = {
        "kind": "compaction",
        "model": claude_id(model),
        "content": _digest(summary),
        **(summarised or {}),
    }
    signature = seal(fields)
    return {"type": "compaction", "content": summary, "signature": signature}


def claude_id(model: str) -> str:
    """The Claude model ``model`` names (``sim`` alone: the sim's default), without a snapshot suffix."""
    name = resolve(model)
    if name == "sim" or name.startswith("sim:"):
        name = name[4:] or SIM_DEFAULT
    return _SNAPSHOT.sub("", name)


def manage(params: dict[str, Any], model: str, info: ModelInfo, betas: frozenset[str]) -> Managed:
    """What the model reads of a checked request, and what the response reports of it."""
    management = params.get("context_management")
    edits: list[dict[str, Any]] = list((management or {}).get("edits") or [])
    request = {k: v for k, v in params.items() if k not in ("context_management", "compaction")}
    messages = view(params["messages"])
    if (
        management is not None
        and thinking_on(params, info)
        and not info.binds_thinking
        and all(e["type"] != CLEAR_THINKING for e in edits)
    ):
        messages, _ = clear_thinking(messages, _KEEP_ONE)
    request["messages"] = messages
    tokens = request_tokens(request)
    applied: list[dict[str, Any]] = []
    for edit in edits:
        if edit["type"] == CLEAR_TOOL_USES:
            messages, report = clear_tool_uses(messages, edit, tokens)
        elif edit["type"] == CLEAR_THINKING:
            messages, report = clear_thinking(messages, edit.get("keep", _KEEP_ONE))
        else:
            trigger = (edit.get("trigger") or {}).get("value", DEFAULT_COMPACT_TRIGGER)
            if tokens < trigger:
                continue
            return _compact(
                model, {**request, "messages": messages}, applied, bool(edit.get("pause_after_compaction"))
            )
        if report is not None:
            applied.append(report)
            tokens -= report["cleared_input_tokens"]
        request["messages"] = messages
    if params.get("compaction") is not None:  # on demand: the turns kept after the block keep their thinking
        return _compact(model, request, applied, pause=True, summarised=compaction_seal(params))
    return Managed(request, applied, None, False)


def _compact(
    model: str,
    request: dict[str, Any],
    applied: list[dict[str, Any]],
    pause: bool,
    summarised: dict[str, str] | None = None,
) -> Managed:
    block = compaction_block(model, summarise(request["messages"], request.get("system")), summarised)
    if pause:
        return Managed(request, applied, block, True, summarised=request)
    compacted = {
        **request,
        "messages": [{"role": "user", "content": [{"type": "text", "text": block["content"]}]}],
    }
    return Managed(compacted, applied, block, False, summarised=request)


def view(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as the model reads them: from the newest compaction block on, that block read as a
    user turn holding its summary (its ``cache_control`` kept); compaction blocks with null content (failed
    compactions) left out. Every message's content is a list of blocks; nothing of ``messages`` changes."""
    newest: tuple[int, int] | None = None
    for i, message in enumerate(messages):
        for j, block in enumerate(message_blocks(message)):
            if block.get("type") == "compaction" and isinstance(block.get("content"), str):
                newest = (i, j)
    out: list[dict[str, Any]] = []
    start = newest[0] if newest else 0
    for i in range(start, len(messages)):
        blocks = message_blocks(messages[i])
        if newest is not None and i == newest[0]:
            block = blocks[newest[1]]
            summary = {"type": "text", "text": block["content"]}
            if block.get("cache_control") is not None:
                summary["cache_control"] = block["cache_control"]
            out.append({"role": "user", "content": [summary]})
            blocks = blocks[newest[1] + 1 :]
        rest = [b for b in blocks if b.get("type") != "compaction"]
        if rest:
            out.append({**messages[i], "content": rest})
    return out


def counted(params: dict[str, Any], model: str, info: ModelInfo, betas: frozenset[str]) -> dict[str, Any]:
    """The ``count_tokens`` answer: the clearing edits applied (compaction neither runs nor counts), and,
    with ``context_management``, the count before them as ``original_input_tokens``."""
    management = params.get("context_management")
    request = {k: v for k, v in params.items() if k not in ("context_management", "compaction")}
    if management is not None:
        request["context_management"] = {
            "edits": [e for e in management.get("edits") or [] if e["type"] != COMPACT]
        }
    managed = manage(request, model, info, betas)
    body: dict[str, Any] = {"input_tokens": request_tokens(managed.params)}
    if management is not None:
        original = {**request, "messages": view(params["messages"])}
        original.pop("context_management", None)
        body["context_management"] = {"original_input_tokens": request_tokens(original)}
    return body


def _check_management(
    management: Any, model: str, info: ModelInfo, betas: frozenset[str], thinking: bool
) -> None:
    if not isinstance(management, dict):
        raise InvalidContext("context_management: Input should be a valid dictionary")
    for key in management:
        if key != "edits":
            raise InvalidContext(f"context_management.{key}: Extra inputs are not permitted")
    edits = management.get("edits")
    if edits is None:
        return
    if not isinstance(edits, list):
        raise InvalidContext("context_management.edits: Input should be a valid list")
    seen: set[str] = set()
    for i, edit in enumerate(edits):
        where = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if not isinstance(edit, dict) or kind not in _FIELDS:
            expected = ", ".join(f"'{t}'" for t in _FIELDS)
            raise InvalidContext(
                f"{where}: Input tag {kind!r} found using 'type' does not match any of the expected tags:"
                f" {expected}"
            )
        if kind in seen:
            raise InvalidContext(f"{where}: each context management strategy may be listed once ({kind!r})")
        seen.add(kind)
        extra = sorted(edit.keys() - _FIELDS[kind])
        if extra:
            raise InvalidContext(f"{where}.{kind}.{extra[0]}: Extra inputs are not permitted")
        if _BETAS[kind] not in betas:
            raise InvalidContext(
                f"{where}: the '{kind}' strategy requires the `anthropic-beta: {_BETAS[kind]}` header"
            )
        if not (info.server_compaction if kind == COMPACT else info.context_editing):
            raise InvalidContext(f"{where}: '{kind}' is not supported on {model}")
        if kind == CLEAR_THINKING:
            if i != 0:
                raise InvalidContext(f"{where}: '{CLEAR_THINKING}' must be listed first in `edits`")
            if not thinking:
                raise InvalidContext(f"{where}: '{CLEAR_THINKING}' requires thinking to be enabled")
            _check_thinking_keep(f"{where}.keep", edit.get("keep", _KEEP_ONE))
        elif kind == CLEAR_TOOL_USES:
            _check_tool_uses(where, edit)
        else:
            if edit.get("trigger") is not None:
                _count(f"{where}.trigger", edit["trigger"], ("input_tokens",), MIN_COMPACT_TRIGGER)
            _optional_string(f"{where}.instructions", edit.get("instructions"))
            if "pause_after_compaction" in edit and not isinstance(edit["pause_after_compaction"], bool):
                raise InvalidContext(f"{where}.pause_after_compaction: Input should be a valid boolean")


def _check_tool_uses(where: str, edit: dict[str, Any]) -> None:
    if "trigger" in edit:
        _count(f"{where}.trigger", edit["trigger"], ("input_tokens", "tool_uses"), 1)
    if "keep" in edit:
        _count(f"{where}.keep", edit["keep"], ("tool_uses",), 0)
    if edit.get("clear_at_least") is not None:
        _count(f"{where}.clear_at_least", edit["clear_at_least"], ("input_tokens",), 0)
    _names(f"{where}.exclude_tools", edit.get("exclude_tools"))
    inputs = edit.get("clear_tool_inputs")
    if not isinstance(inputs, bool):
        _names(f"{where}.clear_tool_inputs", inputs)


def _check_thinking_keep(where: str, keep: Any) -> None:
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all" and len(keep) == 1):
        return
    if not isinstance(keep, dict) or keep.get("type") != "thinking_turns":
        raise InvalidContext(f"{where}: Input should be 'all', {{'type': 'all'}} or a thinking_turns object")
    _count(where, keep, ("thinking_turns",), 1)


def _check_on_demand(compaction: Any, model: str, info: ModelInfo, betas: frozenset[str]) -> None:
    if not isinstance(compaction, dict):
        raise InvalidContext("compaction: Input should be a valid dictionary")
    extra = sorted(compaction.keys() - {"type", "instructions"})
    if extra:
        raise InvalidContext(f"compaction.{extra[0]}: Extra inputs are not permitted")
    if compaction.get("type") != "summarize":
        raise InvalidContext("compaction.type: Input should be 'summarize'")
    _optional_string("compaction.instructions", compaction.get("instructions"))
    if ON_DEMAND_BETA not in betas:
        raise InvalidContext(f"compaction: requires the `anthropic-beta: {ON_DEMAND_BETA}` header")
    if not info.compaction_on_demand:
        raise InvalidContext(f"compaction: not supported on {model}")


def _count(where: str, value: Any, kinds: tuple[str, ...], minimum: int) -> None:
    if not isinstance(value, dict):
        raise InvalidContext(f"{where}: Input should be a valid dictionary")
    extra = sorted(value.keys() - {"type", "value"})
    if extra:
        raise InvalidContext(f"{where}.{extra[0]}: Extra inputs are not permitted")
    if value.get("type") not in kinds:
        raise InvalidContext(f"{where}.type: Input should be {' or '.join(repr(k) for k in kinds)}")
    n = value.get("value")
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidContext(f"{where}.value: Input should be a valid integer")
    if n < minimum:
        raise InvalidContext(f"{where}.value: Input should be greater than or equal to {minimum}")
    if n > MAX_COUNT:
        raise InvalidContext(f"{where}.value: Input should be less than or equal to {MAX_COUNT}")


def _names(where: str, names: Any) -> None:
    if names is None:
        return
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidContext(f"{where}: Input should be a valid list of tool names")


def _optional_string(where: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidContext(f"{where}: Input should be a valid string")


def _digest(content: str) -> str:
    return hashlib.sha256(b"teamrt-sim-compaction\0" + content.encode("utf-8", "surrogatepass")).hexdigest()[
        :32
    ]
