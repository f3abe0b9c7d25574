"""What a spawn is expected to cost, before its children start: ``Forecast``.

Users asked for a cost estimate, and approval, before agents fan out; the
team file's ``Spawn(cost>$2)`` ask and deny rules (``teamrt.tools.permissions``)
judge a spawn by this forecast, and ``teamrt show`` and the TUI add up the
forecasts of live agents against the run's budget (``teamrt.runs.burndown``).

Each child's cost is estimated from, in this order:

1. **The role's history**: the mean cost (and tokens) of the agents of the same
   role (``fork`` for forks) that have ended in this run's store, earlier rounds
   of a continued run included. Earlier runs have stores of their own (a file, or
   rows keyed by their run in a shared database) and are not read.
2. **A model of the child's turns** when no such agent has ended:
   ``DEFAULT_TURNS`` turns (fewer when the role's ``max_turns`` is lower), each
   adding ``GROWTH_TOKENS`` to the conversation (a tool call and its result) and
   writing ``OUTPUT_TOKENS``, from its prefix: a fork's prefix is its parent's
   conversation, read from the cache from its first call at the cache-read price;
   a fresh child's (system prompt, tools, directive) is written to the cache
   first. Every later turn reads the turns before it from the cache and writes
   what it adds, priced with the model's bands (``cost_usd``).

Either is then capped by what the child may spend (its role's ``budget_usd`` and
``budget_tokens``), and the whole spawn by what the run's budget has left. A
model without a price has no dollar forecast (``usd`` None): a ``Spawn`` rule
with a sum then applies, as rules fail closed.

Tokens are teamrt's approximation (``teamrt.models.tokens``), not the model's
tokenizer: the forecast is an estimate, said as one (``~$2.40``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from teamrt.models.catalog import ModelInfo
from teamrt.models.pricing import cost_usd
from teamrt.models.types import Usage
from teamrt.store import AgentRecord

SPAWN_FORECAST: Final = "spawn.forecast"
"""The event of a spawn's forecast: its children (``agents``: each child's name and forecast dollars),
``usd``, ``tokens`` and ``basis``; recorded as the children are made, read by ``teamrt.runs.burndown``."""

DEFAULT_TURNS = 15
"""The turns a child is expected to take when no agent of its role has ended yet (its ``max_turns`` when
lower): a few reads, an edit or two, a check, an answer."""
GROWTH_TOKENS = 1_500
"""What one turn adds to the conversation, expected: a tool call and its result."""
OUTPUT_TOKENS = 500
"""What one turn writes, expected."""
ENDED = frozenset({"done", "failed", "stopped"})
"""The statuses of agents whose cost is final: the role's history."""


@dataclass(frozen=True)
class Past:
    """The agents of a role that have ended: how many, and what they cost on average."""

    count: int
    mean_usd: float
    mean_tokens: int


@dataclass(frozen=True)
class Forecast:
    """A spawn's expected cost: ``children`` agents, ``usd`` dollars in all (None: the model has no
    price), ``tokens`` tokens in all, and ``basis``: where the figure comes from, in words."""

    children: int
    usd: float | None
    tokens: int
    basis: str

    @property
    def each_usd(self) -> float | None:
        return None if self.usd is None else self.usd / max(1, self.children)

    def text(self) -> str:
        """The forecast in words, for an ask or a refusal: ``forecast ~$2.40 for 3 agents (...)``."""
        many = f" for {self.children} agents" if self.children > 1 else ""
        if self.usd is None:
            return f"its cost cannot be forecast{many} ({self.basis}), so the rule applies"
        return f"forecast ~{dollars(self.usd)}{many} ({self.basis})"

    def data(self, names: Iterable[str]) -> dict[str, Any]:
        """The ``spawn.forecast`` event's data, the children named."""
        each = self.each_usd
        return {
            "agents": {name: each for name in names},
            "usd": self.usd,
            "tokens": self.tokens,
            "basis": self.basis,
        }


def dollars(usd: float) -> str:
    """A forecast's sum: to the cent from ten cents up (``$2.40``), else to the tenth of a cent."""
    return f"${usd:.2f}" if usd >= 0.1 else f"${usd:.4f}"


def role_history(agents: Iterable[AgentRecord], role: str) -> Past | None:
    """The ended agents of ``role`` among ``agents``; None when none has ended."""
    ended = [a for a in agents if a.role == role and a.status in ENDED and a.kind != "lead"]
    if not ended:
        return None
    return Past(
        len(ended),
        sum(a.usage.cost_usd for a in ended) / len(ended),
        round(sum(a.usage.total_tokens for a in ended) / len(ended)),
    )


