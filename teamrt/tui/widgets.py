"""The run view's parts, each fed a ``RunState`` (or a part of it) on the app's thread."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, RichLog, Static

from ..logs import describe_event
from ..runs import PendingAsk, age_text, duration_text
from ..store import EventRecord, MergeRecord, TaskRecord
from .activity import describe_call
from .detail import AgentDetail, Line
from .look import LINE_MARK, LINE_STYLE, STATUS_STYLE, cost_text, name_text, status_text, tokens_text
from .state import AgentRow, RunState

AGENT_COLUMNS = ("agent", "kind", "role", "model", "status", "turns", "tokens", "cache", "cost", "activity")


def agent_cells(row: AgentRow) -> tuple[Text | str, ...]:
    return (
        name_text(row.name, row.depth, row.status),
        row.kind,
        row.role,
        row.model,
        status_text(row.status),
        Text(str(row.turns), justify="right"),
        Text(tokens_text(row.tokens), justify="right"),
        Text(f"{row.cache_share:.0%}", justify="right"),
        Text(cost_text(row.cost_usd), justify="right"),
        row.activity,
    )


class KeyTable(DataTable[Text | str]):
    """A table moved with j/k as well as the arrows, filled with columns as wide as their cells.

    Columns get their widths when the table is filled, not from DataTable's
    auto width: that is measured only when the table is idle, and until then a
    table filled between two paints shows the old widths.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
    ]

    def fill(
        self,
        columns: Sequence[str],
        rows: Sequence[tuple[str, Sequence[Text | str]]],
        fixed: Mapping[str, int],
    ) -> None:
        """Replace columns and rows (``(key, cells)``); a column in ``fixed`` has that width."""
        self.clear(columns=True)
        for i, column in enumerate(columns):
            width = fixed.get(column) or max([len(column), *(_cell_len(cells[i]) for _, cells in rows)])
            self.add_column(column, key=column, width=width)
        for key, cells in rows:
            self.add_row(*cells, key=key)

    @property
    def cursor_key(self) -> str | None:
        if self.row_count == 0:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)

    def keep_cursor_on(self, key: str | None, keys: Sequence[str]) -> None:
        if key in keys:
            self.move_cursor(row=keys.index(key), animate=False)


def _cell_len(cell: Text | str) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


AGENT_WIDTHS = {"status": 7, "turns": 5, "tokens": 6, "cache": 5, "cost": 8, "activity": 72}
"""The columns whose cells change as a run goes on: as wide as their widest value can be."""


class AgentTable(KeyTable):
    """The agent tree, one row per agent, keyed by name; updated cell by cell, the cursor kept."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", **kwargs)  # type: ignore[arg-type]
        self._rows: dict[str, AgentRow] = {}
        self._order: list[str] = []

    @property
    def selected(self) -> str | None:
        return self.cursor_key

    def apply(self, rows: Sequence[AgentRow]) -> list[AgentRow]:
        """Show ``rows``; returns those that changed (all of them when the tree changed shape)."""
        order = [r.name for r in rows]
        if order != self._order:
            selected = self.selected
            self.fill(AGENT_COLUMNS, [(r.name, agent_cells(r)) for r in rows], AGENT_WIDTHS)
            self._order = order
            self._rows = {r.name: r for r in rows}
            self.keep_cursor_on(selected, order)
            return list(rows)
        changed = []
        for row in rows:
            old = self._rows[row.name]
            if row == old:
                continue
            changed.append(row)
            for column, new, was in zip(AGENT_COLUMNS, agent_cells(row), agent_cells(old), strict=True):
                if new != was:
                    self.update_cell(row.name, column, new)
            self._rows[row.name] = row
        return changed


class Totals(Static):
    """The run's header: its status and age, agents by status, cost against budget, asks waiting."""

    def show(self, state: RunState, now: float) -> None:
        run = state.run
        line = Text()
        line.append(f"run {run.id} ", style="bold")
        line.append(state.status, style=STATUS_STYLE.get(state.status, "bold"))
        if run.status_reason:
            line.append(f": {run.status_reason}", style="dim")
        end = run.finished_at or (run.heartbeat_at if state.status == "crashed" else None) or now
        line.append(
            f"   ran {duration_text(end - run.created_at)}, started {age_text(now - run.created_at)} ago"
        )
        line.append(f"   {' '.join(run.task.split())}", style="italic")
        line.append("\nagents ")
        counts = state.by_status()
        for i, (status, n) in enumerate(sorted(counts.items(), key=lambda kv: _STATUS_ORDER.get(kv[0], 9))):
            line.append(", " if i else "")
            line.append(f"{n} {status}", style=STATUS_STYLE.get(status, ""))
        u = run.usage
        prompt = u.input_tokens + u.cache_creation_tokens + u.cache_read_tokens
        line.append(f"   cost {cost_text(u.cost_usd)}")
        if run.budget_usd:
            share = u.cost_usd / run.budget_usd
            line.append(
                f" of {cost_text(run.budget_usd)} ({share:.0%})", style="bold red" if share >= 0.9 else ""
            )
        line.append(f"   tokens {tokens_text(u.total_tokens)}")
        if run.budget_tokens:
            line.append(f" of {tokens_text(run.budget_tokens)}")
        line.append(f", {u.cache_read_tokens / prompt if prompt else 0:.0%} from cache")
        if state.asks:
            line.append(
                f"   {len(state.asks)} ask{'s' if len(state.asks) > 1 else ''} waiting: a/d",
                style="bold black on yellow",
            )
        if state.status == "crashed":
            line.append("   r resumes it", style="bold")
        line.no_wrap = True
        line.overflow = "ellipsis"
        self.update(line)


