"""The stall watchdog: a team that can no longer move by itself is woken once, then ended with a reason.

Mail that failed or was lost leaves a run waiting for ever: the recipient was
marked busy for mail that never came, so its parent idles on it, and every
agent waits for mail. The watchdog sees that state: every live agent blocked
on its inbox with nothing to read (``Inbox.waiting``, which the inboxes report
as it changes), for ``settle`` seconds with no change, and then no message in
any live agent's ``new/``. No timer runs while any agent works; an agent that
asks a person, runs a tool or waits for the merge queue is not waiting on its
inbox, so a run that waits for those never looks stalled, nor does a lead that
idles while its children work or teammates that idle while the lead works.

The first time, the lead is woken with a message that says so (``wake``); if
the stall comes back with no progress (no agent but the lead woke in between),
or after ``MAX_WAKES`` wakes, ``watch`` returns ``STALLED`` and the run ends
failed with a ``run.stalled`` event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

STALL_SETTLE_S = 2.0
"""How long every agent must have been waiting, with nothing changing, before the team is stalled."""
MAX_WAKES = 3
"""At most this many wakes of the lead in one run, whatever moved in between."""
STALLED = "the team stalled: every agent idle, no mail in flight, no ask waiting"
WAKE = (
    "Every agent of the team is idle and no mail is in flight: nothing will move unless you act. Mail"
    " you are waiting for may have been lost (teamrt logs names any set aside). Ask again for what you"
    " still need, or end your teammates (request_shutdown) and give your answer with what you have."
)


class Watchdog:
    """Watches one run's agents. ``idle``: every live agent waits on its inbox (cheap, read at every
    change); ``quiet``: nothing is in flight either (no mail in a live agent's ``new/``), read once the
    team has been idle for ``settle`` seconds; ``wake``: wake the lead (it was told why)."""

    def __init__(
        self,
        *,
        idle: Callable[[], bool],
        quiet: Callable[[], bool],
        wake: Callable[[], Awaitable[None]],
        settle: float = STALL_SETTLE_S,
        max_wakes: int = MAX_WAKES,
    ) -> None:
        self._idle = idle
        self._quiet = quiet
        self._wake = wake
        self.settle = settle
        self.max_wakes = max_wakes
        self._changed = asyncio.Event()
        self.wakes = 0
        """How many times an agent stopped waiting on its inbox: the team's progress."""
        self.woken = 0
        """How many times the lead was woken by the watchdog."""
        self._woken_at: int | None = None  # ``wakes`` when the lead was last woken

    def changed(self) -> None:
        """Something that may end or begin a stall happened (an agent added, ended)."""
        self._changed.set()

    def waiting(self, waiting: bool) -> None:
        """An agent's inbox started (True) or stopped (False) waiting for mail."""
        if not waiting:
            self.wakes += 1
        self._changed.set()

    async def watch(self) -> str:
        """Wake the lead at each stall; return the reason once the team has stalled for good."""
        while True:
            await self._stalled()
            if self._woken_at is not None and (
                self.wakes - self._woken_at <= 1 or self.woken >= self.max_wakes
            ):
                return STALLED
            self._woken_at, self.woken = self.wakes, self.woken + 1
            await self._wake()

    async def _stalled(self) -> None:
        """Until every live agent has waited on its inbox for ``settle`` seconds and nothing is in flight."""
        while True:
            self._changed.clear()
            if not self._idle():
                await self._changed.wait()
                continue
            try:
                await asyncio.wait_for(self._changed.wait(), self.settle)
                continue  # something moved meanwhile: look again
            except TimeoutError:
                pass
            if self._idle() and self._quiet():
                return
