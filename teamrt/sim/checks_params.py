"""The API's rules for a request's parameters other than its messages and tools.

The values the SDK's types allow (``service_tier``, ``output_config.effort``,
the ``anthropic-beta`` header's names), what each model takes (the catalog's
``effort`` levels, ``forced_tool_choice``, ``sampling``), and prompt-cache
markers: ``ttl`` only ``"5m"`` or ``"1h"``, at most four breakpoints counting
the one a top-level ``cache_control`` places on the last cacheable block, no
1-hour entry after a 5-minute one. Wording is the API's where it was published
(the beta header's, the breakpoint limit's, the schema's pydantic messages);
docs/simulator.md lists the messages that are ours.
"""

from __future__ import annotations

import functools
from typing import Any

from teamrt.models.catalog import ModelInfo
from teamrt.models.tokens import message_blocks, system_blocks
from teamrt.models.types import Block
from teamrt.sim.checks_thinking import thinks
from teamrt.sim.errors import SimInvalidRequest

MAX_BREAKPOINTS = 4
TTLS = ("5m", "1h")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""``OutputConfigParam.effort``'s values in the SDK."""
SERVICE_TIERS = ("auto", "standard_only")
_SAMPLING = ("temperature", "top_p", "top_k")
_FORCED_CHOICES = ("any", "tool")
_CHOICES = ("auto", "any", "tool", "none")
_UNCACHEABLE = ("thinking", "redacted_thinking")


@functools.cache
def known_betas() -> frozenset[str]:
    """The beta names the SDK knows (``AnthropicBetaParam``): the API refuses any other."""
    import typing

    from anthropic.types import AnthropicBetaParam

    names: set[str] = set()
    for arg in typing.get_args(AnthropicBetaParam):
        names.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return frozenset(names)


def parse_betas(header: str | None) -> frozenset[str]:
    """The names of an ``anthropic-beta`` header (comma-separated), each checked to be one the API knows."""
    names = frozenset(n.strip() for n in (header or "").split(",") if n.strip())
    unknown = sorted(names - known_betas())
    if unknown:
        raise SimInvalidRequest(
            f"Unexpected value(s) {', '.join(f'`{n}`' for n in unknown)} for the `anthropic-beta` header."
            " Please consult our documentation at docs.claude.com or try again without the header."
        )
    return names


def check_params(params: dict[str, Any], info: ModelInfo) -> None:
    _check_sampling(params, info)
    _check_tool_choice(params, info)
    _check_output_config(params.get("output_config"), info)
    tier = params.get("service_tier")
    if tier is not None and tier not in SERVICE_TIERS:
        raise SimInvalidRequest("service_tier: Input should be 'auto' or 'standard_only'")


def _check_sampling(params: dict[str, Any], info: ModelInfo) -> None:
    """Sampling parameters on a model that takes none (``temperature`` 1, its default, passes)."""
    if info.sampling:
        return
    for name in _SAMPLING:
        if name in params and not (name == "temperature" and params[name] == 1):
            raise SimInvalidRequest(f"`{name}` is deprecated for this model.")


def _check_tool_choice(params: dict[str, Any], info: ModelInfo) -> None:
    """A forced tool choice: refused always on a model whose catalog entry says ``forced_tool_choice =
    false`` (Sonnet 5.5's page: "Forced tool use returns an error"; that message is ours), and with
    thinking on (asked for, or the model's default) on the others (the API's message)."""
    choice = params.get("tool_choice")
    if choice is None:
        return
    if not isinstance(choice, dict) or choice.get("type") not in _CHOICES:
        expected = ", ".join(f"'{c}'" for c in _CHOICES)
        tag = choice.get("type") if isinstance(choice, dict) else choice
        raise SimInvalidRequest(
            f"tool_choice: Input tag {tag!r} found using 'type' does not match any of the expected tags:"
            f" {expected}"
        )
    if choice["type"] not in _FORCED_CHOICES:
        return
    if not info.forced_tool_choice:
        raise SimInvalidRequest(
            f"tool_choice.type: '{choice['type']}' (forced tool use) is not supported on this model;"
            " use 'auto' or 'none'"
        )
    if thinks(params, info):
        raise SimInvalidRequest("Thinking may not be enabled when tool_choice forces tool use.")


