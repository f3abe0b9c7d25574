"""What the run view shows, read from a run's store and directory: no Textual here.

``RunFollower`` keeps one read-only reader open and reads incrementally:
turns and events after the last ids it saw, the rest (run, agents, calls
still open, tasks, merges, asks) whole, as those stay small. ``changed()``
is SQLite's ``PRAGMA data_version`` on a connection of its own: it moves
only when another connection commits, so an idle run costs one tiny query
per poll. Everything here blocks; the app calls it from a worker thread.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..runs import CRASHED, LIVE_AGENT, PendingAsk, agent_tree, pending_asks, run_status
from ..store import (
    AgentRecord,
    EventRecord,
    MergeRecord,
    RunRecord,
    StoreReader,
    TaskRecord,
    ToolCallRecord,
    open_reader,
)
from ..store import engine as eng
from .activity import activity
from .detail import AgentDetail, DetailReader

EVENT_TAIL = 200
OPEN_CALLS = ("pending", "running")


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
    read_at: float = field(default_factory=time.time)

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
        self._version = _DataVersion(run_dir)
        self._last_turn = 0
        self._events: deque[EventRecord] = deque(maxlen=EVENT_TAIL)
        self._turns: dict[str, int] = {}
        self._last_role: dict[str, str] = {}
        self._turn_at: dict[str, float] = {}
        self._detail = DetailReader(run_dir)

    def close(self) -> None:
        self._version.close()
        self.reader.close()

    def changed(self) -> bool:
        """Whether anything was committed since the last call (always True on a server database)."""
        return self._version.changed()

    def read(self, selected: str | None) -> RunState:
        reader = self.reader
        run = reader.run()
        status = run_status(run)
        for turn_id, agent, role, at in reader.turn_heads(self._last_turn):
            self._last_turn = turn_id
            self._turns[agent] = self._turns.get(agent, 0) + (role == "assistant")
            self._last_role[agent] = role
            self._turn_at[agent] = at
        records = reader.agents()
        calls: dict[str, list[ToolCallRecord]] = {}
        for call in reader.tool_calls(statuses=OPEN_CALLS):
            calls.setdefault(call.agent, []).append(call)
        rows = tuple(self._row(a, depth, calls.get(a.name, []), status) for a, depth in agent_tree(records))
        self._events.extend(
            reader.events(self._events[-1].id) if self._events else reader.last_events(EVENT_TAIL)
        )
        record = next((a for a in records if a.name == selected), None)
        return RunState(
            run=run,
            status=status,
            agents=rows,
            tasks=tuple(reader.tasks()),
            merges=tuple(reader.merges()),
            asks=tuple(pending_asks(reader)),
            events=tuple(self._events),
            detail=self._detail.read(reader, record, run) if record else None,
        )

    def _row(self, a: AgentRecord, depth: int, calls: list[ToolCallRecord], run_status: str) -> AgentRow:
        u = a.usage
        prompt = u.input_tokens + u.cache_creation_tokens + u.cache_read_tokens
        crashed = run_status == CRASHED and a.status in LIVE_AGENT
        return AgentRow(
            name=a.name,
            depth=depth,
            kind=a.kind,
            role=a.role or "-",
            model=a.model,
            status=CRASHED if crashed else a.status,
            activity=activity(a, self._last_role.get(a.name), calls),  # of a crashed one: when it crashed
            turns=self._turns.get(a.name, 0),
            tokens=u.total_tokens,
            cache_share=u.cache_read_tokens / prompt if prompt else 0.0,
            cost_usd=u.cost_usd,
            changed_at=max(a.updated_at, self._turn_at.get(a.name, 0.0)),
        )


class _DataVersion:
    """SQLite's count of other connections' commits to the run's file."""

    def __init__(self, run_dir: Path) -> None:
        path = eng.run_file(run_dir)
        self._conn = (
            sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            if path is not None
            else None
        )
        self._seen: int | None = None

    def changed(self) -> bool:
        if self._conn is None:
            return True
        version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        moved = version != self._seen
        self._seen = version
        return moved

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
