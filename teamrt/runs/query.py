"""Runs read from outside their owner: ``list_runs``, ``summarize``, ``read_shown``, ``pending_asks``.

What ``teamrt ls``, ``show``, ``logs``, the progress lines and the TUI know of a run comes from here,
as records (``RunSummary``, ``Shown``, ``PendingAsk``); ``teamrt.runs.report`` writes them as text or
JSON, ``teamrt.runs.steer`` acts on a run by mail.

Reads go through the store's read-only reader; the only writes are mail
(docs/architecture.md, Data flow 6: an onlooker acts by sending mail). A run recorded
as running whose owner is gone, or whose heartbeat is stale, is *crashed*; one whose
owner's process still lives on this host but whose heartbeat is stale (stopped by
SIGSTOP, or overloaded) is *not responding*: killing it makes it crashed. Heartbeats
are aged in the database's clock (``StoreReader.now``), which wrote them.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.exc import SQLAlchemyError

from teamrt.errors import UserError
from teamrt.mailbox import is_name
from teamrt.models.registry import is_sim
from teamrt.runs import queued
from teamrt.runs.identity import alone
from teamrt.runs.queued import QueuePlace
from teamrt.runtime.asking import ANSWERED, ASK
from teamrt.runtime.forecast import SPAWN_FORECAST
from teamrt.runtime.losses import MAIL_QUARANTINED
from teamrt.sandbox.bwrap import SANDBOX_EVENT
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
    queue_tables,
)
from teamrt.store import tables as t
from teamrt.store.engine import DB_FILE, reader_engine, run_file, server_url
from teamrt.store.engine import describe as describe_store
from teamrt.store.errors import database_reason
from teamrt.store.migrate import current_revision
from teamrt.store.ownership import GONE, host_identity, owner_state
from teamrt.store.ownership import NOT_RESPONDING as OWNER_NOT_RESPONDING
from teamrt.terminal import clean_line

CRASHED = "crashed"
NOT_RESPONDING = "not responding"
"""A running run whose owner's process is alive on this host while its heartbeat is stale."""
OWNED = ("running", NOT_RESPONDING)
"""The statuses of a run whose owner's process is there: its mail waits for it, nothing else may own it."""
LIVE_AGENT = ("pending", "running", "idle", "merging")


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
        except RunNotFound as e:
            said = why_unreadable(run_id, e)
            if said == str(e):
                raise
            raise RunsError(said) from None
        finally:
            reader.close()
    except SQLAlchemyError as e:
        raise unreadable(run_id, e) from None


def why_unreadable(run_id: str, e: Exception) -> str:
    """What to say of a run whose store could not be read: for a submitted run that no worker started
    (``teamrt submit``), that it is queued or ended before it started; else the error's own line."""
    url = server_url()
    if isinstance(e, RunNotFound) and url is not None:
        said = queue_tables.not_started(url, run_id)
        if said is not None:
            return clean_line(said)
    return str(e)


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
    alone: str | None = None
    """The agent definition a run of one agent runs (``run --agent``, ``identity.alone``); None: a team."""
    queue: QueuePlace | None = None
    """Its place in the queue, when the database holds one (``teamrt.queue.fleet``); None otherwise."""


SummaryCache = dict[str, tuple[tuple[int, ...], RunSummary]]
"""Summaries by run, with the stamp of the store's files they were read at (see ``list_runs``)."""


def list_runs(
    runs_dir: Path, cache: SummaryCache | None = None, *, batch: str | None = None
) -> list[RunSummary]:
    """Every run directory under ``runs_dir``, newest first; an unreadable one carries its problem.

    With ``cache`` (kept by a caller that lists again and again, the TUI), a
    run not live whose store files have not changed since is not read again:
    only a write (a resume's) can change what it says. A live run is always
    read, since its owner can die without writing. With ``batch``, only the runs of that batch of the
    queue (a server database's).
    """
    url = server_url()
    if url is not None:
        return _server_runs(url, runs_dir, batch)
    if not runs_dir.is_dir():
        return []
    found = [
        _summary(Path(entry.path), cache)
        for entry in os.scandir(runs_dir)
        if is_name(entry.name) and entry.is_dir(follow_symlinks=False)
    ]
    return sorted(found, key=lambda s: (s.started, s.id), reverse=True)


