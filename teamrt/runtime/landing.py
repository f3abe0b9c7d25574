"""Landing: a worktree agent's work, once it ends done, goes through the merge queue before its parent hears.

Its work is committed and merged onto the integration branch once the team's
gates pass (``teamrt.worktree``); a conflict or a red gate sends it back to
work, by mail, at most ``MAX_ATTEMPTS`` times; an agent that ends otherwise
keeps its work on its branch. What the gates said goes to the parent with the
agent's answer (``gates_said``). While worktree agents work, each turn that
may have changed files is checked against the others' (``check_overlap``),
and the agents that share a file are told before their merges conflict.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path

from teamrt.events import SUPERVISOR
from teamrt.runtime.agent import Outcome
from teamrt.runtime.diskfull import DiskFull, DiskHalt
from teamrt.runtime.member import Member, Runner
from teamrt.runtime.restore import landed
from teamrt.runtime.services import Services
from teamrt.runtime.spawning import WORKTREE_NOTE_END
from teamrt.store import AgentRecord, Store, StoreWriteFailed
from teamrt.team import Team
from teamrt.worktree import FILE_TOOLS, MAX_ATTEMPTS, GitError, Worktrees
from teamrt.worktree.gates import TOLERATED
from teamrt.worktree.git import full_disk_in
from teamrt.worktree.message import Work, one_line
from teamrt.worktree.queue import IntegrationMoved

ALREADY_MERGED = "already on the integration branch"
"""The merge queue's output for a branch merged before (``teamrt.worktree.queue``): no gate ran."""
RECORDED_ON_RESUME = "recorded on resume"
"""A merge's output when a crash came between the merge and its record (``resume.reconcile_git``)."""
COMMIT_FAILED = "its work could not be committed"
"""How a worktree agent's failed landing begins its reason; a resume lands it again (``unstrand``)."""


class Landing:
    """Lands one run's worktree agents' work."""

    def __init__(
        self, *, store: Store, run_dir: Path, team: Team, members: dict[str, Member],
        worktrees: Worktrees | None, services: Services, disk: DiskHalt, runner: Runner,
    ) -> None:  # fmt: skip
        self.store = store
        self.run_dir = run_dir
        self.team = team
        self.members = members
        self.worktrees = worktrees
        self.services = services
        self.disk = disk
        self.runner = runner

    async def land(self, member: Member, outcome: Outcome) -> Outcome:
        """Land a worktree agent's work: merged (or nothing to merge), or back to it by mail to fix,
        at most ``MAX_ATTEMPTS`` times; an agent that ends otherwise keeps its work on its branch."""
        assert self.worktrees is not None and member.checkout is not None
        name, worktrees = member.name, self.worktrees
        for attempt in itertools.count(1):
            title = self.work_of(member, outcome)
            if outcome.status != "done":
                kept = await worktrees.keep(name, title)
                return dataclasses.replace(outcome, reason=f"{outcome.reason}; {kept}")
            await self.store.set_agent_status(name, "merging")
            member.landing = True
            try:
                # merged before a crash (recorded by a resume): landed as recorded, never queued again
                landing = landed(self.store, name, worktrees.integration, worktrees.repo)
                if landing is None and member.loop.stopping is None:  # else it was told to stop first
                    landing = await worktrees.land(name, title, attempt)
            except asyncio.CancelledError:  # a stop: the gate or the wait for the queue ends
                landing = None
            except GitError as e:
                full = self.disk.disk_full(e, member.checkout.path, f"{name}'s work could not be committed")
                if full is not None:  # not the agent's fault: its work is committed and queued on resume
                    raise await self.disk.stopped_by_disk(full) from e
                reason = f"{COMMIT_FAILED}: {e}"
                await self.store.set_agent_status(name, "failed", reason)
                return Outcome("failed", outcome.answer, member.loop.turns, reason)
            except IntegrationMoved as e:  # the branch kept moving: no gate failed, no attempt is charged
                kept = await worktrees.keep(name, title)
                await self.store.set_agent_status(name, "stopped", f"{e}; {kept}")
                return Outcome("stopped", outcome.answer, member.loop.turns, f"{e}; {kept}")
            except StoreWriteFailed as e:  # the fence refused the merge (the run was taken over): it ends
                for other in self.members.values():
                    if other is not member and not other.done.done():
                        self.runner.stop(other, str(e))
                raise
            finally:
                member.landing = False
            if landing is None and self.disk.full is not None:  # stopped for a full disk: landed on resume
                raise await self.disk.stopped_by_disk(self.disk.full)
            code = full_disk_in(landing.message) if landing is not None and landing.status == "red" else None
            if code is not None:  # no gate failed: the disk is full; no attempt is charged
                full = DiskFull(self.store.run_id, worktrees.queue.path, code, f"{name}'s merge failed")
                raise await self.disk.stopped_by_disk(full)
            if landing is None:
                kept = await worktrees.keep(name, title)
                reason = f"stopped while merging; {kept}"
                await self.store.set_agent_status(name, "stopped", reason)
                return Outcome("stopped", outcome.answer, member.loop.turns, reason)
            if landing.status in ("merged", "empty"):
                await worktrees.remove(name)
                said = landing.message
                if landing.status == "merged":  # what the gates said, for the parent to rely on
                    merge = next((m for m in self.store.reader.merges() if m.agent == name), None)
                    said += "; " + gates_said(self.team.gates, merge.output if merge else None)
                await self.store.set_agent_status(name, "done", said)
                return Outcome("done", outcome.answer, member.loop.turns, said)
            if attempt == MAX_ATTEMPTS:
                kept = await worktrees.keep(name, title)
                reason = f"not merged after {MAX_ATTEMPTS} attempts ({landing.status}); {kept}"
                await self.store.set_agent_status(name, "failed", reason)
                answer = f"{outcome.answer}\n\nThe last attempt:\n{landing.message}".strip()
                return Outcome("failed", answer, member.loop.turns, reason)
            self.services.send(
                SUPERVISOR, name, landing.message, summary=f"merge {landing.status}, attempt {attempt}"
            )
            await self.store.set_agent_status(name, "running")
            outcome = await self.runner.run_with_restarts(member, None)
        raise AssertionError("unreachable")

    async def check_overlap(self, name: str, tools: list[str]) -> None:
        """After a turn that may have changed files: tell both agents and the lead of files now shared."""
        if self.worktrees is None or not FILE_TOOLS.intersection(tools):
            return
        for other, files in (await self.worktrees.changed(name)).items():
            text = (
                f"{name} and {other} have both changed {', '.join(files)}. Agree who changes what"
                " (send_message) before either of you finishes, or the second merge will conflict."
            )
            for to in dict.fromkeys((name, other, "lead")):
                if to in self.members and not self.members[to].done.done():
                    self.services.send(SUPERVISOR, to, text, summary=f"overlap: {name} and {other}")

    def work_of(self, member: Member, outcome: Outcome) -> Work:
        """What the commits of ``member``'s work say of it: its answer, the task it claimed last (else
        its directive), the run, and why it is kept unmerged when it did not finish."""
        name = member.name
        task = max((t for t in self.store.reader.tasks() if t.owner == name), key=lambda t: t.updated_at,
                   default=None)  # fmt: skip
        directive = directive_of(member) if task is None else None
        about = f'#{task.id} "{one_line(task.subject)}"' if task is not None else directive
        why = f" ({outcome.reason})" if outcome.reason else ""
        note = f"Not merged: {name} ended {outcome.status}{why}." if outcome.status != "done" else None
        title = task.subject if task is not None else directive
        return Work(name, outcome.answer, about, self.store.run_id, note, title)

    def with_stranded_work(self, outcome: Outcome) -> Outcome:
        """A run's end names the worktrees that still hold work teamrt could not commit (a failed
        landing): it is not merged, and it is not lost in silence either."""
        if self.store.failure is not None or self.worktrees is None:
            return outcome
        worktrees = self.run_dir / "worktrees"
        stranded = [
            f"{a.name}'s work is left uncommitted in its worktree {worktrees / a.name}"
            for a in self.store.reader.agents()
            if commit_failed(a) and (worktrees / a.name).is_dir()
        ]
        if not stranded:
            return outcome
        said = "; ".join(stranded) + " (teamrt could not commit it)"
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {said}" if outcome.reason else said)

    async def unstrand(self) -> None:
        """Worktree agents whose landing failed because their work could not be committed (a full disk,
        before teamrt stopped runs for it): their work is still in their worktrees, so they are marked
        done again, unlanded, and land as the run goes on (``unlanded``), never stranded."""
        for record in self.store.reader.agents():
            if commit_failed(record):
                await self.store.set_agent_status(record.name, "done")


