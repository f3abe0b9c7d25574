"""Hard budgets: tokens and dollars per agent and per run.

Before each model call the worst case (the input plus ``max_tokens``, priced
at the dearest rates) is reserved against every budget the call counts
toward; if any would overrun, the call is not made. After the call the
reservation is replaced by what it really used. Agents of one run share the
run's ``Budget`` object, and reservations are taken all-or-nothing, so
concurrent agents can never overrun it together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class BudgetExhausted(Exception):
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

    def overrun(self, tokens: int, usd: float) -> str | None:
        if self.max_tokens is not None and self.spent_tokens + self.held_tokens + tokens > self.max_tokens:
            return (
                f"{self.scope} token budget: {self.spent_tokens:,} spent, {self.held_tokens:,} held,"
                f" the next call could use {tokens:,}, the limit is {self.max_tokens:,}"
            )
        if self.max_usd is not None and self.spent_usd + self.held_usd + usd > self.max_usd:
            return (
                f"{self.scope} dollar budget: ${self.spent_usd:.4f} spent, ${self.held_usd:.4f} held,"
                f" the next call could cost ${usd:.4f}, the limit is ${self.max_usd:.4f}"
            )
        return None


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
