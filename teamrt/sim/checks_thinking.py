"""The API's rules for the ``thinking`` parameter, and for the turns a thinking request sends back.

``thinking.type`` is one of the SDK's four (``enabled``, ``disabled``,
``adaptive``, ``between_tools``), each with only its own fields; ``display``
only the SDK's values; ``block_binding`` only with the beta that brings it.
A model whose catalog entry says ``thinking_default = "adaptive"`` thinks when
the request sends no ``thinking`` (``mode``), so every rule about thinking
holds for it then too. Wording is the API's where it was found (the schema's
pydantic messages, the manual-thinking turn rule); docs/simulator.md lists the
messages that are ours.
"""

from __future__ import annotations

from typing import Any

from teamrt.models.catalog import ModelInfo
from teamrt.models.levers import HIGH_EFFORT
from teamrt.models.types import Block
from teamrt.sim.binding import BINDING_BETA, THINKING_TYPES
from teamrt.sim.errors import SimInvalidRequest

MIN_THINKING_BUDGET = 1024
KINDS = ("enabled", "disabled", "adaptive", "between_tools")
_FIELDS = {
    "enabled": {"type", "budget_tokens", "display", "block_binding"},
    "adaptive": {"type", "display", "block_binding"},
    "disabled": {"type"},
    "between_tools": {"type"},
}
_DISPLAY = {"enabled": ("summarized", "omitted"), "adaptive": ("summarized", "omitted", "updates")}
_BEHAVIOURS = ("error", "drop_block")


def mode(params: dict[str, Any], info: ModelInfo) -> str:
    """How the request thinks: its ``thinking.type``, else the model's default, else ``disabled``."""
    thinking = params.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("type"), str):
        return str(thinking["type"])
    return info.thinking_default if info.thinking_default in ("enabled", "adaptive") else "disabled"


def thinks(params: dict[str, Any], info: ModelInfo) -> bool:
    """Whether the model thinks before it answers (manual or adaptive thinking, asked for or by default)."""
    return mode(params, info) in ("enabled", "adaptive")


def drops_blocks(params: dict[str, Any]) -> bool:
    """``thinking.block_binding.prefix_mismatch_behavior`` is ``drop_block`` (checked to carry its beta)."""
    thinking = params.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, dict) else None
    return isinstance(binding, dict) and binding.get("prefix_mismatch_behavior") == "drop_block"


def check_thinking(
    params: dict[str, Any], model: str, info: ModelInfo, betas: frozenset[str], *, count_only: bool
) -> None:
    thinking = params.get("thinking")
    if thinking is None:
        return
    if not isinstance(thinking, dict) or not isinstance(thinking.get("type"), str):
        raise SimInvalidRequest("thinking: Input should be a valid dictionary or object with a 'type'")
    kind = thinking["type"]
    if kind not in KINDS:
        expected = ", ".join(f"'{k}'" for k in KINDS)
        raise SimInvalidRequest(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected tags:"
            f" {expected}"
        )
    extra = sorted(thinking.keys() - _FIELDS[kind])
    if extra:
        raise SimInvalidRequest(f"thinking.{kind}.{extra[0]}: Extra inputs are not permitted")
    display = thinking.get("display")
    if display is not None and display not in _DISPLAY[kind]:
        allowed = " or ".join(f"'{d}'" for d in _DISPLAY[kind])
        raise SimInvalidRequest(f"thinking.{kind}.display: Input should be {allowed}")
    if thinking.get("block_binding") is not None:
        _check_binding(kind, thinking["block_binding"], betas)
    if kind == "enabled":
        _check_manual(params, model, info, count_only)
    elif kind == "disabled" and info.thinking_off != "disabled":
        # Sonnet 5.5's page: a 400 invalid_request_error "whose message prompts you to use between_tools
        # instead"; the message itself is not quoted there, so this wording is ours
        raise SimInvalidRequest(
            f"thinking.type: 'disabled' is not supported on this model; send thinking.type"
            f" '{info.thinking_off}' to turn off up-front thinking"
        )
    elif kind == "between_tools":
        _check_between_tools(params, info)


def _check_binding(kind: str, binding: Any, betas: frozenset[str]) -> None:
    """``block_binding`` is a beta field: without its beta the API does not take it (the message asking for
    the header is ours; the documentation says the API's asks for it but does not quote it)."""
    if BINDING_BETA not in betas:
        raise SimInvalidRequest(
            f"thinking.{kind}.block_binding: requires the `anthropic-beta: {BINDING_BETA}` header"
        )
    if not isinstance(binding, dict):
        raise SimInvalidRequest(
            f"thinking.{kind}.block_binding: Input should be a valid dictionary or object"
        )
    extra = sorted(binding.keys() - {"prefix_mismatch_behavior"})
    if extra:
        raise SimInvalidRequest(f"thinking.{kind}.block_binding.{extra[0]}: Extra inputs are not permitted")
    behaviour = binding.get("prefix_mismatch_behavior")
    if behaviour is not None and behaviour not in _BEHAVIOURS:
        raise SimInvalidRequest(
            f"thinking.{kind}.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'"
        )


def _check_manual(params: dict[str, Any], model: str, info: ModelInfo, count_only: bool) -> None:
    """Manual thinking: its budget, and only on models that take it. Sonnet 5.x and the models that think
    adaptively by default take none (their pages: "manual extended thinking is not supported"); the
    message is ours, no published one was found."""
    if model.startswith("claude-sonnet-5") or info.thinking_default == "adaptive":
        raise SimInvalidRequest(
            "thinking.type.enabled: manual extended thinking is not supported on this model;"
            " use thinking.type 'adaptive'"
        )
    budget = params["thinking"].get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
        raise SimInvalidRequest(f"thinking.budget_tokens: must be at least {MIN_THINKING_BUDGET}")
    max_tokens = params.get("max_tokens")
    if not count_only and isinstance(max_tokens, int) and budget >= max_tokens:
        raise SimInvalidRequest("max_tokens: must be greater than thinking.budget_tokens")


def _check_between_tools(params: dict[str, Any], info: ModelInfo) -> None:
    """``between_tools`` (no up-front thinking) is taken by the models that think adaptively by default,
    not at ``xhigh`` or ``max`` effort (Sonnet 5.5's page); both messages are ours."""
    if info.thinking_default != "adaptive":
        raise SimInvalidRequest("thinking.type: 'between_tools' is not supported on this model")
    config = params.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    if effort in HIGH_EFFORT:
        raise SimInvalidRequest(
            f"thinking.type: 'between_tools' cannot be used with effort {effort!r}; use adaptive thinking"
        )


def check_thinking_turn(
    params: dict[str, Any], turns: list[tuple[int, str, list[tuple[str, Block]]]]
) -> None:
    """With manual thinking on, the last assistant turn that calls a tool starts with a thinking block."""
    thinking = params.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return
    assistant = [blocks for _, role, blocks in turns if role == "assistant"]
    if not assistant or not any(b["type"] == "tool_use" for _, b in assistant[-1]):
        return
    where, first = assistant[-1][0]
    if first["type"] not in THINKING_TYPES:
        raise SimInvalidRequest(
            f"{where}.type: Expected `thinking` or `redacted_thinking`, but found `{first['type']}`. When"
            " `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding"
            " the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking"
            " blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our"
            " documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        )
