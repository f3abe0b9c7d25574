"""When and how an agent's context is compacted: ``ContextPolicy``, chosen per model from its catalog entry.

One strategy per model, the cheapest the API offers it (``ContextPolicy.strategy``):

- ``on_demand`` (the catalog's ``compaction_on_demand``; the docs: "Use on-demand compaction wherever it is
  available"): teamrt decides when (the trigger below) and sends a compaction request: the agent's last
  request exactly (system, tools, ``tool_choice``, thinking, messages: so it reads the cache) plus the
  ``compaction`` parameter and the beta ``compact-2026-09-04``. The API answers with a signed ``compaction``
  block alone, which replaces the messages sent; the agent's last reply and what answered it stay after it
  (``teamrt.runtime.context.swapped``). The API refuses ``context_management`` with ``compaction``, so on
  these models ordinary requests carry none either: a compaction request must read the very prompt the
  cache holds. When no summary comes back, teamrt's own layers (below) do the work.
- ``editing`` (``context_editing`` without on-demand compaction): ordinary requests carry the API's
  ``clear_tool_uses_20250919`` as the cheap layer (it clears before the model reads, the client's history
  stays whole); teamrt's summary is the second layer, at the trigger.
- ``client`` everywhere else: teamrt's layers (``teamrt.runtime.context``): clear old tool results, then
  summarise.

A model with only the threshold edit (``compact_20260112``; none in the catalog, a settings table can make
one) gets ``editing``: one way to compact per model, decided by teamrt, rather than a second,
server-decided one whose response shape the loop would have to replay besides.

The trigger (input tokens) is, in order: the role's ``compact_at``; else the cost trigger below,
lowered to stay under a price band's edge where the model has one (Haiku 5.5 bills a whole prompt of
more than 100K tokens at 5x); always within ``[MIN_TRIGGER, limit]``, ``limit`` being the window less
the reply and a margin.

The cost trigger. An agent's history starts at ``B`` tokens after a compaction (system, tools, summary,
kept turns) and grows ``g`` tokens a turn. Each turn reads the history from the cache (``r`` a token)
and writes what it added (``w``, the same at any trigger). A compaction at ``T`` costs ``C = T*r``
(the summary request reads the cache: it keeps the prefix) ``+ o*out`` (the summary, ``o`` tokens)
``+ B*w`` (the new prefix written). Over one cycle of ``n = (T-B)/g`` turns the cost a turn is

    f(T) = r*(B+T)/2 + g*(T*r + o*out + B*w)/(T-B)

whose minimum is at ``T* = B + sqrt(2*g*(B + (o*out + B*w)/r))``. The prices enter only as ratios:
with ``out = 5*in``, ``w = 1.25*in``, ``r = 0.1*in`` (Sonnet 5.5, Haiku 5.5) and the defaults (``B``
20K, ``g`` 4K, ``o`` 2K) ``T*`` is about 74K tokens; Opus 5.5's cheaper reads (``r = 0.05*in``) give
about 96K. Sonnet 5.5 reads a 942K history for $0.19 a turn, a 74K one for $0.015. Larger ``g`` (big
tool results) moves it up (``g`` 8K: ~97K). A free cache read (an unpriced model) makes compaction
pure loss: the trigger is then the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from teamrt.models.catalog import ModelInfo

DEFAULT_WINDOW = 200_000
"""The window assumed for a model the catalog does not know."""
MIN_TRIGGER = 60_000
"""No cost trigger below this: a summary every few turns loses more than the cache reads it saves."""
BASE_TOKENS = 20_000
"""``B``: the history just after a compaction (system, tools, summary, kept turns)."""
GROWTH_TOKENS = 4_000
"""``g``: what a turn adds on average (a tool call, its result, the reply)."""
MIN_HISTORY = 20_000
"""The least history a compaction may act on past ``base``: a system prompt and tools near the trigger
(a big ``CLAUDE.md``, many MCP tools) would otherwise compact every turn, each compaction saving nothing."""
SUMMARY_TOKENS = 2_000
"""``o``: the length of a summary."""
LIMIT_MARGIN = 50
"""The window less the reply, less 1/50 of the window: room for the estimate of what was added since the
API last counted (sizes come from its counts, see ``teamrt.runtime.sizing``)."""

CONTEXT_EDITING_BETA = "context-management-2025-06-27"
ON_DEMAND_BETA = "compact-2026-09-04"
"""The beta of compaction on demand (the ``compaction`` parameter); sent on every request of an agent that
uses it, since every request after the first compaction carries a signed block."""
KEEP_TOOL_USES = 3
CLEAR_AT_LEAST = 10_000
"""Clear only when that frees this many tokens: each clearing rewrites the cache from the first cleared
result on, which a small gain does not repay."""
CLEAR_SHARE = 0.75
"""The API's clearing fires at this share of the trigger, so it runs before teamrt's summary would."""
SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation so far so that the work can go on without it. Keep the task as it was"
    " given; every fact found, with its exact figures, file paths, names and commands; every decision"
    " made and why; what was changed; every promise made to anyone; and what is left to do. Leave out"
    " what no longer matters."
)
"""The compaction request's ``instructions`` (they replace the server's default prompt)."""
Strategy = Literal["on_demand", "editing", "client"]


@dataclass(frozen=True)
class ContextPolicy:
    """How one agent keeps its context: the trigger, the hard limit and the strategy."""

    trigger: int
    """Compact when the next request would have more input tokens than this."""
    limit: int
    """The most input tokens a request may have: the window less the reply and a margin."""
    strategy: Strategy = "client"
    """How the context is compacted (the module's docstring)."""
    binds_thinking: bool = False
    """The model binds a replayed thinking block to its prefix: an edit strips the blocks after it."""
    measured: bool = True
    """Sizes from the API's counts with a margin on the estimate (False: teamrt's bare byte estimate)."""
    summary_tool_choice: dict[str, Any] | None = None
    """The summary request's ``tool_choice`` (None: the agent's own, so the cached prefix is read)."""
    reason: str = ""
    """How the trigger was chosen, for logs and ``teamrt show``."""
    edits: tuple[dict[str, Any], ...] = field(default=())
    """The ``context_management`` edits sent with every ordinary request (``editing`` only)."""

    @classmethod
    def for_model(
        cls,
        info: ModelInfo | None,
        max_tokens: int,
        role_trigger: int | None = None,
        *,
        base: int = BASE_TOKENS,
        growth: int = GROWTH_TOKENS,
    ) -> ContextPolicy:
        """The default policy: the model's strategy, the trigger from its prices (or the role's)."""
        window = info.context_window if info else DEFAULT_WINDOW
        limit = window - max_tokens - window // LIMIT_MARGIN
        if role_trigger is not None:
            trigger, reason = min(role_trigger, limit), f"the role's compact_at ({role_trigger:,})"
        else:
            trigger, reason = cost_trigger(info, max_tokens, limit, base=base, growth=growth)
        binds = bool(info and info.binds_thinking)
        strategy: Strategy = "client"
        edits: tuple[dict[str, Any], ...] = ()
        if info is not None and info.compaction_on_demand:
            strategy = "on_demand"
        elif info is not None and info.context_editing:
            strategy = "editing"
            edits = (
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": max(1, int(trigger * CLEAR_SHARE))},
                    "keep": {"type": "tool_uses", "value": KEEP_TOOL_USES},
                    "clear_at_least": {"type": "input_tokens", "value": CLEAR_AT_LEAST},
                },
            )
        return cls(trigger, limit, strategy, binds, True, None, reason, edits)

    @classmethod
    def legacy(cls, info: ModelInfo | None, max_tokens: int) -> ContextPolicy:
        """teamrt's policy before issue 36, exactly: compact at window - max_tokens - 5% of a byte estimate
        with no margin, client-side, the summary sent with ``tool_choice`` none (which rewrites the cache).

        Kept ONLY so ``benchmarks/longrun.py`` measures the baseline in the same run; never a default."""
        window = info.context_window if info else DEFAULT_WINDOW
        limit = window - max_tokens - window // 20
        return cls(limit, limit, "client", False, False, {"type": "none"}, "legacy: window - max_tokens - 5%")

    @property
    def context_management(self) -> dict[str, Any] | None:
        """An ordinary request's ``context_management``, or None."""
        return {"edits": [dict(e) for e in self.edits]} if self.edits else None

    @property
    def betas(self) -> tuple[str, ...]:
        """The betas every request of the agent names."""
        if self.strategy == "on_demand":
            return (ON_DEMAND_BETA,)
        return (CONTEXT_EDITING_BETA,) if self.edits else ()

    @property
    def compaction(self) -> dict[str, Any]:
        """A compaction request's ``compaction`` parameter."""
        return {"type": "summarize", "instructions": SUMMARY_INSTRUCTIONS}


