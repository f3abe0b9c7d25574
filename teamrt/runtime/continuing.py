"""``teamrt continue``: a run that ended goes on with a follow-up prompt, as a new round of the same run.

The lead gets the prompt as a new user turn after its whole kept conversation (earlier messages are
never rewritten, so the prompt cache still holds), in the same run: its id, directory and store, its
agents (teammates the run's end stopped idle again, to be messaged as before), its worktree branches and
integration branch. The lead's new worktree agents branch from the integration branch as the round
begins, so they see the work merged before it. ``--budget-usd`` and ``--budget-tokens`` raise the run's
budget (the new limit is the run's total, above what it spent); ``--max-turns`` bounds the lead's turns
in this round.

What can be refused is refused before anything changes, in one line (``plan_round``): a live run (its
lead takes mail: ``teamrt send``), a crashed one (``teamrt resume`` first: a round begun on a crash would
leave its last turn's work unsettled), a run whose budget ran out without a raise; a prompt that is a
person's ``/mcp__<server>__<prompt>`` command is expanded before the round is written
(``personprompts.for_round``), and one that cannot be is refused the same way. The round then
begins in one transaction (``store.rounds.begin_round``) and goes on as a resume does (the same
supervisor path, ``Supervisor.resume``): a crash at any moment after it leaves a running run that
``teamrt resume`` finishes, the prompt read once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrt import home
from teamrt.errors import UserError
from teamrt.mcp.lifecycle import START_TIMEOUT
from teamrt.models import Model
from teamrt.models.types import Block, OnText
from teamrt.runtime import personprompts
from teamrt.runtime.history import rebuild, unanswered_calls
from teamrt.runtime.teamrun import (
    NoPrompt,
    Notice,
    NotResumable,
    RunSummary,
    check_reachable,
    open_models,
    prepare_run,
    summary_of,
)
from teamrt.runtime.verify import accept_loss as record_loss
from teamrt.runtime.verify import verify
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.protect import protected_paths
from teamrt.settings import Settings, load_settings
from teamrt.store import FinishedCall, RunRecord, StoreReader, open_reader
from teamrt.store.integrity import StoreBehind
from teamrt.store.ownership import GONE, NOT_RESPONDING, owner_state
from teamrt.store.rounds import ENDED, ROUND, NewRound, continue_store, round_base, round_number
from teamrt.team import Team, team_from_json, team_to_json
from teamrt.worktree import GitRepo

if TYPE_CHECKING:
    from teamrt.sim import SimServer

STOPPED_CALL = "not run: the run ended before this call finished; check its effects before you repeat it"
"""The result a call of the lead's last turn gets when a stop (or a failure) left it without one."""
RUN_USD = "budget exhausted: run dollar budget"
RUN_TOKENS = "budget exhausted: run token budget"
AGENT_BUDGET = "budget exhausted: agent "


class NotContinued(UserError, ValueError):
    """A follow-up that cannot start as asked (a live or crashed run, a budget not raised), in one line."""


@dataclass(frozen=True)
class Plan:
    """A round checked and made ready, nothing written yet."""

    run: RunRecord
    team: Team
    """The run's team for the round: its raised budgets, the lead's turn limit."""
    new: NewRound
    base: str | None
    """The commit the lead's new worktree agents branch from."""
    findings: list[str]
    """What the store lacks that the run's directory shows was done (``runtime.verify``), accepted."""


