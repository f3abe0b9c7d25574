"""``run_on_sim``: a team run to its end through the real runtime, its models on a simulator a test holds.

    with SimServer({"lead": lambda request: Reply().say("done")}) as sim:
        result = run_on_sim(project / "team.toml", "go", project=project, sim=sim)
    assert result.status == "done"

Nothing is faked but the model: the run is prepared as ``teamrt run`` prepares it (Claude Code settings,
hooks, MCP servers), its supervisor, store, mailbox and sandbox are the real ones, and a project in a git
repository with a commit gets worktree agents and an integration branch, as a run of the CLI does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from teamrt.agents import scan_definitions
from teamrt.api import RunResult, result_of
from teamrt.models.types import Model, OnText
from teamrt.runtime.fromproject import tell_agents
from teamrt.runtime.teamrun import Notice, run_team
from teamrt.settings import Settings
from teamrt.team import Team, load_team

if TYPE_CHECKING:
    from teamrt.sim import SimServer


def run_on_sim(
    team: Team | Path | str,
    prompt: str,
    *,
    project: Path,
    sim: SimServer | None = None,
    run_dir: Path | None = None,
    run_id: str | None = None,
    settings: Settings | None = None,
    timeout: float | None = None,
    models: Mapping[str, Model] | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
) -> RunResult:
    """Run ``team`` on ``prompt`` in ``project`` to its end, every ``sim`` model on ``sim``.

    Unlike ``teamrt.run``, the team is taken as it is: no model, budget or built-in role is put in, except
    that a team file naming no model runs on ``sim``.

    Args:
        team: A ``Team``, or the path of a team file (its agents looked up in ``project``).
        prompt: The lead's task.
        project: The directory the agents work in.
        sim: The simulator the team's ``sim`` models call, with the policies that play its roles
            (default: the process's own, which plays the example teams).
        run_dir: Where the run is kept, made if missing (default: ``<home>/runs/<run_id>``).
        run_id: The run's name (default: ``run_dir``'s name, else a fresh one).
        settings: The user's settings to run with (default: the settings file's); tests pass short
            retries and stalls.
        timeout: Seconds after which the run is cancelled, as a hang (default: none).
        models: Models by name to use instead of opening them: a ``ScriptedModel`` as ``"sim"`` scripts
            the run in the process, without a simulator.
        on_text: Called with the lead's text as it streams.
        on_notice: Called with each line the run says as it starts.

    Returns:
        The ``RunResult``; ``run_dir`` and ``run_id`` open its store for a closer look
        (``teamrt.store.open_reader``).

    Raises:
        UserError: A team file or agent file that cannot be used, an integration branch that exists.
        TimeoutError: The run outlived ``timeout``.
    """
    project = Path(project)
    team = team if isinstance(team, Team) else load_team(Path(team), project=project)
    if not team.model:
        team = dataclasses.replace(team, model="sim")
    if run_dir is not None:
        run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        run_id = run_dir.name if run_id is None else run_id
    scan = scan_definitions(project)
    tell_agents(scan, on_notice)
    work = run_team(
        team,
        prompt,
        project=project,
        definitions=scan.definitions,
        on_text=on_text,
        on_notice=on_notice,
        run_id=run_id,
        run_dir=run_dir,
        settings=settings,
        sim=sim,
        models=models,
    )
    return result_of(asyncio.run(asyncio.wait_for(work, timeout)))
