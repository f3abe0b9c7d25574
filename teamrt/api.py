"""teamrt from Python: ``run()`` a team to its end, ``resume()`` one that crashed, ``continue_run()`` one
that ended with a follow-up, read the ``RunResult``.

    import teamrt

    result = teamrt.run("Make the failing tests pass", team="team.toml", model="sim")
    print(result.status, result.answer, result.integration_branch, result.cost_usd)

These are the ``teamrt run`` and ``teamrt resume`` commands without the terminal: the same preparation
(``teamrt.runtime.teamrun``), the same store, the same run directory, so ``teamrt ls``, ``show``, ``logs``
and the TUI see a run started here. Errors a caller can fix are ``UserError``s (one line each, as the CLI
prints them); every error teamrt raises on purpose is a ``TeamrtError``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from teamrt import home
from teamrt.errors import UserError
from teamrt.events import AgentKind, AgentStatus, MergeStatus
from teamrt.models.types import OnText
from teamrt.runtime import continuing
from teamrt.runtime.teamrun import (
    Choices,
    NoPrompt,
    Notice,
    RunSummary,
    resume_run,
    run_single,
    run_team_file,
    team_file_of,
)
from teamrt.store import open_reader
from teamrt.team import Team
from teamrt.terminal import clean
from teamrt.worktree.facts import on_branch, repo_of


class InvalidRun(UserError, ValueError):
    """A call of ``run()`` or ``resume()`` that cannot start as given (a team and an agent both, a project
    that is no directory)."""


@dataclass(frozen=True)
class AgentResult:
    """One agent of a finished run, as its store keeps it."""

    name: str
    kind: AgentKind
    """``lead``, ``fork``, ``worktree``, ``team`` (a teammate) or ``task``."""
    role: str | None
    model: str
    status: AgentStatus
    """``done``, ``failed`` or ``stopped`` (``running`` or ``idle`` only in a run that did not end)."""
    reason: str | None
    """Why it failed or stopped."""
    cost_usd: float
    """What its model calls cost (simulated on ``sim``)."""
    tokens: int
    """Every token of its model calls: input, output and cache."""


@dataclass(frozen=True)
class BranchResult:
    """A worktree agent's branch and what became of it."""

    agent: str
    branch: str
    merge: MergeStatus | None
    """The merge queue's last word on it: ``queued``, ``merging``, ``merged``, ``conflict`` or ``red``
    (its gates failed); None: never offered to the queue."""
    landed: bool
    """Whether its work is on the run's integration branch now."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended: the lead's answer, what it cost, its agents and its branches."""

    run_id: str
    status: str
    """``done``, ``failed``, ``stopped`` (a budget spent, a stop sent) or ``blocked`` (calls were refused
    and nothing else was done: ``reason`` names the first refusal)."""
    answer: str
    """The lead's last answer."""
    reason: str | None
    """Why the run failed or stopped (None when it is done)."""
    turns: int
    """The lead's turns."""
    cost_usd: float
    """What the run's model calls cost; on ``sim`` priced as Claude's, never billed (``simulated``)."""
    simulated: bool
    """Every model of the run was the simulator."""
    budget_usd: float | None
    input_tokens: int
    """Input tokens sent and written to the cache."""
    cache_read_tokens: int
    output_tokens: int
    agents: tuple[AgentResult, ...]
    """Every agent of the run, the lead first."""
    integration_branch: str | None
    """The branch the worktree agents' work is merged onto (``teamrt apply`` brings it onto yours); None
    when the project is not in a git repository with a commit."""
    branches: tuple[BranchResult, ...]
    """The worktree agents' branches."""
    run_dir: Path
    """Where the run is kept: its store, mailbox, logs and worktrees."""

    def shown(self) -> str:
        """The answer fit for a terminal, as ``teamrt run`` prints it: the model's words with their control
        sequences made inert (``answer`` is the text as the lead wrote it)."""
        return clean(self.answer)


