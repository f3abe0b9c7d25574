"""What the run view shows, read from a run's store and directory: no Textual here.

``RunFollower`` keeps one read-only reader open; each read is one snapshot
(one transaction) and reads only what moved: turns and events after the last
ids it saw, and the records and open calls of the agents that changed since
the last read (``StoreReader.changed_agents``), with every agent read again
every ``FULL_READ_S`` all the same. ``changed()`` is SQLite's ``PRAGMA
data_version`` on a connection of its own: it moves only when another
connection commits, so an idle run costs one tiny query per poll. On
PostgreSQL it is a LISTEN for the owner's commits (``store.notify``): an idle
run costs a look at a socket. Everything here blocks; the app calls it from a
worker thread.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.mcp.capabilities import PROGRESS as MCP_PROGRESS
from teamrt.runs.burndown import BurnDown, burn_down
from teamrt.runs.identity import role_text
from teamrt.runs.query import (
    CRASHED,
    LIVE_AGENT,
    PendingAsk,
    as_pending,
    run_status,
    sandbox_of,
    unconfined_run,
)
from teamrt.runs.render import agent_tree
from teamrt.runtime.asking import ANSWERED, ASK
from teamrt.runtime.budget import HELD_FILE
from teamrt.runtime.forecast import SPAWN_FORECAST
from teamrt.runtime.losses import KINDS as LOSSES
from teamrt.runtime.stream import STREAM_DIR
from teamrt.sandbox.bwrap import SANDBOX_EVENT
from teamrt.store import (
    AgentRecord,
    EventRecord,
    MergeRecord,
    RunRecord,
    StoreReader,
    TaskRecord,
    ToolCallRecord,
    open_reader,
)
from teamrt.store import engine as eng
from teamrt.store.notify import COMMITS, Listener
from teamrt.tui.activity import activity
from teamrt.tui.detail import AgentDetail, DetailReader, streaming_now

EVENT_TAIL = 200
OPEN_CALLS = ("pending", "running")
FULL_READ_S = 2.0  # every agent is read again this often, whatever changed_agents says


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One line of the agent tree."""

    name: str
    depth: int
    kind: str
    role: str
    model: str
    status: str  # the stored status, or ``crashed`` for a live one in a crashed run
    activity: str
    turns: int
    tokens: int
    cache_share: float  # of the prompt tokens, the share read from the cache
    cost_usd: float
    changed_at: float  # the last commit that touched it (its record or a turn)


