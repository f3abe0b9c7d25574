"""What a resume reconciles before the agents go on (docs/architecture.md, Contracts).

- Processes the crashed owner's tools left running (journaled pid plus start
  time, so a reused pid is never hit) are killed first, and so are the MCP
  servers it had started (``mcp.process`` events,
  ``teamrt.mcp.servers.kill_leftover_servers``): each is started afresh when
  a resumed agent needs it.
- What the crashed run's agents, hooks and servers left among the protected
  paths (``teamrt.tools.quarantine``) is moved to its quarantine, and what they
  changed put back, before the resume reads any configuration: its baseline
  outlived it (``sweep_leftovers``, from ``teamrun.resume_run`` and the
  supervisor); the resumed run then takes a new one.
- Lock files git left in the run's worktrees and on its branches are removed,
  and the temporary files of ``write``/``edit`` calls cut short in every
  agent's workspace.
- A merge the queue made but did not record (the integration branch moved,
  the row still says queued or merging) is recorded, not repeated: its agent,
  caught landing, is landed from the record (``landed``), never queued again.
- Each agent's worktree is kept if present, else made again from its branch
  (or its base, if it never landed).
- An agent that had accepted a shutdown, its answer kept, finishes at once
  (``accepted_shutdown``): its model is not called again.
- A permission ask the crash left unanswered is closed (``ask.answered`` by
  ``resume``, denied), so it does not look pending forever; its call, still
  pending in the journal, is asked again when its agent goes on.

Mail and tool calls are reconciled per agent by the supervisor: mail already
ingested is only acknowledged, calls are re-run, answered or reported
interrupted (``Supervisor._settle_calls``). The team's own tools are made
exactly-once rather than reported: a message the cut-short call delivered is
found in its recipient's mailbox (``delivered``) and not sent again, a task it
created is found on the list; claims and status updates are simply repeated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ..mailbox.maildir import peek
from ..models import Message
from ..procs import is_running, kill_group
from ..store import EventRecord, Store, ToolCallRecord
from ..worktree import Landing, Worktrees
from .asking import ANSWERED, ASK

ENDED = ("done", "failed", "stopped")
REPEATABLE = (
    "send_message",
    "request_shutdown",
    "respond_shutdown",
    "task_create",
    "task_claim",
    "task_update",
)
"""Team tools a resume completes exactly once instead of reporting them interrupted."""
UNANSWERED = "the run crashed before the ask was answered; the call is asked again when the agent goes on"
INTERRUPTED = (
    "interrupted by a crash: teamrt does not know whether this call finished, so it was not run again."
    " Check its effects before you repeat it."
)


async def kill_leftovers(calls: Sequence[ToolCallRecord]) -> int:
    """Kill the process groups the crashed run's tools left; how many were still there."""
    alive = [p for call in calls for p in call.processes if is_running(p.pid, p.start_time)]
    await asyncio.gather(*(kill_group(p.pid) for p in alive))
    return len(alive)


async def reconcile_git(store: Store, worktrees: Worktrees) -> None:
    """Clear the crashed run's git lock files, and record the merges it made but did not record."""
    await asyncio.to_thread(worktrees.clear_stale_locks)
    tip = await worktrees.queue.tip()
    for merge in store.reader.merges():
        if merge.status in ("queued", "merging") and await asyncio.to_thread(
            worktrees.repo.is_ancestor, merge.head, tip
        ):
            await store.set_merge_status(
                merge.agent, "merged", output="recorded on resume", merged_commit=tip
            )


def landed(store: Store, agent: str, integration: str) -> Landing | None:
    """The landing of ``agent``'s work when its merge is recorded merged already (by ``reconcile_git``,
    or just before the crash), or None: queued again, it would be taken for a branch merged before, its
    record overwritten and its gates said not to have run."""
    merge = next((m for m in store.reader.merges() if m.agent == agent), None)
    if merge is None or merge.status != "merged" or merge.merged_commit is None:
        return None
    return Landing("merged", f"merged onto {integration} at {merge.merged_commit[:12]}")


def accepted_shutdown(messages: Sequence[Message]) -> str | None:
    """The reason of the shutdown an agent accepted in its last kept turn, whose results were kept before
    the crash (it would have finished right after): None when it accepted none."""
    if len(messages) < 2 or messages[-1]["role"] != "user" or messages[-2]["role"] != "assistant":
        return None
    answered = {
        b.get("tool_use_id")
        for b in messages[-1]["content"]
        if b.get("type") == "tool_result" and not b.get("is_error")
    }
    for block in messages[-2]["content"]:
        call = block.get("input") or {}
        accepts = block.get("name") == "respond_shutdown" and call.get("accept") is True
        if block.get("type") == "tool_use" and accepts and block.get("id") in answered:
            return str(call.get("reason") or "shutdown accepted")
    return None


async def close_stale_asks(store: Store, events: Sequence[EventRecord]) -> list[str]:
    """Close the asks among ``events`` that have no answer (the crash came first); their ids."""
    answered = {e.data.get("id") for e in events if e.kind == ANSWERED}
    stale = [e for e in events if e.kind == ASK and e.data.get("id") not in answered]
    for ask in stale:
        data = {"id": ask.data.get("id"), "allowed": False, "by": "resume", "reason": UNANSWERED}
        await store.append_event(ANSWERED, data, agent=ask.agent)
    return [str(e.data.get("id")) for e in stale]


def worktree_base(events: Sequence[EventRecord], agent: str) -> str | None:
    """The commit ``agent``'s worktree was cut from, as its ``worktree.created`` event says."""
    for event in events:
        if event.kind == "worktree.created" and event.agent == agent:
            return str(event.data["base"])
    return None


def delivered(mailbox_root: Path, sender: str, to: str, body: str, kind: str, since: float) -> str | None:
    """The id of a ``kind`` message ``sender`` sent ``to`` with ``body`` at or after ``since`` (a call
    the crash cut short may have delivered it), or None."""
    for data in peek(mailbox_root, to):
        same = (data.get("from"), data.get("body"), data.get("kind")) == (sender, body, kind)
        if same and _timestamp(data.get("created_at")) >= since - 1:
            return str(data.get("id"))
    return None


def has_mail(mailbox_root: Path, sender: str, to: str | None, kind: str) -> bool:
    """Whether ``to``'s mailbox holds (read or not) a ``kind`` message from ``sender``."""
    return to is not None and any(
        (data.get("from"), data.get("kind")) == (sender, kind) for data in peek(mailbox_root, to)
    )


def _timestamp(created_at: object) -> float:
    try:
        return datetime.fromisoformat(str(created_at)).timestamp()
    except ValueError:
        return 0.0