def cost_trigger(
    info: ModelInfo | None,
    max_tokens: int,
    limit: int,
    *,
    base: int = BASE_TOKENS,
    growth: int = GROWTH_TOKENS,
) -> tuple[int, str]:
    """The trigger that costs least a turn (the module's formula), under a price band's edge, within
    ``[MIN_TRIGGER, limit]``; and why."""
    if info is None or info.price.cache_read <= 0:
        return limit, "the limit: reading the cache costs nothing, so compacting saves nothing"
    price = info.price
    fixed = SUMMARY_TOKENS * price.output + base * price.cache_write_5m
    best = int(base + math.sqrt(2 * growth * (base + fixed / price.cache_read)))
    trigger = max(best, MIN_TRIGGER)
    reason = f"cost: B + sqrt(2g(B + (o*out + B*w)/r)) = {best:,}" + (
        f", raised to the floor of {MIN_TRIGGER:,}" if best < MIN_TRIGGER else ""
    )
    edge = info.long_context_from
    below = edge - max_tokens - edge // 20 if edge is not None else 0  # room for the reply and a turn
    if edge is not None and 0 < below < trigger:
        trigger, reason = below, f"under the {edge:,}-token price band, with room for the reply"
    if trigger < base + MIN_HISTORY:  # a prefix too big for the band: compacting would only repeat itself
        trigger, reason = base + MIN_HISTORY, f"{MIN_HISTORY:,} tokens of history past the prefix ({reason})"
    if trigger > limit:
        return limit, f"the limit ({reason}: past it)"
    return trigger, reason


def cleared_tokens(applied_edits: list[Any]) -> int:
    """The input tokens the API's edits cleared (``applied_edits``), each figure taken only when it is a
    sane count: the response is the API's, but a log line must not fail on an odd one."""
    total = 0
    for edit in applied_edits:
        value = edit.get("cleared_input_tokens") if isinstance(edit, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += min(value, 2**31 - 1)
    return total
