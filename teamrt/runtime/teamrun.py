"""``teamrt run``: a team (or one agent, as a team of one) in a run of its own, to the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import home
from ..agents import AgentDefinition, load_definitions
from ..models import Model, default_model, open_model
from ..models.catalog import resolve
from ..models.registry import is_sim
from ..models.types import OnText
from ..settings import load_settings
from ..store import Store, create_store, open_reader, open_store
from ..tools.policy import SandboxPolicy
from ..tools.sandbox import OPT_IN, default_sandbox, describe
from ..worktree import GitRepo, Worktrees
from .agent import Outcome
from .supervisor import Supervisor
from .teamfile import RoleSpec, TeamFile, load_team_file, team_from_json, team_to_json


class NoPrompt(ValueError):
    pass


class UnknownAgent(ValueError):
    pass


class BranchTaken(ValueError):
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
    """The team of ``teamrt run --prompt`` in ``project``: its ``.teamrt/team.toml``, else the built-in."""
    own = project / home.DEFAULT_HOME / TEAM_FILE
    return own if own.is_file() else DEFAULT_TEAM


async def run_team_file(
    path: Path,
    *,
    prompt: str | None,
    project: Path,
    choices: Choices = Choices(),
    on_notice: Notice | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """Run the team of ``path`` on ``prompt`` (default: the file's), the command line's ``choices`` over
    the file's."""
    team, task = team_from_file(path, prompt=prompt, project=project, choices=choices)
    return await run_team(
        team, task, project=project, definitions=load_definitions(project), on_notice=on_notice, run_id=run_id
    )


def team_from_file(
    path: Path, *, prompt: str | None, project: Path, choices: Choices = Choices()
) -> tuple[TeamFile, str]:
    """The team of ``path`` with ``choices`` and the defaults applied, and its task; raises on a user's
    mistake (a missing key included)."""
    team = load_team_file(path, project=project)
    if choices.model is not None:
        team = dataclasses.replace(
            team,
            model=resolve(choices.model),
            lead=dataclasses.replace(team.lead, model=None),
            roles={n: dataclasses.replace(r, model=None) for n, r in team.roles.items()},
        )
    team = _with_choices(team, choices)
    task = prompt or team.prompt
    if not task:
        raise NoPrompt(f"{path}: the team file has no prompt; give one with --prompt")
    return team, task


def single_team(
    agent: str, *, project: Path, choices: Choices = Choices()
) -> tuple[TeamFile, dict[str, AgentDefinition]]:
    """The team of ``teamrt run --agent``: the agent ``agent`` as a lead with no roles."""
    definitions = load_definitions(project)
    if agent not in definitions:
        raise UnknownAgent(f"no agent named {agent!r}; known: {', '.join(sorted(definitions))}")
    lead = RoleSpec("lead", agent, None, None, None, None, None)
    team = TeamFile(path=project, name=agent, lead=lead, model=resolve(choices.model or ""))
    return _with_choices(team, choices), definitions


def _with_choices(team: TeamFile, choices: Choices) -> TeamFile:
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


def on_sim(team: TeamFile) -> bool:
    """Whether every model of ``team`` is the simulator (nothing it does is billed)."""
    return all(is_sim(r.model or team.model) for r in (team.lead, *team.roles.values()))


def check_start(team: TeamFile, project: Path, *, sim: bool = True) -> dict[str, Model]:
    """What must hold before a run of ``team`` exists: its integration branch is free and every model
    opens (a missing key fails here). Returns the models, open; without ``sim``, leaves out the
    simulator's, which always open (and would cost the SDK's import)."""
    repo = GitRepo.find(project)
    if repo and team.integration_branch and repo.tip(team.integration_branch):
        raise BranchTaken(
            f"{team.path}: the integration branch {team.integration_branch!r} exists already;"
            " delete it, or name another in [merge] integration_branch"
        )
    names = {team.model, *(r.model for r in (team.lead, *team.roles.values()) if r.model)}
    settings = load_settings()
    return {name: open_model(name, settings=settings) for name in sorted(names) if sim or not is_sim(name)}


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

    The command line's model (or the default) decides: an agent file's model never turns an offline
    run into a billed one.
    """
    team, definitions = single_team(agent, project=project, choices=choices)
    return await run_team(
        team, prompt, project=project, definitions=definitions, on_text=on_text, on_notice=on_notice,
        run_id=run_id,
    )  # fmt: skip


async def run_team(
    team: TeamFile,
    task: str,
    *,
    project: Path,
    definitions: dict[str, AgentDefinition],
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """Run ``team`` on ``task`` to the end, as run ``run_id`` (default: a fresh id)."""
    settings = load_settings()
    models = check_start(team, project)
    notice = sandbox_notice(team.sandbox)
    if notice is not None and on_notice is not None:
        on_notice(notice)
    repo = GitRepo.find(project)
    base = repo.head() if repo else None
    run_id = home.new_run_id() if run_id is None else run_id
    run_dir = home.run_dir(run_id)
    integration = team.integration_branch or f"teamrt/{run_id}"
    settings_kept: dict[str, object] = {"team": team_to_json(team)}
    if base:
        settings_kept |= {"integration_branch": integration, "gates": list(team.gates)}
    store = create_store(
        run_dir, run_id, task=task, workdir=str(project), base_head=base, settings=settings_kept,
        budget_tokens=team.budget_tokens, budget_usd=team.budget_usd,
    )  # fmt: skip
    try:
        worktrees = None
        if repo is not None and base is not None:
            worktrees = Worktrees(
                repo=repo, store=store, run_dir=run_dir, run_id=run_id, base=base, project=project,
                integration=integration, gates=team.gates, gate_timeout=team.gate_timeout,
                policy=team.sandbox,
            )  # fmt: skip
            if team.roles and on_notice is not None:
                _tell_if_dirty(repo, base, on_notice)
        elif team.roles and on_notice is not None:
            on_notice(
                f"teamrt: note: {project} is not in a git repository with a commit: the lead cannot start"
                " worktree agents (git init and commit first to let coders work on branches)"
            )
        if on_notice is not None:
            on_notice(started_line(run_id, team, project))
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=definitions, project=project,
            settings=settings, models=models, on_text=on_text, worktrees=worktrees,
        )  # fmt: skip
        outcome = await supervisor.run(task)
        return _summary(run_id, outcome, store, team)
    finally:
        store.close()


class NotResumable(ValueError):
    """A run that exists but cannot be taken over: it ended, or no team was kept with it."""


async def resume_run(run_id: str, *, on_text: OnText | None = None) -> RunSummary:
    """Take over the crashed run ``run_id`` and go on to its end; a live run is refused (``RunOwned``)."""
    run_dir = home.existing_run_dir(run_id)
    reader = open_reader(run_dir, run_id)
    try:
        run = reader.run()
    finally:
        reader.close()
    if run.status != "running":
        raise NotResumable(f"run {run_id} is {run.status}; only a crashed run can be resumed")
    if "team" not in run.settings:
        raise NotResumable(f"run {run_id} was started by an older teamrt that kept no team with it")
    team = team_from_json(run.settings["team"])
    project = Path(run.workdir)
    store = open_store(run_dir, run_id)
    try:
        settings = load_settings()
        names = {team.model, *(r.model for r in (team.lead, *team.roles.values()) if r.model)}
        models = {name: open_model(name, settings=settings) for name in sorted(names)}
        worktrees = None
        repo = GitRepo.find(project)
        if repo is not None and run.base_head:
            worktrees = Worktrees(
                repo=repo, store=store, run_dir=run_dir, run_id=run_id, base=run.base_head,
                project=project, integration=run.settings["integration_branch"], gates=team.gates,
                gate_timeout=team.gate_timeout, policy=team.sandbox,
            )  # fmt: skip
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project), project=project,
            settings=settings, models=models, on_text=on_text, worktrees=worktrees,
        )  # fmt: skip
        outcome = await supervisor.resume()
        return _summary(run_id, outcome, store, team)
    finally:
        store.close()


def started_line(run_id: str, team: TeamFile, project: Path) -> str:
    """What a run says as it starts: its id, team, model, workplace and budget."""
    roles = ", ".join(["lead", *team.roles])
    models = sorted({r.model or team.model for r in (team.lead, *team.roles.values())})
    said = f"run {run_id} started: team {team.name} ({roles}) on {', '.join(models)} in {project}"
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


def _summary(run_id: str, outcome: Outcome, store: Store, team: TeamFile) -> RunSummary:
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
        merged=sum(m.status == "merged" for m in store.reader.merges()),
    )
