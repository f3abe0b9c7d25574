"""What a resume reconciles before the agents go on (DESIGN.md, Contracts).

- Processes the crashed owner's tools left running (journaled pid plus start
  time, so a reused pid is never hit) are killed first.
- A merge the queue made but did not record (the integration branch moved,
  the row still says queued or merging) is recorded, not repeated.
- Each agent's worktree is kept if present, else made again from its branch
  (or its base, if it never landed).

Mail and tool calls are reconciled per agent by the supervisor: mail already
ingested is only acknowledged, calls are re-run, answered or reported
interrupted (``Supervisor._settle_calls``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..procs import is_running, kill_group
from ..store import EventRecord, Store, ToolCallRecord
from ..worktree import Worktrees

ENDED = ("done", "failed", "stopped")
INTERRUPTED = (
    "interrupted by a crash: teamrt does not know whether this call finished, so it was not run again."
    " Check its effects before you repeat it."
)


async def kill_leftovers(calls: Sequence[ToolCallRecord]) -> int:
    """Kill the process groups the crashed run's tools left; how many were still there."""
    alive = [p for call in calls for p in call.processes if is_running(p.pid, p.start_time)]
    await asyncio.gather(*(kill_group(p.pid) for p in alive))
    return len(alive)


async def record_unrecorded_merges(store: Store, worktrees: Worktrees) -> None:
    tip = await worktrees.queue.tip()
    for merge in store.reader.merges():
        if merge.status in ("queued", "merging") and await asyncio.to_thread(
            worktrees.repo.is_ancestor, merge.head, tip
        ):
            await store.set_merge_status(
                merge.agent, "merged", output="recorded on resume", merged_commit=tip
            )


def worktree_base(events: Sequence[EventRecord], agent: str) -> str | None:
    """The commit ``agent``'s worktree was cut from, as its ``worktree.created`` event says."""
    for event in events:
        if event.kind == "worktree.created" and event.agent == agent:
            return str(event.data["base"])
    return None