def _server_runs(url: str, runs_dir: Path, batch: str | None = None) -> list[RunSummary]:
    """Every run in the server database, whichever host it is on, with one connection; and a run
    directory here that the database does not have, as a problem. A database with a queue adds each
    run's place in it and the submitted runs not started yet (``teamrt.queue.fleet``)."""
    engine = reader_engine(url)
    try:
        with engine.connect() as conn:  # a database no run has reached has no schema yet: no runs
            has_runs = current_revision(conn) is not None
            ids = list(conn.execute(select(t.runs.c.id)).scalars()) if has_runs else []
        found = [_summary_of(StoreReader(engine, run_id), run_id, 0.0, runs_dir / run_id) for run_id in ids]
        if has_runs and engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                if queued.has_queue(conn):
                    found = with_queue(conn, found, batch)
                elif batch is not None:
                    raise RunsError(f"no batch {batch[:60]!r}: this database has no queue")
        if batch is not None:
            return found
    except SQLAlchemyError as e:
        reason = database_reason(e)
        raise RunsError(f"cannot read the runs in {describe_store(url)}: {reason}") from None
    finally:
        engine.dispose()
    if runs_dir.is_dir():
        known = {s.id for s in found}  # a queued run's directory (its clone) may come before its row
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
        owner_pid=run.owner.pid if owner is not None and run.owner is not None else None, alone=alone(run),
    )  # fmt: skip


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


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
    forecasts: tuple[EventRecord, ...] = ()
    """The run's ``spawn.forecast`` events: what its spawns were expected to cost (``runs.burndown``)."""


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
            forecasts=tuple(reader.events(kinds=(SPAWN_FORECAST,))),
        )  # fmt: skip


def sandbox_of(reader: StoreReader) -> dict[str, Any] | None:
    """What the run's agents' commands may reach, as its latest ``sandbox`` event says (None: not said)."""
    events = reader.events(kinds=(SANDBOX_EVENT,))
    return events[-1].data if events else None


def unconfined_run(data: dict[str, Any] | None) -> bool:
    """Whether the run's commands run without bubblewrap (it opted in, and there was none)."""
    return data is not None and not data.get("confined") and bool(data.get("unconfined"))


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


def placed(summary: RunSummary, run: queued.QueuedRun | None) -> RunSummary:
    """A run's ``ls`` line with its place in the queue; a crashed run whose next attempt waits for a
    worker says so."""
    if run is None:
        return dataclasses.replace(summary, queue=QueuePlace(None, None, None, 0))
    status = summary.status
    if status == CRASHED and not run.ended and run.attempt > 0 and not run.started:
        status = queued.waiting_text(run)
    place = QueuePlace(run.submitter, run.batch, run.host, run.attempt)
    return dataclasses.replace(summary, status=status, queue=place)


def unstarted(run: queued.QueuedRun) -> RunSummary:
    """The ``ls`` line of a submitted run with no ``runs`` row yet: queued, or ended before it started."""
    status = (run.end_status or "stopped") if run.ended else "queued"
    return RunSummary(
        run.run_id, run.submitted_at, status, run.prompt, budget_usd=run.budget_usd,
        queue=QueuePlace(run.submitter, run.batch, run.host, run.attempt),
    )  # fmt: skip


def with_queue(conn: Connection, summaries: list[RunSummary], batch: str | None) -> list[RunSummary]:
    """``ls``'s runs with their places in the queue, and the submitted runs not started yet; with
    ``batch``, only that batch's runs. A database no run was ever submitted to lists as before."""
    runs = queued.queued_runs(conn, batch=batch)
    if not runs and batch is None:
        return summaries
    shown = [placed(s, runs.get(s.id)) for s in summaries if batch is None or s.id in runs]
    known = {s.id for s in summaries}
    shown += [unstarted(run) for run in runs.values() if run.run_id not in known]
    return sorted(shown, key=lambda s: (s.started, s.id), reverse=True)
