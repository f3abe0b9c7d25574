"""Hard budgets: tokens and dollars per agent and per run.

Before each model call the worst case (the input plus ``max_tokens``, priced
at the dearest rates) is reserved against every budget the call counts
toward; if any would overrun, the call is not made. After the call the
reservation is replaced by what it really used. Agents of one run share the
run's ``Budget`` object, and reservations are taken all-or-nothing, so
concurrent agents can never overrun it together. The message of a budget
reached says where its limit was set and how to raise it (``run_budget``,
``role_budget``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from teamrt.errors import TeamrtError


class BudgetExhausted(TeamrtError):
    """A call could overrun a budget; ``reason`` says which and by how much."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Budget:
    """One limit (``None``: unlimited) with what has been spent and what is held for calls in flight."""

    scope: str
    """Shown in messages: ``agent alice`` or ``run``."""
    max_tokens: int | None = None
    max_usd: float | None = None
    spent_tokens: int = 0
    spent_usd: float = 0.0
    held_tokens: int = 0
    held_usd: float = 0.0
    raise_tokens: str = ""
    """How to raise ``max_tokens`` (``raise it with ...``), said when it is reached."""
    raise_usd: str = ""
    """How to raise ``max_usd``, said when it is reached."""

    def overrun(self, tokens: int, usd: float) -> str | None:
        if self.max_tokens is not None and self.spent_tokens + self.held_tokens + tokens > self.max_tokens:
            return _with_hint(
                f"{self.scope} token budget: {self.spent_tokens:,} spent, {self.held_tokens:,} held,"
                f" the next call could use {tokens:,}, the limit is {self.max_tokens:,}",
                self.raise_tokens,
            )
        if self.max_usd is not None and self.spent_usd + self.held_usd + usd > self.max_usd:
            return _with_hint(
                f"{self.scope} dollar budget: ${self.spent_usd:.4f} spent, ${self.held_usd:.4f} held,"
                f" the next call could cost ${usd:.4f}, the limit is ${self.max_usd:.4f}",
                self.raise_usd,
            )
        return None


def run_budget(max_tokens: int | None, max_usd: float | None) -> Budget:
    """The whole run's budget, its messages saying where a run's limits are set."""
    return Budget(
        "run",
        max_tokens,
        max_usd,
        raise_tokens="raise it with --budget-tokens (or [team] budget_tokens in the team file)",
        raise_usd=(
            "raise it with --budget-usd (or [team] budget_usd in the team file,"
            " or [run] budget_usd in the settings file)"
        ),
    )


def role_budget(agent: str, role: str | None, max_tokens: int | None, max_usd: float | None) -> Budget:
    """The budget of ``agent``, of role ``role`` (None: the lead, or a fork of it, whose limits are
    the ``[lead]`` section's); each agent of a role gets the role's limits."""
    section = "[lead]" if role is None else f"[roles.{role}]"
    return Budget(
        f"agent {agent}",
        max_tokens,
        max_usd,
        raise_tokens=f"raise it with {section} budget_tokens in the team file",
        raise_usd=f"raise it with {section} budget_usd in the team file",
    )


def _with_hint(reason: str, hint: str) -> str:
    return f"{reason}; {hint}" if hint else reason


class Reservation:
    """The worst case of one call, held against its budgets until ``settle``."""

    def __init__(self, budgets: Sequence[Budget], tokens: int, usd: float) -> None:
        for budget in budgets:
            reason = budget.overrun(tokens, usd)
            if reason is not None:
                raise BudgetExhausted(reason)
        for budget in budgets:
            budget.held_tokens += tokens
            budget.held_usd += usd
        self._budgets = budgets
        self._tokens = tokens
        self._usd = usd
        self._open = True

    def settle(self, tokens: int, usd: float) -> None:
        """Release the hold and charge what the call used (0, 0 for a call that failed)."""
        if not self._open:
            return
        self._open = False
        for budget in self._budgets:
            budget.held_tokens -= self._tokens
            budget.held_usd -= self._usd
            budget.spent_tokens += tokens
            budget.spent_usd += usd
