"""``teamrt run`` and ``teamrt resume``: a team (or one agent, as a team of one) in a run of its own, to
the end; the public API (``teamrt.api``) and the test kit (``teamrt.testing``) run through here too.

A new run and a resumed one read their project the same way, once (``prepare_run``: leftovers swept,
Claude Code settings and memory, hooks, MCP servers), and start their supervisor the same way
(``Prepared.supervisor``: worktrees when the project is in git).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from teamrt import home
from teamrt.agents import AgentDefinition, AgentScan, role_name, scan_definitions
from teamrt.claudecode.memory import Memory, load_memory
from teamrt.claudecode.plugins import load_plugins
from teamrt.claudecode.settings import ClaudeSettings, load_claude_settings
from teamrt.claudecode.skills import SkillSet, load_skills, shown
from teamrt.errors import UserError
from teamrt.mcp.config import McpConfig, mcp_config, mcp_notices
from teamrt.models import Model, default_model, open_model
from teamrt.models.catalog import resolve
from teamrt.models.registry import is_sim
from teamrt.models.types import OnText
from teamrt.runtime.agent import Outcome
from teamrt.runtime.fromproject import tell_agents, with_agent_roles, with_test_command
from teamrt.runtime.hooks import RunHooks, load_hooks
from teamrt.runtime.supervisor import Supervisor
from teamrt.runtime.verify import accept_loss as record_loss
from teamrt.runtime.verify import verify
from teamrt.sandbox.bwrap import OPT_IN, default_sandbox, describe
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.settings import Settings, load_settings
from teamrt.store import RunRecord, Store, create_store, open_reader, open_store
from teamrt.store.integrity import StoreBehind
from teamrt.store.ownership import host_identity
from teamrt.store.rounds import round_base
from teamrt.team import Role, Team, load_team, team_from_json, team_to_json
from teamrt.worktree import GitRepo, Worktrees
from teamrt.worktree.facts import on_branch, repo_of

if TYPE_CHECKING:
    from teamrt.sim import SimServer


class NoPrompt(UserError, ValueError):
    pass


class UnknownAgent(UserError, ValueError):
    pass


class BranchTaken(UserError, ValueError):
    """The team file's integration branch exists already."""


Notice = Callable[[str], None]
"""Where a run says what the user should know as it starts (the CLI: stderr)."""


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    outcome: Outcome
    input_tokens: int
    cache_read_tokens: int
    output_tokens: int
    cost_usd: float
    agents: int
    simulated: bool
    budget_usd: float | None
    integration: str | None
    """The branch the run's merged work is on (None outside git)."""
    merged: int
    """Worktree branches merged onto it."""
    run_dir: Path
    """Where the run is kept."""


@dataclass(frozen=True)
class Choices:
    """What the command line says over the team file (None: the file's, or the default)."""

    model: str | None = None
    """Replaces every role's model."""
    on_ask: str | None = None
    ask_wait: float | None = None
    max_turns: int | None = None
    """The lead's."""
    budget_tokens: int | None = None
    budget_usd: float | None = None
    unconfined: bool = False
    """Opts in to commands without bubblewrap."""


TEAM_FILE = "team.toml"
DEFAULT_TEAM = Path(__file__).resolve().parents[1] / "teams" / "default.toml"
"""The built-in team of ``teamrt run --prompt``, and what ``teamrt init`` writes."""


def team_file_of(project: Path) -> Path:
    """The team of ``teamrt run --prompt`` in ``project``: its ``.teamrt/team.toml``, else the built-in (what
    a killed run's agents left there is moved out first: ``sweep``)."""
    sweep(project, None, home.runs_path(project))
    own = project / home.DEFAULT_HOME / TEAM_FILE
    return own if own.is_file() else DEFAULT_TEAM


