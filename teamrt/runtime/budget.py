"""Hard budgets: tokens and dollars per agent and per run.

Before each model call the worst case (the input plus ``max_tokens``, priced
at the dearest rates) is reserved against every budget the call counts
toward; if any would overrun, the call is not made. After the call the
reservation is replaced by what it really used. Agents of one run share the
run's ``Budget`` object, and reservations are taken all-or-nothing, so
concurrent agents can never overrun it together. The message of a budget
reached says where its limit was set and how to raise it (``run_budget``,
``role_budget``).

What the run's budget holds for calls in flight lives only in the running
process, so the run's budget publishes it (``Held``) to a small file in the run's
directory (``HELD_FILE``) each time it changes, written whole and renamed into
place: ``teamrt show`` and the TUI, other processes, read it as the "reserved"
of the run's burn-down (``teamrt.runs.burndown``) while the run is live. It is
a display, not a ledger: a write that fails is skipped (the next call writes it
again), and a run that is not live reserves nothing whatever the file says.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from teamrt.errors import TeamrtError

HELD_FILE = "held.json"
"""In the run's directory: what the run's budget holds for calls in flight (``Held``), as last published."""


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
    calls: int = 0
    """The calls in flight: reservations not yet settled."""
    raise_tokens: str = ""
    """How to raise ``max_tokens`` (``raise it with ...``), said when it is reached."""
    raise_usd: str = ""
    """How to raise ``max_usd``, said when it is reached."""
    publish: Path | None = field(default=None, repr=False)
    """Where what is held is published when it changes (the run's ``HELD_FILE``); None: nowhere."""

    def left_usd(self) -> float | None:
        """The dollars neither spent nor held (None: no dollar limit)."""
        return None if self.max_usd is None else self.max_usd - self.spent_usd - self.held_usd

    def changed(self) -> None:
        """Publish what is held now (``HELD_FILE``), when this budget publishes."""
        if self.publish is None:
            return
        data = {"held_usd": max(0.0, self.held_usd), "held_tokens": max(0, self.held_tokens),
                "calls": self.calls, "at": time.time()}  # fmt: skip
        partial = self.publish.with_name(f".{self.publish.name}.{os.getpid()}")
        try:
            partial.write_text(json.dumps(data))
            os.replace(partial, self.publish)
        except OSError:  # a display only: the next change writes it again
            return

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


def run_budget(max_tokens: int | None, max_usd: float | None, *, run_dir: Path | None = None) -> Budget:
    """The whole run's budget, its messages saying where a run's limits are set; ``run_dir``: publish
    what it holds there (``HELD_FILE``)."""
    budget = Budget(
        "run",
        max_tokens,
        max_usd,
        raise_tokens="raise it with --budget-tokens (or [team] budget_tokens in the team file)",
        raise_usd=(
            "raise it with --budget-usd (or [team] budget_usd in the team file,"
            " or [run] budget_usd in the settings file)"
        ),
        publish=None if run_dir is None else run_dir / HELD_FILE,
    )
    budget.changed()  # a resumed run's file from before its crash says nothing held
    return budget


@dataclass(frozen=True)
class Held:
    """What a run's budget holds for calls in flight, as it last published it."""

    usd: float
    tokens: int
    calls: int
    at: float
    """When it was published (``time.time()``)."""


def read_held(run_dir: Path) -> Held | None:
    """What the run in ``run_dir`` last published as held; None when it has published nothing readable.
    The file is another process's: any figure that is not a finite number 0 or more is not believed."""
    try:
        data = json.loads((run_dir / HELD_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    usd, tokens, calls, at = (data.get(k) for k in ("held_usd", "held_tokens", "calls", "at"))
    numbers = (usd, tokens, calls, at)
    if not all(isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n) and n >= 0
               for n in numbers):  # fmt: skip
        return None
    assert isinstance(usd, int | float) and isinstance(tokens, int | float)
    assert isinstance(calls, int | float) and isinstance(at, int | float)
    return Held(float(usd), int(tokens), int(calls), float(at))


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
            budget.calls += 1
            budget.changed()
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
            budget.calls -= 1
            budget.changed()
