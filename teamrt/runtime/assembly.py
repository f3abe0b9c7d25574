"""An agent made concrete: its prompt and memory, tools, permissions, workspace, budgets and surroundings.

The supervisor's part that turns a role of the team file into a running
agent's ``Member`` (``add``, for a new agent; ``restoring`` rebuilds one from
the store with ``tools_context``, ``spec`` and ``member``). Everything an
agent is made of is decided here, once: which tools it gets (its definition's,
the team's coordination tools, its MCP servers'), its permission rules, where
it works (the project, its worktree, or its parent's workspace) and what is
protected there, its system prompt with the project's memory, its budgets.

What the agent's surroundings call back (its inbox setting mail aside, its
idling, a worktree's overlap check) goes to the supervisor, through
``AgentHost``: the parts that answer are made after this one.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from teamrt.agents import AgentDefinition, choose_model
from teamrt.claudecode.memory import Memory, imports
from teamrt.claudecode.plugins import load_plugins
from teamrt.claudecode.settings import ClaudeSettings
from teamrt.claudecode.skills import SkillSet, load_skills
from teamrt.mailbox import Inbox, Mailbox
from teamrt.mailbox.inbox import SetAside
from teamrt.mailbox.watcher import Watcher
from teamrt.mcp.config import McpConfig
from teamrt.mcp.servers import START_TIMEOUT, McpServers
from teamrt.models import Model, lookup, open_model, price_table
from teamrt.models.catalog import ModelInfo
from teamrt.models.levers import default_effort, effort_problem, thinking_problem, thinking_request
from teamrt.models.types import OnText
from teamrt.runtime import personprompts, scopedrules
from teamrt.runtime.agent import DEFAULT_MAX_TOKENS, AgentEnv, AgentSpec
from teamrt.runtime.asking import HumanAsker
from teamrt.runtime.budget import Budget, role_budget
from teamrt.runtime.hooks import RunHooks
from teamrt.runtime.loop import AgentLoop
from teamrt.runtime.mcphost import RunMcpHost
from teamrt.runtime.member import Member
from teamrt.runtime.stall import Watchdog
from teamrt.runtime.stream import TextStream
from teamrt.sandbox.protect import protected_paths
from teamrt.sandbox.quarantine import Guard
from teamrt.settings import Settings
from teamrt.store import Store, Usage
from teamrt.team import Role, Team
from teamrt.tools.base import Tool, ToolContext, ToolError
from teamrt.tools.commands_brief import bash_allow_rules
from teamrt.tools.commands_brief import render as commands_brief
from teamrt.tools.names import FOLDED, canonical
from teamrt.tools.permissions import Permissions, Rules, Verdict
from teamrt.tools.registry import legacy_tools
from teamrt.tools.skill import SkillTool, listing_budget
from teamrt.tools.team import TeamServices, team_tools
from teamrt.tools.web.search import WebSearch
from teamrt.worktree import Checkout, Worktrees

log = logging.getLogger(__name__)

REVIEWER = "reviewer"
"""The built-in reviewer's definition: its roles get a reviewer's cheap effort when they set none."""


class AgentHost(Protocol):
    """What an agent's surroundings call back in the run (``supervisor.Supervisor`` is one): the run's tools,
    what the team tools call, the stall watchdog; an inbox that set a file aside (``lostmail``), an agent
    that starts or stops working, a worktree agent's turn that ran ``tools`` (who else changed its files)."""

    tools: dict[str, Tool]
    watchdog: Watchdog

    @property
    def services(self) -> TeamServices: ...

    def set_aside(self, aside: SetAside) -> None: ...

    def set_busy(self, name: str, busy: bool) -> None: ...

    async def check_overlap(self, name: str, tools: list[str]) -> None: ...


