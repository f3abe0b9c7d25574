"""The hidden ``--queued`` mode of ``teamrt run RUN`` and ``teamrt resume RUN``: a queued run's child.

A worker starts it in the run's directory's ``project`` (the clone), its output
appended to the run's ``output.log``. The first start reads what was submitted from
the run's ``queue_runs`` row (the team file's text, the prompt, the model, the
budget) and creates the run under its reserved id; a later one resumes it. No one
sits at its terminal, so a permission ask is answered by the policy at once: denied.
Either way the child guards itself (``fence``) from its first moment.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sqlalchemy import select

from teamrt import home
from teamrt.errors import UserError
from teamrt.queue.connect import queue_engine, queue_url
from teamrt.queue.fence import start_fence
from teamrt.runtime.teamrun import (
    DEFAULT_TEAM,
    Choices,
    check_branch,
    resume_run,
    run_team_file,
    team_from_file,
)
from teamrt.store import queue_tables as q
from teamrt.store.errors import RunOwned
from teamrt.terminal import clean

PROJECT_DIR = "project"
TEAM_COPY = "team.toml"
"""The submitted team file's text, written into the run's directory for the run to load."""
BUILT_IN_TEAMS = DEFAULT_TEAM.parent
OWNED_EXIT = 3
"""The exit status of a child whose run another live owner holds (its worker follows that owner)."""
REFUSED_EXIT = 65
"""The exit status of a first start refused before the run began (a team file that does not load, an
integration branch that exists): trying again cannot help, so the worker ends the run failed, saying
the child's last line."""


class NotSubmitted(UserError):
    pass


def notice(line: str) -> None:
    """A line of the run's progress on stderr (its ``output.log``): it quotes agents, made safe."""
    print(clean(line), file=sys.stderr, flush=True)


def run_queued(run_id: str) -> int:
    """First start of the queued run ``run_id``: to its end (any end is exit 0; the worker reads it)."""
    url = queue_url()
    start_fence(url, run_id)
    engine = queue_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(select(q.queue_runs).where(q.queue_runs.c.run_id == run_id)).first()
    finally:
        engine.dispose()
    if row is None:
        raise NotSubmitted(f"run {run_id} was not submitted")
    run_dir = home.run_dir(run_id)
    project = run_dir / PROJECT_DIR
    project.mkdir(mode=0o700, exist_ok=True)
    team = _team_file(run_dir, row.team_file, row.team_name)
    choices = Choices(model=row.model, on_ask="deny", ask_wait=0.0, budget_usd=row.budget_usd)
    try:
        checked, _ = team_from_file(team, prompt=row.prompt, project=project, choices=choices)
        check_branch(checked, project)
    except UserError as e:
        notice(f"teamrt: {e}")
        return REFUSED_EXIT
    work = run_team_file(
        team, prompt=row.prompt, project=project, choices=choices, on_notice=notice, run_id=run_id
    )
    summary = asyncio.run(work)
    notice(f"run {run_id} ended: {summary.outcome.status}")
    return 0


def resume_queued(run_id: str) -> int:
    """A later attempt: take the crashed run over (accepting what its store lacks: no one is here to
    decide, and the loss is recorded as an event) and go on to its end."""
    url = queue_url()
    start_fence(url, run_id)
    try:
        summary = asyncio.run(resume_run(run_id, project=None, on_notice=notice, accept_loss=True))
    except RunOwned as e:
        notice(f"teamrt: {e}")
        return OWNED_EXIT
    notice(f"run {run_id} ended: {summary.outcome.status}")
    return 0


def _team_file(run_dir: Path, text: str | None, name: str | None) -> Path:
    """The team file to load: the submitted text written beside the run, else the built-in team named."""
    if text is not None:
        path = run_dir / TEAM_COPY
        path.write_text(text, encoding="utf-8")
        return path
    if name and (BUILT_IN_TEAMS / f"{name}.toml").is_file() and "/" not in name:
        return BUILT_IN_TEAMS / f"{name}.toml"
    return DEFAULT_TEAM
