"""``teamrt run``: a team (or one agent, as a team of one) in a run of its own, to the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import home
from ..agents import AgentDefinition, load_definitions
from ..models import Model, open_model
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


async def run_team_file(
    path: Path,
    *,
    prompt: str | None,
    model: str | None,
    project: Path,
    on_notice: Notice | None = None,
    run_id: str | None = None,
    ask_wait: float | None = None,
    unconfined: bool = False,
) -> RunSummary:
    """Run the team of ``path`` on ``prompt`` (default: the file's); ``model`` replaces every role's model,
    ``ask_wait`` the file's ``ask_wait``; ``unconfined`` opts in to commands without bubblewrap."""
    team, task = team_from_file(
        path, prompt=prompt, model=model, project=project, ask_wait=ask_wait, unconfined=unconfined
    )
    return await run_team(
        team, task, project=project, definitions=load_definitions(project), on_notice=on_notice, run_id=run_id
    )


def team_from_file(
    path: Path, *, prompt: str | None, model: str | None, project: Path, ask_wait: float | None = None,
    unconfined: bool = False,
) -> tuple[TeamFile, str]:  # fmt: skip
    """The team of ``path`` (``model`` replacing every role's, ``ask_wait`` the file's, ``unconfined``
    opting in to commands without bubblewrap) and its task; raises on a user's mistake."""
    team = load_team_file(path, project=project)
    if unconfined:
        team = dataclasses.replace(team, sandbox=dataclasses.replace(team.sandbox, unconfined=True))
    if ask_wait is not None:
        team = dataclasses.replace(team, ask_wait=ask_wait)
    if model is not None:
        team = dataclasses.replace(
            team,
            model=model,
            lead=dataclasses.replace(team.lead, model=None),
            roles={n: dataclasses.replace(r, model=None) for n, r in team.roles.items()},
        )
    task = prompt or team.prompt
    if not task:
        raise NoPrompt(f"{path}: the team file has no prompt; give one with --prompt")
    return team, task


def single_team(
    agent: str, *, model: str, project: Path, on_ask: str = "deny", ask_wait: float = 0.0,
    max_turns: int | None = None, budget_tokens: int | None = None, budget_usd: float | None = None,
    unconfined: bool = False,
) -> tuple[TeamFile, dict[str, AgentDefinition]]:  # fmt: skip
    """The team of ``teamrt run --prompt``: the agent ``agent`` as a lead with no roles."""
    definitions = load_definitions(project)
    if agent not in definitions:
        raise UnknownAgent(f"no agent named {agent!r}; known: {', '.join(sorted(definitions))}")
    lead = RoleSpec("lead", agent, None, None, None, max_turns, None)
    team = TeamFile(
        path=project, name=agent, lead=lead, model=model, on_ask=on_ask, ask_wait=ask_wait,
        budget_tokens=budget_tokens, budget_usd=budget_usd, sandbox=SandboxPolicy(unconfined=unconfined),
    )  # fmt: skip
    return team, definitions


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
    model: str,
    project: Path,
    on_ask: str = "deny",
    ask_wait: float = 0.0,
    max_turns: int | None = None,
    budget_tokens: int | None = None,
    budget_usd: float | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
    unconfined: bool = False,
) -> RunSummary:
    """``teamrt run --prompt``: the agent ``agent`` as the lead of a team with no roles.

    ``model`` decides: an agent file's model never turns the offline default into Claude.
    """
    team, definitions = single_team(
        agent, model=model, project=project, on_ask=on_ask, ask_wait=ask_wait, max_turns=max_turns,
        budget_tokens=budget_tokens, budget_usd=budget_usd, unconfined=unconfined,
    )  # fmt: skip
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
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=definitions, project=project,
            settings=settings, models=models, on_text=on_text, worktrees=worktrees,
        )  # fmt: skip
        outcome = await supervisor.run(task)
        return _summary(run_id, outcome, store)
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
        return _summary(run_id, outcome, store)
    finally:
        store.close()


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


def _summary(run_id: str, outcome: Outcome, store: Store) -> RunSummary:
    usage = store.reader.run().usage
    return RunSummary(
        run_id,
        outcome,
        usage.input_tokens + usage.cache_creation_tokens,
        usage.cache_read_tokens,
        usage.output_tokens,
        usage.cost_usd,
        len(store.reader.agents()),
    )
