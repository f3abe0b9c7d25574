"""One agent of a run as the supervisor holds it (``Member``), and what the supervisor's parts ask of it.

A module of its own, below the supervisor and its parts (``assembly``,
``spawning``, ``landing``, ``restoring``, ``services``, ``idling``,
``guarding``, ``diskfull``): each names a member, and none imports another part to do so.
``Runner`` is what those parts call back in the supervisor: start an agent's
task, settle its end, stop it, run it with restarts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from teamrt.mailbox import Inbox
from teamrt.models.types import Block
from teamrt.runtime.agent import Outcome
from teamrt.runtime.loop import AgentLoop
from teamrt.store import FinishedCall
from teamrt.worktree import Checkout


@dataclass
class Member:
    """One agent of the run: its loop and inbox, where it stands in the tree, and how it is doing."""

    name: str
    kind: str
    parent: str | None
    depth: int
    loop: AgentLoop
    inbox: Inbox
    done: asyncio.Future[Outcome] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    task: asyncio.Task[None] | None = None
    settled: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    """Resolved when the agent first has nothing to do: it idles (a teammate) or ends."""
    busy: bool = True
    """Working or about to (mail delivered); False while it idles. A parent waits while a child is busy."""
    background: bool = False
    """Started without its parent waiting: its end goes to the parent as ``result`` mail."""
    checkout: Checkout | None = None
    """A worktree agent's own checkout."""
    landing: bool = False
    """A worktree agent whose work is going through the merge queue (a stop cancels that)."""


class Runner(Protocol):
    """What the supervisor's parts ask of it (``supervisor.Supervisor`` is one)."""

    def start(self, member: Member, task: str | list[Block] | None, *, resumed: bool = False) -> None:
        """Run ``member`` as a task of its own; ``resumed``: it goes on from its kept turns."""
        ...

    def settle(self, member: Member, outcome: Outcome) -> None:
        """``member`` has ended with ``outcome``: its parent, the watchdog and the run hear of it."""
        ...

    def stop(self, member: Member, reason: str) -> None:
        """Stop ``member`` (and its landing, when it is in the merge queue)."""
        ...

    async def run_with_restarts(
        self, member: Member, task: str | list[Block] | None, *, finished: list[FinishedCall] | None = None
    ) -> Outcome:
        """Run ``member``'s loop to its end, restarted from its kept turns when it raises."""
        ...