@dataclass(frozen=True, slots=True)
class RunState:
    run: RunRecord
    status: str  # as a user sees it: running, done, failed, stopped or crashed
    agents: tuple[AgentRow, ...]
    tasks: tuple[TaskRecord, ...]
    merges: tuple[MergeRecord, ...]
    asks: tuple[PendingAsk, ...]
    events: tuple[EventRecord, ...]  # the newest ``EVENT_TAIL``, oldest first
    detail: AgentDetail | None  # of the selected agent
    streaming: str  # what the selected agent's model is writing now, not yet a turn
    unconfined: bool = False  # the run's commands run without bubblewrap (it opted in)
    losses: tuple[EventRecord, ...] = ()  # every loss the run named (``runtime.losses``), oldest first
    burn: BurnDown | None = None  # spent, reserved and forecast against the budget (``runs.burndown``)

    def by_status(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.agents:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts


class RunFollower:
    """Reads one run as it goes on. Not thread-safe: one worker thread owns it."""

    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.reader: StoreReader = open_reader(run_dir, run_id)
        self._version = _DataVersion(run_dir, run_id)
        self._last_turn = 0
        self._events: deque[EventRecord] = deque(maxlen=EVENT_TAIL)
        self._turns: dict[str, int] = {}
        self._last_role: dict[str, str] = {}
        self._turn_at: dict[str, float] = {}
        self._detail = DetailReader(run_dir)
        self._asked: dict[str, EventRecord] = {}  # asks not answered yet, by id
        self._asking: set[str] = set()  # the agents with an ask waiting, as their rows show
        self._progress: dict[str, dict[str, Any]] = {}  # each agent's latest MCP progress (mcp.progress)
        self._stream_size = 0
        self._records: dict[str, AgentRecord] = {}
        self._calls: dict[str, list[ToolCallRecord]] = {}  # each agent's calls not finished
        self._rows: dict[str, AgentRow] = {}
        self._depth: dict[str, int] = {}  # the agents depth-first, each with its depth in the tree
        self._tasks: tuple[TaskRecord, ...] = ()
        self._merges: tuple[MergeRecord, ...] = ()
        self._detail_of: AgentDetail | None = None
        self._status = ""
        self._since: float | None = None  # the writer's time of the latest change read
        self._full_at = 0.0
        self._unconfined = False
        self._losses: list[EventRecord] = []
        self._forecasts: list[EventRecord] = []  # every ``spawn.forecast`` of the run
        self._held_at = 0  # the mtime of the run's published reservations (``HELD_FILE``) last seen

    def close(self) -> None:
        self._version.close()
        self.reader.close()

    def changed(self, selected: str | None) -> bool:
        """Whether anything was committed since the last call, or the ``selected`` agent's model has
        written more text."""
        committed = self._version.changed()
        try:
            size = (self.run_dir / STREAM_DIR / selected).stat().st_size if selected else 0
        except OSError:
            size = 0
        streamed, self._stream_size = size != self._stream_size, size
        try:  # a call that starts or ends changes what is reserved, before anything is committed
            held_at = (self.run_dir / HELD_FILE).stat().st_mtime_ns
        except OSError:
            held_at = 0
        held, self._held_at = held_at != self._held_at, held_at
        return committed or streamed or held

    def read(self, selected: str | None) -> RunState:
        """What the run view shows now. A server lost mid-read is read again, for the reader's grace: a
        read only moves this follower on past what it has seen, so a repeat shows nothing twice."""

        def once() -> RunState:
            with self.reader.snapshot() as reader:
                return self._read(reader, selected)

        return eng.reconnecting(once, self.reader.grace_s, f"the run view of {self.run_id}")

    def _read(self, reader: StoreReader, selected: str | None) -> RunState:
        run = reader.run()
        status = run_status(run)
        full = self._since is None or time.monotonic() - self._full_at >= FULL_READ_S
        moved = self._read_agents(reader, full)
        if len(self._depth) != len(self._records):
            self._depth = {a.name: depth for a, depth in agent_tree(list(self._records.values()))}
            moved = set(self._records)
        if status != self._status:  # a crash (or its resume) changes how every live agent is shown
            self._status, moved = status, set(self._records)
        if self._events:
            new = reader.events(self._events[-1].id)
            self._losses += [e for e in new if e.kind in LOSSES]
            self._forecasts += [e for e in new if e.kind == SPAWN_FORECAST]
        else:  # the first read: the tail, and every ask and loss of the run
            new = reader.last_events(EVENT_TAIL)
            self._note_asks(reader.events(kinds=(ASK, ANSWERED)))
            self._unconfined = unconfined_run(sandbox_of(reader))
            self._losses = reader.events(kinds=tuple(sorted(LOSSES)))  # older than the tail too
            self._forecasts = reader.events(kinds=(SPAWN_FORECAST,))
        self._events.extend(new)
        for event in new:
            if event.kind == SANDBOX_EVENT:  # recorded as the run starts, and as it is resumed
                self._unconfined = unconfined_run(event.data)
        kinds = {e.kind.split(".")[0] for e in new}
        for event in new:
            if event.kind == MCP_PROGRESS and event.agent:
                self._progress[event.agent] = event.data
                moved.add(event.agent)
        self._note_asks(e for e in new if e.kind in (ASK, ANSWERED))
        # an agent whose ask waits shows it; a crashed run's asks wait for nothing (its resume asks again)
        asking = {e.agent or "" for e in self._asked.values()} if status == "running" else set()
        moved |= asking ^ self._asking
        self._asking = asking
        for name in moved & self._records.keys():
            self._rows[name] = self._row(self._records[name], self._calls.get(name, []), status)
        if full or "task" in kinds:
            self._tasks = tuple(reader.tasks())
        if full or "merge" in kinds:
            self._merges = tuple(reader.merges())
        record = self._records.get(selected or "")
        if record is None:
            self._detail_of = None
        elif full or record.name in moved or self._detail_of is None or self._detail_of.name != record.name:
            self._detail_of = self._detail.read(reader, record, run)
        return RunState(
            run=run,
            status=status,
            agents=tuple(self._rows[name] for name in self._depth),
            tasks=self._tasks,
            merges=self._merges,
            # a crashed run's asks cannot be answered; its resume asks them again
            asks=tuple(as_pending(e) for e in self._asked.values()) if status == "running" else (),
            events=tuple(self._events),
            detail=self._detail_of,
            streaming=self._streaming(record),
            unconfined=self._unconfined,
            losses=tuple(self._losses),
            burn=burn_down(
                run, self._records.values(), self._forecasts, self.run_dir, live=status == "running"
            ),
        )

    def _streaming(self, agent: AgentRecord | None) -> str:
        if agent is None or agent.status != "running" or self._last_role.get(agent.name) == "assistant":
            return ""
        return streaming_now(self.run_dir, agent.name)

    def _read_agents(self, reader: StoreReader, full: bool) -> set[str]:
        """Read the agents that moved since the last read (all of them when ``full``); their names."""
        moved: set[str] = set()
        for turn_id, agent, role, at in reader.turn_heads(self._last_turn):
            self._last_turn = turn_id
            self._turns[agent] = self._turns.get(agent, 0) + (role == "assistant")
            self._last_role[agent] = role
            self._turn_at[agent] = at
            moved.add(agent)
        if full:
            self._since = reader.changed_agents(self._since or 0.0)[1]
            self._records = {a.name: a for a in reader.agents()}
            self._calls = _by_agent(reader.tool_calls(statuses=OPEN_CALLS))
            self._full_at = time.monotonic()
            return set(self._records)
        assert self._since is not None
        changed, self._since = reader.changed_agents(self._since)
        moved |= changed
        if moved:
            self._records.update((a.name, a) for a in reader.agents(moved))
            calls = _by_agent(reader.tool_calls(statuses=OPEN_CALLS, agents=moved))
            self._calls.update((name, calls.get(name, [])) for name in moved)
        return moved

    def _note_asks(self, events: Iterable[EventRecord]) -> None:
        for event in events:
            if event.kind == ASK:
                self._asked[str(event.data.get("id"))] = event
            else:
                self._asked.pop(str(event.data.get("id")), None)

    def _row(self, a: AgentRecord, calls: list[ToolCallRecord], run_status: str) -> AgentRow:
        u = a.usage
        prompt = u.input_tokens + u.cache_creation_tokens + u.cache_read_tokens
        crashed = run_status == CRASHED and a.status in LIVE_AGENT
        return AgentRow(
            name=a.name,
            depth=self._depth.get(a.name, 0),
            kind=a.kind,
            role=role_text(a),  # a lead running another agent file (run --agent) shows that one
            model=a.model,
            status=CRASHED if crashed else a.status,
            # of a crashed one: when it crashed
            activity=activity(
                a,
                self._last_role.get(a.name),
                calls,
                asking=a.name in self._asking,
                progress=self._progress.get(a.name),
            ),
            turns=self._turns.get(a.name, 0),
            tokens=u.total_tokens,
            cache_share=u.cache_read_tokens / prompt if prompt else 0.0,
            cost_usd=u.cost_usd,
            changed_at=max(a.updated_at, self._turn_at.get(a.name, 0.0)),
        )


def _by_agent(calls: list[ToolCallRecord]) -> dict[str, list[ToolCallRecord]]:
    out: dict[str, list[ToolCallRecord]] = {}
    for call in calls:
        out.setdefault(call.agent, []).append(call)
    return out


class _DataVersion:
    """Whether another connection committed to the run since the last look: SQLite's count of other
    connections' commits to the run's file, PostgreSQL's commit notifications for the run (True, to read
    once, when the listener has just connected), or always True on another server database."""

    def __init__(self, run_dir: Path, run_id: str) -> None:
        path = eng.run_file(run_dir)
        url = eng.server_url()
        self._conn = (
            sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            if path is not None
            else None
        )
        self._listener = Listener(url, COMMITS, run_id) if url is not None and eng.is_postgres(url) else None
        self._seen: int | None = None

    def changed(self) -> bool:
        if self._listener is not None:
            return self._listener.wait(0)
        if self._conn is None:
            return True
        version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        moved = version != self._seen
        self._seen = version
        return moved

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._listener is not None:
            self._listener.close()
