"""What ``teamrt ls`` and ``teamrt show`` say of runs: as text, or with ``--json`` as JSON.

``ls`` and ``show`` print text, or with ``--json`` the same facts as JSON
(``summary_json``, ``show_json``): machine-readable, every cost in USD with a
``simulated`` flag, times in ISO 8601 UTC. What their text shows is agent data
(answers, task subjects, reasons, branches): ``render_ls`` and ``render_show``
return it through ``terminal.clean_line``, a table's cells before they are aligned.
The facts come from ``teamrt.runs.query``, the words for them from ``teamrt.runs.render``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from teamrt.models.catalog import SOURCE_DATE, ModelInfo
from teamrt.models.pricing import cost_for
from teamrt.models.registry import is_sim
from teamrt.models.types import Usage as ModelUsage
from teamrt.runs.burndown import BurnDown, burn_down, burn_down_text
from teamrt.runs.identity import agent_file, alone, alone_text, definition_name, role_text
from teamrt.runs.query import (
    CRASHED,
    LIVE_AGENT,
    NOT_RESPONDING,
    OWNED,
    PendingAsk,
    RunSummary,
    Shown,
    read_shown,
    simulated,
)
from teamrt.runs.render import (
    age_text,
    agent_tree,
    budget_text,
    clip,
    describe_call,
    describe_sandbox,
    duration_text,
    iso_time,
    money,
    spent_text,
    table,
)
from teamrt.runs.rounds import read_rounds, round_lines, rounds_json
from teamrt.store import (
    AgentRecord,
    EventRecord,
    MergeRecord,
    RunRecord,
    TaskRecord,
    TurnRecord,
    Usage,
    integrity,
)
from teamrt.store.engine import describe as describe_store
from teamrt.store.engine import server_url
from teamrt.store.ownership import host_identity
from teamrt.terminal import clean, clean_line
from teamrt.worktree.facts import git_findings, on_branch, repo_of

TASK_CHARS = 50
SHOWN_LINES = 6  # of an answer or a task in ``show`` (``show --full``: all)
LINE_CHARS = 160


# -- ls ------------------------------------------------------------------------


def render_ls(summaries: list[RunSummary], runs_dir: Path, now: float | None = None) -> list[str]:
    if not summaries:
        url = server_url()
        where = runs_dir if url is None else describe_store(url)
        return [f"no runs yet in {where}; start one with: teamrt run --prompt '...'"]
    now = time.time() if now is None else now
    queued = any(s.queue is not None for s in summaries)  # a database with a queue: who, which batch, where
    rows = [("RUN", "STATUS", "AGE", "AGENTS", "COST", "TOKENS", *(QUEUE_COLUMNS if queued else ()), "TASK")]
    for s in summaries:
        age = age_text(now - s.started)
        place = _place_cells(s) if queued else ()
        if s.problem is not None:
            rows.append((s.id, s.status, age, "", "", "", *place, s.problem))
            continue
        agents = f"{s.agents}, {s.running} running" if s.running else str(s.agents)
        agents += f" ({s.alone})" if s.alone else ""  # run --agent: the one agent file it runs
        task = clip((_lines(s.task) or [""])[0], TASK_CHARS)
        behind = ", store behind" if s.store_behind else ""
        status = s.status + behind + (f" ({s.owner})" if s.owner else "")
        cost = spent_text(s.usage.cost_usd, s.budget_usd, s.simulated)
        rows.append((s.id, status, age, agents, cost, f"{s.usage.total_tokens:,}", *place, task))
    return [clean_line(line) for line in table(rows, right=(4, 5))]


QUEUE_COLUMNS = ("SUBMITTER", "BATCH", "HOST")


def _place_cells(s: RunSummary) -> tuple[str, str, str]:
    q = s.queue
    return ("", "", "") if q is None else (q.submitter or "", q.batch or "", q.host or "")


def summary_json(s: RunSummary) -> dict[str, Any]:
    """One run of ``teamrt ls --json``; what could not be read is null (and ``problem`` says why)."""
    readable = s.problem is None
    return {
        "id": s.id,
        "status": s.status if readable else None,
        "started": iso_time(s.started),
        "task": s.task if readable else None,
        "agents": s.agents if readable else None,
        "alone": s.alone,
        "running": s.running if readable else None,
        "cost_usd": s.usage.cost_usd if readable else None,
        "simulated": s.simulated if readable else None,
        "tokens": s.usage.total_tokens if readable else None,
        "budget_usd": s.budget_usd,
        "owner_pid": s.owner_pid,
        "store_behind": s.store_behind if readable else None,
        "problem": s.problem,
        **_place_json(s),
    }


def _place_json(s: RunSummary) -> dict[str, Any]:
    """The queue's keys of ``ls --json``, for every run of a database with a queue (none otherwise)."""
    q = s.queue
    if q is None:
        return {}
    return {"submitter": q.submitter, "batch": q.batch, "host": q.host, "attempt": q.attempt or None}


# -- show ----------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    """Prices to recompute a run's cost at: the catalog with a prices file laid over it."""

    table: Mapping[str, ModelInfo]
    source: str
    """Where they come from, as shown: ``prices.toml``."""


_RECOMPUTED = " (cache writes at the 5-minute rate; web searches not counted)"


def recomputed_cost(shown: Shown, table: Mapping[str, ModelInfo]) -> float:
    """What the run's model calls cost at ``table``'s prices, turn by turn (a model without a price: 0).

    The store keeps neither the 1-hour share of cache writes nor web searches, so this is the
    estimate ``_RECOMPUTED`` says it is."""
    models = {a.name: a.model for a in shown.agents}
    total = 0.0
    for agent, turns in shown.turns.items():
        for turn in turns:
            u = turn.usage
            if not u.total_tokens:
                continue
            usage = ModelUsage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_creation_input_tokens=u.cache_creation_tokens,
                cache_read_input_tokens=u.cache_read_tokens,
            )
            total += cost_for(turn.model or models.get(agent, ""), usage, table) or 0.0
    return total


def render_show(
    run_dir: Path, run_id: str, now: float | None = None, *, full: bool = False, prices: Prices | None = None
) -> list[str]:
    """The run's header, its agent tree, each agent's last answer and the task list; ``full``: answers
    and tasks whole, else cut to ``SHOWN_LINES`` lines; ``prices``: also its cost at those prices. Each
    line is safe for a terminal (``clean_line``)."""
    return [clean_line(line) for line in _show_lines(run_dir, run_id, now, full=full, prices=prices)]


def _show_lines(
    run_dir: Path, run_id: str, now: float | None, *, full: bool, prices: Prices | None
) -> list[str]:
    now = time.time() if now is None else now
    shown = read_shown(run_dir, run_id)
    run, status = shown.run, shown.status
    more = f"teamrt show {run.id} --full"
    burn = burn_down(run, shown.agents, shown.forecasts, run_dir, live=status == "running")
    lines = _header(run, status, now, shown.sandbox, more=None if full else more, burn=burn)
    lines += [f"agent    {said}"] if (said := alone_text(run, shown.agents)) else []
    if shown.store_behind:
        lines.append(f"store    {store_behind_line(run.id, shown.store_behind)}")
    lines += round_lines(read_rounds(run_dir, run_id, run), status, full=full)
    if prices is not None:
        usd = recomputed_cost(shown, prices.table)
        lines.append(f"         {money(usd, simulated(run))} at the prices of {prices.source}{_RECOMPUTED}")
    tree = agent_tree(shown.agents)
    if not tree:
        return [*lines, "", "agents: none yet"]
    lines += ["", "agents", *_agent_table(tree, shown.turns, crashed=status == CRASHED), "", "answers"]
    for agent, _ in tree:
        text = _answer(shown.turns[agent.name])
        lines.append(f"  {agent.name}:" + ("" if text else f" {_no_answer(agent, status)}"))
        lines += [f"    {line}" for line in (_whole(text) if full else _first_lines(text, more))]
    if shown.tasks:
        lines += ["", "tasks", *_task_table(shown.tasks, full=full)]
    lines += _ask_lines(run, status, shown.asks) + _worktree_lines(run, shown.agents, shown.merges)
    lines += _repository_lines(run, status, shown.agents, shown.merges)
    return lines + set_aside_lines(run.id, shown.set_aside)


SET_ASIDE_FIELDS = ("agent", "id", "sender", "reason", "file", "redelivered", "told", "note")
"""What ``show --json`` gives of each message file set aside (a ``mail.quarantined`` event's data)."""


def set_aside_lines(run_id: str, events: Sequence[EventRecord]) -> list[str]:
    """``show``'s "mail set aside": each message file damaged on disk, what became of it (one line each)."""
    if not events:
        return []
    head = f"mail set aside (damaged on disk; teamrt logs {run_id} has when)"
    return ["", head, *(f"  {clean_line(str(e.data.get('note', '')))}" for e in events)]


def store_behind_line(run_id: str, count: int) -> str:
    """What ``show`` says of a store ``count`` commits behind its run directory."""
    commits = "commit" if count == 1 else "commits"
    return (
        f"{count} {commits} behind its run directory (its database lost them: a WAL emptied or cut, an old"
        f" backup); teamrt resume refuses it until {integrity.ACCEPT_LOSS}, which records the loss"
    )


def _no_answer(agent: AgentRecord, status: str) -> str:
    """Why an agent shows no answer: it has not given one yet (a live agent of a live run), or never did."""
    if status == "running" and agent.status in LIVE_AGENT:
        return "(no answer yet)"
    said = agent.status_reason
    if status == CRASHED and agent.status in LIVE_AGENT:
        said = f"{agent.status} when the run crashed"
    elif said:
        said = f"{agent.status}: {said}"
    return f"(no answer; {' '.join(said.split())})" if said else "(no answer)"


def show_json(run_dir: Path, run_id: str) -> dict[str, Any]:
    """``teamrt show --json``: the run, its agents with their answers whole, tasks, asks, merges and
    the worktrees still on disk."""
    shown = read_shown(run_dir, run_id)
    run, u = shown.run, shown.run.usage
    owner = run.owner if shown.status in OWNED else None  # a live (or not responding) run's
    held = _held(run, shown.merges)
    return {
        "id": run.id,
        "status": shown.status,
        "status_reason": run.status_reason,
        "store_behind": shown.store_behind,
        "task": run.task,
        "rounds": rounds_json(read_rounds(run_dir, run_id, run)),
        "workdir": run.workdir,
        "started": iso_time(run.created_at),
        "finished": iso_time(run.finished_at),
        "heartbeat": iso_time(run.heartbeat_at),
        "owner_pid": owner.pid if owner else None,
        "owner_host": owner.host if owner else None,
        "budget_usd": run.budget_usd,
        "budget_tokens": run.budget_tokens,
        "cost_usd": u.cost_usd,
        **_burn_json(burn_down(run, shown.agents, shown.forecasts, run_dir, live=shown.status == "running")),
        "simulated": simulated(run),
        "tokens": u.total_tokens,
        "usage": _usage_json(u),
        "sandbox": describe_sandbox(shown.sandbox) if shown.sandbox is not None else None,
        "integration_branch": run.settings.get("integration_branch"),
        "alone": alone(run),
        "agents": [
            {
                "name": a.name,
                "kind": a.kind,
                "parent": a.parent,
                "depth": depth,
                "role": a.role,
                "definition": definition_name(a),
                "agent_file": agent_file(a),
                "model": a.model,
                "status": a.status,
                "status_reason": a.status_reason,
                "epoch": a.epoch,
                "turns": sum(t.role == "assistant" for t in shown.turns[a.name]),
                "cost_usd": a.usage.cost_usd,
                "simulated": is_sim(a.model),
                "tokens": a.usage.total_tokens,
                "workspace": a.workspace,
                "branch": a.branch,
                "answer": _answer(shown.turns[a.name]) or None,
            }
            for a, depth in agent_tree(shown.agents)
        ],
        "tasks": [
            {
                "id": t.id,
                "subject": t.subject,
                "description": t.description,
                "status": t.status,
                "owner": t.owner,
                "created_by": t.created_by,
                "blocked_by": list(t.blocked_by),
            }
            for t in shown.tasks
        ],
        "asks": [
            {
                "id": a.id,
                "agent": a.agent,
                "tool": a.tool,
                "input": a.input,
                "reason": a.reason,
                "asked": iso_time(a.at),
                "wait_s": a.wait_s,
            }
            for a in shown.asks
        ],
        "merges": [
            {
                "agent": m.agent,
                "branch": m.branch,
                "head": m.head,
                "status": _merge_status(m, held),
                "attempts": m.attempts,
                "merged_commit": m.merged_commit,
            }
            for m in shown.merges
        ],
        "worktrees_kept": [
            {"agent": a.name, "path": a.workspace, "branch": a.branch} for a in _kept_worktrees(shown.agents)
        ],
        "mail_set_aside": [{k: e.data.get(k) for k in SET_ASIDE_FIELDS} for e in shown.set_aside],
    }


def _usage_json(u: Usage) -> dict[str, int]:
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_creation_tokens": u.cache_creation_tokens,
        "cache_read_tokens": u.cache_read_tokens,
    }


def _ask_lines(run: RunRecord, status: str, asks: list[PendingAsk]) -> list[str]:
    if not asks:
        return []
    if status == CRASHED:
        head = f"asks unanswered when the run crashed (teamrt resume {run.id} asks them again)"
    else:
        head = f"asks waiting (answer with: teamrt answer {run.id} ASK allow|deny)"
    rows = [("ASK", "AGENT", "CALL")] + [(a.id, a.agent, describe_call(a.tool, a.input)) for a in asks]
    return ["", head, *(f"  {line}" for line in table(rows))]


def _worktree_lines(run: RunRecord, agents: list[AgentRecord], merges: list[MergeRecord]) -> list[str]:
    """The merge queue's entries and the worktrees still on disk (kept ones: work not merged)."""
    lines = []
    repo = repo_of(run.workdir)

    def named(branch: str | None) -> str:
        """The branch, marked ``(removed)`` when git no longer has it (apply, gc or a person deleted it)."""
        gone = branch is None or (repo is not None and repo.tip(branch) is None)
        return f"{branch or '?'} (removed)" if gone else branch or "?"

    if merges:
        rows = [("AGENT", "BRANCH", "STATUS", "ATTEMPTS", "COMMIT")]
        held = _held(run, merges)
        rows += [
            (m.agent, named(m.branch), _merge_status(m, held), str(m.attempts), (m.merged_commit or "-")[:12])
            for m in merges
        ]
        branch = run.settings.get("integration_branch")
        onto = named(branch)
        brings = f"teamrt apply {run.id} brings it onto your branch" if onto == branch else "nothing to apply"
        lines += ["", f"merges onto {onto} ({brings})"]
        lines += [f"  {line}" for line in table(rows, right=(3,))]
    kept = _kept_worktrees(agents)
    if kept:
        lines += ["", "worktrees kept"]
        lines += [f"  {a.name}: {a.workspace} (branch {named(a.branch)})" for a in kept]
    return lines


def _repository_lines(
    run: RunRecord, status: str, agents: list[AgentRecord], merges: list[MergeRecord]
) -> list[str]:
    """For a crashed run, how its repository is behind what the store recorded (a branch or workspace
    deleted): what its resume will put back, or name as lost (``resume.reconcile_git``)."""
    repo = repo_of(run.workdir) if status == CRASHED else None
    if repo is None:
        return []
    found = git_findings(repo, run.settings.get("integration_branch"), merges, agents)
    if not found:
        return []
    head = f"repository behind the store (teamrt resume {run.id} puts back what it can and names the rest)"
    return ["", head, *(f"  {line}" for line in found)]


def _held(run: RunRecord, merges: list[MergeRecord]) -> set[int]:
    """The ids of the merges the integration branch holds, as git shows it (claims come from facts)."""
    branch = run.settings.get("integration_branch")
    return {m.id for m in on_branch(repo_of(run.workdir), branch, merges)}


def _merge_status(merge: MergeRecord, held: set[int]) -> str:
    """A merge's status as shown: ``lost`` for one recorded merged that the integration branch lacks."""
    return "lost" if merge.status == "merged" and merge.id not in held else merge.status


def _burn_json(burn: BurnDown) -> dict[str, Any]:
    """``show --json``'s burn-down: ``reserved_usd`` (None: the run is not live) and ``forecast_usd``."""
    return {"reserved_usd": burn.reserved_usd, "forecast_usd": burn.forecast_usd}


def _kept_worktrees(agents: list[AgentRecord]) -> list[AgentRecord]:
    return [a for a in agents if a.kind == "worktree" and a.workspace and Path(a.workspace).exists()]


def _owned_by(run: RunRecord, status: str) -> str | None:
    """``owner_text`` for a run whose status is already known."""
    if run.owner is None or status not in OWNED:
        return None
    return f"pid {run.owner.pid}" + ("" if run.owner.host == host_identity() else f" on {run.owner.host}")


def _header(
    run: RunRecord, status: str, now: float, sandbox: dict[str, Any] | None, *, more: str | None,
    burn: BurnDown | None = None,
) -> list[str]:  # fmt: skip
    owner = _owned_by(run, status)
    reason = f": {' '.join(run.status_reason.split())}" if run.status_reason else ""
    said = status + (f" ({owner})" if owner else "") + reason
    if status == CRASHED:
        beat = f"last heartbeat {age_text(now - run.heartbeat_at)} ago" if run.heartbeat_at else "no owner"
        said = f"crashed ({beat}); resume it with teamrt resume {run.id}"
    elif status == NOT_RESPONDING and run.heartbeat_at is not None:
        said = (
            f"not responding ({owner}, last heartbeat {age_text(now - run.heartbeat_at)} ago): it may be"
            " stopped (SIGSTOP) or overloaded; kill it or wait, then resume"
        )
    end = run.finished_at or (run.heartbeat_at if status == CRASHED else None) or now
    ran = ("running for " if status == "running" else "ran ") + duration_text(end - run.created_at)
    started = datetime.fromtimestamp(run.created_at).strftime("%Y-%m-%d %H:%M:%S")
    task = (_first_lines(run.task, more) if more else _whole(run.task)) or ["(none)"]
    u = run.usage
    prompt = u.input_tokens + u.cache_creation_tokens + u.cache_read_tokens
    share = u.cache_read_tokens / prompt if prompt else 0.0
    lines = [
        f"run {run.id}: {said}",
        f"task     {task[0]}",
        *(f"         {line}" for line in task[1:]),
        f"workdir  {run.workdir}",
        *([f"sandbox  {describe_sandbox(sandbox)}"] if sandbox is not None else []),
        f"started  {started} ({age_text(now - run.created_at)} ago); {ran}",
        f"tokens   {prompt:,} in ({share:.0%} read from cache), {u.output_tokens:,} out; costs are estimates"
        f" at the prices of {SOURCE_DATE} or your settings (teamrt models)",
    ]
    budgets = [budget_text(run.budget_usd)] if run.budget_usd is not None else []
    budgets += [f"{run.budget_tokens:,} tokens"] if run.budget_tokens is not None else []
    budget = f"budget {', '.join(budgets)}" if budgets else "no budget"
    if burn is not None and (burn.reserved_usd or burn.forecast_usd):  # calls in flight, agents at work
        rest = [f"budget {run.budget_tokens:,} tokens"] if run.budget_tokens is not None else []
        rest += [] if budgets else ["no budget"]
        lines.append(f"cost     {burn_down_text(burn, simulated(run))}" + "".join(f"; {r}" for r in rest))
        return lines
    lines.append(f"cost     {money(u.cost_usd, simulated(run))}; {budget}")
    return lines


def _agent_table(
    tree: list[tuple[AgentRecord, int]], turns: dict[str, list[TurnRecord]], *, crashed: bool
) -> list[str]:
    rows = [("NAME", "KIND", "ROLE", "MODEL", "EPOCH", "TURNS", "TOKENS", "COST", "STATUS")]
    for a, depth in tree:
        status = a.status + (f": {' '.join(a.status_reason.split())}" if a.status_reason else "")
        if crashed and a.status in LIVE_AGENT:
            status += " when the run crashed"
        model_turns = sum(t.role == "assistant" for t in turns[a.name])
        rows.append(
            (
                "  " * depth + a.name,
                a.kind,
                role_text(a),
                a.model,
                str(a.epoch),
                str(model_turns),
                f"{a.usage.total_tokens:,}",
                money(a.usage.cost_usd, is_sim(a.model)),
                status,
            )
        )
    return [f"  {line}" for line in table(rows, right=(4, 5, 6, 7))]


def _answer(turns: list[TurnRecord]) -> str:
    """The text of the agent's last assistant turn ("" when it has none)."""
    for turn in reversed(turns):
        if turn.role == "assistant":
            return "\n".join(_texts(turn.content)).strip()
    return ""


def _texts(content: list[Any]) -> Iterator[str]:
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]


def _task_table(tasks: list[TaskRecord], *, full: bool = False) -> list[str]:
    """The task list; ``full``: each subject whole, and each task's description under its row."""
    rows = [("ID", "STATUS", "OWNER", "SUBJECT", "BLOCKED BY")]
    for task in tasks:
        blocked = ", ".join(f"#{b}" for b in task.blocked_by)
        subject = " ".join(task.subject.split()) if full else clip(task.subject, 60)
        rows.append((f"#{task.id}", task.status, task.owner or "-", subject, blocked))
    lines = [f"  {line}" for line in table(rows)]
    if not full:
        return lines
    out = lines[:1]
    for task, line in zip(tasks, lines[1:], strict=True):
        out += [line, *(f"      {said}" for said in _whole(task.description))]
    return out


# -- text ----------------------------------------------------------------------


def _first_lines(text: str, more: str) -> list[str]:
    """The first ``SHOWN_LINES`` lines of ``text``, each cut to ``LINE_CHARS``; when lines were left
    out, a last line says how many and the command that shows them (``more``)."""
    lines = [clip(line, LINE_CHARS) for line in _lines(text)]
    if len(lines) > SHOWN_LINES:
        return [*lines[:SHOWN_LINES], f"... ({len(lines) - SHOWN_LINES} more lines: {more})"]
    return lines


def _whole(text: str) -> list[str]:
    return _lines(text)


def _lines(text: str) -> list[str]:
    """``text``'s lines, made safe for a terminal first (``clean``): only a newline ends a line, and a
    lone carriage return shows as U+FFFD where a terminal would have drawn over the line's start."""
    said = clean(text).strip()
    return said.split("\n") if said else []
