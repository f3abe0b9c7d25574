"""What a resume reconciles before the agents go on (docs/architecture.md, Contracts).

- Processes the crashed owner's tools left running (journaled pid plus start
  time, so a reused pid is never hit) are killed first, and so are the MCP
  servers it had started (``mcp.process`` events,
  ``teamrt.mcp.servers.kill_leftover_servers``): each is started afresh when
  a resumed agent needs it.
- What the crashed run's agents, hooks and servers left among the protected
  paths (``teamrt.sandbox.quarantine``) is moved to its quarantine, and what they
  changed put back, before the resume reads any configuration: its baseline
  outlived it (``sweep_leftovers``, from ``teamrun.resume_run`` and the
  supervisor's ``guarding``); the resumed run then takes a new one.
- Lock files git left in the run's worktrees and on its branches are removed,
  and the temporary files of ``write``/``edit`` calls cut short in every
  agent's workspace.
- A merge the queue made but did not record (the integration branch moved,
  the row still says queued or merging) is recorded, not repeated: its agent,
  caught landing, is landed from the record (``landed``), never queued again.
- Each agent's worktree is kept if present, else made again from its branch
  (or its base, if it never landed); what the lost one held is said to the
  agent and in a ``worktree.remade`` event (``workspace_remade``).
- An integration branch that lost recorded merges (deleted, moved back) is put
  back at the newest recorded merge commit still there (``branch.restored``),
  else the loss is named (``branch.lost``) and the merge claimed by no one
  (``repair_integration``); every merge claim asks git (``facts.on_branch``).
- An agent that had accepted a shutdown, its answer kept, finishes at once
  (``accepted_shutdown``): its model is not called again.
- A permission ask the crash left unanswered stays open with its id: its call,
  still pending in the journal, asks again under that id when its agent goes on
  (``HumanAsker.carry`` in ``teamrt.runtime.asking``); one whose call does not
  ask again is closed (``ask.answered`` by ``resume``, denied).

Mail and tool calls are reconciled per agent, with the agents rebuilt in
memory (``restoring``): mail already ingested is only acknowledged, calls are
re-run, answered or reported interrupted (``Restoring._settle_calls``). The
team's own tools are made exactly-once rather than reported: a message the
cut-short call delivered is found in its recipient's mailbox (``delivered``)
and not sent again, a task it created is found on the list; claims and status
updates are simply repeated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from teamrt.mailbox.maildir import peek
from teamrt.models import Message
from teamrt.procs import is_running, kill_group
from teamrt.runtime.losses import BRANCH_LOST, BRANCH_RESTORED, WORKSPACE_REMADE
from teamrt.store import AgentRecord, EventRecord, MergeRecord, Store, ToolCallRecord
from teamrt.worktree import GitRepo, Landing, Worktrees
from teamrt.worktree.facts import lost_work, on_branch, plan_repair
from teamrt.worktree.worktrees import Restored

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
    """Clear the crashed run's git lock files, mend an integration branch that lost recorded merges
    (``repair_integration``), and record the merges it made but did not record."""
    await asyncio.to_thread(worktrees.clear_stale_locks)
    await repair_integration(store, worktrees)  # before ``tip``, which makes a missing branch at base
    tip = await worktrees.queue.tip()
    for merge in store.reader.merges():
        if merge.status in ("queued", "merging") and await asyncio.to_thread(
            worktrees.repo.is_ancestor, merge.head, tip
        ):
            await store.set_merge_status(
                merge.agent, "merged", output="recorded on resume", merged_commit=tip
            )


async def repair_integration(store: Store, worktrees: Worktrees) -> None:
    """Put the integration branch back when it lacks merges the store records made (deleted, or moved
    back): at the newest recorded merge commit whose objects are still there (``branch.restored``).
    Merges that cannot be brought back are said (``branch.lost``) and claimed by no one: an agent whose
    branch is still there is queued again, one whose branch is gone too ends failed, saying so (its row
    still says merged; every count asks git, ``facts.on_branch``)."""
    repo, branch = worktrees.repo, worktrees.integration
    repair = await asyncio.to_thread(plan_repair, repo, branch, store.reader.merges())
    if repair is None:
        return
    was = "was gone" if repair.tip is None else f"was moved back to {repair.tip[:12]}"
    if repair.restore_at is not None:
        await asyncio.to_thread(repo.set_branch, branch, repair.restore_at, repair.tip or "0" * 40)
        names = ", ".join(m.agent for m in repair.restored)
        at = repair.restore_at[:12]
        note = f"the integration branch {branch} {was}; restored at {at} with the merges of {names}"
        data = {"note": note, "branch": branch, "commit": repair.restore_at, "was": repair.tip,
                "agents": [m.agent for m in repair.restored]}  # fmt: skip
        await store.append_event(BRANCH_RESTORED, data)
    if not repair.lost:
        return
    fates = [await _lost_merge(store, repo, branch, merge) for merge in repair.lost]
    note = f"the integration branch {branch} {was} and lost the merges of {'; '.join(fates)}"
    data = {"note": note, "branch": branch, "was": repair.tip, "agents": [m.agent for m in repair.lost],
            "commits": [str(m.merged_commit) for m in repair.lost]}  # fmt: skip
    await store.append_event(BRANCH_LOST, data)


async def _lost_merge(store: Store, repo: GitRepo, branch: str, merge: MergeRecord) -> str:
    """Unclaim a merge its branch lost; how it fares, for the note."""
    commit = str(merge.merged_commit)[:12]
    head = await asyncio.to_thread(repo.tip, merge.branch)
    agent = store.reader.agent(merge.agent)
    if head is not None and await asyncio.to_thread(repo.is_ancestor, merge.head, head):
        output = f"its merge at {commit} was lost with {branch}; queued again from {merge.branch}"
        await store.set_merge_status(merge.agent, "queued", output=output)
        if agent.status in ENDED:  # landed again when the run goes on (``landing.unlanded``)
            await store.set_agent_status(merge.agent, "done")
        return f"{merge.agent} (at {commit}; queued again from {merge.branch})"
    reason = f"its merge onto {branch} at {commit} was lost, and its branch {merge.branch} with it"
    await store.set_agent_status(merge.agent, "failed", reason)  # its row stays: shown lost, counted by git
    return f"{merge.agent} (at {commit}; its branch {merge.branch} is gone too: its work is lost)"


async def workspace_remade(
    store: Store, worktrees: Worktrees, record: AgentRecord, restored: Restored
) -> str | None:
    """Say what an agent lost when its workspace had to be made again (``worktree.remade``, unless it
    had finished and lost nothing: a landed agent's checkout is removed on purpose); the notice for the
    agent's next turn, or None when nothing of its is gone."""
    if restored.remade_at is None:
        return None
    checkout, at = restored.checkout, restored.remade_at
    calls = store.reader.tool_calls(record.name)
    lost = await asyncio.to_thread(lost_work, worktrees.repo, checkout.workspace, at, calls)
    if not (lost.files or lost.commands) and record.status in ("merging", "done"):
        return None
    where = f"{restored.remade_from or 'its base'} at {at[:12]}"
    files = ", ".join(lost.files)
    note = f"{record.name}'s workspace (branch {checkout.branch}) was lost and remade from {where}" + (
        f"; its uncommitted changes to {files} are gone" if files else "; no file it wrote is known lost"
    )
    if lost.commands:
        note += f"; so are the effects of the {len(lost.commands)} commands it ran since"
    data = {"note": note, "branch": checkout.branch, "commit": at, "from": restored.remade_from,
            "lost": list(lost.files), "commands": list(lost.commands)}  # fmt: skip
    await store.append_event(WORKSPACE_REMADE, data, agent=record.name)
    if not (lost.files or lost.commands):
        return None
    notice = f"Your workspace was lost and remade from {where}"
    if files:
        notice += f"; your uncommitted changes to {files} are gone: redo them"
    if lost.commands:
        last = lost.commands[-1].splitlines()[0][:200] if lost.commands[-1] else ""
        notice += (
            f"; the effects on files of the {len(lost.commands)} commands you ran since then are gone too"
            f" (the last: `{last}`): check them"
        )
    return notice + "."


def landed(store: Store, agent: str, integration: str, repo: GitRepo | None = None) -> Landing | None:
    """The landing of ``agent``'s work when its merge is recorded merged already (by ``reconcile_git``,
    or just before the crash), or None: queued again, it would be taken for a branch merged before, its
    record overwritten and its gates said not to have run. With ``repo``, only a merge the integration
    branch holds counts (claims come from git, not the row)."""
    merge = next((m for m in store.reader.merges() if m.agent == agent), None)
    if merge is None or merge.status != "merged" or merge.merged_commit is None:
        return None
    if repo is not None and not on_branch(repo, integration, [merge]):
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