def run(
    prompt: str,
    *,
    team: Team | Path | str | None = None,
    agent: str | None = None,
    project: Path | str | None = None,
    model: str | None = None,
    budget_usd: float | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Run a team on ``prompt`` in ``project`` to its end, as ``teamrt run`` does.

    The run is kept in teamrt's home (``$TEAMRT_HOME``, else ``.teamrt`` at the top of the project's git
    repository), where ``teamrt ls``, ``show``, ``logs``, ``apply`` and the TUI find it. From async code,
    await ``run_async`` instead.

    Args:
        prompt: The task. With a team file, an empty prompt takes the file's own ``prompt``.
        team: A ``Team`` built in code, the path of a team file, or None: the project's
            ``.teamrt/team.toml`` if there is one, else the built-in team.
        agent: Instead of a team, run this agent (by name or role name) alone.
        project: The directory the agents work in (default: the top of the git repository holding the
            current directory, else the current directory).
        model: Every role's model, over the team's (``sim``: offline, on the simulator).
        budget_usd: The run's hard budget, over the team's; a run on Claude without one gets the
            settings' (``$5`` unless set).
        on_text: Called with the lead's text as it streams.
        on_notice: Called with each line the run says as it starts.
        run_id: The run's name (default: a fresh one, sortable by time).

    Returns:
        The ``RunResult``: status, answer, cost, agents and branches.

    Raises:
        UserError: A mistake the caller can fix, said in one line: a bad team file, an unknown agent, a
            missing API key, a taken integration branch or run name, ``InvalidRun``.
        TeamrtError: The run could not go on (its store failed, its disk is full); resume it once the
            cause is fixed.
    """
    work = run_async(
        prompt,
        team=team,
        agent=agent,
        project=project,
        model=model,
        budget_usd=budget_usd,
        on_text=on_text,
        on_notice=on_notice,
        run_id=run_id,
    )
    return asyncio.run(work)


async def run_async(
    prompt: str,
    *,
    team: Team | Path | str | None = None,
    agent: str | None = None,
    project: Path | str | None = None,
    model: str | None = None,
    budget_usd: float | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    run_id: str | None = None,
) -> RunResult:
    """``run()``, awaitable: the run goes on in the caller's event loop. It takes, returns and raises what
    ``run()`` does."""
    where = _project(project)
    choices = Choices(model=model, budget_usd=budget_usd)
    if agent is not None:
        if team is not None:
            raise InvalidRun("run() takes a team or an agent, not both")
        if not prompt:
            raise NoPrompt(f"agent {agent!r} needs a prompt")
        summary = await run_single(
            prompt,
            agent=agent,
            project=where,
            choices=choices,
            on_text=on_text,
            on_notice=on_notice,
            run_id=run_id,
        )
    else:
        chosen = team if isinstance(team, Team) else team_file_of(where) if team is None else Path(team)
        summary = await run_team_file(
            chosen,
            prompt=prompt or None,
            project=where,
            choices=choices,
            on_text=on_text,
            on_notice=on_notice,
            run_id=run_id,
        )
    return result_of(summary)


def resume(
    run_id: str,
    *,
    project: Path | str | None = None,
    accept_loss: bool = False,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
) -> RunResult:
    """Take over a crashed run and go on to its end, as ``teamrt resume`` does.

    Every agent goes on from its last kept turn; mail is neither lost nor read twice.

    Args:
        run_id: The run, as ``RunResult.run_id`` or ``teamrt ls`` names it.
        project: Where the run is kept: teamrt's home of this directory (default: of the current one).
        accept_loss: Go on from what the store has even when it is behind the run's files (a lost WAL, a
            restored backup); the loss is recorded.
        on_text: Called with the lead's text as it streams.
        on_notice: Called with each line the run says as it starts again.

    Returns:
        The ``RunResult`` of the whole run.

    Raises:
        UserError: No such run; a run that ended or that a live process owns; a store behind its files
            (without ``accept_loss``).
        TeamrtError: The run could not go on.
    """
    where = None if project is None else _project(project)
    work = resume_run(run_id, project=where, on_text=on_text, on_notice=on_notice, accept_loss=accept_loss)
    return result_of(asyncio.run(work))


def continue_run(
    run_id: str,
    prompt: str,
    *,
    project: Path | str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    max_turns: int | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
) -> RunResult:
    """Go on with a run that ended on a follow-up ``prompt``, as ``teamrt continue`` does: a new round of
    the same run, the same lead with its whole conversation (the prompt cache still holds), its agents and
    branches.

    Args:
        run_id: The run, as ``RunResult.run_id`` or ``teamrt ls`` names it: done, failed, blocked or
            stopped (a budget spent, a stop sent).
        prompt: What the lead should do next.
        project: Where the run is kept: teamrt's home of this directory (default: of the current one).
        budget_usd: The run's new dollar budget, in all: above what it has spent; needed when its budget
            ran out.
        budget_tokens: The run's new token budget, in all: above what it has spent.
        max_turns: The lead's turns in this round (default: the team's limit, each round).
        on_text: Called with the lead's text as it streams.
        on_notice: Called with each line the run says as it goes on.

    Returns:
        The ``RunResult`` of the round: its answer, status and turns; the run's cost, agents and branches.

    Raises:
        UserError: No such run; a live run (send its lead mail) or a crashed one (``resume()`` it first);
            a budget out and not raised, or raised no higher than what was spent; a process holding the run.
        TeamrtError: The run could not go on.
    """
    where = None if project is None else _project(project)
    work = continuing.continue_run(
        run_id, prompt, project=where, budget_usd=budget_usd, budget_tokens=budget_tokens,
        max_turns=max_turns, on_text=on_text, on_notice=on_notice,
    )  # fmt: skip
    return result_of(asyncio.run(work))


def result_of(summary: RunSummary) -> RunResult:
    """The ``RunResult`` of a run that ended, read from its store."""
    reader = open_reader(summary.run_dir, summary.run_id)
    try:
        records = reader.agents()
        merges = reader.merges()
        landed = {m.id for m in on_branch(repo_of(reader.run().workdir), summary.integration, merges)}
    finally:
        reader.close()
    agents = tuple(
        AgentResult(
            name=a.name,
            kind=a.kind,
            role=a.role,
            model=a.model,
            status=a.status,
            reason=a.status_reason,
            cost_usd=a.usage.cost_usd,
            tokens=a.usage.total_tokens,
        )
        for a in records
    )
    branches = []
    for a in records:
        if a.branch is None:
            continue
        mine = sorted((m for m in merges if m.agent == a.name), key=lambda m: m.id)
        merge = mine[-1].status if mine else None
        branches.append(BranchResult(a.name, a.branch, merge, any(m.id in landed for m in mine)))
    outcome = summary.outcome
    return RunResult(
        run_id=summary.run_id,
        status=outcome.status,
        answer=outcome.answer,
        reason=outcome.reason,
        turns=outcome.turns,
        cost_usd=summary.cost_usd,
        simulated=summary.simulated,
        budget_usd=summary.budget_usd,
        input_tokens=summary.input_tokens,
        cache_read_tokens=summary.cache_read_tokens,
        output_tokens=summary.output_tokens,
        agents=agents,
        integration_branch=summary.integration,
        branches=tuple(branches),
        run_dir=summary.run_dir,
    )


def _project(project: Path | str | None) -> Path:
    where = home.project_root() if project is None else Path(project).expanduser().resolve()
    if not where.is_dir():
        raise InvalidRun(f"{where} is not a directory")
    return where