async def run_team_file(
    path: Path | Team,
    *,
    prompt: str | None,
    project: Path,
    choices: Choices = Choices(),
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """Run the team of ``path`` (or a team built in code) on ``prompt`` (default: the team's), the
    command line's ``choices`` over the team's."""
    sweep(project, on_notice, home.runs_path(project))
    scan = scan_definitions(project)
    tell_agents(scan, on_notice)
    team, task = team_from_file(path, prompt=prompt, project=project, choices=choices, scan=scan,
                                on_notice=on_notice)  # fmt: skip
    return await run_team(
        team, task, project=project, definitions=scan.definitions, on_text=on_text, on_notice=on_notice,
        run_id=run_id,
    )  # fmt: skip


def team_from_file(
    path: Path | Team,
    *,
    prompt: str | None,
    project: Path,
    choices: Choices = Choices(),
    scan: AgentScan | None = None,
    on_notice: Notice | None = None,
) -> tuple[Team, str]:
    """The team of ``path`` (or ``path`` itself, a team built in code) with ``choices`` and the defaults
    applied, and its task; raises on a user's mistake (a missing key included). The built-in team also
    gets a role for each of the user's and the project's agents (``scan``: the project's agents, scanned
    already)."""
    team = path if isinstance(path, Team) else load_team(path, project=project)
    if path == DEFAULT_TEAM:
        team = with_agent_roles(team, scan or scan_definitions(project), on_notice)
        team = with_test_command(team, project, on_notice)
    if choices.model is not None:  # over the team file's models; an agent file's still counts (choose_model)
        team = dataclasses.replace(
            team,
            model=resolve(choices.model),
            lead=dataclasses.replace(team.lead, model=None),
            roles={n: dataclasses.replace(r, model=None) for n, r in team.roles.items()},
        )
    team = _with_choices(team, choices)
    task = prompt or team.prompt
    if not task:
        raise NoPrompt(f"{team.path}: the team file has no prompt; give one with --prompt")
    return team, task


def single_team(
    agent: str, *, project: Path, choices: Choices = Choices(), scan: AgentScan | None = None
) -> tuple[Team, dict[str, AgentDefinition]]:
    """The team of ``teamrt run --agent``: the agent ``agent`` (its name, or its role name) as a lead with
    no roles; the command line's model, when it names one, over the agent file's."""
    definitions = (scan or scan_definitions(project)).definitions
    if agent not in definitions:
        agent = next((name for name in definitions if role_name(name) == agent), agent)
    if agent not in definitions:
        raise UnknownAgent(f"no agent named {agent!r}; known: {', '.join(sorted(definitions))}")
    model = resolve(choices.model) if choices.model else None
    lead = Role("lead", agent, model, None, None, None, None)
    team = Team(path=project, name=agent, lead=lead, model=resolve(choices.model or ""))
    return _with_choices(team, choices), definitions


def _with_choices(team: Team, choices: Choices) -> Team:
    """``team`` with the command line's choices, the default model where it names none, and the
    default budget on Claude where none is set."""
    settings = load_settings()
    team = dataclasses.replace(
        team,
        model=team.model or default_model(settings),
        on_ask=choices.on_ask or team.on_ask,
        ask_wait=team.ask_wait if choices.ask_wait is None else choices.ask_wait,
        budget_tokens=choices.budget_tokens or team.budget_tokens,
        budget_usd=choices.budget_usd or team.budget_usd,
        lead=dataclasses.replace(team.lead, max_turns=choices.max_turns or team.lead.max_turns),
    )
    if choices.unconfined:
        team = dataclasses.replace(team, sandbox=dataclasses.replace(team.sandbox, unconfined=True))
    if team.budget_usd is None and not on_sim(team):
        team = dataclasses.replace(team, budget_usd=settings.run.budget_usd)
    return team


def on_sim(team: Team) -> bool:
    """Whether every model of ``team`` is the simulator (nothing it does is billed)."""
    return all(is_sim(r.model or team.model) for r in (team.lead, *team.roles.values()))


def check_start(team: Team, project: Path, *, sim: bool = True) -> dict[str, Model]:
    """What must hold before a run of ``team`` exists: its integration branch is free and every model
    opens (a missing key fails here). Returns the models, open; without ``sim``, leaves out the
    simulator's, which always open (and would cost the SDK's import)."""
    check_branch(team, project)
    return open_models(team, load_settings(), with_sim=sim)


def check_branch(team: Team, project: Path) -> None:
    """Refuse a new run of ``team`` whose integration branch exists already (``BranchTaken``)."""
    repo = GitRepo.find(project)
    if repo and team.integration_branch and repo.tip(team.integration_branch):
        raise BranchTaken(
            f"{team.path}: the integration branch {team.integration_branch!r} exists already;"
            " delete it, or name another in [merge] integration_branch"
        )


def open_models(
    team: Team,
    settings: Settings,
    *,
    sim: SimServer | None = None,
    with_sim: bool = True,
    given: Mapping[str, Model] | None = None,
) -> dict[str, Model]:
    """Every model ``team`` names, open, by name: those ``given`` as they are, the others opened (``sim``:
    the simulator the ``sim`` models call; default: the process's own); ``with_sim`` False leaves the
    simulator's out."""
    names = {team.model, *(r.model for r in (team.lead, *team.roles.values()) if r.model)}
    models = dict(given or {})
    for name in sorted(names - models.keys()):
        if with_sim or not is_sim(name):
            models[name] = open_model(name, settings=settings, sim=sim)
    return models


async def run_single(
    prompt: str,
    *,
    agent: str,
    project: Path,
    choices: Choices = Choices(),
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """``teamrt run --agent``: the agent ``agent`` as the lead of a team with no roles.

    The command line's model decides, else the agent file's, else the default; on ``sim`` an agent
    file's model stays simulated (``choose_model``), so it never turns an offline run into a billed one.
    """
    sweep(project, on_notice, home.runs_path(project))
    scan = scan_definitions(project)
    tell_agents(scan, on_notice)
    team, definitions = single_team(agent, project=project, choices=choices, scan=scan)
    return await run_team(
        team, prompt, project=project, definitions=definitions, on_text=on_text, on_notice=on_notice,
        run_id=run_id,
    )  # fmt: skip


async def run_team(
    team: Team,
    task: str,
    *,
    project: Path,
    definitions: dict[str, AgentDefinition],
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
    run_dir: Path | None = None,
    settings: Settings | None = None,
    sim: SimServer | None = None,
    models: Mapping[str, Model] | None = None,
) -> RunSummary:
    """Run ``team`` on ``task`` to the end, as run ``run_id`` (default: a fresh id) kept in ``run_dir``
    (default: ``<home>/runs/<run_id>``, made; given, it must exist), with ``settings`` (default: the
    user's), its ``sim`` models on ``sim`` (default: the process's own simulator) and the ``models``
    given open (a test's scripted model) in place of opening them."""
    settings = load_settings() if settings is None else settings
    check_branch(team, project)
    opened = open_models(team, settings, sim=sim, given=models)
    run_id = home.new_run_id() if run_id is None else run_id
    runs = home.runs_path(project) if run_dir is None else run_dir.parent
    prepared = prepare_run(team, project, on_notice, runs, definitions=definitions)
    notice = sandbox_notice(team.sandbox)
    if notice is not None and on_notice is not None:
        on_notice(notice)
    repo = GitRepo.find(project)
    base = repo.head() if repo else None
    run_dir = home.run_dir(run_id, project) if run_dir is None else run_dir
    integration = team.integration_branch or f"teamrt/{run_id}"
    settings_kept: dict[str, object] = {"team": team_to_json(team)}
    if base:
        settings_kept |= {"integration_branch": integration, "gates": list(team.gates)}
    store = create_store(
        run_dir, run_id, task=task, workdir=str(project), base_head=base, settings=settings_kept,
        budget_tokens=team.budget_tokens, budget_usd=team.budget_usd,
    )  # fmt: skip
    try:
        if on_notice is not None:
            if repo is not None and base is not None and team.roles:
                _tell_if_dirty(repo, base, on_notice)
            elif team.roles:
                on_notice(
                    f"teamrt: note: {project} is not in a git repository with a commit: the lead cannot start"
                    " worktree agents (git init and commit first to let coders work on branches)"
                )
            on_notice(started_line(run_id, team, project))
        supervisor = prepared.supervisor(
            store, run_dir, settings=settings, models=opened, repo=repo, base=base, integration=integration,
            on_text=on_text, sim=sim,
        )  # fmt: skip
        outcome = await supervisor.run(task)
        return summary_of(run_id, outcome, store, team, run_dir)
    finally:
        store.close()


@dataclass(frozen=True)
class Prepared:
    """What a run reads of its project once, before its supervisor starts: a new run and a resumed one
    alike (``prepare_run``)."""

    team: Team
    project: Path
    definitions: dict[str, AgentDefinition]
    claude: ClaudeSettings
    memory: Memory
    hooks: RunHooks
    mcp: McpConfig
    skills: SkillSet | None = None
    """The run's skills (``teamrt.claudecode.skills``); None: the supervisor reads them."""

    def supervisor(
        self,
        store: Store,
        run_dir: Path,
        *,
        settings: Settings,
        models: dict[str, Model],
        repo: GitRepo | None,
        base: str | None,
        integration: str | None,
        on_text: OnText | None,
        sim: SimServer | None = None,
    ) -> Supervisor:
        """The supervisor of the run kept in ``store``; its worktree agents branch from ``base`` and land
        on ``integration`` when the project is in ``repo`` (None, or no ``base``: no worktree agents)."""
        team, project = self.team, self.project
        worktrees = None
        if repo is not None and base and integration:
            worktrees = Worktrees(
                repo=repo, store=store, run_dir=run_dir, run_id=store.run_id, base=base, project=project,
                integration=integration, gates=team.gates, gate_timeout=team.gate_timeout,
                policy=team.sandbox, team_file=team.path,
            )  # fmt: skip
        return Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=self.definitions, project=project,
            settings=settings, sim=sim, models=models, on_text=on_text, worktrees=worktrees,
            claude=self.claude, memory=self.memory, hooks=self.hooks, mcp=self.mcp, skills=self.skills,
        )  # fmt: skip


def prepare_run(
    team: Team,
    project: Path,
    on_notice: Notice | None,
    runs: Path,
    *,
    definitions: dict[str, AgentDefinition] | None = None,
) -> Prepared:
    """Read what a run of ``team`` in ``project`` needs, its warnings said: what a killed run (kept in
    ``runs``) left swept out first, then the agents (``definitions``, else scanned now), Claude Code's
    settings and memory, hooks and MCP servers."""
    sweep(project, on_notice, runs)
    if definitions is None:
        scan = scan_definitions(project)
        tell_agents(scan, on_notice)
        definitions = scan.definitions
    claude, memory = read_claude_code(project, on_notice)
    hooks = load_hooks(project, on_notice)
    mcp = read_mcp(project, team, definitions, on_notice)
    skills = read_skills(project, definitions, on_notice)
    return Prepared(team, project, definitions, claude, memory, hooks, mcp, skills)


class NotResumable(UserError, ValueError):
    """A run that exists but cannot be taken over: it ended, or no team was kept with it."""


def check_reachable(run_dir: Path, run: RunRecord) -> None:
    """Refuse to resume a run (of a server database) whose directory or project is not on this host:
    its mailbox, spill files and worktrees are where its owner was."""
    if not run_dir.is_dir():
        where = f" (last owned by pid {run.owner.pid} on {run.owner.host})" if run.owner else ""
        raise NotResumable(
            f"run {run.id}'s directory {run_dir} is not reachable on {host_identity()}{where}; resume it"
            " there, or on a host that shares the directory"
        )
    if not Path(run.workdir).is_dir():
        raise NotResumable(f"run {run.id} works in {run.workdir}, which is not on {host_identity()}")


async def resume_run(
    run_id: str,
    *,
    project: Path | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    accept_loss: bool = False,
) -> RunSummary:
    """Take over the crashed run ``run_id`` (kept in the home of ``project``, default: of the current
    directory) and go on to its end; a live run is refused (``RunOwned``), and so is a store behind
    what its run directory shows (``StoreBehind``, see ``verify``) unless ``accept_loss``: then the loss
    is recorded and the run goes on from what the store has."""
    run_dir = home.existing_run_dir(run_id, project)
    reader = open_reader(run_dir, run_id)
    try:
        run = reader.run()
        findings = verify(run_dir, run_id, reader) if run.status == "running" else []
    finally:
        reader.close()
    if run.status != "running":
        raise NotResumable(
            f"run {run_id} is {run.status}; only a crashed run can be resumed (teamrt continue {run_id}"
            " --prompt ... gives an ended run a follow-up)"
        )
    if "team" not in run.settings:
        raise NotResumable(f"run {run_id} was started by an older teamrt that kept no team with it")
    check_reachable(run_dir, run)
    if findings and not accept_loss:
        raise StoreBehind(run_id, findings)  # before anything changes: the evidence stays as it is
    team = team_from_json(run.settings["team"])
    workdir = Path(run.workdir)
    # the crashed run's own leftovers too: it takes a new baseline
    prepared = prepare_run(team, workdir, on_notice, run_dir.parent)
    store = open_store(run_dir, run_id)
    try:
        if findings:  # accepted: said by a store.behind event, and the unrecorded mail is read again
            await record_loss(store, run_dir, findings)
        settings = load_settings()
        models = open_models(team, settings)
        repo = GitRepo.find(workdir)
        integration = run.settings["integration_branch"] if repo is not None and run.base_head else None
        supervisor = prepared.supervisor(
            store, run_dir, settings=settings, models=models, repo=repo, base=round_base(run),
            integration=integration, on_text=on_text,
        )  # fmt: skip
        outcome = await supervisor.resume()
        return summary_of(run_id, outcome, store, team, run_dir)
    finally:
        store.close()


def sweep(project: Path, on_notice: Notice | None, runs: Path) -> None:
    """Move out what the agents of a run (kept in ``runs``) killed before its last scan left among
    ``project``'s protected paths, before anything there is read as configuration
    (``home.sweep_leftovers``); said a line each."""
    for line in home.sweep_leftovers(project, runs):
        if on_notice is not None:
            on_notice(line)


def read_claude_code(project: Path, on_notice: Notice | None) -> tuple[ClaudeSettings, Memory]:
    """The project's Claude Code settings and memory, read once for the run, their warnings said (no
    settings file stops a run: what cannot be used is a warning)."""
    claude, memory = load_claude_settings(project), load_memory(project)
    if on_notice is not None:  # the plugins' lines are said here, once (their parts load in several places)
        for line in (*claude.warnings, *memory.warnings, *load_plugins(project).warnings):
            on_notice(f"teamrt: warning: {line}")
    return claude, memory


def read_skills(project: Path, definitions: dict[str, AgentDefinition], on_notice: Notice | None) -> SkillSet:
    """The run's skills, read once (their bodies when used); what is left out said, and each skill an
    agent file names in ``skills`` that the run does not have."""
    skills = load_skills(project, load_plugins(project).skill_roots)
    if on_notice is not None:
        for line in skills.warnings:
            on_notice(f"teamrt: warning: {line}")
        for definition in definitions.values():
            for name in definition.skills:
                if name not in skills.skills:
                    on_notice(shown(
                        f"teamrt: warning: {definition.source}: skill {name!r} is not loaded (no such skill,"
                        " or not trusted); the agent starts without it"
                    ))  # fmt: skip
    return skills


def read_mcp(
    project: Path, team: Team, definitions: dict[str, AgentDefinition], on_notice: Notice | None
) -> McpConfig:
    """The run's MCP servers, read once; what is left out or does not start said."""
    config = mcp_config(project, team, definitions)
    if on_notice is not None:
        for line in mcp_notices(config):
            on_notice(line)
    return config


SHOWN_ROLES = 8
"""Roles a run's start line names (the built-in team has one per agent file, maybe many)."""


def started_line(run_id: str, team: Team, project: Path) -> str:
    """What a run says as it starts: its id, team, model, workplace and budget."""
    names = ["lead", *team.roles]
    more = f" and {len(names) - SHOWN_ROLES} more" if len(names) > SHOWN_ROLES else ""
    roles = ", ".join(names[:SHOWN_ROLES]) + more
    models = sorted({r.model or team.model for r in (team.lead, *team.roles.values())})
    who = f"team {team.name} ({roles})"
    if not team.roles and team.name == team.lead.agent:  # teamrt run --agent: one agent file, no team
        who = f"agent {team.name} alone"
    said = f"run {run_id} started: {who} on {', '.join(models)} in {project}"
    if on_sim(team):
        return f"{said}; offline, its costs are simulated"
    if team.budget_usd is None:
        return said
    return f"{said}; budget ${team.budget_usd:.2f} (--budget-usd to change it)"


def sandbox_notice(policy: SandboxPolicy) -> str | None:
    """What a run's start says when its agents' commands will not be confined (None when they will)."""
    confined = default_sandbox().confined
    if confined:
        return None
    said = describe(confined=confined, unconfined=policy.unconfined, network=policy.network)
    if policy.unconfined:
        return f"teamrt: WARNING: sandbox {said}"
    return f"teamrt: note: sandbox {said}; to run them, {OPT_IN}"


def _tell_if_dirty(repo: GitRepo, base: str, on_notice: Notice) -> None:
    # not into submodules: git would run there with the submodule's own configuration, filters included
    changed = repo.run(
        "status", "--porcelain=v1", "--untracked-files=normal", "--ignore-submodules=dirty"
    ).splitlines()
    if changed:
        on_notice(
            f"teamrt: note: your working tree has {len(changed)} uncommitted change(s); worktree agents"
            f" start from HEAD ({base[:12]}) and will not see them"
        )


def _merged(run: RunRecord, store: Store) -> int:
    """How many merges the integration branch holds, as git shows it: a merge the store records but the
    branch lost (deleted, moved back) is not counted."""
    branch = run.settings.get("integration_branch")
    return len(on_branch(repo_of(run.workdir), branch, store.reader.merges()))


def summary_of(run_id: str, outcome: Outcome, store: Store, team: Team, run_dir: Path) -> RunSummary:
    run = store.reader.run()
    usage = run.usage
    return RunSummary(
        run_id,
        outcome,
        usage.input_tokens + usage.cache_creation_tokens,
        usage.cache_read_tokens,
        usage.output_tokens,
        usage.cost_usd,
        len(store.reader.agents()),
        simulated=on_sim(team),
        budget_usd=run.budget_usd,
        integration=run.settings.get("integration_branch"),
        merged=_merged(run, store),
        run_dir=run_dir,
    )