def gates_said(gates: tuple[str, ...], output: str | None) -> str:
    """What the merge queue's gates said of a merge, from its kept output, on one line: whether they
    passed outright or let it through with tests that failed before it too."""
    if not gates:
        return "the team has no gates"
    if output is None:
        return "the gates' results were not kept"
    if output.strip() == ALREADY_MERGED:
        return "no gate ran: it was on the integration branch already"
    if output.strip() == RECORDED_ON_RESUME:
        return "the gates' results were lost in a crash"
    if not all(f"$ {gate}\n" in f"{output}\n" for gate in gates):
        return "the gates' output was cut; teamrt show has it"
    failing = [gate for gate, section in _sections(gates, output) if TOLERATED in section]
    if not failing:
        return "gates passed: " + ", ".join(f"`{gate}`" for gate in gates)
    one, names = len(failing) == 1, ", ".join(f"`{gate}`" for gate in failing)
    said = (
        f"{names} still fail{'s' if one else ''} on the merge, as {'it' if one else 'they'} did on the"
        " integration branch before it; no test that passed there fails now"
    )
    passed = [f"`{gate}`" for gate in gates if gate not in failing]
    return f"{said}; {', '.join(passed)} passed" if passed else said


def _sections(gates: tuple[str, ...], output: str) -> list[tuple[str, str]]:
    """Each gate with its part of the merge queue's output: from its ``$ gate`` line to the next gate's
    (the gates ran in order; a gate's own output may hold lines that start with ``$``)."""
    text, starts, at = f"{output}\n", [], 0
    for gate in gates:
        at = text.find(f"$ {gate}\n", at)
        starts.append(at)
    ends = [*starts[1:], len(text)]
    return [(gate, text[start:end]) for gate, start, end in zip(gates, starts, ends, strict=True)]


def commit_failed(record: AgentRecord) -> bool:
    """A worktree agent whose landing failed because teamrt could not commit its work."""
    reason = record.status_reason or ""
    return record.kind == "worktree" and record.status == "failed" and reason.startswith(COMMIT_FAILED)


def unlanded(record: AgentRecord) -> bool:
    """A worktree agent whose loop ended done but whose work the crash caught before its landing."""
    return record.kind == "worktree" and record.status == "done" and record.status_reason is None


def directive_of(member: Member) -> str | None:
    """The directive a worktree agent was spawned with (its first message, after teamrt's word on its
    worktree); None when its conversation no longer starts with it."""
    first = member.loop.messages[0] if member.loop.messages else None
    content = first.get("content") if isinstance(first, dict) and first.get("role") == "user" else None
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    text = next((str(b["text"]) for b in blocks if isinstance(b.get("text"), str)), "")
    _, found, directive = text.partition(WORKTREE_NOTE_END)
    return (directive.strip() or None) if found else None
