"""The prompt cache's lifetime for an agent's next request: 5 minutes or 1 hour, from its own waits.

An agent that waits for mail (a lead whose teammates work, a teammate between tasks) comes back to a
prompt the API cached when it last called. A 5-minute entry (written at 1.25x the input price) has
expired after a longer wait, so the whole prompt is written again; a 1-hour entry costs 2x to write,
on every token the agent writes, but is read at 0.1x after any wait under an hour. Which is cheaper
depends on how long the agent waits and how much it writes between waits, so it is decided from the
run's own record of them: each wait (``agent.waited`` events: its seconds and the prompt's tokens when
it began) is priced both ways, with the model's own prices, and the cheaper lifetime is chosen.

For the waits of one agent, wait k with prompt ``P_k`` tokens, ``D_k`` of them written since the
previous wait (all of ``P_k`` after a compaction, which rewrites the prompt), and gap ``g_k``::

    cost_5m = sum  D_k * write_5m + P_k * (write_5m if g_k > 5 min else read)
    cost_1h = sum  D_k * write_1h + P_k * (write_1h if g_k > 1 h   else read)

With the prompt written once per wait (``D = P``) and every gap between 5 minutes and an hour, 1 hour
pays when a share ``s`` of the waits is long enough that ``(w5 - r) * s > w1 - w5``: on every current
model (w5 = 1.25, w1 = 2, r = 0.1 of the input price) ``s > 0.65``; when an agent writes a fifth of its
prompt between waits, ``s > 0.13``. ``break_even_share`` gives the figure for a model's prices.

What it leaves out, knowingly: gaps between an agent's own turns (a long command) are not waits, and
only the newest ``WINDOW`` waits count, so an agent whose rhythm changes follows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from teamrt.models.catalog import ModelInfo, Price
from teamrt.models.types import CacheTTL
from teamrt.store import Store

SHORT_TTL: Final = 300.0
LONG_TTL: Final = 3600.0
"""The lifetimes of the API's two cache entries, in seconds."""
WINDOW: Final = 20
"""The newest waits that count."""
WAITED: Final = "agent.waited"
"""The event a wait for mail records: ``{"seconds": float, "tokens": int}``."""


@dataclass(frozen=True)
class Wait:
    """One wait for mail: how long it lasted, and the prompt's size (input tokens) when it began."""

    seconds: float
    tokens: int = 0


class WaitHistory:
    """One agent's waits for mail: read from the run's events on first use, so a resumed or continued
    run goes on with the history it had, then kept as the agent records more."""

    def __init__(self, store: Store, agent: str, *, fresh: bool = False) -> None:
        """``fresh``: a new agent, which has no waits to read (nothing is read before its first call)."""
        self._store, self._agent = store, agent
        self._waits: list[Wait] | None = [] if fresh else None

    @property
    def waits(self) -> list[Wait]:
        if self._waits is None:
            events = self._store.reader.events(kinds=(WAITED,))
            self._waits = [_wait(e.data) for e in events if e.agent == self._agent][-(WINDOW + 1) :]
        return self._waits

    async def record(self, seconds: float, tokens: int) -> None:
        """A wait that lasted ``seconds``, begun with a prompt of ``tokens``: kept as an event, then here."""
        seconds = max(0.0, seconds)
        await self._store.append_event(
            WAITED, {"seconds": round(seconds, 3), "tokens": tokens}, agent=self._agent
        )
        self.waits.append(Wait(seconds, tokens))
        del self.waits[: -(WINDOW + 1)]


def _wait(data: dict[str, object]) -> Wait:
    """A recorded wait; a value that is not a number (an old or damaged record) counts as 0."""
    seconds, tokens = data.get("seconds"), data.get("tokens")
    return Wait(
        float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else 0.0,
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else 0,
    )


def choose_ttl(waits: Sequence[Wait], info: ModelInfo | None, setting: str = "auto") -> CacheTTL:
    """The lifetime the next request's cache entries get: ``setting`` when it forces one; else ``1h``
    when the newest waits would have cost less with it, ``5m`` otherwise (no waits yet, no prices)."""
    if setting in ("5m", "1h"):
        return "5m" if setting == "5m" else "1h"
    if not waits or info is None:
        return "5m"
    truncated = len(waits) > WINDOW  # then the oldest wait kept only says where the prompt stood
    five, hour = costs(waits[-(WINDOW + 1) :], info, since_start=not truncated)
    return "1h" if hour < five else "5m"


def costs(waits: Sequence[Wait], info: ModelInfo, *, since_start: bool = True) -> tuple[float, float]:
    """What the cache would have cost over ``waits`` (USD) with 5-minute and with 1-hour entries.
    ``since_start``: the first wait is the agent's first, so its whole prompt was written before it;
    else the first only says where the prompt stood, and is not priced."""
    five = hour = 0.0
    counted = list(_growth(waits))
    for wait, written in counted if since_start else counted[1:]:
        prompt = max(wait.tokens, 1)  # a wait recorded without a size weighs as one token
        price = _price(info, prompt)
        five += written * price.cache_write_5m
        five += prompt * (price.cache_write_5m if wait.seconds > SHORT_TTL else price.cache_read)
        hour += written * price.cache_write_1h
        hour += prompt * (price.cache_write_1h if wait.seconds > LONG_TTL else price.cache_read)
    return five / 1e6, hour / 1e6


def break_even_share(price: Price, growth: float = 1.0) -> float:
    """The share of waits between 5 minutes and an hour above which 1-hour entries cost less, for an
    agent that writes ``growth`` times its prompt between waits (1.0: all of it); above 1, never."""
    gain = price.cache_write_5m - price.cache_read
    return float("inf") if gain <= 0 else growth * (price.cache_write_1h - price.cache_write_5m) / gain


def _growth(waits: Sequence[Wait]) -> Iterable[tuple[Wait, int]]:
    """Each wait with the tokens written since the one before: the prompt's growth, or all of it when the
    prompt shrank (a compaction wrote it anew) or nothing came before."""
    before: int | None = None
    for wait in waits:
        prompt = max(wait.tokens, 1)
        yield wait, prompt if before is None or prompt < before else prompt - before
        before = prompt


def _price(info: ModelInfo, tokens: int) -> Price:
    """The prices a prompt of ``tokens`` is billed at: its long-context band's above the band's edge."""
    band = info.long_context_from
    if band is not None and info.long_context_price is not None and tokens > band:
        return info.long_context_price
    return info.price