class Assembly:
    """Makes the run's agents: one ``Member`` per agent, added to ``members``."""

    def __init__(
        self, *, store: Store, run_dir: Path, team: Team, definitions: dict[str, AgentDefinition],
        project: Path, settings: Settings, sim: Any, claude: ClaudeSettings, memory: Memory,
        hooks: RunHooks, mailbox: Mailbox, watcher: Watcher, members: dict[str, Member],
        models: dict[str, Model], on_text: OnText | None, worktrees: Worktrees | None,
        run_budget: Budget, asker: HumanAsker, guard: Guard, mcp: McpConfig, host: AgentHost,
        skills: SkillSet | None = None,
    ) -> None:  # fmt: skip
        """``models``: the clients open so far, by name (``model`` adds to it); ``on_text``: where the lead's
        text streams; ``mcp``: the run's MCP configuration, its servers started as agents need them;
        ``skills``: the run's skills (None: read them now, their warnings logged)."""
        self.store = store
        self.run_dir = run_dir
        self.team = team
        self.definitions = definitions
        self.project = project
        self.settings = settings
        self._sim = sim
        self.claude = claude
        self.memory = memory
        self.hooks = hooks
        self.mailbox = mailbox
        self.watcher = watcher
        self.members = members
        self.models = models
        self._on_text = on_text
        self.worktrees = worktrees
        self.run_budget = run_budget
        self.asker = asker
        self.guard = guard
        self.host = host
        self._prices = price_table(settings)
        if skills is None:
            skills = load_skills(project, load_plugins(project).skill_roots)
            for line in skills.warnings:
                log.warning("%s", line)
        self.skills = skills
        lead = self.tools_context("lead", None, None)
        allowed = [team.model, *(r.model for r in (team.lead, *team.roles.values()) if r.model)]
        self.mcp = McpServers(
            mcp, dataclasses.replace(lead.confinement, env={}), guard=lead.guard, store=store,
            start_timeout=claude.knobs.mcp_start_timeout or START_TIMEOUT,  # MCP_TIMEOUT in the settings
            host=RunMcpHost(members, self.model, allowed, self._prices),  # servers' sampling and questions
        )  # fmt: skip

    def model(self, name: str) -> Model:
        """One client per model name, shared by the agents that use it."""
        if name not in self.models:
            self.models[name] = open_model(name, settings=self.settings, sim=self._sim)
        return self.models[name]

    async def add(
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
        tools = self.tools_context(kind, parent, checkout)
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
            spec = fork_spec(fork_of.loop.spec, name, role.name)
        else:
            await self.mcp.prepare(self.mcp.servers_for(definition))
            spec = self.spec(name, role, definition, model_name, persistent=kind == "team")
        messages = list(fork_of.loop.messages) if fork_of else None
        if messages:
            await self.store.append_turn(name, epoch=epoch, role="compaction", content=messages)
        return self.member(name, kind, parent, depth, role, spec, tools, epoch, messages, checkout)

    def tools_context(self, kind: str, parent: str | None, checkout: Checkout | None) -> ToolContext:
        """Where an agent works: the project (the lead), its checkout, or its parent's workspace. The run's
        skill folders are read-only roots besides the spill directory: a skill's files can be read once the
        model loads it (never written: extra roots are read-only, and protected paths stay protected)."""
        extra = (self.run_dir / "spill", *self.skills.folders())
        policy = self.team.sandbox
        if parent is None:
            protected = self._protected(self.project, also=self.memory_paths())
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

    def spec(
        self, name: str, role: Role, definition: AgentDefinition, model_name: str, *, persistent: bool
    ) -> AgentSpec:
        tools = self._tools_for(definition, role, name)
        info = lookup(model_name, self._prices)
        tools |= self._skill_tool(definition, role, info)
        levers = role_levers(self.team, role, definition, model_name, info)
        return AgentSpec(
            name=name,
            model=self.model(model_name),
            model_name=model_name,
            system=self._with_memory(
                self._with_skills(self._system(role, definition, "Bash" in tools), definition)
            ),
            tools=tools,
            permissions=self._permissions(role, definition),
            info=info,
            role=role.name,
            team=self.team.name,
            max_turns=role.max_turns or definition.max_turns,
            persistent=persistent,
            **levers,
        )

    def _system(self, role: Role, definition: AgentDefinition, bash: bool) -> str:
        """The agent's system prompt; the lead's also names the roles it may spawn, which the team file,
        not its definition, decides; an agent with ``bash`` is told the commands the rules let it run
        and the merge gates (``commands_brief``)."""
        prompt = definition.prompt
        if role.name == "lead" and self.team.roles:
            roles = "\n".join(
                f"- {name}: {self._description(r.agent)}" for name, r in self.team.roles.items()
            )
            prompt = (
                f"{prompt}\n\nThe roles of your team, for spawn_agent's role (kinds worktree and"
                f" team; forks need none) and Task's subagent_type:\n{roles}"
            )
        if bash:
            allow = bash_allow_rules((*Rules.parse(allow=self.team.allow).allow, *self.claude.rules.allow))
            told = commands_brief(allow, self.team.gates)
            prompt = f"{prompt}\n\n{told}" if told else prompt
        return prompt

    def _with_skills(self, prompt: str, definition: AgentDefinition) -> str:
        """``prompt``, then the bodies of the skills its agent file names in ``skills``, which Claude Code
        preloads into a subagent's context at its start; in the system prompt here, which stays the same
        for every request of the agent (a name the run has no skill for was said when the run started)."""
        if not definition.skills:
            return prompt
        text, missing = self.skills.preloaded(definition.skills)
        for line in missing:
            log.warning("%s (agent %s): %s", definition.source, definition.name, line)
        return f"{prompt}\n\nSkills loaded for you:\n\n{text}" if text else prompt

    def _skill_tool(self, definition: AgentDefinition, role: Role, info: ModelInfo | None) -> dict[str, Tool]:
        """``Skill``, when the run has skills the model may invoke and ``definition`` does not leave it out
        (its ``tools`` naming others, its ``disallowedTools``), its listing within Claude Code's budget for
        the model's context window (``info``); the same tool, byte for byte, on every request."""
        named = definition.tools is None or "Skill" in definition.tools
        if not self.skills.listed() or not named or "Skill" in definition.disallowed_tools:
            return {}
        budget = listing_budget(info.context_window if info else None, {**os.environ, **self.claude.env})
        tool = SkillTool(self.skills, budget)
        if tool.bare or tool.left_out:
            log.warning("%s: the skills listing is over its budget of %d characters: %d shown without a"
                        " description, %d left out", role.name, budget, tool.bare, tool.left_out)  # fmt: skip
        return {tool.name: tool}

    def _description(self, agent: str) -> str:
        definition = self.definitions.get(agent)
        return definition.description if definition else "(its agent file no longer loads; do not use it)"

    def _with_memory(self, prompt: str) -> str:
        """``prompt``, then the run's memory (CLAUDE.md ...), the same for every agent."""
        return f"{prompt}\n\n{self.memory.text}" if self.memory.text else prompt

    def memory_paths(self) -> tuple[Path, ...]:
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

    def member(
        self, name: str, kind: str, parent: str | None, depth: int, role: Role, spec: AgentSpec,
        tools: ToolContext, epoch: int, messages: list[Any] | None, checkout: Checkout | None,
        spent: Usage | None = None,
    ) -> Member:  # fmt: skip
        self.mailbox.register(name)
        inbox = Inbox(self.mailbox, name, watcher=self.watcher, on_quarantine=self.host.set_aside,
                      on_wait=self.host.watchdog.waiting)  # fmt: skip
        self.host.watchdog.changed()
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
            on_idle=lambda idle: self.host.set_busy(name, not idle),
            current_epoch=lambda agent: self.members[agent].loop.epoch if agent in self.members else None,
            after_tools=(lambda tools: self.host.check_overlap(name, tools)) if checkout else None,
            hooks=self.hooks.for_agent(self.store, name=name, kind=kind, agent=role.agent),
            rules=scopedrules.for_agent(self.memory.scoped, self.store, name),
            tools_changed=self._mcp_follow(role),
            person_prompt=personprompts.for_mail(self.mcp, self.store, name),
        )
        member = Member(
            name, kind, parent, depth, AgentLoop(spec, env, epoch=epoch, messages=messages), inbox,
            checkout=checkout,
        )  # fmt: skip
        self.members[name] = member
        return member

    def _tools_for(self, definition: AgentDefinition, role: Role, name: str) -> dict[str, Tool]:
        """The tools ``definition`` names (all when it names none) and the team's coordination tools, less
        those it disallows; names compared as the model sees them. Claude Code's TodoWrite and Task, team
        tools in teamrt, come only when named, as in Claude Code. WebSearch, which the API runs and no
        rule can ask about call by call, comes only when the agent's permissions do not deny it, with the
        team's search domains. Agent ``name`` of an older run that called a tool teamrt has since folded
        into another (MultiEdit, into Edit) is offered it again where it stood (``legacy_tools``)."""
        team = team_tools(self.host.services)

        def wanted(name: str) -> bool:
            shown = canonical(name) or name
            coordination = name in team and canonical(name) is None
            named = definition.tools is None or shown in definition.tools or coordination
            return named and shown not in definition.disallowed_tools

        tools = {n: tool for n, tool in self.host.tools.items() if wanted(n)}
        tools = self._with_legacy(tools, name)
        search = tools.get("WebSearch")
        if isinstance(search, WebSearch):
            decision = self._permissions(role, definition).decide(
                "WebSearch", {}, read_only=True, workspace=self.project
            )
            if decision.verdict is Verdict.DENY:
                del tools["WebSearch"]
            else:
                tools["WebSearch"] = dataclasses.replace(search, policy=self.team.web)
        tools |= {tool.name: tool for tool in self.mcp.tools_for(definition)}  # started by add or restoring
        return tools

    def _with_legacy(self, tools: dict[str, Tool], name: str) -> dict[str, Tool]:
        """``tools`` with each folded tool agent ``name``'s journal holds a call to, right after the tool
        it folded into when the agent has that one (an agent denied Edit gets no MultiEdit back)."""
        folded = {n: tool for n, tool in legacy_tools().items() if FOLDED[n] in tools}
        if not folded:
            return tools
        called = {call.name for call in self.store.reader.tool_calls(name)} & folded.keys()
        if not called:
            return tools
        kept: dict[str, Tool] = {}
        for n, tool in tools.items():
            kept[n] = tool
            kept |= {old: folded[old] for old in sorted(called) if FOLDED[old] == n}
        return kept

    def _permissions(self, role: Role, definition: AgentDefinition) -> Permissions:
        mode = role.permission_mode or definition.permission_mode or self.claude.default_mode or "default"
        allow = [*self.team.allow, *team_tools(self.host.services)]  # coordination, unless a rule denies it
        return Permissions(mode, allow=allow, deny=self.team.deny, ask=self.team.ask, then=self.claude.rules)

    def _mcp_follow(self, role: Role) -> Callable[[dict[str, Tool]], bool] | None:
        """What puts the tools an agent of ``role``'s servers list now in its tools before its next model
        call (a server's ``tools/list_changed``: ``McpServers.follow``)."""
        definition = self.definitions.get(role.agent)
        return self.mcp.follow(definition) if definition is not None else None

    def mcp_notices(self) -> list[str]:
        """What the run's MCP configuration left out, and the repository's servers that do not start."""
        config = self.mcp.config
        blocked = [f"MCP server {b.config.name!r} ({b.config.source}) does not start: {b.reason}"
                   for b in config.blocked.values()]  # fmt: skip
        return [*config.problems, *blocked]


