"""A run's burn-down: what it has spent, holds for calls in flight, and expects its live agents to spend,
against its budget (``teamrt show`` and the TUI's header).

- **spent**: the store's total of the run's model calls.
- **reserved**: what the run's budget holds for calls in flight, the worst case of each
  (``teamrt.runtime.budget``), as the running process last published it (``HELD_FILE``).
  Only a live run holds anything: for any other the figure is left out.
- **forecast**: what the agents still working are expected to spend on top of what they have
  spent: for each agent a ``spawn.forecast`` event forecast (``teamrt.runtime.forecast``) and not
  yet ended, its forecast less its spending so far, never below 0. The lead, which no spawn made,
  has none.

So ``$1.2400 spent · $0.3000 reserved · ~$2.1000 forecast of $5.00`` reads: $1.24 gone, $0.30 may go
with the calls now in flight, about $2.10 more to come from the agents at work, out of $5.00.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from teamrt.runs.render import budget_text
from teamrt.runtime.budget import read_held
from teamrt.runtime.forecast import remaining
from teamrt.store import AgentRecord, EventRecord, RunRecord

SEPARATOR = " · "


@dataclass(frozen=True)
class BurnDown:
    spent_usd: float
    reserved_usd: float | None
    """None: the run is not live, so nothing is held."""
    forecast_usd: float
    budget_usd: float | None

    def left_usd(self) -> float | None:
        """What the budget has left once what is reserved and forecast is spent (None: no budget)."""
        if self.budget_usd is None:
            return None
        return self.budget_usd - self.spent_usd - (self.reserved_usd or 0.0) - self.forecast_usd


def burn_down(
    run: RunRecord,
    agents: Iterable[AgentRecord],
    forecasts: Iterable[EventRecord],
    run_dir: Path,
    *,
    live: bool,
) -> BurnDown:
    """The burn-down of ``run`` from its ``agents``, its ``spawn.forecast`` events and (``live``: the run is
    running now) what its process published as held in ``run_dir``."""
    held = read_held(run_dir) if live else None
    by_name = {a.name: a for a in agents}
    expected = remaining((e.data for e in forecasts), by_name)
    reserved = (held.usd if held is not None else 0.0) if live else None
    return BurnDown(run.usage.cost_usd, reserved, expected, run.budget_usd)


def burn_down_text(b: BurnDown, simulated: bool, *, short: bool = False) -> str:
    """``$1.2400 spent · $0.3000 reserved · ~$2.1000 forecast of $5.00``, then `` (sim)`` when nothing
    was billed; ``short`` (a narrow screen): ``$1.2400 +$0.3000 held ~$2.1000 more of $5.00``."""
    parts = [f"${b.spent_usd:.4f}" + ("" if short else " spent")]
    if b.reserved_usd is not None:
        parts.append(f"+${b.reserved_usd:.4f} held" if short else f"${b.reserved_usd:.4f} reserved")
    if b.forecast_usd > 0 or b.reserved_usd is not None:
        parts.append(f"~${b.forecast_usd:.4f}" + (" more" if short else " forecast"))
    text = (" " if short else SEPARATOR).join(parts)
    if b.budget_usd is not None:
        text += f" of {budget_text(b.budget_usd)}"
    return text + (" (sim)" if simulated else "")