def modeled(info: ModelInfo, prefix: int, *, cached: bool, turns: int) -> tuple[float, int]:
    """Dollars and tokens of ``turns`` turns from a ``prefix``-token start (``cached``: read from the cache
    at once, as a fork's), each adding ``GROWTH_TOKENS`` and writing ``OUTPUT_TOKENS``."""
    usd, tokens = 0.0, 0
    before = 0  # what the previous call sent, read from the cache by this one
    for turn in range(turns):
        sent = prefix + GROWTH_TOKENS * turn
        read = prefix if turn == 0 and cached else before
        usage = Usage(
            input_tokens=0,
            output_tokens=OUTPUT_TOKENS,
            cache_creation_input_tokens=sent - read,
            cache_read_input_tokens=read,
        )
        usd += cost_usd(usage, info)
        tokens += sent + OUTPUT_TOKENS
        before = sent
    return usd, tokens


@dataclass(frozen=True)
class Child:
    """What the forecast knows of the children of one spawn before they are made."""

    label: str
    """Their role (``fork`` for forks): whose history counts."""
    model: str
    info: ModelInfo | None
    prefix_tokens: int
    """The first request's input, each (the mean over the spawn's directives)."""
    cached: bool
    """The prefix is in the cache already (a fork's: its parent's conversation)."""
    max_turns: int | None
    budget_usd: float | None
    budget_tokens: int | None


def forecast(
    child: Child, children: int, agents: Iterable[AgentRecord], *, run_left_usd: float | None = None
) -> Forecast:
    """The forecast of ``children`` agents like ``child``, from the ended ``agents`` of its role or its
    model of turns; capped by each child's budget, and the spawn by ``run_left_usd`` (the run budget's
    dollars not spent nor held; None: no limit)."""
    past = role_history(agents, child.label)
    if past is not None:
        plural = "s" if past.count > 1 else ""
        each_usd: float | None = past.mean_usd
        each_tokens = past.mean_tokens
        basis = f"{past.count} earlier {child.label}{plural} averaged {dollars(past.mean_usd)}"
    else:
        turns = min(DEFAULT_TURNS, child.max_turns) if child.max_turns else DEFAULT_TURNS
        start = f"{child.prefix_tokens:,}-token prefix" + (" read from the cache" if child.cached else "")
        none = f"no {child.label} has ended yet"
        if child.info is None:
            each_usd, each_tokens = None, _tokens(child.prefix_tokens, turns)
            basis = f"{none}, and {child.model} has no price"
        else:
            each_usd, each_tokens = modeled(child.info, child.prefix_tokens, cached=child.cached, turns=turns)
            basis = f"{none}: {turns} turns from a {start} at {child.model}'s prices"
    if children > 1 and each_usd is not None:
        basis = f"{children} × {dollars(each_usd)}: {basis}"
    if each_usd is not None and child.budget_usd is not None and each_usd > child.budget_usd:
        each_usd = child.budget_usd
        basis += f"; capped at each agent's {dollars(child.budget_usd)} budget"
    if child.budget_tokens is not None:
        each_tokens = min(each_tokens, child.budget_tokens)
    usd = None if each_usd is None else each_usd * children
    if usd is not None and run_left_usd is not None and usd > run_left_usd:
        usd = max(0.0, run_left_usd)
        basis += f"; capped at the {dollars(usd)} the run's budget has left"
    return Forecast(children, usd, each_tokens * children, basis)


def _tokens(prefix: int, turns: int) -> int:
    """The tokens of ``modeled`` without prices."""
    return sum(prefix + GROWTH_TOKENS * turn + OUTPUT_TOKENS for turn in range(turns))


def remaining(forecasts: Iterable[Mapping[str, Any]], agents: Mapping[str, AgentRecord]) -> float:
    """What live agents are still expected to spend: for each agent a ``spawn.forecast`` event's data
    (``forecasts``) names that has not ended, its forecast less what it has spent, never below 0. A
    value that is not a finite number counts as nothing (the store holds what was written, but a
    reader trusts no figure it did not check)."""
    total = 0.0
    for data in forecasts:
        named = data.get("agents")
        if not isinstance(named, dict):
            continue
        for name, each in named.items():
            agent = agents.get(name) if isinstance(name, str) else None
            if agent is None or agent.status in ENDED or not _finite(each):
                continue
            total += max(0.0, float(each) - agent.usage.cost_usd)
    return total


def _finite(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )
