"""What ``teamrt ls``, ``show``, ``send``, ``stop`` and ``answer`` do: read runs' stores, act by mail.

``ls`` and ``show`` print text, or with ``--json`` the same facts as JSON
(``summary_json``, ``show_json``): machine-readable, every cost in USD with a
``simulated`` flag, times in ISO 8601 UTC. What their text shows is agent data
(answers, task subjects, reasons, branches): ``render_ls`` and ``render_show``
return it through ``terminal.clean_line``, a table's cells before they are aligned.

Reads go through the store's read-only reader; the only writes are mail
(docs/architecture.md, Data flow 6: an onlooker acts by sending mail). A run recorded
as running whose owner is gone, or whose heartbeat is stale, is *crashed*; one whose
owner's process still lives on this host but whose heartbeat is stale (stopped by
SIGSTOP, or overloaded) is *not responding*: killing it makes it crashed. Heartbeats
are aged in the database's clock (``StoreReader.now``), which wrote them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from teamrt.errors import UserError
from teamrt.mailbox import MailboxError, is_name
from teamrt.mailbox.message import preview
from teamrt.models.catalog import SOURCE_DATE, ModelInfo
from teamrt.models.pricing import cost_for
from teamrt.models.registry import is_sim
from teamrt.models.types import Usage as ModelUsage
from teamrt.runs import steer
from teamrt.runs.steer import MAILBOX_DIR, Sent
from teamrt.runtime.asking import ANSWERED, ASK
from teamrt.runtime.losses import MAIL_QUARANTINED
from teamrt.sandbox.bwrap import SANDBOX_EVENT, describe
from teamrt.store import (
    AgentRecord,
    EventRecord,
    MergeRecord,
    RunNotFound,
    RunRecord,
    StoreError,
    StoreReader,
    TaskRecord,
    TurnRecord,
    Usage,
    integrity,
    open_reader,
)
from teamrt.store.engine import DB_FILE, run_file, server_url
from teamrt.store.engine import describe as describe_store
from teamrt.store.errors import database_reason
from teamrt.store.ownership import GONE, host_identity, owner_state
from teamrt.store.ownership import NOT_RESPONDING as OWNER_NOT_RESPONDING
from teamrt.terminal import clean, clean_line
from teamrt.worktree.facts import git_findings, on_branch, repo_of

CRASHED = "crashed"
NOT_RESPONDING = "not responding"
"""A running run whose owner's process is alive on this host while its heartbeat is stale."""
OWNED = ("running", NOT_RESPONDING)
"""The statuses of a run whose owner's process is there: its mail waits for it, nothing else may own it."""
LIVE_AGENT = ("pending", "running", "idle", "merging")
SUPERVISOR = "supervisor"  # the mailbox the run's supervisor reads its control mail from
SUMMARY_CHARS = 80
TASK_CHARS = 50
SHOWN_LINES = 6  # of an answer or a task in ``show`` (``show --full``: all)
LINE_CHARS = 160
ARGUMENT_CHARS = 60  # of a call's argument in ``describe_call``
ARGUMENT_KEYS = ("command", "file_path", "path", "pattern", "to", "agent", "subject", "task_id", "kind")
"""The input that says what a call is about, by the first key present."""


class RunsError(UserError):
    """A request about a run that cannot be met; its text is one line for the user."""


def simulated(run: RunRecord) -> bool:
    """Whether every model the run's team names is the simulator: its costs were never billed."""
    team = run.settings.get("team")
    if not isinstance(team, dict):
        return False
    roles = [team.get("lead") or {}, *(team.get("roles") or {}).values()]
    names = {team.get("model"), *(r.get("model") for r in roles if isinstance(r, dict) and r.get("model"))}
    return all(isinstance(name, str) and is_sim(name) for name in names)


def money(usd: float, simulated: bool) -> str:
    """A cost as shown everywhere: ``$0.1234``, or ``$0.1234 (sim)`` when nothing was billed."""
    return f"${usd:.4f}" + (" (sim)" if simulated else "")


def budget_text(usd: float) -> str:
    """A budget in dollars: ``$5.00``, or to the tenth of a cent when it needs it (``$0.0050``)."""
    return f"${usd:.2f}" if round(usd, 2) == usd else f"${usd:.4f}"


def spent_text(usd: float, budget_usd: float | None, simulated: bool) -> str:
    """What a run cost, with its budget when it has one: ``$0.1234/$5.00``, ``$0.1234 (sim)``."""
    if budget_usd is None:
        return money(usd, simulated)
    return f"${usd:.4f}/{budget_text(budget_usd)}" + (" (sim)" if simulated else "")


def iso_time(at: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC to the millisecond (``2026-11-22T13:35:12.345Z``)."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def owner_text(run: RunRecord, now: float | None = None) -> str | None:
    """``pid 1234`` (``pid 1234 on HOST`` for another machine's) of a live or not responding run's owner;
    None for others. ``now``: the database's clock (``StoreReader.now``)."""
    owner = run.owner
    if owner is None or run_status(run, now) not in OWNED:
        return None
    return f"pid {owner.pid}" + ("" if owner.host == host_identity() else f" on {owner.host}")


def run_status(run: RunRecord, now: float | None = None) -> str:
    """The status a user sees: the stored one; for a running run, ``crashed`` when it has no live owner,
    ``not responding`` when its owner's process lives on this host but its heartbeat is stale. ``now``:
    the database's clock, which the heartbeat was written in (this machine's when not given)."""
    if run.status != "running":
        return run.status
    state = owner_state(run, now)
    if state == GONE:
        return CRASHED
    return NOT_RESPONDING if state == OWNER_NOT_RESPONDING else "running"


def heartbeat_age(run: RunRecord, now: float | None = None) -> float | None:
    """Seconds since the owner's last heartbeat, in the database's clock ``now``; None: it never beat."""
    if run.heartbeat_at is None:
        return None
    return max(0.0, (time.time() if now is None else now) - run.heartbeat_at)


def not_responding(run: RunRecord, now: float | None = None) -> str:
    """Why a not responding run can be neither resumed nor trusted to go on, in one line."""
    pid = run.owner.pid if run.owner is not None else 0
    age = heartbeat_age(run, now)
    beat = f"heartbeat {age:.0f} s old" if age is not None else "no heartbeat"
    return (
        f"run {run.id} is not responding (pid {pid} on this host, {beat}): it may be stopped (SIGSTOP)"
        " or overloaded; kill it or wait, then resume"
    )


@contextmanager
def reading(run_dir: Path, run_id: str) -> Iterator[StoreReader]:
    """The run's reader, closed afterwards. Store errors pass; a damaged file raises RunsError."""
    try:
        reader = open_reader(run_dir, run_id)
        try:
            yield reader
        finally:
            reader.close()
    except SQLAlchemyError as e:
        raise unreadable(run_id, e) from None


def unreadable(run_id: str, e: SQLAlchemyError) -> RunsError:
    """A database error met reading a run's store, said in one line."""
    reason = database_reason(e)
    return RunsError(f"cannot read the store of run {run_id!r}: {reason}")


# -- ls ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One line of ``teamrt ls``; ``problem`` says why a run could not be read."""

    id: str
    started: float  # the run's start, or its directory's mtime when it could not be read
    status: str = "?"
    task: str = ""
    agents: int = 0
    running: int = 0
    usage: Usage = field(default_factory=Usage)
    problem: str | None = None
    budget_usd: float | None = None
    simulated: bool = False
    """Every model of the run's team is sim: its cost was never billed."""
    owner: str | None = None
    """``pid 1234`` of a live run's owner (``pid 1234 on HOST`` on another machine); else None."""
    owner_pid: int | None = None
    store_behind: int = 0
    """Commits the store lacks against its run directory (``store.integrity``): a resume refuses it."""


SummaryCache = dict[str, tuple[tuple[int, ...], RunSummary]]
"""Summaries by run, with the stamp of the store's files they were read at (see ``list_runs``)."""


def list_runs(runs_dir: Path, cache: SummaryCache | None = None) -> list[RunSummary]:
    """Every run directory under ``runs_dir``, newest first; an unreadable one carries its problem.

    With ``cache`` (kept by a caller that lists again and again, the TUI), a
    run not live whose store files have not changed since is not read again:
    only a write (a resume's) can change what it says. A live run is always
    read, since its owner can die without writing.
    """
    url = server_url()
    if url is not None:
        return _server_runs(url, runs_dir)
    if not runs_dir.is_dir():
        return []
    found = [
        _summary(Path(entry.path), cache)
        for entry in os.scandir(runs_dir)
        if is_name(entry.name) and entry.is_dir(follow_symlinks=False)
    ]
    return sorted(found, key=lambda s: (s.started, s.id), reverse=True)


def _server_runs(url: str, runs_dir: Path) -> list[RunSummary]:
    """Every run in the server database, whichever host it is on, with one connection; and a run
    directory here that the database does not have, as a problem."""
    from sqlalchemy import select

    from teamrt.store import tables as t
    from teamrt.store.engine import reader_engine

    engine = reader_engine(url)
    try:
        with engine.connect() as conn:
            ids = list(conn.execute(select(t.runs.c.id)).scalars())
        found = [_summary_of(StoreReader(engine, run_id), run_id, 0.0, runs_dir / run_id) for run_id in ids]
    except SQLAlchemyError as e:
        reason = database_reason(e)
        raise RunsError(f"cannot read the runs in {describe_store(url)}: {reason}") from None
    finally:
        engine.dispose()
    if runs_dir.is_dir():
        known = set(ids)
        for entry in os.scandir(runs_dir):
            if is_name(entry.name) and entry.is_dir(follow_symlinks=False) and entry.name not in known:
                found.append(
                    RunSummary(
                        entry.name,
                        _mtime(Path(entry.path)),
                        problem="no run store here (not in the database)",
                    )
                )
    return sorted(found, key=lambda s: (s.started, s.id), reverse=True)


def _summary(run_dir: Path, cache: SummaryCache | None) -> RunSummary:
    stamp = _stamp(run_dir)
    if cache is None or stamp is None:
        return summarize(run_dir)
    kept = cache.get(run_dir.name)
    if kept is not None and kept[0] == stamp and kept[1].status not in OWNED:
        return kept[1]
    summary = summarize(run_dir)
    cache[run_dir.name] = (_stamp(run_dir) or stamp, summary)  # as reading left them (a reader may add files)
    return summary


def _stamp(run_dir: Path) -> tuple[int, ...] | None:
    """The store files' change times and sizes; None when the run lives in a server database."""
    if run_file(run_dir) is None:
        return None
    stamp: list[int] = []
    for name in (DB_FILE, f"{DB_FILE}-wal"):
        try:
            info = (run_dir / name).stat()
        except OSError:
            stamp += [-1, -1]
        else:
            stamp += [info.st_mtime_ns, info.st_size]
    return tuple(stamp)


def summarize(run_dir: Path) -> RunSummary:
    run_id = run_dir.name
    try:
        with reading(run_dir, run_id) as reader:
            return _summary_of(reader, run_id, _mtime(run_dir), run_dir)
    except RunNotFound:
        return RunSummary(run_id, _mtime(run_dir), problem="no run store here (run.db missing or empty)")
    except (StoreError, RunsError, OSError) as e:
        return RunSummary(run_id, _mtime(run_dir), problem=str(e))


def _summary_of(reader: StoreReader, run_id: str, started: float, run_dir: Path | None = None) -> RunSummary:
    sidecar = integrity.read_sidecar(run_dir) if run_dir is not None else None  # before the store: it follows
    try:
        with reader.snapshot() as snap:
            run = snap.run()
            agents = snap.agents()
            now = snap.now()
    except StoreError as e:
        return RunSummary(run_id, started, problem=str(e))
    status = run_status(run, now)
    running = sum(a.status == "running" for a in agents) if status in OWNED else 0
    owner = owner_text(run, now)
    if status == NOT_RESPONDING and owner is not None:
        age = heartbeat_age(run, now)
        owner += f", heartbeat {age:.0f} s old" if age is not None else ""
    return RunSummary(
        run_id, run.created_at, status, run.task, len(agents), running, run.usage,
        budget_usd=run.budget_usd, simulated=simulated(run), owner=owner,
        store_behind=max(0, sidecar - run.commits) if sidecar is not None else 0,
        owner_pid=run.owner.pid if owner is not None and run.owner is not None else None,
    )  # fmt: skip


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def render_ls(summaries: list[RunSummary], runs_dir: Path, now: float | None = None) -> list[str]:
    if not summaries:
        url = server_url()
        where = runs_dir if url is None else describe_store(url)
        return [f"no runs yet in {where}; start one with: teamrt run --prompt '...'"]
    now = time.time() if now is None else now
    rows = [("RUN", "STATUS", "AGE", "AGENTS", "COST", "TOKENS", "TASK")]
    for s in summaries:
        age = age_text(now - s.started)
        if s.problem is not None:
            rows.append((s.id, s.status, age, "", "", "", s.problem))
            continue
        agents = f"{s.agents}, {s.running} running" if s.running else str(s.agents)
        task = _clip((_lines(s.task) or [""])[0], TASK_CHARS)
        behind = ", store behind" if s.store_behind else ""
        status = s.status + behind + (f" ({s.owner})" if s.owner else "")
        cost = spent_text(s.usage.cost_usd, s.budget_usd, s.simulated)
        rows.append((s.id, status, age, agents, cost, f"{s.usage.total_tokens:,}", task))
    return [clean_line(line) for line in table(rows, right=(4, 5))]


def summary_json(s: RunSummary) -> dict[str, Any]:
    """One run of ``teamrt ls --json``; what could not be read is null (and ``problem`` says why)."""
    readable = s.problem is None
    return {
        "id": s.id,
        "status": s.status if readable else None,
        "started": iso_time(s.started),
        "task": s.task if readable else None,
        "agents": s.agents if readable else None,
        "running": s.running if readable else None,
        "cost_usd": s.usage.cost_usd if readable else None,
        "simulated": s.simulated if readable else None,
        "tokens": s.usage.total_tokens if readable else None,
        "budget_usd": s.budget_usd,
        "owner_pid": s.owner_pid,
        "store_behind": s.store_behind if readable else None,
        "problem": s.problem,
    }


# -- show ----------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """All ``show`` reads of a run, in one pass over its store."""

    run: RunRecord
    status: str
    agents: list[AgentRecord]
    turns: dict[str, list[TurnRecord]]
    tasks: list[TaskRecord]
    merges: list[MergeRecord]
    asks: list[PendingAsk]
    sandbox: dict[str, Any] | None
    store_behind: int = 0
    """Commits the store lacks against its run directory (``store.integrity``)."""
    db_now: float | None = None
    """The database's clock at the read, which the heartbeat is aged in (None: this machine's)."""
    set_aside: tuple[EventRecord, ...] = ()
    """The run's ``mail.quarantined`` events: message files damaged on disk (``runtime.lostmail``)."""


def read_shown(run_dir: Path, run_id: str) -> Shown:
    """What ``show`` says of the run, read in one transaction: one state of the run, even a live one."""
    sidecar = integrity.read_sidecar(run_dir)  # before the store: the file only ever follows it
    with reading(run_dir, run_id) as store, store.snapshot() as reader:
        run = reader.run()
        agents = reader.agents()
        turns = {a.name: reader.turns(a.name) for a in agents}
        db_now = reader.now()
        return Shown(
            run, run_status(run, db_now), agents, turns, reader.tasks(), reader.merges(),
            pending_asks(reader), sandbox_of(reader), db_now=db_now,
            store_behind=integrity.behind(run_dir, run.commits, sidecar) if sidecar is not None else 0,
            set_aside=tuple(reader.events(kinds=(MAIL_QUARANTINED,))),
        )  # fmt: skip


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
    lines = _header(run, status, now, shown.sandbox, more=None if full else more)
    if shown.store_behind:
        lines.append(f"store    {store_behind_line(run.id, shown.store_behind)}")
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
        "workdir": run.workdir,
        "started": iso_time(run.created_at),
        "finished": iso_time(run.finished_at),
        "heartbeat": iso_time(run.heartbeat_at),
        "owner_pid": owner.pid if owner else None,
        "owner_host": owner.host if owner else None,
        "budget_usd": run.budget_usd,
        "budget_tokens": run.budget_tokens,
        "cost_usd": u.cost_usd,
        "simulated": simulated(run),
        "tokens": u.total_tokens,
        "usage": _usage_json(u),
        "sandbox": describe_sandbox(shown.sandbox) if shown.sandbox is not None else None,
        "integration_branch": run.settings.get("integration_branch"),
        "agents": [
            {
                "name": a.name,
                "kind": a.kind,
                "parent": a.parent,
                "depth": depth,
                "role": a.role,
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
        head = f"asks unanswered when the run crashed (teamrt resume {run.id} closes them)"
    else:
        head = f"asks waiting (answer with: teamrt answer {run.id} ASK allow|deny)"
    rows = [("ASK", "AGENT", "CALL")] + [(a.id, a.agent, describe_call(a.tool, a.input)) for a in asks]
    return ["", head, *(f"  {line}" for line in table(rows))]


def _worktree_lines(run: RunRecord, agents: list[AgentRecord], merges: list[MergeRecord]) -> list[str]:
    """The merge queue's entries and the worktrees still on disk (kept ones: work not merged)."""
    lines = []
    if merges:
        rows = [("AGENT", "BRANCH", "STATUS", "ATTEMPTS", "COMMIT")]
        held = _held(run, merges)
        rows += [
            (m.agent, m.branch, _merge_status(m, held), str(m.attempts), (m.merged_commit or "-")[:12])
            for m in merges
        ]
        branch = run.settings.get("integration_branch", "?")
        lines += ["", f"merges onto {branch} (teamrt apply {run.id} brings it onto your branch)"]
        lines += [f"  {line}" for line in table(rows, right=(3,))]
    kept = _kept_worktrees(agents)
    if kept:
        lines += ["", "worktrees kept"]
        lines += [f"  {a.name}: {a.workspace} (branch {a.branch})" for a in kept]
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


def _kept_worktrees(agents: list[AgentRecord]) -> list[AgentRecord]:
    return [a for a in agents if a.kind == "worktree" and a.workspace and Path(a.workspace).exists()]


def _owned_by(run: RunRecord, status: str) -> str | None:
    """``owner_text`` for a run whose status is already known."""
    if run.owner is None or status not in OWNED:
        return None
    return f"pid {run.owner.pid}" + ("" if run.owner.host == host_identity() else f" on {run.owner.host}")


def _header(
    run: RunRecord, status: str, now: float, sandbox: dict[str, Any] | None, *, more: str | None
) -> list[str]:
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
    lines.append(f"cost     {money(u.cost_usd, simulated(run))}; {budget}")
    return lines


def sandbox_of(reader: StoreReader) -> dict[str, Any] | None:
    """What the run's agents' commands may reach, as its latest ``sandbox`` event says (None: not said)."""
    events = reader.events(kinds=(SANDBOX_EVENT,))
    return events[-1].data if events else None


def describe_sandbox(data: dict[str, Any]) -> str:
    """A ``sandbox`` event's data in one line."""
    return describe(
        confined=bool(data.get("confined")),
        unconfined=bool(data.get("unconfined")),
        network=bool(data.get("network")),
    )


def unconfined_run(data: dict[str, Any] | None) -> bool:
    """Whether the run's commands run without bubblewrap (it opted in, and there was none)."""
    return data is not None and not data.get("confined") and bool(data.get("unconfined"))


def agent_tree(agents: list[AgentRecord]) -> list[tuple[AgentRecord, int]]:
    """Agents depth-first from each root, with their depth; one whose parent is unknown is a root."""
    names = {a.name for a in agents}
    children: dict[str | None, list[AgentRecord]] = {}
    for a in agents:
        children.setdefault(a.parent if a.parent in names else None, []).append(a)
    out: list[tuple[AgentRecord, int]] = []
    stack = [(a, 0) for a in reversed(children.get(None, []))]
    while stack:
        agent, depth = stack.pop()
        out.append((agent, depth))
        stack += [(c, depth + 1) for c in reversed(children.get(agent.name, []))]
    return out


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
                a.role or "-",
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
        subject = " ".join(task.subject.split()) if full else _clip(task.subject, 60)
        rows.append((f"#{task.id}", task.status, task.owner or "-", subject, blocked))
    lines = [f"  {line}" for line in table(rows)]
    if not full:
        return lines
    out = lines[:1]
    for task, line in zip(tasks, lines[1:], strict=True):
        out += [line, *(f"      {said}" for said in _whole(task.description))]
    return out


# -- send and stop -------------------------------------------------------------


def send(run_dir: Path, run_id: str, agent: str, text: str) -> tuple[Sent, str]:
    """Deliver ``text`` from the user to ``agent`` (see ``steer.post``); returns it and the run's status."""
    if not text.strip():
        raise RunsError("the message is empty; nothing was sent")
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        names = [a.name for a in reader.agents()]
    if agent not in names:
        raise RunsError(_no_agent(run_id, agent, names))
    root = run_dir / MAILBOX_DIR
    if not steer.elsewhere(run_dir, run) and not (root / agent).is_dir():
        raise RunsError(f"agent {agent!r} of run {run_id!r} has no mailbox at {root / agent}")
    sent = _post(run_dir, run, recipient=agent, body=text, summary=preview(text, SUMMARY_CHARS))
    return sent, run_status(run)


def stop(run_dir: Path, run_id: str, agent: str | None) -> tuple[Sent, bool]:
    """Ask the run's supervisor to stop the run, or one agent, by a ``control`` message.

    Refused unless the run is live. Returns the message and whether the
    supervisor's mailbox had to be created (then no supervisor has read it yet).
    """
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        agents = {a.name: a for a in reader.agents()}
    status = run_status(run)
    if status == CRASHED:
        raise RunsError(f"run {run_id!r} crashed; resume it with teamrt resume {run_id}")
    if status not in OWNED:  # a not responding owner reads the mail when it goes on
        raise RunsError(f"run {run_id!r} is {status}; there is nothing to stop")
    if agent is not None:
        record = agents.get(agent)
        if record is None:
            raise RunsError(_no_agent(run_id, agent, list(agents)))
        if record.status not in LIVE_AGENT:
            raise RunsError(f"agent {agent!r} of run {run_id!r} is {record.status}; there is nothing to stop")
    created = not steer.elsewhere(run_dir, run) and not (run_dir / MAILBOX_DIR / SUPERVISOR).is_dir()
    sent = _post(
        run_dir, run, recipient=SUPERVISOR, register=True, kind="control",
        body=f"stop agent {agent}" if agent else "stop the run", data={"action": "stop", "agent": agent},
    )  # fmt: skip
    return sent, created


def _post(run_dir: Path, run: RunRecord, **fields: Any) -> Sent:
    """``steer.post``, its every failure one line: a refusal, a message mail cannot carry, a database
    out of reach."""
    try:
        return steer.post(run_dir, run, **fields)
    except (steer.SteerError, MailboxError) as e:
        raise RunsError(str(e)) from None
    except SQLAlchemyError as e:
        raise unreadable(run.id, e) from None


# -- permission asks ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PendingAsk:
    """A permission ask no one has answered yet: ``agent`` wants to call ``tool`` with ``input``."""

    id: str
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str
    """Why the call needs approval (the rule or the mode that asks)."""
    at: float
    """When it was asked (seconds since the epoch)."""
    wait_s: float = 0.0
    """How long it waits for a person from ``at`` before the run's policy answers."""


def pending_asks(reader: StoreReader) -> list[PendingAsk]:
    """The run's asks with no answer yet, oldest first (of a crashed run: those the crash left)."""
    events = reader.events(kinds=(ASK, ANSWERED))
    answered = {e.data.get("id") for e in events if e.kind == ANSWERED}
    return [as_pending(e) for e in events if e.kind == ASK and e.data.get("id") not in answered]


def as_pending(event: EventRecord) -> PendingAsk:
    data = event.data
    tool_input = data.get("input")
    wait = data.get("wait_s")
    return PendingAsk(
        id=str(data.get("id")),
        agent=event.agent or "?",
        tool=str(data.get("tool", "?")),
        input=tool_input if isinstance(tool_input, dict) else {},
        reason=str(data.get("reason", "")),
        at=event.at,
        wait_s=float(wait) if isinstance(wait, int | float) else 0.0,
    )


def answer(run_dir: Path, run_id: str, ask_id: str, allow: bool, reason: str | None = None) -> Sent:
    """Answer the waiting ask ``ask_id`` by a ``control`` message to the run's supervisor, as the user.

    Refused unless the run is live and the ask waits. The answer counts only if
    it reaches the supervisor before the ask's wait runs out (then the run's
    policy has answered, and the ``ask.answered`` event says so).
    """
    with reading(run_dir, run_id) as reader:
        run = reader.run()
        events = reader.events(kinds=(ASK, ANSWERED))
    status = run_status(run)
    if status == CRASHED:
        raise RunsError(f"run {run_id!r} crashed; resume it with teamrt resume {run_id}")
    if status not in OWNED:
        raise RunsError(f"run {run_id!r} is {status}; no ask waits for an answer")
    asked = {e.data.get("id"): e for e in events if e.kind == ASK}
    done = {e.data.get("id"): e for e in events if e.kind == ANSWERED}
    if ask_id not in asked:
        waiting = [str(i) for i in asked if i not in done]
        said = f"asks waiting: {', '.join(waiting)}" if waiting else "none is waiting"
        raise RunsError(f"no ask {_clip(ask_id, 40)!r} in run {run_id!r} ({said})")
    if ask_id in done:
        verdict = done[ask_id].data
        how = "allowed" if verdict.get("allowed") else "denied"
        raise RunsError(
            f"ask {ask_id!r} of run {run_id!r} was already answered: {how} by {verdict.get('by')}"
        )
    reason = " ".join(reason.split()) if reason else None
    call = describe_call(str(asked[ask_id].data.get("tool", "?")), asked[ask_id].data.get("input") or {})
    verb = "allow" if allow else "deny"
    return _post(
        run_dir,
        run,
        recipient=SUPERVISOR,
        register=True,
        kind="control",
        body=f"{verb} {ask_id} ({asked[ask_id].agent}: {call})" + (f": {reason}" if reason else ""),
        summary=f"{verb} {ask_id}",
        data={"action": "answer", "ask": ask_id, "allow": allow, "reason": reason or None},
    )


def describe_call(tool: str, tool_input: dict[str, Any]) -> str:
    """``bash: python3 -m unittest``: the tool, and the argument that says what the call is about."""
    key = next((k for k in ARGUMENT_KEYS if k in tool_input), None)
    if key is None:
        return tool
    return f"{tool}: {_clip(' '.join(str(tool_input[key]).split()), ARGUMENT_CHARS)}"


def _no_agent(run_id: str, agent: str, names: list[str]) -> str:
    known = ", ".join(sorted(names)) or "none yet"
    return f"no agent named {_clip(agent, 40)!r} in run {run_id!r} (its agents: {known})"


# -- text ----------------------------------------------------------------------


def age_text(seconds: float) -> str:
    """``42s``, ``3m``, ``2h``, ``4d``: the largest whole unit."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def duration_text(seconds: float) -> str:
    """``12s``, ``3m 12s``, ``2h 05m``, ``4d 3h``: two units at most."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def _first_lines(text: str, more: str) -> list[str]:
    """The first ``SHOWN_LINES`` lines of ``text``, each cut to ``LINE_CHARS``; when lines were left
    out, a last line says how many and the command that shows them (``more``)."""
    lines = [_clip(line, LINE_CHARS) for line in _lines(text)]
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def table(rows: Sequence[tuple[str, ...]], right: tuple[int, ...] = ()) -> list[str]:
    """Rows as aligned columns (``right`` ones right-aligned); the last column is never padded. Each
    cell is made safe for a terminal first (``clean_line``): its width is what the terminal shows."""
    rows = [tuple(clean_line(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row[:-1], widths, strict=True))
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines
