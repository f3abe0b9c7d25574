"""The supervisor: one run's agents as asyncio tasks in this process.

It starts the lead, creates children when an agent calls ``spawn_agent``
(within the team's limits on depth and numbers), gives each start an epoch,
delivers every child's final answer to its parent (as the tool's result when
the parent waits, else as a ``result`` mail), takes permission asks (a person
answers by control mail within the team's ``ask_wait``, else the run's policy),
and stops the remaining teammates when the lead ends.

Forks: the children of one spawn get the parent's system prompt and tools
list unchanged, its messages up to and including the spawning assistant
turn, and the same placeholder result for every call of that turn; only
their directive differs, so they share one prompt-cache entry. A fork may
not spawn (its tools list stays its parent's, or the cache is lost).

Worktree children get a checkout of their own (``teamrt.worktree``); when one
finishes, its work is landed through the merge queue before its parent hears
of it, and a conflict or a red gate sends it back to work, by mail. Forks and
teammates work in their parent's workspace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.agents import AgentDefinition, choose_model, kept_definition
from teamrt.claudecode.memory import Memory, imports, load_memory
from teamrt.claudecode.settings import ClaudeSettings, load_claude_settings
from teamrt.mailbox import Inbox, Mailbox, MailboxError, Message, open_watcher
from teamrt.mailbox.inbox import SetAside
from teamrt.mailbox.mailbox import MailNotDelivered
from teamrt.mcp.config import McpConfig, mcp_config
from teamrt.mcp.servers import NOTICE, PROCESS, McpServers, kill_leftover_servers
from teamrt.models import Model, is_sim, lookup, open_model, with_overrides
from teamrt.models.types import Block, OnText
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import USER, HumanAsker
from teamrt.runtime.budget import role_budget, run_budget
from teamrt.runtime.diskfull import DiskFull, full_disk_errno, where_of
from teamrt.runtime.history import rebuild, unanswered_calls
from teamrt.runtime.hooks import RunHooks, load_hooks, task_completing
from teamrt.runtime.loop import AgentLoop
from teamrt.runtime.losses import MAIL_FAILED, RUN_STALLED
from teamrt.runtime.lostmail import LostMail, found_in_bad
from teamrt.runtime.relay import SteeringRelay
from teamrt.runtime.restore import (
    ENDED,
    INTERRUPTED,
    REPEATABLE,
    accepted_shutdown,
    close_stale_asks,
    delivered,
    has_mail,
    kill_leftovers,
    landed,
    reconcile_git,
    workspace_remade,
    worktree_base,
)
from teamrt.runtime.stall import WAKE, Watchdog
from teamrt.runtime.stream import TextStream
from teamrt.sandbox.bwrap import SANDBOX_EVENT, default_sandbox
from teamrt.sandbox.protect import protected_paths
from teamrt.sandbox.quarantine import QUARANTINED, Guard, Moved, describe, sweep_leftovers
from teamrt.settings import Settings
from teamrt.store import (
    AgentRecord,
    EventRecord,
    FinishedCall,
    Store,
    StoreError,
    StoreWriteFailed,
    TaskUnavailable,
    ToolCallRecord,
    Usage,
    ops,
)
from teamrt.team import Role, Team
from teamrt.tools.base import Tool, ToolContext, ToolError
from teamrt.tools.files.edit import remove_temporaries
from teamrt.tools.names import canonical
from teamrt.tools.permissions import Permissions, Verdict
from teamrt.tools.registry import builtin_tools
from teamrt.tools.team import describe_tasks, task_spawn, team_tools
from teamrt.tools.todo import TODOS_EVENT
from teamrt.tools.web.search import WebSearch
from teamrt.worktree import FILE_TOOLS, MAX_ATTEMPTS, Checkout, GitError, Worktrees
from teamrt.worktree.git import full_disk_in
from teamrt.worktree.queue import IntegrationMoved

log = logging.getLogger(__name__)

MAX_RESTARTS = 2
RESTART_BACKOFF_S = 0.2
FORK_PLACEHOLDER = "Forked: you are one of the children this call started. Your directive follows."
SUPERVISOR = "supervisor"
SPAWN_FAILED = "spawn.failed"
"""The event of a spawn refused or failed: its agent, kind, role and reason (the caller gets a tool error)."""
ALREADY_MERGED = "already on the integration branch"
"""The merge queue's output for a branch merged before (``teamrt.worktree.queue``): no gate ran."""
RECORDED_ON_RESUME = "recorded on resume"
"""A merge's output when a crash came between the merge and its record (``resume.reconcile_git``)."""
FINAL_SCAN_WAIT_S = 5.0
"""How long a run's end waits for its agents' tasks to finish before its last scan of protected paths."""
SIM_UNPLAYED = "sim.unplayed"
"""The event of a run on ``sim`` whose team has roles no simulator policy plays (``sim_notice``)."""
COMMIT_FAILED = "its work could not be committed"
"""How a worktree agent's failed landing begins its reason; a resume lands it again (``_unstrand``)."""
KEPT_DELIVERED = "mail.kept_delivered"
"""A message a full disk refused, kept in its ``mail.failed`` event, delivered by a resume."""


@dataclass
class Member:
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


