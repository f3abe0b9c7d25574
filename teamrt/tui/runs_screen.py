"""The runs list: every run under the teamrt home, newest first, read again every ``REREAD_S``."""

from __future__ import annotations

import threading
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from teamrt.runs.query import CRASHED, RunSummary, SummaryCache, list_runs
from teamrt.runs.render import age_text, spent_text
from teamrt.terminal import clean
from teamrt.tui.look import status_text, tokens_text
from teamrt.tui.screen import OpenRun, TeamScreen, TuiOptions
from teamrt.tui.widgets import KeyTable

REREAD_S = 1.0
TASK_CHARS = 60
COLUMNS = ("run", "status", "age", "agents", "cost", "tokens", "task")


def _cells(s: RunSummary, now: float) -> tuple[Text | str, ...]:
    task = s.problem or (clean(s.task).strip().split("\n") or [""])[0]
    return (
        s.id,
        status_text(s.status),
        age_text(now - s.started),
        f"{s.agents}, {s.running} running" if s.running else str(s.agents or ""),
        Text(
            spent_text(s.usage.cost_usd, s.budget_usd, s.simulated) if not s.problem else "", justify="right"
        ),
        Text(tokens_text(s.usage.total_tokens) if not s.problem else "", justify="right"),
        Text(task[:TASK_CHARS], style="red" if s.problem else ""),
    )


class RunsRead(Message):
    def __init__(self, runs: list[RunSummary]) -> None:
        super().__init__()
        self.runs = runs

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunsRead)


class RunsScreen(TeamScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "open", show=True, priority=False),
        Binding("r", "resume", "resume"),  # offered on a crashed run; the key says why not on another
        Binding("r", "resume(False)", show=False),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("question_mark", "app.help", "help"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, options: TuiOptions) -> None:
        super().__init__(options)
        self.runs: list[RunSummary] = []
        self.rereads = threading.Event()  # set: read the runs list again now
        self._resumable = False  # the selected run crashed: the footer offers r
        self._filter = ""
        self._cache: SummaryCache = {}  # the worker's: runs not live are read again only when written

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title")
        yield Input(placeholder="filter runs by id, status or task", id="filter", classes="hidden")
        yield KeyTable(id="runs", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs", KeyTable).focus()
        self._read()

    @work(thread=True, exclusive=True, group="runs")
    def _read(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            if self.app.screen is self:  # under a run view it waits (the app wakes it on the way back)
                self.post_message(RunsRead(list_runs(self.options.runs_dir, self._cache)))
            self.rereads.wait(REREAD_S)
            self.rereads.clear()

    def on_runs_read(self, message: RunsRead) -> None:
        self.runs = message.runs
        self._show()

    def _show(self) -> None:
        table = self.query_one("#runs", KeyTable)
        selected = table.cursor_key
        now = self.options.clock()
        shown = [
            s for s in self.runs if not self._filter or self._filter in f"{s.id} {s.status} {s.task}".lower()
        ]
        table.fill(COLUMNS, [(s.id, _cells(s, now)) for s in shown], {})
        table.keep_cursor_on(selected, [s.id for s in shown])
        self._offer()
        title = Text("teamrt", style="bold").append(
            f"  {len(self.runs)} run{'s' if len(self.runs) != 1 else ''}"
        )
        if not self.runs:
            where = self.options.runs_dir
            title.append(
                f"\n\nno runs yet in {where}; start one with: teamrt run TEAMFILE --tui, or teamrt demo"
            )
        self.query_one("#runs-title", Static).update(title)

    def _selected(self) -> str | None:
        return self.query_one("#runs", KeyTable).cursor_key

    def _summary(self) -> RunSummary | None:
        run = self._selected()
        return next((s for s in self.runs if s.id == run), None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "resume" and not parameters:
            return self._resumable
        return True

    @on(DataTable.RowHighlighted, "#runs")
    def _offer(self) -> None:
        summary = self._summary()
        resumable = summary is not None and summary.status == CRASHED
        if resumable != self._resumable:
            self._resumable = resumable
            self.refresh_bindings()

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        run = self._selected()
        if run is not None:
            self.post_message(OpenRun(run))

    def action_resume(self, offered: bool = True) -> None:
        """``r``; ``offered``: from the footer's binding (else the hidden one that says why not)."""
        summary = self._summary()
        if summary is not None:
            self.resume(summary.id, summary.status)

    def acted(self) -> None:
        self.rereads.set()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = event.value.strip().lower()
        self._show()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.query_one("#runs", KeyTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.add_class("hidden")
        self.query_one("#runs", KeyTable).focus()