async def continue_run(
    run_id: str,
    prompt: str,
    *,
    project: Path | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    max_turns: int | None = None,
    on_text: OnText | None = None,
    on_notice: Notice | None = None,
    settings: Settings | None = None,
    sim: SimServer | None = None,
    models: Mapping[str, Model] | None = None,
    accept_loss: bool = False,
) -> RunSummary:
    """Go on with the ended run ``run_id`` (kept in the home of ``project``, default: of the current
    directory) on ``prompt``, to the round's end; ``settings``, ``sim`` and ``models`` as ``run_team``
    takes them. Raises ``NotContinued`` (and the store's ``RunOwned``) before anything changes, and
    ``StoreBehind`` as a resume does, unless ``accept_loss``: then the loss is recorded as the round
    begins."""
    run_dir = home.existing_run_dir(run_id, project)
    plan = plan_round(
        run_dir, run_id, prompt, budget_usd=budget_usd, budget_tokens=budget_tokens, max_turns=max_turns,
        accept_loss=accept_loss,
    )  # fmt: skip
    team, workdir = plan.team, Path(plan.run.workdir)
    settings = load_settings() if settings is None else settings
    prepared = prepare_run(team, workdir, on_notice, run_dir.parent)
    # a /mcp__<server>__<prompt> follow-up: expanded now, its failure one line with nothing changed
    expanded = await personprompts.for_round(
        prepared.mcp, round_context(team, workdir, run_dir), prompt,
        start_timeout=prepared.claude.knobs.mcp_start_timeout or START_TIMEOUT,
    )  # fmt: skip
    new = plan.new
    if expanded is not None:  # the prompt is the lead's turn's last block: the server's prompt instead
        new = dataclasses.replace(new, lead_turn=[*new.lead_turn[:-1], *expanded.blocks])
    opened = open_models(team, settings, sim=sim, given=models)  # a missing key is said before the round
    try:
        store = continue_store(run_dir, run_id, new)
    except BaseException:
        for name, model in opened.items():
            if models is None or name not in models:
                await model.aclose()
        raise
    try:
        if expanded is not None:  # journaled for logs and the TUI; a resume reads the lead's turn
            await personprompts.journal_round(store, expanded, new.number)
        if plan.findings:  # accepted: said by a store.behind event, and the unrecorded mail is read again
            await record_loss(store, run_dir, plan.findings)
        if on_notice is not None:
            on_notice(round_line(plan))
        repo = GitRepo.find(workdir)
        integration = plan.run.settings.get("integration_branch") if repo and plan.run.base_head else None
        supervisor = prepared.supervisor(
            store, run_dir, settings=settings, models=opened, repo=repo, base=plan.base,
            integration=integration, on_text=on_text, sim=sim,
        )  # fmt: skip
        outcome = await supervisor.resume(continued=True)
        return summary_of(run_id, outcome, store, team, run_dir)
    finally:
        store.close()


def plan_round(
    run_dir: Path,
    run_id: str,
    prompt: str,
    *,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    max_turns: int | None = None,
    accept_loss: bool = False,
) -> Plan:
    """Check that run ``run_id`` can take a round on ``prompt`` as asked, and make it ready; raises one
    line (``NotContinued``, ``NoPrompt``, ``NotResumable``, ``StoreBehind`` unless ``accept_loss``) when it
    cannot. Writes nothing."""
    if not prompt.strip():
        raise NoPrompt(f'continue run {run_id} with a prompt: --prompt "what to do next"')
    reader = open_reader(run_dir, run_id)
    try:
        run = reader.run()
        refuse_unless_ended(run, reader.now())
        if "team" not in run.settings:
            raise NotResumable(f"run {run_id} was started by an older teamrt that kept no team with it")
        check_reachable(run_dir, run)
        findings = verify(run_dir, run_id, reader)
        if findings and not accept_loss:  # before anything changes: the evidence stays as it is
            raise StoreBehind(run_id, findings, command="continue")
        names = {a.name: a for a in reader.agents()}
        if "lead" not in names:
            raise NotContinued(f"run {run_id} {run.status} before its lead started: start a new run")
        check_budget(run, reader, budget_usd, budget_tokens)
        team = team_from_json(run.settings["team"])
        turns = reader.turns("lead")
        open_calls = {c.id for c in reader.tool_calls("lead") if c.status in ("pending", "running")}
        revive = [
            a.name
            for a in names.values()
            if a.kind == "team" and a.status == "stopped" and a.role in team.roles
        ]
    finally:
        reader.close()
    messages = rebuild(turns)
    lead_turn: list[Block] = []
    finished: list[FinishedCall] = []
    for call in unanswered_calls(messages):
        block: Block = {"type": "tool_result", "tool_use_id": call["id"], "content": STOPPED_CALL,
                        "is_error": True}  # fmt: skip
        lead_turn.append(block)
        if call["id"] in open_calls:
            finished.append(FinishedCall(call["id"], "interrupted", [block], True))
    lead_turn.append({"type": "text", "text": prompt})
    kept: dict[str, Any] = run.settings.get(ROUND, {})
    own = kept.get("team_max_turns", team.lead.max_turns)  # the team file's
    per_round = max_turns or own  # the lead counts a round's turns (``store.rounds.round_so_far``)
    team = dataclasses.replace(
        team,
        budget_usd=budget_usd or run.budget_usd,
        budget_tokens=budget_tokens or run.budget_tokens,
        lead=dataclasses.replace(team.lead, max_turns=per_round),
    )
    base = _round_base(run)
    number = round_number(run) + 1
    settings = {
        **run.settings,
        "team": team_to_json(team),
        ROUND: {"base": base, "team_max_turns": own, "prompt": prompt},
    }
    new = NewRound(
        number=number, prompt=prompt, lead_turn=lead_turn, finished=finished,
        lead_seq=turns[-1].seq if turns else 0, settings=settings, budget_tokens=team.budget_tokens,
        budget_usd=team.budget_usd, revive=revive,
        data={"budget_usd": team.budget_usd, "budget_tokens": team.budget_tokens, "max_turns": per_round},
    )  # fmt: skip
    return Plan(run, team, new, base, findings)


