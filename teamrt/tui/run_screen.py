"""The run view: header totals, the agent tree, the selected agent's detail, tasks and events.

A worker thread owns a ``RunFollower``: it polls SQLite's data version (and
the selected agent's stream file) every ``POLL_S``, and reads the run when
something moved, at most every ``MIN_GAP_S`` and only once the last read has
been shown; at once when the user selects another agent or acts; and every
``REREAD_S`` anyway (ages move, and a dead owner commits nothing). Each read
is posted as one ``StateRead`` message, which replaces one still queued.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from sqlalchemy.exc import SQLAlchemyError
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Input, TabbedContent, TabPane
from textual.worker import get_current_worker

from teamrt.mcp.capabilities import ELICITATION_ASK
from teamrt.runs.query import CRASHED, PendingAsk, RunsError, unreadable, why_unreadable
from teamrt.runs.render import describe_call
from teamrt.store import StoreError
from teamrt.tui import actions, paging
from teamrt.tui.agent_list import AgentList
from teamrt.tui.dialogs import ConfirmDialog, FollowUpDialog, FormDialog, MessageDialog, NoteDialog
from teamrt.tui.diff_view import DiffView
from teamrt.tui.look import ENDED, NARROW, plain
from teamrt.tui.notifying import RunAlerts
from teamrt.tui.screen import OpenRuns, TeamScreen, TuiOptions
from teamrt.tui.state import RunFollower, RunState
from teamrt.tui.statusline import StatusBar
from teamrt.tui.widgets import AgentTitle, EventLog, MailView, TaskTable, Totals, Transcript, WorktreeView

POLL_S = 0.05
MIN_GAP_S = 0.15  # between two reads while commits keep coming: each read is a repaint
REREAD_S = 1.0


class StateRead(Message):
    def __init__(self, state: RunState) -> None:
        super().__init__()
        self.state = state

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StateRead)


class ReadFailed(Message):
    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem


class RunScreen(TeamScreen):
    # An action that cannot apply now (``_why_not``) is left out of the footer and its key falls
    # through to the hidden ``refused`` binding after it, which says why in one line.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back"),
        Binding("j", "move(1)", "down", show=False),
        Binding("k", "move(-1)", "up", show=False),
        Binding("m", "message", "message"),
        Binding("m", "refused('message')", show=False),
        Binding("x", "stop", "stop"),
        Binding("x", "refused('stop')", show=False),
        Binding("a", "answer(True)", "approve"),
        Binding("a", "refused('answer')", show=False),
        Binding("d", "answer(False)", "deny"),
        Binding("d", "refused('answer')", show=False),
        Binding("A", "answer(True, True)", "always", show=False),  # the help names A and D
        Binding("A", "refused('answer')", show=False),
        Binding("D", "answer(False, False, True)", "deny, with a note", show=False),
        Binding("D", "refused('answer')", show=False),
        Binding("r", "resume", "resume"),
        Binding("r", "refused('resume')", show=False),
        Binding("c", "follow_up", "continue"),
        Binding("c", "refused('follow_up')", show=False),
        Binding("slash", "filter", "filter"),
        Binding("f", "unfold", "unfold"),
        Binding("t", "next_tab", "tab"),  # offered on a wide screen; the keys work on any (tui.paging)
        Binding("t", "next_tab(1)", show=False),
        Binding("T", "next_tab(-1)", show=False),
        Binding("pagedown", "page(1)", show=False, priority=True),  # the agent list keeps the focus
        Binding("pageup", "page(-1)", show=False, priority=True),
        Binding("right_square_bracket", "diff_file(1)", show=False),  # the diff tab: next file
        Binding("left_square_bracket", "diff_file(-1)", show=False),  # and the previous one
        Binding("question_mark", "app.help", "help"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, options: TuiOptions, run_dir: Path, run_id: str) -> None:
        super().__init__(options)
        self.run_dir = run_dir
        self.run_id = run_id
        self.state: RunState | None = None
        self._selected: str | None = None
        self._wake = threading.Event()
        self._consumed = threading.Event()  # the last state read has been shown
        self._consumed.set()
        self._filter = ""
        self._unfolded = False
        self._shown_agent: str | None = None
        self._answered: set[str] = set()  # asks answered from here
        self._offered = frozenset(OFFERED)  # the actions the footer offers (all, until the run is read)
        self._alerts = RunAlerts(run_id)  # the bell and a toast when an ask waits or the run ends

    def compose(self) -> ComposeResult:
        yield Totals(id="totals")
        yield Input(
            placeholder="filter agents by name, role, status or activity", id="filter", classes="hidden"
        )
        yield AgentList(id="agents")
        with Horizontal(id="bottom"):
            with Vertical(id="detail"):
                yield AgentTitle(id="agent-title")
                yield from self._tabs()
            with Vertical(id="side"):
                yield TaskTable(id="tasks")
                yield EventLog(id="events")
        yield StatusBar(self.run_dir, clock=self.options.clock, id="statusline")  # the settings' statusLine
        yield Footer()

    def _tabs(self) -> ComposeResult:
        with TabbedContent(id="tabs"):
            with TabPane("transcript", id="tab-transcript"), VerticalScroll(id="transcript-scroll"):
                yield Transcript(id="transcript")
            with TabPane("mail", id="tab-mail"), VerticalScroll():
                yield MailView(id="mail")
            with TabPane("worktree", id="tab-worktree"), VerticalScroll():
                yield WorktreeView(id="worktree")
            with TabPane("diff", id="tab-diff"):
                yield DiffView(self.run_dir, self.run_id, id="diff")

    def on_mount(self) -> None:
        self.query_one(AgentList).focus()
        self._follow()

    # -- reading ---------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="follow")
    def _follow(self) -> None:
        worker = get_current_worker()
        follower: RunFollower | None = None
        try:
            follower = RunFollower(self.run_dir, self.run_id)
            last = 0.0
            committed = False
            while not worker.is_cancelled:
                woken = self._wake.is_set()  # the user chose another agent, or acted: read now
                committed = follower.changed(self._selected) or committed
                since = time.monotonic() - last
                due = (committed and since >= MIN_GAP_S) or since >= REREAD_S
                if woken or (due and self._consumed.is_set()):
                    self._wake.clear()
                    self._consumed.clear()
                    last, committed = time.monotonic(), False
                    self.post_message(StateRead(follower.read(self._selected)))
                self._wake.wait(POLL_S)
        except SQLAlchemyError as e:
            self.post_message(ReadFailed(str(unreadable(self.run_id, e))))
        except (StoreError, RunsError, OSError, sqlite3.Error) as e:
            self.post_message(ReadFailed(why_unreadable(self.run_id, e)))
        finally:
            if follower is not None:
                follower.close()

    def on_read_failed(self, message: ReadFailed) -> None:
        said = Text(f"cannot read run {self.run_id}: ", style="bold red")
        self.query_one(Totals).update(said.append_text(plain(message.problem)))

    def on_state_read(self, message: StateRead) -> None:
        self.state = message.state
        self._show(message.state)
        self._offer()
        self._alerts.seen(self, message.state)
        self.query_one(StatusBar).seen(message.state)
        self._consumed.set()

    def resized(self) -> None:
        self.call_after_refresh(self._reshow)  # the header is cut to the width

    def _reshow(self) -> None:
        """Show the newest state again, as it is when the refresh comes (not as it was when asked:
        a newer read may have been shown in between)."""
        if self.state is not None:
            self._show(self.state)

    def _show(self, state: RunState) -> None:
        now = self.options.clock()
        self.query_one(Totals).show(state, now)
        table = self.query_one(AgentList)
        rows = [r for r in state.agents if _matches(self._filter, r.name, r.role, r.status, r.activity)]
        changed = table.apply(rows)
        self.options.trace(changed)
        if self._selected != table.selected:
            self._select(table.selected)
        detail = state.detail if state.detail and state.detail.name == self._selected else None
        asks = [a for a in state.asks if a.agent == self._selected]
        scroll = self.query_one("#transcript-scroll", VerticalScroll)
        follow = scroll.scroll_y >= scroll.max_scroll_y or self._shown_agent != self._selected
        self._shown_agent = self._selected
        row = next((r for r in state.agents if r.name == self._selected), None)
        self.query_one(AgentTitle).show(detail, row.status if row else "", waiting=bool(asks))
        streaming = state.streaming if detail else ""
        if self.query_one(Transcript).show(detail, asks, streaming, unfolded=self._unfolded) and follow:
            self.call_after_refresh(scroll.scroll_end, animate=False)  # the user had not scrolled up
        self.query_one(MailView).show(detail, now)
        self.query_one(WorktreeView).show(detail, state.merges)
        self._want_diff(row.kind if row else None)
        self.query_one(TaskTable).show(state.tasks)
        self.query_one(EventLog).show(state)

    def _select(self, name: str | None) -> None:
        self._selected = name
        self._wake.set()

    def on_agent_list_highlighted(self, event: AgentList.Highlighted) -> None:
        if event.name != self._selected:
            self._select(event.name)

    def on_agent_list_selected(self) -> None:
        self.toggle_class("-agent-only")

    # -- actions -----------------------------------------------------------------

    def _why_not(self, action: str) -> str | None:
        """Why ``action`` cannot apply to the run as last read, in one line; None when it can."""
        state = self.state
        if state is None:
            return None  # not read yet: the action says what it finds
        run, status = self.run_id, state.status
        ended = status not in ("running", CRASHED)
        if action == "message" and ended:
            return f"run {run} is {status}: no agent reads mail any more"
        if action == "stop" and status == CRASHED:
            return f"run {run} crashed: nothing runs to stop (r resumes it)"
        if action == "stop" and ended:
            return f"run {run} is {status}: nothing to stop"
        if action == "answer" and not self._waiting():
            if status == CRASHED:
                return "the run crashed: r resumes it"
            return (
                f"run {run} is {status}: nothing to approve or deny"
                if ended
                else "no permission ask is waiting"
            )
        if action == "resume" and status != CRASHED:
            return f"run {run} is {status}; only a crashed run can be resumed"
        if action == "follow_up" and not ended:
            return (
                f"run {run} crashed: r resumes it; continue it once it has ended"
                if status == CRASHED
                else f"run {run} is {status}: m messages its agents; continue it once it has ended"
            )
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_tab" and not parameters:  # the footer's: where it fits
            return self.size.width >= NARROW
        return action not in OFFERED or self._why_not(action) is None

    def _offer(self) -> None:
        """Show in the footer the actions that apply now (its keys are read again when they change)."""
        offered = frozenset(a for a in OFFERED if self._why_not(a) is None)
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    def action_refused(self, action: str) -> None:
        self.notify(self._why_not(action) or f"{action}: not now", severity="warning", markup=False)

    def action_move(self, by: int) -> None:
        """j/k move between agents wherever the focus is (the arrows scroll what has it)."""
        self.query_one(AgentList).action_move(by)

    def action_back(self) -> None:
        if self.has_class("-agent-only"):
            self.remove_class("-agent-only")
        elif not self.query_one("#filter").has_class("hidden"):
            self._close_filter(clear=True)
        else:
            self.post_message(OpenRuns())

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = event.value.strip().lower()
        if self.state is not None:
            self._show(self.state)

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self._close_filter(clear=False)

    def _close_filter(self, *, clear: bool) -> None:
        box = self.query_one("#filter", Input)
        if clear:
            box.value = ""
        if not box.value:
            box.add_class("hidden")
        self.query_one(AgentList).focus()

    def action_unfold(self) -> None:
        self._unfolded = not self._unfolded
        if self.state is not None:
            self._show(self.state)

    def _want_diff(self, kind: str | None) -> None:
        """Have the diff tab read the selected agent's diff, when it is in view (``DiffView.want``)."""
        active = self.query_one("#tabs", TabbedContent).active == "tab-diff"
        live = self.state is not None and self.state.status not in ENDED
        self.query_one(DiffView).want(self._selected, kind, active=active, live=live)

    @on(TabbedContent.TabActivated, "#tabs")
    def _tab_shown(self) -> None:
        if self.state is not None:
            row = next((r for r in self.state.agents if r.name == self._selected), None)
            self._want_diff(row.kind if row else None)

    def action_next_tab(self, by: int = 1) -> None:
        paging.next_tab(self.query_one("#tabs", TabbedContent), by)

    def action_page(self, by: int) -> None:
        paging.page(self.query_one("#tabs", TabbedContent), by)

    def action_diff_file(self, by: int) -> None:
        """``]``/``[``: the diff tab, at the next or previous file of the selected agent's diff."""
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active != "tab-diff":
            tabs.active = "tab-diff"
            return
        self.query_one(DiffView).jump(by)

    def action_message(self) -> None:
        agent = self._selected
        if agent is None:
            self.notify("no agent selected", severity="warning")
            return

        def send(text: str | None) -> None:
            if text:
                self.act(lambda: actions.message(self.run_dir, self.run_id, agent, text))

        self.app.push_screen(MessageDialog(agent, blink=self.options.blink), send)

    def action_stop(self) -> None:
        agent = self._selected
        if agent is None:
            self.notify("no agent selected", severity="warning")
            return

        def stop(yes: bool | None) -> None:
            if yes:
                self.act(lambda: actions.stop(self.run_dir, self.run_id, agent))

        question = Text.assemble("Stop agent ", plain(agent, "bold"), f" of run {self.run_id}?")
        self.app.push_screen(ConfirmDialog(question), stop)

    def action_answer(self, allow: bool, always: bool = False, with_note: bool = False) -> None:
        """a, d; A: allow always (the run adds the ask's rule to the settings); D: deny with a note."""
        ask = self._ask()
        if ask is None:
            self.action_refused("answer")
            return
        if with_note:

            def deny(note: str | None) -> None:
                if note:
                    self._send_answer(ask, False, note=note)

            call = describe_call(ask.tool, ask.input)
            self.app.push_screen(NoteDialog(ask.agent, call, blink=self.options.blink), deny)
            return
        fields = ask.input.get("fields") if ask.tool == ELICITATION_ASK else None
        if allow and isinstance(fields, dict) and fields:  # an MCP server's form: allowing it answers it

            def accept(values: str | None) -> None:
                if values:
                    self._send_answer(ask, True, note=values)

            shown = ", ".join(str(name) for name in fields)
            self.app.push_screen(FormDialog(ask.agent, shown, blink=self.options.blink), accept)
            return
        self._send_answer(ask, allow, always=always)

    def _send_answer(
        self, ask: PendingAsk, allow: bool, *, always: bool = False, note: str | None = None
    ) -> None:
        self._answered.add(ask.id)
        self._offer()

        def answer() -> str:
            try:
                return actions.answer(self.run_dir, self.run_id, ask, allow, always=always, note=note)
            except actions.ActionFailed:
                self._answered.discard(ask.id)  # not answered after all: the next press may try again
                raise

        self.act(answer)

    def _waiting(self) -> bool:
        """Whether an ask waits that was not answered from here."""
        return self._ask() is not None

    def _ask(self) -> PendingAsk | None:
        """The selected agent's oldest waiting ask, else the run's oldest; one already answered from
        here is passed over while its answer is on its way (a second press answers the next ask)."""
        asks = [a for a in (self.state.asks if self.state else ()) if a.id not in self._answered]
        return next((a for a in asks if a.agent == self._selected), asks[0] if asks else None)

    def action_resume(self) -> None:
        self.resume(self.run_id, self.state.status if self.state else "unknown")

    def action_follow_up(self) -> None:
        """``c``: the follow-up prompt asked for, then ``teamrt continue RUN --detach`` started with it."""
        run_id = self.run_id

        def go_on(text: str | None) -> None:
            if text:
                self.notify(f"starting teamrt continue {run_id} --detach ...")
                self.act(lambda: actions.follow_up(run_id, text))

        self.app.push_screen(FollowUpDialog(run_id, blink=self.options.blink), go_on)

    def acted(self) -> None:
        self._wake.set()


OFFERED = ("message", "stop", "answer", "resume", "follow_up")
"""The actions offered only when they can apply to the run (``RunScreen._why_not``)."""


def _matches(query: str, *fields: str) -> bool:
    return not query or any(query in f.lower() for f in fields)
