"""The run's guard over its protected paths (``teamrt.sandbox.quarantine``), from its start to its end.

Made before anything is read as configuration: what a run killed before its
last scan left among the protected paths is moved out first (``swept``, said
as the run starts). The project is watched from the start, each worktree as
it is made; every scan that moved something is recorded
(``protected.quarantined``); the run's last scan comes once every agent's task
has ended. A part of its own: the supervisor only says when.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from teamrt.runtime.member import Member
from teamrt.sandbox.baseline import Moved
from teamrt.sandbox.quarantine import QUARANTINED, Guard, describe, sweep_leftovers
from teamrt.store import Store

FINAL_SCAN_WAIT_S = 5.0
"""How long a run's end waits for its agents' tasks to finish before its last scan of protected paths."""


class Guarding:
    """One run's ``guard``, and what a killed run left (``swept``)."""

    def __init__(self, store: Store, run_dir: Path, project: Path, members: dict[str, Member]) -> None:
        self.store = store
        self.members = members
        self.swept = sweep_leftovers(project, run_dir.parent)
        self.guard = Guard(run_dir, project, on_moved=self._quarantined)

    async def start(self, project: Path, extras: Iterable[Path]) -> None:
        """Say what was swept, then watch ``project`` and ``extras`` (files outside it, protected too)."""
        if self.swept:
            await self._quarantined(self.swept, "a run killed before its last scan", None)
        await self.guard.watch(project, extras)

    async def final_scan(self) -> None:
        """The guard's last scan, once every agent's task (and so every process it ran) has ended; a run
        whose agents are still at work (cancelled) keeps its baseline for the next run's sweep."""
        tasks = [m.task for m in self.members.values() if m.task is not None and not m.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=FINAL_SCAN_WAIT_S)
        if all(m.task is None or m.task.done() for m in self.members.values()):
            await self.guard.close()

    async def _quarantined(self, moved: list[Moved], cause: str, agent: str | None) -> None:
        """Record a scan that moved protected paths (``protected.quarantined``), a line for the log."""
        workspaces = sorted({str(m.workspace) for m in moved})
        await self.store.append_event(
            QUARANTINED,
            {"workspace": ", ".join(workspaces), "cause": cause, "moved": [m.to_json() for m in moved],
             "note": describe(moved, f"after {cause}, teamrt found that something")},
            agent=agent,
        )  # fmt: skip
