"""The supervisor: one run's agents as asyncio tasks in this process.

It starts the lead (``run``), or a crashed run's agents again (``resume``),
each under a new epoch; restarts an agent whose loop raised from its last kept
turn; acts on control mail (``teamrt stop``; ``teamrt answer`` to a permission
ask, else the run's policy decides after the team's ``ask_wait``); and once the
lead has ended, stops the rest, records the run's status and tears it down.

The rest is done by its parts, a module each, each given what it needs:
``assembly`` makes an agent concrete, ``spawning`` starts children and reports
their ends, ``landing`` takes a worktree agent's work through the merge queue,
``restoring`` rebuilds agents from the store, ``services`` answers the team
tools, ``idling`` keeps who works and waits for the lead's end (or a stall),
``guarding`` keeps the protected paths, ``diskfull.DiskHalt`` stops the run
for a full disk. Each part is made after the parts it calls; what they call
back (``member.Runner``, ``assembly.AgentHost``) is answered here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from teamrt.agents import AgentDefinition
from teamrt.claudecode.envknobs import knob_tools
from teamrt.claudecode.memory import Memory, load_memory
from teamrt.claudecode.settings import ClaudeSettings, load_claude_settings
from teamrt.claudecode.skills import SkillSet
from teamrt.events import SUPERVISOR, USER
from teamrt.mailbox import Inbox, Mailbox, open_watcher
from teamrt.mailbox.inbox import SetAside
from teamrt.mcp.config import McpConfig, mcp_config
from teamrt.mcp.prompts import PromptError
from teamrt.mcp.servers import NOTICE
from teamrt.models import Model
from teamrt.models.types import Block, OnText
from teamrt.runtime import hook_events, personprompts, verdict
from teamrt.runtime.agent import Outcome
from teamrt.runtime.always import LiveRules
from teamrt.runtime.asking import HumanAsker
from teamrt.runtime.assembly import Assembly
from teamrt.runtime.budget import run_budget
from teamrt.runtime.diskfull import DiskHalt
from teamrt.runtime.guarding import Guarding
from teamrt.runtime.hooks import RunHooks, load_hooks
from teamrt.runtime.idling import Idling
from teamrt.runtime.landing import Landing
from teamrt.runtime.lostmail import LostMail
from teamrt.runtime.member import Member
from teamrt.runtime.notify import RunNotifier
from teamrt.runtime.relay import SteeringRelay
from teamrt.runtime.restoring import Restoring
from teamrt.runtime.services import Services
from teamrt.runtime.simnotice import SIM_UNPLAYED, sim_notice
from teamrt.runtime.spawning import Spawning
from teamrt.sandbox.bwrap import SANDBOX_EVENT, default_sandbox
from teamrt.settings import Settings
from teamrt.store import FinishedCall, Store
from teamrt.team import Team
from teamrt.tools.base import Tool
from teamrt.tools.registry import builtin_tools
from teamrt.tools.team import team_tools
from teamrt.worktree import Worktrees

MAX_RESTARTS = 2
RESTART_BACKOFF_S = 0.2


class Supervisor:
    """Runs one run's team from its lead's start (or a resume) to its end."""

    def __init__(
        self,
        *,
        store: Store,
        run_dir: Path,
        team: Team,
        definitions: dict[str, AgentDefinition],
        project: Path,
        settings: Settings,
        sim: Any = None,
        models: dict[str, Model] | None = None,
        on_text: OnText | None = None,
        worktrees: Worktrees | None = None,
        claude: ClaudeSettings | None = None,
        memory: Memory | None = None,
        hooks: RunHooks | None = None,
        mcp: McpConfig | None = None,
        skills: SkillSet | None = None,
    ) -> None:
        """``models``: clients already open, by name; ``on_text``: where the lead's text streams;
        ``worktrees``: the run's worktree agents (None: the project is not a git repository);
        ``claude``, ``memory`` and ``hooks``: the project's Claude Code settings, memory and hooks (None: read
        them now)."""
        self.store = store
        self.run_dir = run_dir
        self.team = team
        self.definitions = definitions
        self.project = project
        self.members: dict[str, Member] = {}
        # what a run killed before its last scan left is moved out before anything is read as configuration
        self.guarding = Guarding(store, run_dir, project, self.members)
        self.guard = self.guarding.guard
        self.claude = load_claude_settings(project) if claude is None else claude
        memory = load_memory(project) if memory is None else memory  # read once: forks' prefixes match
        hooks = load_hooks(project) if hooks is None else hooks
        self._sim = sim
        self.mailbox = Mailbox(run_dir / "mailbox", store.run_id, spill_dir=run_dir / "spill")
        self.mailbox.register(SUPERVISOR)
        self.watcher = open_watcher()
        self.models: dict[str, Model] = dict(models or {})
        self.worktrees = worktrees
        self.run_budget = run_budget(team.budget_tokens, team.budget_usd, run_dir=run_dir)
        self.asker = HumanAsker(store, policy=team.on_ask, wait_s=team.ask_wait)
        self.notifier = RunNotifier(
            store, project=project, hooks=hooks.hooks, settings=settings.notify, budget=self.run_budget,
            lead_context=lambda: self.members["lead"].loop.env.tools if "lead" in self.members else None,
        )  # fmt: skip
        self._slots = asyncio.Semaphore(team.max_concurrent)
        self.lost_mail = LostMail(
            store, self.mailbox, tell_from=SUPERVISOR, alive=self._alive, busy=self._mail_coming,
            epoch=lambda name: self.members[name].loop.epoch if name in self.members else None,
        )  # fmt: skip
        # mail set aside (``lostmail``): delivered again from its record, or its recipient and sender told
        self.disk = DiskHalt(store, self.members, self.mailbox, self.lost_mail, self)
        self.assembly = Assembly(
            store=store, run_dir=run_dir, team=team, definitions=definitions, project=project,
            settings=settings, sim=sim, claude=self.claude, memory=memory, hooks=hooks, mailbox=self.mailbox,
            watcher=self.watcher, members=self.members, models=self.models, on_text=on_text,
            worktrees=worktrees, run_budget=self.run_budget, asker=self.asker, guard=self.guard,
            mcp=mcp_config(project, team, definitions) if mcp is None else mcp, host=self, skills=skills,
        )  # fmt: skip
        self.mcp = self.assembly.mcp
        self.asker.always = LiveRules(
            project=project, guard=self.guard, assembly=self.assembly, members=self.members
        )
        self.spawning = Spawning(
            store=store, run_dir=run_dir, team=team, project=project, members=self.members,
            mailbox=self.mailbox, worktrees=worktrees, lost_mail=self.lost_mail, assembly=self.assembly,
            disk=self.disk, runner=self,
        )  # fmt: skip
        self.services = Services(
            store=store, members=self.members, mailbox=self.mailbox, lost_mail=self.lost_mail,
            disk=self.disk, spawning=self.spawning,
        )  # fmt: skip
        # Claude Code's env knobs in the settings (BASH_DEFAULT_TIMEOUT_MS ...) make their tools
        self.tools: dict[str, Tool] = {
            **builtin_tools(), **knob_tools(self.claude.knobs), **team_tools(self.services)
        }  # fmt: skip
        self.idling = Idling(
            store=store, members=self.members, lost_mail=self.lost_mail, services=self.services, runner=self
        )
        self.watchdog = self.idling.watchdog
        self.landing = Landing(
            store=store, run_dir=run_dir, team=team, members=self.members, worktrees=worktrees,
            services=self.services, disk=self.disk, runner=self,
        )  # fmt: skip
        self.restoring = Restoring(
            store=store, run_dir=run_dir, team=team, definitions=definitions, members=self.members,
            worktrees=worktrees, guard=self.guard, mcp=self.mcp, run_budget=self.run_budget,
            lost_mail=self.lost_mail, assembly=self.assembly, spawning=self.spawning, services=self.services,
            disk=self.disk, landing=self.landing, idling=self.idling, runner=self,
        )  # fmt: skip

    # -- the run ---------------------------------------------------------------

    async def run(self, prompt: str) -> Outcome:
        """Run the lead on ``prompt`` to its end; then stop whoever is left."""

        async def begin() -> Member:
            notice = sim_notice(self.team, self.definitions, sim=self._sim)
            if notice is not None:  # roles no team policy plays, for logs and the CLI
                await self.store.append_event(SIM_UNPLAYED, {"note": notice})
            lead = await self.assembly.add(self.team.lead, "lead", kind="lead", parent=None, depth=0)
            # a person's /mcp__<server>__<prompt> task: expanded once, journaled (personprompts)
            self.start(lead, await personprompts.task(self.assembly.mcp, self.store, prompt))
            return lead

        try:
            return await self._conduct(begin)
        except PromptError as e:  # the lead never started: the run fails with the one line the CLI prints
            await self.store.set_run_status("failed", str(e))
            raise

    async def resume(self, *, continued: bool = False) -> Outcome:
        """Go on with a crashed run: reconcile what the crash left and rebuild its agents (``restoring``),
        then restart every agent that had not ended from its last kept turn, under a new epoch.
        ``continued``: an ended run's new round (``runtime.continuing``), recorded as ``run.continued``
        already, goes on the same way."""

        async def begin() -> Member:
            await self.restoring.restore()
            if "lead" not in self.members:  # the crash came before the lead was kept: start it
                self.members["lead"] = await self.assembly.add(
                    self.team.lead, "lead", kind="lead", parent=None, depth=0
                )
            for member in self.members.values():
                if not member.done.done():
                    self.start(member, self.restoring.unstarted_task(member), resumed=True)
            if not continued:
                await self.store.append_event("run.resumed", {"agents": len(self.members)})
            return self.members["lead"]

        return await self._conduct(begin)

    async def _conduct(self, begin: Callable[[], Awaitable[Member]]) -> Outcome:
        """Run the team from ``begin`` (which starts its agents and names the lead) to the lead's end."""
        control = asyncio.create_task(self._control())
        notifying = asyncio.create_task(self.notifier.follow())  # asks waiting, the budget near: told
        relay = asyncio.create_task(SteeringRelay(self.store, self.mailbox).run())  # mail from other hosts
        try:
            policy = self.team.sandbox
            await self.store.append_event(  # what the agents' commands may reach, for show and the TUI
                SANDBOX_EVENT,
                {"confined": default_sandbox().confined, "unconfined": policy.unconfined,
                 "network": policy.network},
            )  # fmt: skip
            for note in self.assembly.mcp_notices():
                await self.store.append_event(NOTICE, {"note": note})
            team_file = () if self.team.path.is_dir() else (self.team.path,)
            await self.guarding.start(self.project, (*self.assembly.memory_paths(), *team_file))
            lead = await begin()
            outcome = await self.idling.until_end(lead)
            for member in list(self.members.values()):
                if not member.done.done():
                    self.stop(member, "the run ended")
            await asyncio.gather(*(m.done for m in self.members.values()), return_exceptions=True)
            await asyncio.gather(*self.idling.handling)  # each file set aside is named before the run's end
            outcome = self.spawning.with_failed_spawns(outcome)
            outcome = self.landing.with_stranded_work(outcome)
            await self.asker.release()  # asks a crash left whose calls never asked again
            outcome = await verdict.judged(self.store, outcome)  # blocked: refused, and nothing else done
            await verdict.abandon_unfinished(self.store)
            await self.store.set_run_status(outcome.status, outcome.reason)
            await self.notifier.ended(outcome.status, outcome.reason)
            lead_ctx = self.notifier.lead_context()  # SessionEnd hooks, in the lead's sandbox
            status, why = outcome.status, outcome.reason
            await hook_events.session_end(self.notifier.hooks, self.store, lead_ctx, status, why)
            return outcome
        finally:
            control.cancel()
            relay.cancel()
            notifying.cancel()
            self.notifier.close()
            await hook_events.close_background(m.loop.env.hooks for m in self.members.values())
            await self.mcp.close()
            await self.guarding.final_scan()
            self.spawning.torn_down = True  # before the mailbox closes: see Spawning.report
            for member in self.members.values():
                if member.task is not None and member.task.done() and not member.task.cancelled():
                    member.task.exception()  # said by its outcome; a stopped store is raised by the run
                member.inbox.close()
                if member.loop.env.stream is not None:
                    member.loop.env.stream.close()
            for model in self.models.values():
                await model.aclose()
            if self.worktrees is not None:
                await self.worktrees.close()
            self.watcher.close()
            self.mailbox.close()

    async def _control(self) -> None:
        """Act on control mail to ``supervisor``: ``teamrt stop`` and ``teamrt answer``. Each message is
        recorded; one that asks for nothing possible (an answer to an ask not waiting) does nothing."""
        async with Inbox(
            self.mailbox, SUPERVISOR, watcher=self.watcher, on_quarantine=self.set_aside
        ) as inbox:
            async for msg in inbox:
                await self.store.append_event("control", {"from": msg.sender, "data": msg.data})
                # only a person's mail is obeyed: an agent may write to the supervisor, never steer it
                action = msg.data.get("action") if msg.kind == "control" and msg.sender == USER else None
                if action == "stop":
                    target = msg.data.get("agent")
                    for member in self.members.values():
                        if target in (None, member.name) and not member.done.done():
                            self.stop(member, f"stopped by {msg.sender}")
                elif action == "answer":
                    ask, allow, reason = msg.data.get("ask"), msg.data.get("allow"), msg.data.get("reason")
                    if isinstance(ask, str) and isinstance(allow, bool):
                        text = reason.strip() if isinstance(reason, str) else None
                        always = msg.data.get("always") is True
                        self.asker.answer(ask, allow, by=msg.sender, reason=text or None, always=always)
                inbox.ack(msg)

    def _alive(self, name: str) -> bool:
        member = self.members.get(name)
        return member is not None and not member.done.done()

    def _mail_coming(self, name: str) -> None:
        if name in self.members:
            self.members[name].busy = True  # as ``send`` does: its parent must not end before it reads it

    # -- what the parts call back: ``member.Runner`` and ``assembly.AgentHost`` ----------------------

    def start(self, member: Member, task: str | list[Block] | None, *, resumed: bool = False) -> None:
        """Run ``member`` as a task of its own; ``resumed``: it goes on from its kept turns."""

        async def first_run() -> Outcome:
            if not resumed or task is not None:  # a resumed agent with a task had never started
                return await self.run_with_restarts(member, task)
            return await self.restoring.go_on(member)

        async def work() -> Outcome:
            if member.kind == "lead":
                return await first_run()
            async with self._slots:
                outcome = await first_run()
                if member.checkout is not None:
                    outcome = await self.landing.land(member, outcome)
                return outcome

        async def main() -> None:
            try:
                outcome = await work()
            except BaseException as e:  # a bug here must not leave its parent, or the run, waiting
                if not member.done.done():
                    self.settle(member, Outcome("failed", member.loop.answer, member.loop.turns, repr(e)))
                raise
            self.settle(member, outcome)

        member.task = asyncio.create_task(main(), name=f"agent {member.name}")

    def settle(self, member: Member, outcome: Outcome) -> None:
        member.busy = False
        member.done.set_result(outcome)
        self.watchdog.changed()
        if member.background:  # in the same step, so a parent that sees it done finds the mail
            self.spawning.report(member, outcome)
        if not member.settled.done():
            member.settled.set_result(None)

    async def run_with_restarts(
        self, member: Member, task: str | list[Block] | None, *, finished: list[FinishedCall] | None = None
    ) -> Outcome:
        """Run the agent; one that raises (a bug in a tool, say) is restarted from its last kept
        turn under a new epoch, at most ``MAX_RESTARTS`` times, then marked failed."""
        for attempt in range(MAX_RESTARTS + 1):
            try:
                return await member.loop.run(task, finished=finished)
            except Exception as e:
                if self.store.failure is not None:  # the store stopped: the run stops, nothing is retried
                    raise self.store.failure from e
                full = self.disk.full or self.disk.disk_full(
                    e, self.run_dir, f"{member.name} could not go on"
                )
                if full is not None:  # the disk under the run is full: restarted, it would meet it again
                    raise await self.disk.stopped_by_disk(full) from e
                why = f"{type(e).__name__}: {e}"
                await self.store.append_event(
                    "agent.raised", {"error": why, "attempt": attempt + 1}, agent=member.name
                )
                if attempt == MAX_RESTARTS:
                    reason = f"failed after {MAX_RESTARTS} restarts: {why}"
                    await self.store.set_agent_status(member.name, "failed", reason)
                    return Outcome("failed", "", member.loop.turns, reason)
                await asyncio.sleep(RESTART_BACKOFF_S * 2**attempt)
                task, finished = await self.restoring.restart(member, why), None
        raise AssertionError("unreachable")

    def stop(self, member: Member, reason: str) -> None:
        member.loop.stop(reason)
        if member.landing and member.task is not None:  # between runs of its loop: in the merge queue
            member.task.cancel()

    def set_aside(self, aside: SetAside) -> None:
        self.idling.set_aside(aside)

    def set_busy(self, name: str, busy: bool) -> None:
        self.idling.set_busy(name, busy)

    async def check_overlap(self, name: str, tools: list[str]) -> None:
        await self.landing.check_overlap(name, tools)