def round_context(team: Team, workdir: Path, run_dir: Path) -> Confinement:
    """Where the servers that expand a follow-up's prompt command run: the project, under the team's
    sandbox policy, the paths the run protects read-only (as its own servers have them). The run's guard
    does not watch them yet (it starts with the round); the confinement is what keeps them out."""
    repo = GitRepo.find(workdir)
    protected = protected_paths(
        (workdir, *((repo.root,) if repo is not None else ())),
        home=run_dir.parent.parent,
        git_dir=repo.git_dir if repo is not None else None,
        team_file=None if team.path.is_dir() else team.path,
    )
    return Confinement(workspace=workdir, run_dir=run_dir, protected=protected, policy=team.sandbox)


def refuse_unless_ended(run: RunRecord, now: float) -> None:
    """Raise one line unless ``run`` has ended: a live run takes mail, a crashed one is resumed first."""
    if run.status in ENDED:
        return
    state = owner_state(run, now)
    if state == GONE:
        raise NotContinued(
            f"run {run.id} crashed in the middle of its work: finish it first with teamrt resume {run.id},"
            " then continue it"
        )
    if state == NOT_RESPONDING:
        raise NotContinued(
            f"run {run.id} is running but not responding; wait for it, or kill it and resume it"
        )
    raise NotContinued(
        f'run {run.id} is still running: tell its lead with teamrt send {run.id} lead "...", or continue it'
        " once it has ended"
    )


def check_budget(
    run: RunRecord, reader: StoreReader, budget_usd: float | None, budget_tokens: int | None
) -> None:
    """Refuse a raise that is not above what the run spent (the new limit is the run's total), and a run
    whose budget ran out when no raise is given."""
    spent_usd, spent_tokens = run.usage.cost_usd, run.usage.total_tokens
    if budget_usd is not None and budget_usd <= spent_usd:
        raise NotContinued(
            f"--budget-usd {budget_usd:g} is not above the ${spent_usd:.4f} run {run.id} has spent: it is"
            " the run's new total, so give more than that"
        )
    if budget_tokens is not None and budget_tokens <= spent_tokens:
        raise NotContinued(
            f"--budget-tokens {budget_tokens:,} is not above the {spent_tokens:,} tokens run {run.id} has"
            " spent: it is the run's new total, so give more than that"
        )
    reasons = [run.status_reason or "", reader.agent("lead").status_reason or ""]
    usd_out = any(RUN_USD in r for r in reasons) or (
        run.budget_usd is not None and spent_usd >= run.budget_usd
    )
    if usd_out and budget_usd is None:
        limit = f"${run.budget_usd:.2f}" if run.budget_usd is not None else "its limit"
        raise NotContinued(
            f"run {run.id} ran out of its budget ({limit}, ${spent_usd:.4f} spent); continue it with"
            f" --budget-usd N, the run's new total (above ${spent_usd:.4f})"
        )
    tokens_out = any(RUN_TOKENS in r for r in reasons) or (
        run.budget_tokens is not None and spent_tokens >= run.budget_tokens
    )
    if tokens_out and budget_tokens is None:
        raise NotContinued(
            f"run {run.id} ran out of its token budget ({spent_tokens:,} spent); continue it with"
            f" --budget-tokens N, the run's new total (above {spent_tokens:,})"
        )
    lead_reason = reasons[1]
    if lead_reason.startswith(AGENT_BUDGET + "lead "):
        raise NotContinued(
            f"run {run.id}'s lead spent its own budget ([lead] in the team file kept with the run); a"
            " follow-up cannot raise one agent's budget: start a new run"
        )


def _round_base(run: RunRecord) -> str | None:
    """The integration branch's tip as the round begins (the previous round's base when it is gone)."""
    branch = run.settings.get("integration_branch")
    repo = GitRepo.find(Path(run.workdir)) if branch and run.base_head else None
    tip = repo.tip(branch) if repo is not None and isinstance(branch, str) else None
    return tip or round_base(run)


def round_line(plan: Plan) -> str:
    """What a round says as it begins: the run, the round, its budget."""
    team, run = plan.team, plan.run
    said = f"run {run.id} goes on: round {plan.new.number}, the lead's conversation kept"
    if plan.new.revive:
        said += f", {len(plan.new.revive)} teammate(s) idle again"
    if team.budget_usd is not None:
        said += f"; budget ${team.budget_usd:.2f} in all (${run.usage.cost_usd:.4f} spent)"
    return said
