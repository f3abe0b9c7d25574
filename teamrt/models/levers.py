"""What a role may set about its requests (effort, thinking, the compaction trigger), checked against
its model, and made into request parameters.

The team file (``teamrt.team``) checks each setting when it loads, so a level the model does not take is
one line before the run starts rather than a 400 from the API an hour in; the supervisor's assembly
turns them into an ``AgentSpec``'s ``effort``, ``thinking`` and ``max_tokens``. Everything here reads
the model's features from the catalog (``ModelInfo``); a model the catalog does not know (one reached
through ``ANTHROPIC_BASE_URL``) takes any value the API's own lists allow.

Thinking on the API (docs: extended and adaptive thinking):

- Models that think adaptively by default (``thinking_default = "adaptive"``) refuse a manual budget
  (``thinking.type.enabled``); ``off`` sends the catalog's ``thinking_off`` type (``disabled``, or
  ``between_tools`` on Sonnet 5.5, which refuses ``disabled``), since leaving ``thinking`` out would keep
  them thinking.
- Other models take a manual budget (``{"type": "enabled", "budget_tokens": N}``, N >= 1024 and below
  ``max_tokens``); a budget is added to the reply's allowance, so ``max_tokens`` always exceeds it, and
  clamped to the model's output limit, the budget giving way.
- Which models take ``adaptive`` without defaulting to it is not in the catalog: teamrt assumes the
  models whose effort goes to ``max`` do (adaptive thinking and the ``max`` level came with the same
  generation, Opus and Sonnet 4.6; Opus 4.5 takes effort up to ``high`` and manual thinking only), and
  says so in its one line.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from teamrt.models.catalog import EFFORT_LEVELS, ModelInfo

HIGH_EFFORT: Final = ("xhigh", "max")
"""The effort levels at which the API refuses ``between_tools`` thinking."""

log = logging.getLogger(__name__)

THINKING_WORDS: Final = ("adaptive", "off")
REPLY_TOKENS: Final = 8192
"""The tokens an agent's reply may take (``max_tokens`` without a thinking budget)."""
MIN_THINKING_BUDGET: Final = 1024
"""The API's least ``thinking.budget_tokens``."""
REVIEW_EFFORT: Final = "medium"
"""The effort reviewers get when nothing sets one, on models that take it: a reviewer judges work rather
than producing it. (Forks keep their parent's: see ``runtime.assembly.fork_spec``.)"""

CACHE_SETTINGS: Final = ("auto", "5m", "1h")
"""A role's ``cache``: ``auto`` chooses the lifetime from the agent's waits (``runtime.cachettl``);
``5m`` or ``1h`` forces it."""

Thinking = str | int
"""A role's ``thinking``: ``"adaptive"``, ``"off"`` or a manual budget in tokens."""


def effort_problem(level: str, model: str, info: ModelInfo | None) -> str | None:
    """Why ``model`` cannot take effort ``level``, or None."""
    if level not in EFFORT_LEVELS:
        return f"effort must be one of {', '.join(EFFORT_LEVELS)}, not {level!r}"
    if info is None:
        return None
    if not info.effort:
        return f"effort: {model} takes no effort setting; leave effort out for it"
    if level not in info.effort:
        return f"effort: {model} takes {', '.join(info.effort)}, not {level!r}"
    return None


def off_with_effort_problem(
    thinking: object, effort: object, model: str, info: ModelInfo | None
) -> str | None:
    """Why thinking ``off`` cannot go with ``effort`` on ``model``: where off is ``between_tools`` (Sonnet
    5.5), the API refuses it at ``xhigh`` and ``max`` effort (its what's-new page); else None."""
    if thinking != "off" or info is None or info.thinking_off != "between_tools" or effort not in HIGH_EFFORT:
        return None
    return (
        f'thinking "off" on {model} is thinking.type "between_tools", which the API refuses at effort'
        f' {effort!r}; use effort "high" or less, or leave thinking on'
    )


def thinking_problem(setting: object, model: str, info: ModelInfo | None) -> str | None:
    """Why ``setting`` is not a thinking setting ``model`` takes, or None."""
    if isinstance(setting, bool) or not isinstance(setting, str | int):
        return f'thinking must be "adaptive", "off" or a budget of tokens, not {setting!r}'
    if isinstance(setting, str):
        if setting not in THINKING_WORDS:
            return f'thinking must be "adaptive", "off" or a budget of tokens, not {setting!r}'
        if setting == "adaptive" and info is not None and not takes_adaptive(info):
            return (
                f"thinking: {model} does not think adaptively (teamrt assumes the models whose effort goes"
                ' to "max" do); give a budget of tokens instead'
            )
        return None
    if setting < MIN_THINKING_BUDGET:
        return f"thinking: a budget must be at least {MIN_THINKING_BUDGET} tokens, not {setting}"
    if info is None:
        return None
    if info.thinking_default == "adaptive":
        return f'thinking: {model} thinks adaptively and refuses a manual budget; use "adaptive" or "off"'
    if setting >= info.max_output_tokens:
        return f"thinking: {model} writes at most {info.max_output_tokens:,} tokens, budget included"
    return None


def compact_at_problem(tokens: int, model: str, info: ModelInfo | None, max_tokens: int) -> str | None:
    """Why a compaction trigger of ``tokens`` cannot work on ``model`` (it must leave room for a reply of
    ``max_tokens`` in the window), or None."""
    if info is None:
        return None
    room = info.context_window - min(max_tokens, info.max_output_tokens)
    if tokens >= room:
        return (
            f"compact_at: {tokens:_} leaves no room for a reply in {model}'s window of"
            f" {info.context_window:_} tokens; give less than {room:_}"
        )
    return None


def takes_adaptive(info: ModelInfo) -> bool:
    """Whether the model takes ``thinking: {"type": "adaptive"}`` (an assumption, see the module's note)."""
    return info.thinking_default == "adaptive" or "max" in info.effort


def default_effort(info: ModelInfo | None, *, reviewer: bool) -> str | None:
    """The effort of an agent no setting gives one: a reviewer's on a model that takes the level, else
    None (the model's own default)."""
    if not reviewer or info is None or REVIEW_EFFORT not in info.effort:
        return None
    return REVIEW_EFFORT


def thinking_request(
    setting: Thinking | None, info: ModelInfo | None, reply_tokens: int, *, agent: str = ""
) -> tuple[dict[str, Any] | None, int]:
    """The request's ``thinking`` and ``max_tokens`` for ``setting`` with ``reply_tokens`` for the reply.

    A manual budget is added to the reply's allowance; over the model's output limit the total is the
    limit and the budget shrinks to fit (logged), never below the API's minimum, nor to ``max_tokens``.
    """
    if setting is None:
        return None, reply_tokens
    if setting == "adaptive":
        return {"type": "adaptive"}, reply_tokens
    if setting == "off":
        adaptive = info is not None and info.thinking_default == "adaptive"
        assert info is not None or not adaptive
        return ({"type": info.thinking_off} if info is not None and adaptive else None), reply_tokens
    assert isinstance(setting, int)
    budget = setting
    limit = info.max_output_tokens if info is not None else None
    total = reply_tokens + budget
    if limit is not None and total > limit:
        reply = max(1, min(reply_tokens, limit - MIN_THINKING_BUDGET - 1))  # the budget keeps the minimum
        budget, total = limit - reply, limit
        log.warning(
            "%s: a thinking budget of %d and %d tokens of reply pass the model's output limit of %d;"
            " thinking budget %d",
            agent or "agent", setting, reply_tokens, limit, budget,
        )  # fmt: skip
    return {"type": "enabled", "budget_tokens": budget}, total
