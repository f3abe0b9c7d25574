"""Restoring: agents rebuilt from the store, as a crash left them (a resume) or after their loop raised.

``restore.py`` reconciles what a crash left outside the agents (processes,
git, asks, the mailbox's files) with functions over the store; this part of
the supervisor does the rest, with the agents in memory: each is rebuilt from
its record and kept turns (``restore``), with its workspace and its mail
(mail ingested before the crash is only acknowledged); one that had not
started gets its first turn again (``unstarted_task``); one that had ended
ends again (``go_on``); the calls of its last turn left without a result are
settled (``_settle_calls``): a call never started, or a read-only one, runs
(again); a spawn gets its children's answers; a team tool's call is completed
exactly once; any other call that was running is reported interrupted, never
run blindly again. An agent whose loop raised gets a fresh loop from its kept
turns the same way (``restart``), its unfinished calls reported failed. A
module beside ``restore.py``, not in it: together they would pass 500 lines.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from teamrt.agents import AgentDefinition, kept_definition
from teamrt.events import SUPERVISOR
from teamrt.mcp.servers import PROCESS, McpServers, kill_leftover_servers
from teamrt.models.types import Block
from teamrt.runtime import personprompts
from teamrt.runtime.agent import Outcome
from teamrt.runtime.assembly import Assembly, fork_spec
from teamrt.runtime.budget import Budget
from teamrt.runtime.diskfull import DiskHalt
from teamrt.runtime.history import rebuild, unanswered_calls
from teamrt.runtime.idling import Idling
from teamrt.runtime.landing import Landing, unlanded
from teamrt.runtime.loop import AgentLoop
from teamrt.runtime.lostmail import LostMail, found_in_bad
from teamrt.runtime.member import Member, Runner
from teamrt.runtime.restore import (
    ENDED,
    INTERRUPTED,
    REPEATABLE,
    accepted_shutdown,
    delivered,
    has_mail,
    kill_leftovers,
    reconcile_git,
    workspace_remade,
    worktree_base,
)
from teamrt.runtime.services import Services
from teamrt.runtime.spawning import Spawning
from teamrt.sandbox.quarantine import Guard
from teamrt.store import AgentRecord, EventRecord, FinishedCall, Store, ToolCallRecord
from teamrt.store.rounds import round_so_far
from teamrt.team import Role, Team
from teamrt.tools.files.edit import remove_temporaries
from teamrt.worktree import Worktrees


class Restoring:
    """Rebuilds one resumed run's agents."""

    def __init__(
        self, *, store: Store, run_dir: Path, team: Team, definitions: dict[str, AgentDefinition],
        members: dict[str, Member], worktrees: Worktrees | None, guard: Guard, mcp: McpServers,
        run_budget: Budget, lost_mail: LostMail, assembly: Assembly, spawning: Spawning,
        services: Services, disk: DiskHalt, landing: Landing, idling: Idling, runner: Runner,
    ) -> None:  # fmt: skip
        self.store = store
        self.run_dir = run_dir
        self.team = team
        self.definitions = definitions
        self.members = members
        self.worktrees = worktrees
        self.guard = guard
        self.mcp = mcp
        self.run_budget = run_budget
        self.lost_mail = lost_mail
        self.assembly = assembly
        self.spawning = spawning
        self.services = services
        self.disk = disk
        self.landing = landing
        self.idling = idling
        self.runner = runner

    async def restore(self) -> None:
        """Reconcile what the crash left (``restore``), then rebuild every agent the store has, as the crash
        left it; none is started."""
        reader = self.store.reader
        await kill_leftovers(reader.tool_calls(statuses=("running",)))
        await kill_leftover_servers(reader.events(kinds=(PROCESS,)))  # started again when needed
        if self.worktrees is not None:
            await reconcile_git(self.store, self.worktrees)
        await self.disk.deliver_kept()  # mail a full disk refused, kept for now (``diskfull``)
        await self.landing.unstrand()
        usage = reader.run().usage
        self.run_budget.spent_tokens, self.run_budget.spent_usd = usage.total_tokens, usage.cost_usd
        events = reader.events()  # read once: what each agent's restore looks up
        live = {r.name for r in reader.agents() if r.status not in ENDED or unlanded(r)}
        await self.assembly.asker.carry(events, live)  # asked again, same ids, as the agents go on (go_on)
        self.idling.restoring = True  # what the restores set aside is looked at below, all agents restored
        for record in reader.agents():
            await self._restore(record, events)
        self.idling.restoring = False
        for member in list(self.members.values()):  # and what a crashed run set aside and never told
            await self.lost_mail.scan(found_in_bad(member.inbox))
        for workspace in {m.loop.env.tools.workspace for m in self.members.values()}:
            await asyncio.to_thread(remove_temporaries, workspace)  # of writes the crash cut short
        so_far = round_so_far(reader)  # a later round's answer and turns are its own, not the run's
        if so_far is not None and "lead" in self.members:
            self.members["lead"].loop.answer, self.members["lead"].loop.turns = so_far

    async def go_on(self, member: Member) -> Outcome:
        """Run a resumed agent that had started on from its kept turns: one that had ended (or was landing)
        ends again at once; one that had accepted a shutdown finishes; the others go on with their last
        turn's calls settled."""
        if self.store.reader.agent(member.name).status == "merging" or unlanded(
            self.store.reader.agent(member.name)
        ):
            await self.assembly.asker.release(member.name)
            return Outcome("done", member.loop.answer, member.loop.turns)
        if self._had_ended(member):
            await self.assembly.asker.release(member.name)
            if member.checkout is None:  # a worktree agent's status is its landing's
                await self.store.set_agent_status(member.name, "done")
            return Outcome("done", member.loop.answer, member.loop.turns)
        accepted = accepted_shutdown(member.loop.messages)
        if accepted is not None:  # kept its answer, crashed before it finished
            self.services.accept_shutdown(member.name, accepted)
        finished = await self._settle_calls(member)  # its carried asks' calls ask again here, or never
        await self.assembly.asker.release(member.name)
        return await self.runner.run_with_restarts(member, None, finished=finished)

    async def _restore(self, record: AgentRecord, events: list[EventRecord]) -> Member:
        """``record``'s agent as the crash left it: its conversation, its workspace, its mail."""
        reader = self.store.reader
        role = self._role_of(record)
        ended = record.status in ENDED and not unlanded(record)
        checkout, notice = None, None
        if record.kind == "worktree" and not ended:
            assert self.worktrees is not None
            restored = await self.worktrees.restore(record.name, worktree_base(events, record.name))
            checkout = restored.checkout
            notice = await workspace_remade(self.store, self.worktrees, record, restored)
            await self.guard.watch(checkout.workspace)
        tools = self.assembly.tools_context(record.kind, record.parent, checkout)
        parent = self.members.get(record.parent or "")
        if record.kind == "fork" and parent is not None:
            spec = fork_spec(parent.loop.spec, record.name, role.name)
        else:
            definition = self.definitions.get(role.agent) or kept_definition(record.definition)  # gone since
            await self.mcp.prepare(self.mcp.servers_for(definition))
            spec = self.assembly.spec(
                record.name, role, definition, record.model, persistent=record.kind == "team"
            )
        epoch = record.epoch if ended else await self.store.begin_epoch(record.name)
        messages = rebuild(reader.turns(record.name), spec.info)
        if record.kind == "fork" and not messages and parent is not None:  # caught before its copy was kept
            messages = list(parent.loop.messages)
            await self.store.append_turn(record.name, epoch=epoch, role="compaction", content=messages)
        member = self.assembly.member(
            record.name, record.kind, record.parent, record.depth, role, spec, tools, epoch, messages,
            checkout, spent=record.usage,
        )  # fmt: skip
        member.loop.resumed_from_store()
        member.background = any(
            e.kind == "spawn" and not e.data.get("wait", True) and record.name in e.data.get("children", [])
            for e in events
        )
        if ended:
            outcome = Outcome(record.status, member.loop.answer, member.loop.turns, record.status_reason)
            member.busy = False
            member.done.set_result(outcome)
            member.settled.set_result(None)
            if member.background and not has_mail(
                self.run_dir / "mailbox", record.name, record.parent, "result"
            ):
                self.spawning.report(member, outcome)  # it ended, and the crash came before it could say so
            return member
        if notice is not None:  # read with the mail below; the supervisor's word on the run itself, as
            # its idle notes are (no teammate's message: the chaos checker counts it by state)
            self.services.send(SUPERVISOR, record.name, notice, kind="control", summary="workspace remade")
        ingested = reader.ingested_ids(record.name)
        fresh = []
        while (msg := member.inbox.poll()) is not None:
            if msg.id in ingested:  # ingested before the crash, acknowledged only now
                member.inbox.ack(msg)
            else:
                fresh.append(msg)
        member.loop.hold(fresh)
        member.busy = record.status != "idle" or bool(
            fresh
        )  # an idle agent with no mail waits; it is not busy
        if record.kind == "team" and member.loop.answer:
            member.settled.set_result(None)
        return member

    def unstarted_task(self, member: Member) -> str | list[Block] | None:
        """The first turn of an agent the crash caught before it was kept (None: it had started).

        A child's directive is read back from its parent's spawning call: the children of one call
        were created in the order of its directives."""
        if any(turn.role != "compaction" for turn in self.store.reader.turns(member.name)):
            return None  # a fork's copy of its parent's conversation is kept as a compaction turn
        if member.parent is None:  # a /mcp__ task as it was expanded, never asked of its server again
            kept = personprompts.kept_task(self.store.reader.events(kinds=(personprompts.PROMPTED,)))
            return kept if kept is not None else self.store.reader.run().task
        parent = self.members[member.parent]
        for call, children in self.spawning.spawned_by_last_turn(parent):
            spawn = self.spawning.spawn_of(call)
            if member in children and spawn is not None:
                return self.spawning.first_turn(parent, member, spawn[2][children.index(member)])
        return None

    def _had_ended(self, member: Member) -> bool:
        """Whether a resumed agent had given its final answer: its last kept turn is the model's, with
        no call, and nothing would have kept it waiting (a teammate always waits for mail)."""
        messages = member.loop.messages
        if (
            member.loop.spec.persistent
            or member.loop.paused
            or not messages
            or messages[-1]["role"] != "assistant"
        ):
            return False
        keep_waiting = member.loop.env.keep_waiting
        waits = member.kind == "lead" and keep_waiting is not None and keep_waiting()
        return not unanswered_calls(messages) and not waits and not member.loop.has_mail()

    def _role_of(self, record: AgentRecord) -> Role:
        if record.kind == "lead":
            return self.team.lead
        if record.kind == "fork":
            return dataclasses.replace(self.team.lead, name="fork")
        return self.team.roles[record.role or ""]

    async def _settle_calls(self, member: Member) -> list[FinishedCall]:
        """Results for the calls of a resumed agent's last turn that have none: a call never started,
        or a read-only one, runs (again); a spawn gets its children's answers; any other call that
        was running is reported interrupted, never run blindly again."""
        journal = {c.id: c for c in self.store.reader.tool_calls(member.name)}
        finished = []
        for call in unanswered_calls(member.loop.messages):
            entry = journal.get(call["id"])
            status = entry.status if entry else "pending"
            if status == "running" and self.spawning.spawn_of(call) is not None:
                finished.append(await self._respawn_result(member, call))
            elif status == "running" and call["name"] in REPEATABLE:
                finished.append(await self._team_call_once(member, call, entry))
            elif status == "pending" or (status == "running" and entry is not None and entry.read_only):
                finished.append(await member.loop.rerun(call))
            else:
                block: Block = {"type": "tool_result", "tool_use_id": call["id"], "content": INTERRUPTED,
                                "is_error": True}  # fmt: skip
                finished.append(FinishedCall(call["id"], "interrupted", [block], True))
        return finished

    async def _team_call_once(
        self, member: Member, call: Block, entry: ToolCallRecord | None
    ) -> FinishedCall:
        """A team tool's call the crash cut short, completed exactly once: what it did is looked up
        (the message delivered, the task created); what it did not do is done now."""
        args = call["input"]
        since = (entry.started_at or entry.created_at) if entry else 0.0
        done: str | None = None
        if call["name"] in ("send_message", "request_shutdown"):
            to = str(args.get("to") or args.get("agent"))
            body, kind = (
                (args.get("body"), "message")
                if call["name"] == "send_message"
                else (args.get("reason", "the work is done"), "shutdown_request")
            )
            found = delivered(self.run_dir / "mailbox", member.name, to, str(body), kind, since)
            done = f"delivered {found} to {to}" if found else None
        elif call["name"] == "respond_shutdown":
            accept, reason = bool(args.get("accept")), str(args.get("reason") or "")
            body = reason or ("accepted" if accept else "rejected")
            to = str(args.get("to"))
            found = delivered(self.run_dir / "mailbox", member.name, to, body, "shutdown_response", since)
            if found and accept:
                self.services.accept_shutdown(member.name, reason or "shutdown accepted")
            done = (
                f"delivered {found} to {to}" + ("; you finish after this turn" if accept else "")
                if found
                else None
            )
        elif call["name"] in ("task_claim", "task_update") and isinstance(args.get("task_id"), int):
            task = next((t for t in self.store.reader.tasks() if t.id == args["task_id"]), None)
            if call["name"] == "task_claim" and task is not None and task.owner == member.name:
                done = f"you hold task {task.id}: {task.subject}\n{task.description}"
            elif task is not None and task.status == args.get("status"):
                done = f"task {task.id} is {task.status}"
        elif call["name"] == "task_create":
            tasks = self.store.reader.tasks()
            mine = [t for t in tasks if t.created_by == member.name and t.created_at >= since - 1]
            task = next((t for t in mine if t.subject == args.get("subject")), None)
            done = f"created task {task.id}: {task.subject}" if task else None
        if done is None:
            return await member.loop.rerun(call)
        block: Block = {"type": "tool_result", "tool_use_id": call["id"], "content": done}
        return FinishedCall(call["id"], "done", [block], False)

    async def _respawn_result(self, parent: Member, call: Block) -> FinishedCall:
        """The result of a spawn the crash cut short: the children it started go on, and answer."""
        children = next(
            (kids for c, kids in self.spawning.spawned_by_last_turn(parent) if c["id"] == call["id"]), []
        )
        spawn = self.spawning.spawn_of(call)
        assert spawn is not None
        kind, role, directives, wait = spawn
        for directive in directives[len(children) :]:  # the crash came before these were created
            child = await self.spawning.child(parent, kind, role)
            self.runner.start(child, self.spawning.first_turn(parent, child, directive))
            children.append(child)
        logged = {  # the spawn's event, when the crash came after it: a resume does not log it again
            name
            for event in self.store.reader.events(kinds=("spawn",))
            if event.agent == parent.name
            for name in event.data.get("children", [])
        }
        fresh = [c.name for c in children if c.name not in logged]
        if fresh:
            await self.store.append_event(
                "spawn", {"kind": kind, "children": fresh, "wait": wait}, agent=parent.name
            )
        if not wait:
            for child in children:
                child.background = True
            text = f"started {', '.join(c.name for c in children)}; each result will arrive as mail"
        else:
            await asyncio.gather(*(c.settled for c in children))
            text = "\n\n".join(self.spawning.answer(c) for c in children) or "no child was started"
        block: Block = {"type": "tool_result", "tool_use_id": call["id"], "content": text}
        return FinishedCall(call["id"], "done", [block], False)

    async def restart(self, member: Member, why: str) -> list[Block] | None:
        """A fresh loop for ``member`` from its kept turns; calls left without a result get an error."""
        epoch = await self.store.begin_epoch(member.name)
        messages = rebuild(self.store.reader.turns(member.name), member.loop.spec.info)
        results: list[Block] = []
        for call in unanswered_calls(messages):
            text = f"the call failed ({why}); you were restarted, and it did not finish"
            results.append(
                {"type": "tool_result", "tool_use_id": call["id"], "content": text, "is_error": True}
            )
            await self.store.move_tool_call(call["id"], "interrupted")
        old = member.loop
        member.loop = AgentLoop(old.spec, old.env, epoch=epoch, messages=messages)
        return results or None
