"""``teamrt run TEAMFILE``: a team in a run of its own, led to the end by its supervisor."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import home
from ..agents import load_definitions
from ..settings import load_settings
from ..store import create_store
from .agent import Outcome
from .single import RunSummary, summarise
from .supervisor import Supervisor
from .teamfile import load_team_file


class NoPrompt(ValueError):
    pass


async def run_team_file(path: Path, *, prompt: str | None, model: str | None, project: Path) -> RunSummary:
    """Run the team of ``path`` on ``prompt`` (default: the file's); ``model`` replaces every role's model."""
    team = load_team_file(path, project=project)
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
    definitions = load_definitions(project)
    settings = load_settings()
    run_id = home.new_run_id()
    run_dir = home.run_dir(run_id)
    store = create_store(
        run_dir, run_id, task=task, workdir=str(project),
        budget_tokens=team.budget_tokens, budget_usd=team.budget_usd,
    )  # fmt: skip
    try:
        supervisor = Supervisor(
            store=store,
            run_dir=run_dir,
            team=team,
            definitions=definitions,
            project=project,
            settings=settings,
        )
        outcome: Outcome = await supervisor.run(task)
        return summarise(run_id, outcome, store)
    finally:
        store.close()