class Supervisor:
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
        self.settings = settings
        # what a run killed before its last scan left is moved out before anything is read as configuration
        self.swept = sweep_leftovers(project, run_dir.parent)
        self.guard = Guard(run_dir, project, on_moved=self._quarantined)
        self.claude = load_claude_settings(project) if claude is None else claude
        self.memory = load_memory(project) if memory is None else memory  # read once: forks' prefixes match
        self.hooks = load_hooks(project) if hooks is None else hooks
        self._sim = sim
        self._prices = with_overrides(settings.prices)
        self.mailbox = Mailbox(run_dir / "mailbox", store.run_id, spill_dir=run_dir / "spill")
        self.mailbox.register(SUPERVISOR)
        self.watcher = open_watcher()
        self.members: dict[str, Member] = {}
        self.models: dict[str, Model] = dict(models or {})
        self._on_text = on_text
        self.worktrees = worktrees
        self.run_budget = run_budget(team.budget_tokens, team.budget_usd)
        self.asker = HumanAsker(store, policy=team.on_ask, wait_s=team.ask_wait)
        self.tools: dict[str, Tool] = {**builtin_tools(), **team_tools(self)}
        if mcp is None:
            mcp = mcp_config(project, team, definitions)
        self.mcp = McpServers(
            mcp, dataclasses.replace(self._tools_context("lead", None, None), env={}), store=store
        )
        self._slots = asyncio.Semaphore(team.max_concurrent)
        self._serial = itertools.count(1)
        self._full: DiskFull | None = None
        """Why the run stops: the disk under its own files is full (``diskfull``); set at once, the store
        stopped right after by ``_halting``."""
        self._halting: asyncio.Task[None] | None = None
        self._refused: list[tuple[dict[str, Any], str | None]] = []  # mail.failed events still to record
        self._recorder: asyncio.Task[None] | None = None
        self.lost_mail = LostMail(
            store, self.mailbox, tell_from=SUPERVISOR, alive=self._alive, busy=self._mail_coming,
            epoch=lambda name: self.members[name].loop.epoch if name in self.members else None,
        )  # fmt: skip
        # mail set aside (``lostmail``): delivered again from its record, or its recipient and sender told
        self._handling: set[asyncio.Task[None]] = set()  # of mail set aside, still being handled
        self._restoring = False  # a resume is restoring its agents: mail set aside waits for its scan
        self.watchdog = Watchdog(idle=self._all_waiting, quiet=self._nothing_in_flight, wake=self._wake_lead)
        self._torn_down = False
        """The run's end has closed its mailbox and inboxes: an agent task still left (one an interrupt
        cancels at the interpreter's shutdown) reports to no one."""

    # -- the run ---------------------------------------------------------------

    async def run(self, prompt: str) -> Outcome:
        """Run the lead on ``prompt`` to its end; then stop whoever is left."""

        async def begin() -> Member:
            notice = sim_notice(self.team, self.definitions, sim=self._sim)
            if notice is not None:  # the roles that will only echo, for logs and the CLI
                await self.store.append_event(SIM_UNPLAYED, {"note": notice})
            lead = await self._add(self.team.lead, "lead", kind="lead", parent=None, depth=0)
            self._start(lead, prompt)
            return lead

        return await self._conduct(begin)

    async def resume(self) -> Outcome:
        """Go on with a crashed run: reconcile what the crash left (``resume``), then restart every
        agent that had not ended from its last kept turn, under a new epoch."""

        async def begin() -> Member:
            reader = self.store.reader
            await kill_leftovers(reader.tool_calls(statuses=("running",)))
            await kill_leftover_servers(reader.events(kinds=(PROCESS,)))  # started again when needed
            if self.worktrees is not None:
                await reconcile_git(self.store, self.worktrees)
            await self._deliver_kept()  # mail a full disk refused, kept for now (``diskfull``)
            await self._unstrand()
            usage = reader.run().usage
            self.run_budget.spent_tokens, self.run_budget.spent_usd = usage.total_tokens, usage.cost_usd
            events = reader.events()  # read once: what each agent's restore looks up
            await close_stale_asks(self.store, events)  # their calls are asked again as the agents go on
            self._restoring = True  # what the restores set aside is looked at below, all agents restored
            for record in reader.agents():
                await self._restore(record, events)
            self._restoring = False
            for member in list(self.members.values()):  # and what a crashed run set aside and never told
                await self.lost_mail.scan(found_in_bad(member.inbox))
            for workspace in {m.loop.env.tools.workspace for m in self.members.values()}:
                await asyncio.to_thread(remove_temporaries, workspace)  # of writes the crash cut short
            if "lead" not in self.members:  # the crash came before the lead was kept: start it
                self.members["lead"] = await self._add(
                    self.team.lead, "lead", kind="lead", parent=None, depth=0
                )
            for member in self.members.values():
                if not member.done.done():
                    self._start(member, self._unstarted_task(member), resumed=True)
            await self.store.append_event("run.resumed", {"agents": len(self.members)})
            return self.members["lead"]

        return await self._conduct(begin)

    async def _conduct(self, begin: Callable[[], Awaitable[Member]]) -> Outcome:
        """Run the team from ``begin`` (which starts its agents and names the lead) to the lead's end."""
        control = asyncio.create_task(self._control())
        relay = asyncio.create_task(SteeringRelay(self.store, self.mailbox).run())  # mail from other hosts
        try:
            policy = self.team.sandbox
            await self.store.append_event(  # what the agents' commands may reach, for show and the TUI
                SANDBOX_EVENT,
                {"confined": default_sandbox().confined, "unconfined": policy.unconfined,
                 "network": policy.network},
            )  # fmt: skip
            for note in self._mcp_notices():
                await self.store.append_event(NOTICE, {"note": note})
            if self.swept:
                await self._quarantined(self.swept, "a run killed before its last scan", None)
            team_file = () if self.team.path.is_dir() else (self.team.path,)
            await self.guard.watch(self.project, (*self._memory_paths(), *team_file))
            lead = await begin()
            outcome = await self._until_end(lead)
            for member in list(self.members.values()):
                if not member.done.done():
                    self._stop(member, "the run ended")
            await asyncio.gather(*(m.done for m in self.members.values()), return_exceptions=True)
            await asyncio.gather(*self._handling)  # each file set aside is named before the run's end
            outcome = self._with_failed_spawns(outcome)
            outcome = self._with_stranded_work(outcome)
            await self.store.set_run_status(outcome.status, outcome.reason)
            return outcome
        finally:
            control.cancel()
            relay.cancel()
            await self.mcp.close()
            await self._final_scan()
            self._torn_down = True  # before the mailbox closes: see _report
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

    def _with_stranded_work(self, outcome: Outcome) -> Outcome:
        """A run's end names the worktrees that still hold work teamrt could not commit (a failed
        landing): it is not merged, and it is not lost in silence either."""
        if self.store.failure is not None or self.worktrees is None:
            return outcome
        worktrees = self.run_dir / "worktrees"
        stranded = [
            f"{a.name}'s work is left uncommitted in its worktree {worktrees / a.name}"
            for a in self.store.reader.agents()
            if _commit_failed(a) and (worktrees / a.name).is_dir()
        ]
        if not stranded:
            return outcome
        said = "; ".join(stranded) + " (teamrt could not commit it)"
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {said}" if outcome.reason else said)

    def _with_failed_spawns(self, outcome: Outcome) -> Outcome:
        """A run that ends ``done`` after spawns failed says so in its reason: the lead heard each
        failure as a tool error and may have worked around it, so the run is not failed, but it is
        not a silent success either.

        The outcome first: a run that did not end ``done`` (its store stopped, say) reads nothing; a
        store that cannot be read here stops the run as a failed write does, in one line."""
        if outcome.status != "done" or self.store.failure is not None:
            return outcome
        from sqlalchemy.exc import SQLAlchemyError

        from teamrt.store import StoreWriteFailed
        from teamrt.store.engine import one_line

        try:
            failed = self.store.reader.events(kinds=(SPAWN_FAILED,))
        except SQLAlchemyError as e:
            raise StoreWriteFailed(self.store.where, one_line(e)) from e
        if not failed:
            return outcome
        first = failed[0].data
        what = " ".join(str(x) for x in (first.get("kind"), first.get("role")) if x)
        said = (
            f"{len(failed)} spawn{'' if len(failed) == 1 else 's'} failed; the first:"
            f" {failed[0].agent} could not start {what} agents: {first.get('reason')}"
        )
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {said}" if outcome.reason else said)

    async def _final_scan(self) -> None:
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

    def _memory_paths(self) -> tuple[Path, ...]:
        """The project's memory files the run read and every file they import (found or not, as resolved now):
        protected for the run, so no agent can put text into the next run's system prompts."""
        found: list[Path] = []
        for file in self.memory.files:
            found.append(file.path)
            for target in imports(file.text):
                if not target.startswith("~") and "\0" not in target:
                    found.append(Path(os.path.normpath(file.path.parent / target)))
        top = Path(os.path.realpath(self.project))
        inside = [p for p in found if Path(os.path.realpath(p.parent)).is_relative_to(top)]
        return tuple(dict.fromkeys(inside))

    def _mcp_notices(self) -> list[str]:
        """What the run's MCP configuration left out, and the repository's servers that do not start."""
        config = self.mcp.config
        blocked = [f"MCP server {b.config.name!r} ({b.config.source}) does not start: {b.reason}"
                   for b in config.blocked.values()]  # fmt: skip
        return [*config.problems, *blocked]

    async def _control(self) -> None:
        """Act on control mail to ``supervisor``: ``teamrt stop`` and ``teamrt answer``. Each message is
        recorded; one that asks for nothing possible (an answer to an ask not waiting) does nothing."""
        async with Inbox(
            self.mailbox, SUPERVISOR, watcher=self.watcher, on_quarantine=self._set_aside
        ) as inbox:
            async for msg in inbox:
                await self.store.append_event("control", {"from": msg.sender, "data": msg.data})
                # only a person's mail is obeyed: an agent may write to the supervisor, never steer it
                action = msg.data.get("action") if msg.kind == "control" and msg.sender == USER else None
                if action == "stop":
                    target = msg.data.get("agent")
                    for member in self.members.values():
                        if target in (None, member.name) and not member.done.done():
                            self._stop(member, f"stopped by {msg.sender}")
                elif action == "answer":
                    ask, allow, reason = msg.data.get("ask"), msg.data.get("allow"), msg.data.get("reason")
                    if isinstance(ask, str) and isinstance(allow, bool):
                        text = reason.strip() if isinstance(reason, str) else None
                        self.asker.answer(ask, allow, by=msg.sender, reason=text or None)
                inbox.ack(msg)

    def _stop(self, member: Member, reason: str) -> None:
        member.loop.stop(reason)
        if member.landing and member.task is not None:  # between runs of its loop: in the merge queue
            member.task.cancel()

    def model(self, name: str) -> Model:
        """One client per model name, shared by the agents that use it."""
        if name not in self.models:
            self.models[name] = open_model(name, settings=self.settings, sim=self._sim)
        return self.models[name]

    # -- agents ----------------------------------------------------------------

    async def _add(
        self,
        role: Role,
        name: str,
        *,
        kind: str,
        parent: str | None,
        depth: int,
        fork_of: Member | None = None,
    ) -> Member:
        definition = self.definitions.get(role.agent)
        if definition is None:  # a resumed run whose agent file has stopped loading since it started
            raise ToolError(f"the agent {role.agent!r} of role {role.name!r} no longer loads (teamrt agents"
                            " says why)")  # fmt: skip
        model_name = (
            fork_of.loop.spec.model_name if fork_of else choose_model(role.model, definition, self.team.model)
        )
        checkout = None
        if kind == "worktree":
            assert self.worktrees is not None
            checkout = await self.worktrees.create(name, parent)
            await self.guard.watch(checkout.workspace)
        tools = self._tools_context(kind, parent, checkout)
        await self.store.add_agent(
            name,
            kind=kind,
            model=model_name,
            parent=parent,
            role=role.name,
            definition=dataclasses.asdict(definition),
            workspace=str(tools.workspace),
            branch=checkout.branch if checkout else None,
            budget_tokens=role.budget_tokens,
            budget_usd=role.budget_usd,
        )
        if checkout is not None:
            await self.store.append_event("worktree.created", {"base": checkout.base}, agent=name)
        epoch = await self.store.begin_epoch(name)
        if fork_of is not None:
            spec = dataclasses.replace(fork_of.loop.spec, name=name, role=role.name, persistent=False)
        else:
            await self.mcp.prepare(self.mcp.servers_for(definition))
            spec = self._spec(name, role, definition, model_name, persistent=kind == "team")
        messages = list(fork_of.loop.messages) if fork_of else None
        if messages:
            await self.store.append_turn(name, epoch=epoch, role="compaction", content=messages)
        return self._member(name, kind, parent, depth, role, spec, tools, epoch, messages, checkout)

    def _tools_context(self, kind: str, parent: str | None, checkout: Checkout | None) -> ToolContext:
        """Where an agent works: the project (the lead), its checkout, or its parent's workspace."""
        extra = (self.run_dir / "spill",)
        policy = self.team.sandbox
        if parent is None:
            protected = self._protected(self.project, also=self._memory_paths())
            return ToolContext(
                workspace=self.project, run_dir=self.run_dir, extra_roots=extra, protected=protected,
                policy=policy, env=dict(self.claude.env), web=self.team.web, guard=self.guard,
            )  # fmt: skip
        if checkout is not None:
            assert self.worktrees is not None
            return ToolContext(
                workspace=checkout.workspace, run_dir=self.run_dir, extra_roots=extra,
                env={**self.claude.env, **checkout.env(self.worktrees.repo)},
                readable=(self.worktrees.repo.git_dir,),
                writable=checkout.writable, protected=self._protected(checkout.path, checkout.workspace),
                policy=policy, web=self.team.web, guard=self.guard,
            )  # fmt: skip
        return self.members[parent].loop.env.tools  # forks and teammates work where their parent does

    def _protected(self, *roots: Path, also: tuple[Path, ...] = ()) -> tuple[Path, ...]:
        """The protected paths of an agent working in ``roots``: the project's and the repository's too, and
        ``also`` (the files the run's memory imports)."""
        repo = self.worktrees.repo if self.worktrees is not None else None
        tops = (*roots, self.project, *((repo.root,) if repo is not None else ()))
        return protected_paths(
            tops,
            home=self.run_dir.parent.parent,
            git_dir=repo.git_dir if repo is not None else None,
            team_file=None if self.team.path.is_dir() else self.team.path,  # run --agent: the project
            also=also,
        )

    def _spec(
        self, name: str, role: Role, definition: AgentDefinition, model_name: str, *, persistent: bool
    ) -> AgentSpec:
        return AgentSpec(
            name=name,
            model=self.model(model_name),
            model_name=model_name,
            system=self._with_memory(self._system(role, definition)),
            tools=self._tools_for(definition, role),
            permissions=self._permissions(role, definition),
            info=lookup(model_name, self._prices),
            role=role.name,
            team=self.team.name,
            max_turns=role.max_turns or definition.max_turns,
            persistent=persistent,
        )

    def _system(self, role: Role, definition: AgentDefinition) -> str:
        """The agent's system prompt; the lead's also names the roles it may spawn, which the team file,
        not its definition, decides."""
        if role.name != "lead" or not self.team.roles:
            return definition.prompt
        roles = "\n".join(f"- {name}: {self._description(r.agent)}" for name, r in self.team.roles.items())
        return (
            f"{definition.prompt}\n\nThe roles of your team, for spawn_agent's role (kinds worktree and"
            f" team; forks need none) and Task's subagent_type:\n{roles}"
        )

    def _description(self, agent: str) -> str:
        definition = self.definitions.get(agent)
        return definition.description if definition else "(its agent file no longer loads; do not use it)"

    def _with_memory(self, prompt: str) -> str:
        """``prompt``, then the run's memory (CLAUDE.md ...), the same for every agent."""
        return f"{prompt}\n\n{self.memory.text}" if self.memory.text else prompt

    def _member(
        self, name: str, kind: str, parent: str | None, depth: int, role: Role, spec: AgentSpec,
        tools: ToolContext, epoch: int, messages: list[Any] | None, checkout: Checkout | None,
        spent: Usage | None = None,
    ) -> Member:  # fmt: skip
        self.mailbox.register(name)
        inbox = Inbox(self.mailbox, name, watcher=self.watcher, on_quarantine=self._set_aside,
                      on_wait=self.watchdog.waiting)  # fmt: skip
        self.watchdog.changed()
        stream = TextStream(self.run_dir, name)
        echo = self._on_text if kind == "lead" else None
        budget = role_budget(
            name, None if kind in ("lead", "fork") else role.name, role.budget_tokens, role.budget_usd
        )
        if spent is not None:  # a resumed agent's budget counts what it spent before
            budget.spent_tokens, budget.spent_usd = spent.total_tokens, spent.cost_usd
        env = AgentEnv(
            store=self.store,
            tools=tools,
            spill_dir=self.run_dir / "spill",
            asker=self.asker,
            budgets=[budget, self.run_budget],
            inbox=inbox,
            on_text=stream.write if echo is None else _tee(stream.write, echo),
            stream=stream,
            keep_waiting=lambda: any(
                m.parent == name and m.busy and not m.done.done() for m in self.members.values()
            ),
            on_idle=lambda idle: self._set_busy(name, not idle),
            current_epoch=lambda agent: self.members[agent].loop.epoch if agent in self.members else None,
            after_tools=(lambda tools: self._check_overlap(name, tools)) if checkout else None,
            hooks=self.hooks.for_agent(self.store, name=name, kind=kind, agent=role.agent),
        )
        member = Member(
            name, kind, parent, depth, AgentLoop(spec, env, epoch=epoch, messages=messages), inbox,
            checkout=checkout,
        )  # fmt: skip
        self.members[name] = member
        return member

    def _set_busy(self, name: str, busy: bool) -> None:
        """Track who is working; a parent idling on its children hears when one idles."""
        member = self.members[name]
        member.busy = busy
        if not busy and not member.settled.done():
            member.settled.set_result(None)
        parent = self.members.get(member.parent or "")
        if not busy and parent is not None and not parent.busy and not parent.done.done():
            self.send(SUPERVISOR, parent.name, f"{name} is idle.", kind="control", summary=f"{name} idle")

    # -- mail set aside, and a team that stalls -------------------------------------

    def _alive(self, name: str) -> bool:
        member = self.members.get(name)
        return member is not None and not member.done.done()

    def _mail_coming(self, name: str) -> None:
        if name in self.members:
            self.members[name].busy = True  # as ``send`` does: its parent must not end before it reads it

    def _set_aside(self, aside: SetAside) -> None:
        """An inbox set a file aside: deliver it again or tell, and record it (``lostmail``), in a task."""
        if self._restoring:  # not every agent is back yet (who may be told?): the resume's scan of bad/
            return
        task = asyncio.create_task(self._name_set_aside(aside), name=f"set aside {aside.bad}")
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    async def _name_set_aside(self, aside: SetAside) -> None:
        try:
            await self.lost_mail.handle(aside)
        except Exception as e:  # the store stopped (the run ends and says so), or a bug: never the inbox's
            if self.store.failure is None:
                log.error("could not name %s's message set aside as bad/%s: %s", aside.agent, aside.bad, e)
        finally:
            self.watchdog.changed()

    def _all_waiting(self) -> bool:
        """Every live agent waits on its inbox with nothing to read (the stall watchdog's first test)."""
        live = [m for m in self.members.values() if not m.done.done()]
        return "lead" in self.members and bool(live) and all(m.inbox.waiting for m in live)

    def _nothing_in_flight(self) -> bool:
        """No mail waits in a live agent's ``new/``, none set aside is still being handled."""
        if self._handling or self.store.failure is not None:
            return False
        try:
            return not any(m.inbox.unread() for m in self.members.values() if not m.done.done())
        except OSError:
            return False

    async def _wake_lead(self) -> None:
        """The team stalled: tell the lead (once per stall), and say so in the run's events."""
        lead = self.members.get("lead")
        if lead is None or lead.done.done():
            return
        waiting = ", ".join(sorted(n for n, m in self.members.items() if not m.done.done()))
        note = f"every agent is idle ({waiting}) and no mail is in flight; the lead was woken to go on"
        await self.store.append_event(RUN_STALLED, {"note": note, "woke": "lead"})
        try:
            self.send(SUPERVISOR, "lead", WAKE, summary="every agent is idle")
        except ToolError as e:  # the stall comes back, with no progress: the run ends with its reason
            log.error("could not wake the lead: %s", e)

    async def _until_end(self, lead: Member) -> Outcome:
        """The lead's end; or, once the team has stalled for good (``stall``), every agent stopped and the
        run failed with the reason, recorded as a ``run.stalled`` event; or, once the store has stopped
        (a full disk, the lease lost), every agent stopped: nothing it did would be kept, and an agent
        idle on its inbox would wait for ever. The run then ends with the store's failure, in one line."""
        watch = asyncio.create_task(self.watchdog.watch(), name="stall watchdog")
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future[None] = loop.create_future()

        def tell() -> None:
            if not stopped.done():
                stopped.set_result(None)

        def tell_from_writer() -> None:
            loop.call_soon_threadsafe(tell)

        self.store.on_failure(tell_from_writer)
        try:
            await asyncio.wait((lead.done, watch, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if stopped.done() and not lead.done.done():
            for member in self.members.values():
                if not member.done.done():
                    self._stop(member, f"the run's store stopped: {self.store.failure}")
            return await lead.done
        if lead.done.done() or watch.cancelled():
            return self._with_stalls(await lead.done)
        reason = watch.result()
        waiting = sorted(n for n, m in self.members.items() if not m.done.done())
        times = f"{self.watchdog.woken} time{'' if self.watchdog.woken == 1 else 's'}"
        capped = self.watchdog.woken >= self.watchdog.max_wakes
        note = f"{reason}; the lead was woken {times}" + (", the most" if capped else " and nothing moved")
        note += f"; stopped {', '.join(waiting)}"
        await self.store.append_event(RUN_STALLED, {"note": note, "agents": waiting, "reason": reason})
        for member in self.members.values():
            if not member.done.done():
                self._stop(member, reason)
        ended = await lead.done
        return Outcome("failed", ended.answer, ended.turns, reason)

    def _with_stalls(self, outcome: Outcome) -> Outcome:
        """A run that ends ``done`` after the team stalled and its lead was woken says so in its reason: the
        lead answered with what it had, which may lack what the lost mail carried."""
        woken = self.watchdog.woken
        if outcome.status != "done" or not woken:
            return outcome
        times = f"{woken} time{'' if woken == 1 else 's'}"
        said = (
            f"the team stalled {times} (every agent idle, no mail in flight); the lead was woken and answered"
        )
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {said}" if outcome.reason else said)

    def _tools_for(self, definition: AgentDefinition, role: Role) -> dict[str, Tool]:
        """The tools ``definition`` names (all when it names none) and the team's coordination tools, less
        those it disallows; names compared as the model sees them. Claude Code's TodoWrite and Task, team
        tools in teamrt, come only when named, as in Claude Code. WebSearch, which the API runs and no
        rule can ask about call by call, comes only when the agent's permissions do not deny it, with the
        team's search domains."""
        team = team_tools(self)

        def wanted(name: str) -> bool:
            shown = canonical(name) or name
            coordination = name in team and canonical(name) is None
            named = definition.tools is None or shown in definition.tools or coordination
            return named and shown not in definition.disallowed_tools

        tools = {n: tool for n, tool in self.tools.items() if wanted(n)}
        search = tools.get("WebSearch")
        if isinstance(search, WebSearch):
            decision = self._permissions(role, definition).decide(
                "WebSearch", {}, read_only=True, workspace=self.project
            )
            if decision.verdict is Verdict.DENY:
                del tools["WebSearch"]
            else:
                tools["WebSearch"] = dataclasses.replace(search, policy=self.team.web)
        tools |= {tool.name: tool for tool in self.mcp.tools_for(definition)}  # started by _add or _restore
        return tools

    def _permissions(self, role: Role, definition: AgentDefinition) -> Permissions:
        mode = role.permission_mode or definition.permission_mode or self.claude.default_mode or "default"
        allow = [*self.team.allow, *team_tools(self)]  # coordination is allowed unless a rule denies it
        return Permissions(mode, allow=allow, deny=self.team.deny, ask=self.team.ask, then=self.claude.rules)

    def _start(self, member: Member, task: str | list[Block] | None, *, resumed: bool = False) -> None:
        """Run ``member`` as a task of its own; ``resumed``: it goes on from its kept turns."""

        async def first_run() -> Outcome:
            if not resumed or task is not None:  # a resumed agent with a task had never started
                return await self._run_with_restarts(member, task)
            if self.store.reader.agent(member.name).status == "merging" or _unlanded(
                self.store.reader.agent(member.name)
            ):
                return Outcome("done", member.loop.answer, member.loop.turns)
            if self._had_ended(member):
                if member.checkout is None:  # a worktree agent's status is its landing's
                    await self.store.set_agent_status(member.name, "done")
                return Outcome("done", member.loop.answer, member.loop.turns)
            accepted = accepted_shutdown(member.loop.messages)
            if accepted is not None:  # kept its answer, crashed before it finished
                self.accept_shutdown(member.name, accepted)
            return await self._run_with_restarts(member, None, finished=await self._settle_calls(member))

        async def work() -> Outcome:
            if member.kind == "lead":
                return await first_run()
            async with self._slots:
                outcome = await first_run()
                if member.checkout is not None:
                    outcome = await self._land(member, outcome)
                return outcome

        async def main() -> None:
            try:
                outcome = await work()
            except BaseException as e:  # a bug here must not leave its parent, or the run, waiting
                if not member.done.done():
                    self._settle(member, Outcome("failed", member.loop.answer, member.loop.turns, repr(e)))
                raise
            self._settle(member, outcome)

        member.task = asyncio.create_task(main(), name=f"agent {member.name}")

    def _settle(self, member: Member, outcome: Outcome) -> None:
        member.busy = False
        member.done.set_result(outcome)
        self.watchdog.changed()
        if member.background:  # in the same step, so a parent that sees it done finds the mail
            self._report(member, outcome)
        if not member.settled.done():
            member.settled.set_result(None)

    async def _run_with_restarts(
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
                full = self._full or self._disk_full(e, self.run_dir, f"{member.name} could not go on")
                if full is not None:  # the disk under the run is full: restarted, it would meet it again
                    raise await self._stopped_by_disk(full) from e
                why = f"{type(e).__name__}: {e}"
                await self.store.append_event(
                    "agent.raised", {"error": why, "attempt": attempt + 1}, agent=member.name
                )
                if attempt == MAX_RESTARTS:
                    reason = f"failed after {MAX_RESTARTS} restarts: {why}"
                    await self.store.set_agent_status(member.name, "failed", reason)
                    return Outcome("failed", "", member.loop.turns, reason)
                await asyncio.sleep(RESTART_BACKOFF_S * 2**attempt)
                task, finished = await self._restart(member, why), None
        raise AssertionError("unreachable")

    async def _land(self, member: Member, outcome: Outcome) -> Outcome:
        """Land a worktree agent's work: merged (or nothing to merge), or back to it by mail to fix,
        at most ``MAX_ATTEMPTS`` times; an agent that ends otherwise keeps its work on its branch."""
        assert self.worktrees is not None and member.checkout is not None
        name, worktrees = member.name, self.worktrees
        title = _title(outcome.answer) or f"work of {name}"
        for attempt in itertools.count(1):
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
                full = self._disk_full(e, member.checkout.path, f"{name}'s work could not be committed")
                if full is not None:  # not the agent's fault: its work is committed and queued on resume
                    raise await self._stopped_by_disk(full) from e
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
                        self._stop(other, str(e))
                raise
            finally:
                member.landing = False
            if landing is None and self._full is not None:  # stopped for a full disk: landed on resume
                raise await self._stopped_by_disk(self._full)
            code = full_disk_in(landing.message) if landing is not None and landing.status == "red" else None
            if code is not None:  # no gate failed: the disk is full; no attempt is charged
                full = DiskFull(self.store.run_id, worktrees.queue.path, code, f"{name}'s merge failed")
                raise await self._stopped_by_disk(full)
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
            self.send(SUPERVISOR, name, landing.message, summary=f"merge {landing.status}, attempt {attempt}")
            await self.store.set_agent_status(name, "running")
            outcome = await self._run_with_restarts(member, None)
        raise AssertionError("unreachable")

    async def _check_overlap(self, name: str, tools: list[str]) -> None:
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
                    self.send(SUPERVISOR, to, text, summary=f"overlap: {name} and {other}")

    async def _restart(self, member: Member, why: str) -> list[Block] | None:
        """A fresh loop for ``member`` from its kept turns; calls left without a result get an error."""
        epoch = await self.store.begin_epoch(member.name)
        messages = rebuild(self.store.reader.turns(member.name))
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

    async def _restore(self, record: AgentRecord, events: list[EventRecord]) -> Member:
        """``record``'s agent as the crash left it: its conversation, its workspace, its mail."""
        reader = self.store.reader
        role = self._role_of(record)
        ended = record.status in ENDED and not _unlanded(record)
        checkout, notice = None, None
        if record.kind == "worktree" and not ended:
            assert self.worktrees is not None
            restored = await self.worktrees.restore(record.name, worktree_base(events, record.name))
            checkout = restored.checkout
            notice = await workspace_remade(self.store, self.worktrees, record, restored)
            await self.guard.watch(checkout.workspace)
        tools = self._tools_context(record.kind, record.parent, checkout)
        parent = self.members.get(record.parent or "")
        if record.kind == "fork" and parent is not None:
            spec = dataclasses.replace(parent.loop.spec, name=record.name, role=role.name, persistent=False)
        else:
            definition = self.definitions.get(role.agent) or kept_definition(record.definition)  # gone since
            await self.mcp.prepare(self.mcp.servers_for(definition))
            spec = self._spec(record.name, role, definition, record.model, persistent=record.kind == "team")
        epoch = record.epoch if ended else await self.store.begin_epoch(record.name)
        messages = rebuild(reader.turns(record.name))
        if record.kind == "fork" and not messages and parent is not None:  # caught before its copy was kept
            messages = list(parent.loop.messages)
            await self.store.append_turn(record.name, epoch=epoch, role="compaction", content=messages)
        member = self._member(
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
                self._report(member, outcome)  # it ended, and the crash came before it could say so
            return member
        if notice is not None:  # read with the mail below; the supervisor's word on the run itself, as
            # its idle notes are (no teammate's message: the chaos checker counts it by state)
            self.send(SUPERVISOR, record.name, notice, kind="control", summary="workspace remade")
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

    def _unstarted_task(self, member: Member) -> str | list[Block] | None:
        """The first turn of an agent the crash caught before it was kept (None: it had started).

        A child's directive is read back from its parent's spawning call: the children of one call
        were created in the order of its directives."""
        if any(turn.role != "compaction" for turn in self.store.reader.turns(member.name)):
            return None  # a fork's copy of its parent's conversation is kept as a compaction turn
        if member.parent is None:
            return self.store.reader.run().task
        parent = self.members[member.parent]
        for call, children in self._spawned_by_last_turn(parent):
            spawn = self._spawn_of(call)
            if member in children and spawn is not None:
                return self._first_turn(parent, member, spawn[2][children.index(member)])
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
            if status == "running" and self._spawn_of(call) is not None:
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
                self.accept_shutdown(member.name, reason or "shutdown accepted")
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
        children = next((kids for c, kids in self._spawned_by_last_turn(parent) if c["id"] == call["id"]), [])
        spawn = self._spawn_of(call)
        assert spawn is not None
        kind, role, directives, wait = spawn
        for directive in directives[len(children) :]:  # the crash came before these were created
            child = await self._child(parent, kind, role)
            self._start(child, self._first_turn(parent, child, directive))
            children.append(child)
        names = [c.name for c in children]
        await self.store.append_event(
            "spawn", {"kind": kind, "children": names, "wait": wait}, agent=parent.name
        )
        if not wait:
            for child in children:
                child.background = True
            text = f"started {', '.join(c.name for c in children)}; each result will arrive as mail"
        else:
            await asyncio.gather(*(c.settled for c in children))
            text = "\n\n".join(self._answer(c) for c in children) or "no child was started"
        block: Block = {"type": "tool_result", "tool_use_id": call["id"], "content": text}
        return FinishedCall(call["id"], "done", [block], False)

    def _name(self, base: str) -> str:
        name = base
        while name in self.members:
            name = f"{base}-{next(self._serial)}"
        return name

    # -- the Team protocol (the team tools call these) --------------------------------

    async def spawn(
        self, parent: str, *, kind: str, role: str | None, directives: list[str], wait: bool
    ) -> str:
        """Start ``directives``' children of ``parent``; one refused or failing is recorded as a
        ``spawn.failed`` event (for the progress lines and logs) and comes back as a tool error."""
        try:
            return await self._spawn(parent, kind=kind, role=role, directives=directives, wait=wait)
        except ToolError as e:
            await self.store.append_event(
                SPAWN_FAILED,
                {"agent": parent, "kind": kind, "role": role, "children": len(directives), "reason": str(e)},
                agent=parent,
            )
            raise

    async def _spawn(
        self, parent: str, *, kind: str, role: str | None, directives: list[str], wait: bool
    ) -> str:
        caller = self.members[parent]
        if caller.kind == "fork":
            raise ToolError("a fork cannot spawn agents; report back to your parent instead")
        if caller.depth + 1 > self.team.max_depth:
            raise ToolError(
                f"agents may nest {self.team.max_depth} deep; {parent} is at depth {caller.depth}"
            )
        if len(self.members) + len(directives) > self.team.max_agents:
            raise ToolError(f"the run may have {self.team.max_agents} agents; it has {len(self.members)}")
        if kind == "worktree" and self.worktrees is None:
            raise ToolError(
                f"worktree agents need a git repository with a commit; {self.project} is not in one"
            )
        if kind in ("team", "worktree", "task") and (role is None or role not in self.team.roles):
            raise ToolError(f"role must be one of: {', '.join(sorted(self.team.roles)) or '(none)'}")
        children: list[tuple[Member, str]] = []
        for directive in directives:
            try:
                child = await self._child(caller, kind, role)
            except (GitError, OSError) as e:
                full = self._disk_full(e, self.run_dir, f"{parent} could not start a {role or kind} agent")
                if full is not None:  # the spawn's call goes on on resume, with the children made so far
                    for made, _ in children:
                        self._settle(made, Outcome("stopped", "", 0, str(full)))
                    raise await self._stopped_by_disk(full) from e
                if not isinstance(e, GitError):
                    raise
                await self._abandon([c for c, _ in children], f"not started: {e}")
                raise ToolError(f"could not create a worktree for a {role}: {e}") from e
            children.append((child, directive))
        for child, directive in children:
            child.background = not wait
            self._start(child, self._first_turn(caller, child, directive))
        await self.store.append_event(
            "spawn", {"kind": kind, "children": [c.name for c, _ in children], "wait": wait}, agent=parent
        )
        if not wait:
            return f"started {', '.join(c.name for c, _ in children)}; each result will arrive as mail"
        await asyncio.gather(*(c.settled for c, _ in children))  # a teammate: until its first answer
        return "\n\n".join(self._answer(c) for c, _ in children)

    async def _child(self, caller: Member, kind: str, role: str | None) -> Member:
        """A new child of ``caller``, added to the run, not started."""
        if kind == "fork":
            spec_role = dataclasses.replace(self.team.lead, name="fork", agent=self.team.lead.agent)
        else:
            spec_role = self.team.roles[role or ""]
        name = self._name(f"{caller.name}-fork" if kind == "fork" else role or "mate")
        return await self._add(
            spec_role, name, kind=kind, parent=caller.name, depth=caller.depth + 1,
            fork_of=caller if kind == "fork" else None,
        )  # fmt: skip

    def _spawned_by_last_turn(self, parent: Member) -> list[tuple[Block, list[Member]]]:
        """Each spawn call of ``parent``'s last kept turn with the children it had created: children
        are created call by call, in the order of each call's directives."""
        turns = self.store.reader.turns(parent.name)
        if not turns or turns[-1].role != "assistant":
            return []
        created = {a.name: a.created_at for a in self.store.reader.agents() if a.parent == parent.name}
        since = turns[-1].created_at
        children = sorted((m for m in self.members.values() if created.get(m.name, -1.0) >= since),
                          key=lambda m: created[m.name])  # fmt: skip
        spawned = []
        for call in turns[-1].content:
            spawn = self._spawn_of(call) if call.get("type") == "tool_use" else None
            if spawn is not None:
                count = len(spawn[2])
                spawned.append((call, children[:count]))
                children = children[count:]
        return spawned

    def _spawn_of(self, call: Block) -> tuple[str, str | None, list[str], bool] | None:
        """What a spawning call (``spawn_agent``, or ``Task`` by any of its names) asked for: the kind, the
        role, the directives and whether its caller waits; None for any other call, or a Task call that
        could start nothing."""
        args = call.get("input") or {}
        if call.get("name") == "spawn_agent":
            kind, directives = str(args.get("kind")), list(args.get("directives") or [])
            return kind, args.get("role"), directives, bool(args.get("wait", kind != "team"))
        if canonical(str(call.get("name"))) == "Task":
            try:
                kind, role, prompt = task_spawn(args, self.role_agents())
            except ToolError:
                return None
            return kind, role, [prompt], True
        return None

    def _answer(self, child: Member) -> str:
        """A child's answer for its parent: its end, or (a teammate still with us) its latest answer."""
        if child.done.done():
            o = child.done.result()
            head = f"## {child.name}: {o.status}" + (f" ({o.reason})" if o.reason else "")
            return f"{head}\n{o.answer or '(no answer)'}"
        return f"## {child.name}: idle; reach it with send_message\n{child.loop.answer or '(no answer)'}"

    async def _abandon(self, members: list[Member], reason: str) -> None:
        """Children added but never started, because a later one of the same spawn failed."""
        for member in members:
            await self.store.set_agent_status(member.name, "failed", reason)
            member.busy = False
            member.done.set_result(Outcome("failed", "", 0, reason))
            member.settled.set_result(None)

    def _first_turn(self, parent: Member, child: Member, directive: str) -> str | list[Block]:
        if child.checkout is not None and self.worktrees is not None:
            gates = ", ".join(f"`{g}`" for g in self.team.gates) or "none"
            return (
                f"You work in your own git worktree, {child.checkout.workspace}, a detached checkout of"
                f" {child.checkout.base[:12]}. Commit there if you like; when you finish, teamrt commits"
                f" the rest and merges your work onto {self.worktrees.integration} once its gates"
                f" ({gates}) pass. Write only inside your worktree.\n\n{directive}"
            )
        if child.kind != "fork":
            return directive
        calls = [b for b in parent.loop.messages[-1]["content"] if b.get("type") == "tool_use"]
        placeholders: list[Block] = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": FORK_PLACEHOLDER} for c in calls
        ]
        return [*placeholders, {"type": "text", "text": directive}]

    def _report(self, child: Member, outcome: Outcome) -> None:
        """A background child's final answer, as a ``result`` mail to its parent (not when the store
        stopped: the end was not kept, so a resume goes on with the child and it reports then). Nor once
        the run's end has closed the mailbox: a teammate idle at Ctrl-C is cancelled only at the
        interpreter's shutdown, and its "failed: CancelledError" was posted through the closed mailbox
        (``OSError: Bad file descriptor``); the store keeps it live, so a resume goes on with it."""
        if child.parent is None or child.parent not in self.members or self.store.failure is not None:
            return
        if self._torn_down or self._full is not None:  # a full disk: as a stopped store, reported on resume
            return
        body = outcome.answer or f"(no answer; {outcome.status}: {outcome.reason})"
        data = {"status": outcome.status, "reason": outcome.reason, "epoch": child.loop.epoch}
        try:
            posted = self.mailbox.post(
                sender=child.name, recipient=child.parent, body=body, kind="result",
                summary=f"{child.name} {outcome.status}", data=data, epoch=child.loop.epoch,
            )  # fmt: skip
        except MailNotDelivered as e:  # a resume reports it again: no result mail is found
            self._mail_failed(e, kept=False)
            return
        self.lost_mail.remember(posted)  # delivered again from here if its file is damaged

    def send(self, sender: str, to: str, body: str, *, kind: str = "message", summary: str = "",
             data: dict[str, Any] | None = None) -> str:  # fmt: skip
        epoch = self.members[sender].loop.epoch if sender in self.members else 0
        if to in self.members:
            self.members[to].busy = True  # before delivery: its parent must not end in between
        try:
            msg = self.mailbox.post(
                sender=sender, recipient=to, body=body, kind=kind, summary=summary or body[:80],
                data=data or {}, epoch=epoch,
            )  # fmt: skip
            self.lost_mail.remember(msg)  # delivered again from here if its file is damaged
        except MailNotDelivered as e:  # the disk refused it: the sender hears why (a tool error)
            kept = e.lasting and sender in self.members  # an agent's: a resume delivers it, once
            self._mail_failed(e, kept=kept)
            if kept:
                then = "; the run stops until space is freed; this message is kept and delivered when the run"
                then += " is resumed: do not send it again"
            else:
                then = "; the run stops until space is freed" if e.lasting else "; send it again later"
            raise ToolError(f"{e}{then}") from e
        except MailboxError as e:
            known = ", ".join(sorted(n for n in self.members if n != sender))
            raise ToolError(f"{e}; the team is: {known}") from e
        return f"delivered {msg.id} to {to}"

    def broadcast(self, sender: str, body: str, summary: str) -> list[str]:
        """Send to every other live agent; one the disk refuses does not keep the rest from theirs (each
        refusal is kept or said), and the caller hears who has it and who has not."""
        others = [n for n, m in self.members.items() if n != sender and not m.done.done()]
        refused: list[tuple[str, ToolError]] = []
        for name in others:
            try:
                self.send(sender, name, body, summary=summary)
            except ToolError as e:
                if not isinstance(e.__cause__, MailNotDelivered):
                    raise
                refused.append((name, e))
        if refused:
            sent = [n for n in others if n not in dict(refused)]
            head = f"sent to {', '.join(sent)}; " if sent else ""
            raise ToolError(head + "; ".join(str(e) for _, e in refused)) from refused[0][1].__cause__
        return others

    # -- a full disk under the run's own files (``diskfull``) ---------------------------

    def _mail_failed(self, e: MailNotDelivered, *, kept: bool) -> None:
        """Record a message the disk refused (``mail.failed``, with the message itself when ``kept``: a
        resume delivers it); a lasting cause (a full disk) stops the run, as a full store does."""
        msg = e.msg
        what = f"{msg.sender}'s {msg.kind} to {msg.recipient} ({msg.id})"
        then = "; kept, to be delivered when the run is resumed" if kept else ""
        data: dict[str, Any] = {
            "note": f"{what} was not delivered: {e.cause}{then}", "id": msg.id, "from": msg.sender,
            "to": msg.recipient, "kind": msg.kind, "errno": e.errno,
        }  # fmt: skip
        if kept:
            data["message"] = msg.to_dict()
        self._refused.append((data, msg.sender if msg.sender in self.members else None))
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.get_running_loop().create_task(self._record_refused())
        if e.lasting:
            self._stop_for_disk(DiskFull(self.store.run_id, e.where, e.errno, f"{what} was not delivered"))

    def _stop_for_disk(self, full: DiskFull) -> None:
        """Stop the run for a full disk: at once in memory (no agent is restarted or reports), and in the
        store right after the refusals not yet recorded, queued now: nothing written after this (the
        refused sender's tool result, a model turn) is kept, as after a crash there. The sender's call is
        then completed once by the resume, which finds its message delivered from the ``mail.failed``
        event (``_deliver_kept``), so the agent never acts on a refusal that the resume undoes."""
        if self._full is None:
            self._full = full
            log.warning("%s", full)
            refused, self._refused = self._refused, []
            run = self.store.run_id

            def record(conn: Any) -> None:
                for data, agent in refused:
                    ops.append_event(conn, run=run, kind=MAIL_FAILED, agent=agent, data=data)

            try:
                stopped: asyncio.Future[None] | None = self.store.stop_after(record, full)
            except StoreError:
                stopped = None  # stopped already, by what came first
            self._halting = asyncio.get_running_loop().create_task(self._halt(stopped))

    async def _record_refused(self) -> None:
        """Record each refused message (``mail.failed``), each committed before the next is written."""
        while self._refused:
            data, agent = self._refused.pop(0)
            try:
                await self.store.append_event(MAIL_FAILED, data, agent=agent)
            except StoreError:
                return  # the store stopped: the journal says the call never finished; a resume redoes it

    async def _halt(self, stopped: asyncio.Future[None] | None) -> None:
        """Once the store has stopped (``stopped``: its last write), end the lead, which ends the run: its
        end raises the failure, in one line."""
        if stopped is not None:
            try:
                await stopped
            except StoreError:
                pass  # stopped before, by what came first
        lead = self.members.get("lead")
        if lead is not None and not lead.done.done():
            self._stop(lead, str(self._full))

    async def _deliver_kept(self) -> None:
        """Deliver the agents' messages a full disk refused and the run kept (``mail.failed`` with the
        message), each once: never one its recipient holds already (waiting, read or ingested). A disk
        still full stops the resume in one line, before any agent starts."""
        reader = self.store.reader
        for event in reader.events(kinds=(MAIL_FAILED,)):
            kept = event.data.get("message")
            if not isinstance(kept, dict):
                continue
            try:
                msg = Message.decode(json.dumps(kept).encode())
                if self.mailbox.locate(msg.recipient, msg.id) or msg.id in reader.ingested_ids(msg.recipient):
                    continue
                self.mailbox.deliver(msg)
            except MailNotDelivered as e:
                what = f"the kept message {e.msg.id} to {e.recipient} was not delivered"
                raise DiskFull(self.store.run_id, e.where, e.errno, what) from e
            except MailboxError as e:  # its recipient's mailbox is gone: the event said the loss already
                log.warning("kept message %s not delivered on resume: %s", kept.get("id"), e)
                continue
            self.lost_mail.remember(msg)
            note = f"{msg.sender}'s {msg.kind} to {msg.recipient} ({msg.id}), kept while the disk was full:"
            note += " delivered now"
            await self.store.append_event(KEPT_DELIVERED, {"note": note, "id": msg.id}, agent=msg.sender)

    async def _unstrand(self) -> None:
        """Worktree agents whose landing failed because their work could not be committed (a full disk,
        before teamrt stopped runs for it): their work is still in their worktrees, so they are marked
        done again, unlanded, and land as the run goes on (``_unlanded``), never stranded."""
        for record in self.store.reader.agents():
            if _commit_failed(record):
                await self.store.set_agent_status(record.name, "done")

    def _disk_full(self, error: BaseException, where: Path, what: str) -> DiskFull | None:
        """The ``DiskFull`` behind ``error`` (teamrt's own write, not an agent's command), else None."""
        code = full_disk_errno(error)
        if code is None:
            return None
        return DiskFull(self.store.run_id, where_of(error, where), code, what)

    async def _stopped_by_disk(self, full: DiskFull) -> StoreError:
        """Stop the run for ``full`` (or what stopped it first) and wait until the store has stopped;
        the error to raise."""
        self._stop_for_disk(full)
        if self._halting is not None:
            await asyncio.shield(self._halting)
        return self.store.failure or self._full or full

    async def create_task(self, agent: str, subject: str, description: str, blocked_by: list[int]) -> str:
        task = await self.store.create_task(subject, description, created_by=agent, blocked_by=blocked_by)
        return f"created task {task.id}: {task.subject}"

    async def claim_task(self, agent: str, task_id: int) -> str:
        try:
            task = await self.store.claim_task(task_id, agent)
        except TaskUnavailable as e:
            if e.owner != agent or not e.reason.startswith("already claimed"):
                raise ToolError(str(e)) from e
            task = next(t for t in self.store.reader.tasks() if t.id == task_id)  # its own claim, again
        return f"you hold task {task.id}: {task.subject}\n{task.description}"

    async def update_task(self, agent: str, task_id: int, status: str) -> str:
        task = next((t for t in self.store.reader.tasks() if t.id == task_id), None)
        if status == "done" and task is not None and agent in self.members:  # TaskCompleted hooks first
            refused = await task_completing(self.members[agent].loop, task.id, task.subject, task.description)
            if refused is not None:
                raise ToolError(f"task {task.id} is not done: a TaskCompleted hook says:\n{refused}")
        task = await self.store.update_task(task_id, status, by=agent)
        return f"task {task.id} is {task.status}"

    def list_tasks(self) -> str:
        return describe_tasks(self.store.reader.tasks())

    def accept_shutdown(self, agent: str, reason: str) -> None:
        self.members[agent].loop.finish_after_turn(reason)

    def role_agents(self) -> dict[str, str]:
        return {name: role.agent for name, role in self.team.roles.items()}

    async def record_todos(self, agent: str, todos: list[dict[str, str]]) -> None:
        await self.store.append_event(TODOS_EVENT, {"todos": todos}, agent=agent)


def sim_notice(team: Team, definitions: dict[str, AgentDefinition], *, sim: Any = None) -> str | None:
    """The line a run of ``team`` on ``sim`` gives at its start when roles of it are played by no
    simulator policy (they only echo their prompt): None when every role on sim is played, or none is
    on sim. ``sim``: the run's own ``SimServer`` (default: the process's, playing the example teams).
    Costs no SDK import; the simulator is imported (and the process's started) only when a role is on
    sim."""
    on_sim = [r for r in (team.lead, *team.roles.values()) if is_sim(r.model or team.model)]
    if not on_sim:
        return None
    from teamrt.sim import echo, shared_server
    from teamrt.sim.plays import unplayed_notice

    server = sim if sim is not None else shared_server()
    if server.default is not echo:  # a server that plays every role
        return None
    lead = definitions.get(team.lead.agent)
    forks = lead is not None and "spawn_agent" not in lead.disallowed_tools
    roles = [r.name for r in on_sim]
    if roles and roles[0] == "lead" and forks:
        roles.insert(1, "fork")
    return unplayed_notice(team.name, roles, server.policies)


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
    tolerated = re.findall(
        r"^\[[^\n]*, but every failing test failed before this merge too", output, re.MULTILINE
    )
    if tolerated:
        return (
            f"{len(tolerated)} of {len(gates)} gates still fail, only tests that failed before this merge too"
        )
    if not all(f"$ {gate}\n" in f"{output}\n" for gate in gates):
        return "the gates' output was cut; teamrt show has it"
    return "gates passed: " + ", ".join(f"`{gate}`" for gate in gates)


def _tee(*sinks: OnText) -> OnText:
    def write(text: str) -> None:
        for sink in sinks:
            sink(text)

    return write


def _commit_failed(record: AgentRecord) -> bool:
    """A worktree agent whose landing failed because teamrt could not commit its work."""
    reason = record.status_reason or ""
    return record.kind == "worktree" and record.status == "failed" and reason.startswith(COMMIT_FAILED)


def _unlanded(record: AgentRecord) -> bool:
    """A worktree agent whose loop ended done but whose work the crash caught before its landing."""
    return record.kind == "worktree" and record.status == "done" and record.status_reason is None


def _title(answer: str) -> str:
    """A commit title from an agent's answer: its first line that says something, shortened."""
    line = next((x.strip(" #*-") for x in answer.splitlines() if x.strip(" #*-")), "")
    return line if len(line) <= 72 else line[:69] + "..."