def _check_output_config(config: Any, info: ModelInfo) -> None:
    """``output_config.effort``: one of the SDK's levels, and one the model takes (a model with none takes
    no effort at all); the messages for a level the model lacks are ours."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise SimInvalidRequest("output_config: Input should be a valid dictionary or object")
    extra = sorted(config.keys() - {"effort", "format"})
    if extra:
        raise SimInvalidRequest(f"output_config.{extra[0]}: Extra inputs are not permitted")
    effort = config.get("effort")
    if effort is None:
        return
    if effort not in EFFORTS:
        raise SimInvalidRequest(
            "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
        )
    if not info.effort:
        raise SimInvalidRequest("output_config.effort: this model does not support the effort parameter")
    if effort not in info.effort:
        raise SimInvalidRequest(
            f"output_config.effort: {effort!r} is not supported on this model (it takes"
            f" {', '.join(repr(e) for e in info.effort)})"
        )


def cache_target(params: dict[str, Any]) -> tuple[str, Block] | None:
    """Where a top-level ``cache_control`` puts its breakpoint: the last cacheable block of the request
    (messages, else system, else tools; thinking blocks take no marker), with its place."""
    places = _places(params)
    for where, block in reversed(places):
        if block.get("type") not in _UNCACHEABLE:
            return where, block
    return None


def _places(params: dict[str, Any]) -> list[tuple[str, Block]]:
    places = [(f"tools.{i}", t) for i, t in enumerate(params.get("tools") or []) if isinstance(t, dict)]
    places += [(f"system.{i}", b) for i, b in enumerate(system_blocks(params.get("system")))]
    for i, message in enumerate(params.get("messages") or []):
        places += [(f"messages.{i}.content.{j}", b) for j, b in enumerate(message_blocks(message))]
    return places


def check_breakpoints(params: dict[str, Any]) -> None:
    """The request's cache breakpoints: block markers and the top-level ``cache_control``."""
    ttls: list[str] = []
    target = cache_target(params)
    automatic = params.get("cache_control")
    if automatic is not None:
        _check_marker("cache_control", automatic)
    for where, block in _places(params):
        marker = block.get("cache_control")
        if marker is not None:
            _check_marker(f"{where}.cache_control", marker)
            if block.get("type") in _UNCACHEABLE:
                raise SimInvalidRequest("cache_control cannot be set on thinking blocks")
            ttls.append(marker.get("ttl") or "5m")
        if automatic is not None and target is not None and target[1] is block:
            ttl = automatic.get("ttl") or "5m"
            if marker is None:
                ttls.append(ttl)
            elif (marker.get("ttl") or "5m") != ttl:  # one breakpoint, two lifetimes: ours to refuse
                raise SimInvalidRequest(
                    f"cache_control: the top-level ttl {ttl!r} differs from the ttl of {where},"
                    " the block it marks"
                )
    if len(ttls) > MAX_BREAKPOINTS:
        raise SimInvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(ttls)}."
        )
    if "1h" in ttls and "5m" in ttls[: len(ttls) - ttls[::-1].index("1h")]:
        raise SimInvalidRequest("cache_control: a ttl='1h' entry must not come after a ttl='5m' entry")


def _check_marker(where: str, marker: Any) -> None:
    if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
        raise SimInvalidRequest(f"{where}: type must be 'ephemeral'")
    extra = sorted(marker.keys() - {"type", "ttl"})
    if extra:
        raise SimInvalidRequest(f"{where}.{extra[0]}: Extra inputs are not permitted")
    ttl = marker.get("ttl")
    if ttl is not None and ttl not in TTLS:
        raise SimInvalidRequest(f"{where}.ttl: Input should be '5m' or '1h'")