def role_levers(
    team: Team, role: Role, definition: AgentDefinition, model: str, info: ModelInfo | None
) -> dict[str, Any]:
    """``AgentSpec``'s effort, thinking, max_tokens, compact_at and cache for ``role`` on ``model``: the
    role's settings, else (effort) its agent file's, else the team's; without one, a reviewer's effort is
    cheap (``default_effort``). The
    team file checked them against the model it named; one the model of this agent does not take (the
    command line named another) is left out with a warning, never sent for the API to refuse."""
    effort = role.effort or definition.effort or team.effort  # as a model is chosen: role, file, team
    thinking = team.lever(role, "thinking")
    if effort is not None and (problem := effort_problem(effort, model, info)) is not None:
        log.warning("%s: %s; the model's default effort applies", role.name, problem)
        effort = None
    if effort is None:
        effort = default_effort(info, reviewer=definition.name == REVIEWER)
    if thinking is not None and (problem := thinking_problem(thinking, model, info)) is not None:
        log.warning("%s: %s; the model's default thinking applies", role.name, problem)
        thinking = None
    thinking_param, max_tokens = thinking_request(thinking, info, DEFAULT_MAX_TOKENS, agent=role.name)
    return {
        "effort": effort,
        "thinking": thinking_param,
        "max_tokens": max_tokens,
        "compact_at": team.lever(role, "compact_at"),
        "cache": team.lever(role, "cache") or "auto",
    }


def fork_spec(parent: AgentSpec, name: str, role: str) -> AgentSpec:
    """A fork's spec: its parent's, ending when it answers. Its effort and thinking stay its parent's:
    the API keys the cached prefix on the top-level ``output_config`` (docs, "Per-message effort": only an
    effort-only system message in ``messages`` keeps the prefix), so a fork at a cheaper top-level effort
    would write its parent's whole history again at 1.25x instead of reading it at 0.1x, costing far
    more than the effort saves."""
    return dataclasses.replace(parent, name=name, role=role, persistent=False)


def _tee(*sinks: OnText) -> OnText:
    def write(text: str) -> None:
        for sink in sinks:
            sink(text)

    return write