_STATUS_ORDER = {
    s: i
    for i, s in enumerate(("running", "idle", "merging", "pending", "done", "stopped", "failed", "crashed"))
}


class AgentTitle(Static):
    """Whose detail this is: ``coder-1  worktree agent  merging``."""

    def show(self, detail: AgentDetail | None) -> None:
        if detail is None:
            self.update("")
            return
        line = Text()
        line.append(detail.name, style="bold")
        line.append(f"  {detail.kind} agent  ", style="dim")
        line.append(detail.status, style=STATUS_STYLE.get(detail.status, ""))
        if detail.status_reason:
            line.append(f": {detail.status_reason}", style="dim")
        line.no_wrap = True
        line.overflow = "ellipsis"
        self.update(line)


class Transcript(Static):
    """The selected agent's transcript, tool calls folded unless ``unfolded``."""

    def show(self, detail: AgentDetail | None, asks: Sequence[PendingAsk], *, unfolded: bool) -> None:
        if detail is None:
            self.update(Text("no agent selected", style="dim"))
            return
        text = Text()
        for line in detail.transcript:
            _line(text, line, unfolded)
        for ask in asks:
            text.append(
                f"\n? asks to run {describe_call(ask.tool, ask.input)}: {ask.reason} (a approves, d denies)",
                style="bold black on yellow",
            )
        if not detail.transcript:
            text.append("(nothing yet)", style="dim")
        self.update(text)


def _line(text: Text, line: Line, unfolded: bool) -> None:
    if text:
        text.append("\n")
    text.append(LINE_MARK.get(line.kind, ""), style="dim")
    text.append(line.text, style=LINE_STYLE.get(line.kind, ""))
    if unfolded and line.more:
        text.append("\n" + "\n".join("    " + part for part in line.more.splitlines()), style="dim")


class MailView(Static):
    def show(self, detail: AgentDetail | None, now: float) -> None:
        if detail is None:
            self.update("")
            return
        text = Text()
        unread = sum(letter.at is None for letter in detail.inbox)
        text.append(
            f"inbox: {len(detail.inbox)}" + (f", {unread} not read yet" if unread else ""), style="bold"
        )
        for letter in detail.inbox:
            when = "unread" if letter.at is None else f"{age_text(now - letter.at)} ago"
            text.append(f"\n  {when:>8}  from {letter.peer:<14} {letter.kind:<8} {letter.summary}")
        text.append(f"\n\noutbox: {len(detail.outbox)}", style="bold")
        for letter in detail.outbox:
            when = f"{age_text(now - letter.at)} ago" if letter.at else ""
            text.append(f"\n  {when:>8}  to   {letter.peer:<14} {letter.kind:<8} {letter.summary}")
        self.update(text)


class WorktreeView(Static):
    def show(self, detail: AgentDetail | None, merges: Sequence[MergeRecord]) -> None:
        if detail is None or detail.kind != "worktree":
            self.update(Text("not a worktree agent", style="dim"))
            return
        text = Text()
        text.append(f"branch     {detail.branch or '-'}\nworktree   {detail.workspace or '-'}\n")
        merge = next((m for m in merges if m.agent == detail.name), None)
        if merge is not None:
            said = f"merge      {merge.status}, attempt {merge.attempts}"
            said += f", commit {merge.merged_commit[:12]}" if merge.merged_commit else ""
            text.append(
                said + "\n", style=STATUS_STYLE.get("done" if merge.status == "merged" else "merging", "")
            )
        text.append("\n" + detail.diff_stat)
        self.update(text)


class TaskTable(KeyTable):
    COLUMNS = ("#", "status", "owner", "subject")

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="none", **kwargs)  # type: ignore[arg-type]
        self._shown: tuple[TaskRecord, ...] | None = None

    def show(self, tasks: tuple[TaskRecord, ...]) -> None:
        if tasks == self._shown:
            return
        rows = [(str(t.id), (f"#{t.id}", t.status, t.owner or "-", t.subject)) for t in tasks]
        self.fill(self.COLUMNS, rows, {"status": 11})
        self._shown = tasks


def _event_line(event: EventRecord, started: float) -> Text:
    """``+12.3s coder-1 merge.merged attempt 1, ...``: ``teamrt logs``'s line, narrower."""
    line = Text(f"+{max(0.0, event.at - started):.1f}s ", style="dim")
    line.append(f"{event.agent or 'run'} ", style="bold")
    line.append(f"{event.kind} ", style=EVENT_STYLE.get(event.kind.split(".")[0], ""))
    line.append(describe_event(event))
    return line


EVENT_STYLE = {
    "agent": "cyan",
    "merge": "magenta",
    "task": "green",
    "ask": "bold yellow",
    "control": "yellow",
}


class EventLog(RichLog):
    """The tail of the run's event log; writes only the events it has not shown yet."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_lines=500, wrap=False, **kwargs)  # type: ignore[arg-type]
        self._last = 0

    def show(self, state: RunState) -> None:
        new = [e for e in state.events if e.id > self._last]
        if not new:
            return
        following = self.scroll_y >= self.max_scroll_y
        for event in new:
            self.write(_event_line(event, state.run.created_at), scroll_end=False)
        self._last = new[-1].id
        if following:  # the user had not scrolled back: keep the newest in view, once laid out
            self.call_after_refresh(self.scroll_end, animate=False)
