"""The run view's parts, each fed a ``RunState`` (or a part of it) on the app's thread.

Everything they show from the store (names, statuses, transcripts, tool results, branches, diffs) is
agent data: it is drawn as ``Text``, never read as markup, and goes through ``look.inert`` in
``Panel.put`` and ``KeyTable.fill`` (one line in a cell), so no control sequence reaches the terminal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from teamrt.runs.follow import describe_event
from teamrt.runs.query import PendingAsk, simulated
from teamrt.runs.render import age_text, budget_text, describe_call, duration_text, money
from teamrt.runtime.forecast import dollars
from teamrt.runtime.losses import KINDS as LOSSES
from teamrt.store import EventRecord, MergeRecord, TaskRecord
from teamrt.store.rounds import round_number, round_prompt
from teamrt.terminal import clean
from teamrt.tui.activity import WAITING
from teamrt.tui.detail import AgentDetail, Line
from teamrt.tui.look import LINE_MARK, LINE_STYLE, STATUS_STYLE, inert, plain, tokens_text
from teamrt.tui.state import RunState


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
        # a str cell as Text: DataTable would read it as markup; every cell on one line, inert
        shown = [(key, [inert(c, one_line=True) if isinstance(c, Text) else plain(c) for c in cells])
                 for key, cells in rows]  # fmt: skip
        for i, column in enumerate(columns):
            width = fixed.get(column) or max([len(column), *(_cell_len(cells[i]) for _, cells in shown)])
            self.add_column(column, key=column, width=width)
        for key, cells in shown:
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


NO_AGENT = "no agent selected"


class Panel(Static):
    """A Static that repaints only when what it shows has changed; ``FIXED``: its size never does."""

    FIXED = False

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._shown: Text | None = None

    def put(self, content: Text) -> bool:
        """Show ``content`` (Text: never read as markup; its controls made inert); whether it differed
        from what was shown."""
        content = inert(content)
        if content == self._shown:
            return False
        self._shown = content
        self.update(content, layout=not self.FIXED)
        return True


class Totals(Panel):
    FIXED = True
    """The run's header: its status and age, its cost against its budget, asks waiting, agents by status."""

    def show(self, state: RunState, now: float) -> None:
        run = state.run
        line = Text()
        line.append(f"run {run.id} ", style="bold")
        line.append_text(plain(state.status, STATUS_STYLE.get(state.status, "bold")))
        if run.status_reason:
            line.append_text(plain(f": {run.status_reason}", "dim"))
        end = run.finished_at or (run.heartbeat_at if state.status == "crashed" else None) or now
        line.append(
            f" · ran {duration_text(end - run.created_at)}, started {age_text(now - run.created_at)} ago"
        )
        if state.unconfined:  # said before the task, which may be cut
            line.append("   UNCONFINED: commands run without a sandbox", style="bold white on red")
        number = round_number(run)  # a follow-up's round says its own prompt
        said = run.task if number == 1 else f"round {number}: {round_prompt(run)}"
        line.append_text(plain(f"   {' '.join(said.split())}", "italic"))
        # what may need the user first: a narrow screen cuts the end of the line
        first, line = line, Text("cost ")
        u = run.usage
        line.append(money(u.cost_usd, simulated(run)))
        burn = state.burn
        if run.budget_usd:
            share = u.cost_usd / run.budget_usd
            left = burn.left_usd() if burn is not None else None  # red once the budget may not last
            short = share >= 0.9 or (left is not None and left < 0.1 * run.budget_usd)
            line.append(f" of {budget_text(run.budget_usd)} ({share:.0%})", style="bold red" if short else "")
        if state.asks:
            line.append("   ")
            line.append(
                f"{len(state.asks)} ask{'s' if len(state.asks) > 1 else ''} waiting: a/d",
                style="bold black on yellow",
            )
        if burn is not None and (burn.reserved_usd or burn.forecast_usd):  # after the asks, the user's to do
            line.append("  ")
            if burn.reserved_usd:  # what calls in flight may cost
                line.append(f" +{dollars(burn.reserved_usd)} held")
            if burn.forecast_usd:  # what agents at work are expected to spend yet
                line.append(f" ~{dollars(burn.forecast_usd)} more")
        if state.status == "crashed":
            line.append("   r resumes it", style="bold")
        if state.losses:  # what a fault took (mail set aside, a stall, a remade workspace), not only logged
            line.append("   ")
            count = f"{len(state.losses)} loss{'es' if len(state.losses) > 1 else ''}"
            latest = str(state.losses[-1].data.get("note", state.losses[-1].kind))
            line.append_text(plain(f"{count}: {latest}", LOSS_STYLE))
        line.append("   agents ")
        counts = state.by_status()
        for i, (status, n) in enumerate(sorted(counts.items(), key=lambda kv: _STATUS_ORDER.get(kv[0], 9))):
            line.append(", " if i else "")
            line.append_text(plain(f"{n} {status}", STATUS_STYLE.get(status, "")))
        prompt = u.input_tokens + u.cache_creation_tokens + u.cache_read_tokens
        line.append(f" · tokens {tokens_text(u.total_tokens)}")  # a mark, not spaces alone, after the counts
        if run.budget_tokens:
            line.append(f" of {tokens_text(run.budget_tokens)}")
        line.append(f", {u.cache_read_tokens / prompt if prompt else 0:.0%} from cache")
        width = max(20, self.content_size.width)
        for part in (first, line):
            part.truncate(width, overflow="ellipsis")
        self.put(Text("\n").join((first, line)))


_STATUS_ORDER = {
    s: i
    for i, s in enumerate(("running", "idle", "merging", "pending", "done", "stopped", "failed", "crashed"))
}


class AgentTitle(Panel):
    FIXED = True
    """Whose detail this is: ``coder-1  merging  worktree agent`` (its kind last: a narrow one cuts it)."""

    def show(self, detail: AgentDetail | None, status: str, *, waiting: bool = False) -> None:
        """``status``: as the agent tree shows it (``crashed`` for a live agent of a crashed run);
        ``waiting``: a permission ask of the agent waits for the user's answer."""
        if detail is None:
            self.put(Text())
            return
        line = Text()
        line.append_text(plain(detail.name, "bold"))
        line.append("  ")
        line.append_text(plain(status, STATUS_STYLE.get(status, "")))
        if detail.status_reason:
            line.append_text(plain(f": {detail.status_reason}", "dim"))
        if waiting:
            line.append("  ")
            line.append(f"{WAITING}: a/d", style="bold black on yellow")
        line.append_text(plain(f"  {detail.kind} agent", "dim"))
        line.no_wrap = True
        line.overflow = "ellipsis"
        self.put(line)


class Transcript(Panel):
    """The selected agent's transcript, tool calls folded unless ``unfolded``."""

    def show(
        self, detail: AgentDetail | None, asks: Sequence[PendingAsk], streaming: str, *, unfolded: bool
    ) -> bool:
        """``streaming``: the text the model is writing now. Whether what it shows changed."""
        if detail is None:
            return self.put(Text(NO_AGENT, style="dim"))
        text = Text()
        for line in detail.transcript:
            _line(text, line, unfolded)
        if streaming:
            _line(text, Line("streaming", streaming), unfolded)
        for ask in asks:
            text.append("\n")
            call = describe_call(ask.tool, ask.input)
            said = f"? {WAITING} to run {call}: {ask.reason} (a approves, d denies)"
            text.append_text(plain(said, "bold black on yellow"))
        if not detail.transcript:
            text.append("(nothing yet)", style="dim")
        return self.put(text)


def _line(text: Text, line: Line, unfolded: bool) -> None:
    if text:
        text.append("\n")
    text.append(LINE_MARK.get(line.kind, ""), style="dim")
    text.append_text(plain(line.text, LINE_STYLE.get(line.kind, "")))
    if unfolded and line.more:  # cleaned before Rich sees it: Rich would drop a CR or a BEL unseen
        more = "\n".join("    " + part for part in clean(line.more).splitlines())
        text.append("\n" + more, style="dim")


class MailView(Panel):
    def show(self, detail: AgentDetail | None, now: float) -> None:
        if detail is None:
            self.put(Text())
            return
        text = Text()
        unread = sum(letter.at is None for letter in detail.inbox)
        text.append(
            f"inbox: {len(detail.inbox)}" + (f", {unread} not read yet" if unread else ""), style="bold"
        )
        for letter in detail.inbox:
            when = "unread" if letter.at is None else f"{age_text(now - letter.at)} ago"
            text.append("\n")
            text.append_text(plain(f"  {when:>8}  from {letter.peer:<14} {letter.kind:<8} {letter.summary}"))
        text.append(f"\n\noutbox: {len(detail.outbox)}", style="bold")
        for letter in detail.outbox:
            when = f"{age_text(now - letter.at)} ago" if letter.at else ""
            text.append("\n")
            text.append_text(plain(f"  {when:>8}  to   {letter.peer:<14} {letter.kind:<8} {letter.summary}"))
        self.put(text)


class WorktreeView(Panel):
    def show(self, detail: AgentDetail | None, merges: Sequence[MergeRecord]) -> None:
        if detail is None or detail.kind != "worktree":
            self.put(Text("not a worktree agent", style="dim"))
            return
        text = plain(f"branch     {detail.branch or '-'}")
        text.append("\n")
        text.append_text(plain(f"worktree   {detail.workspace or '-'}"))
        text.append("\n")
        merge = next((m for m in merges if m.agent == detail.name), None)
        if merge is not None:
            said = f"merge      {merge.status}, attempt {merge.attempts}"
            said += f", commit {merge.merged_commit[:12]}" if merge.merged_commit else ""
            text.append(
                said + "\n", style=STATUS_STYLE.get("done" if merge.status == "merged" else "merging", "")
            )
        text.append("\n" + clean(detail.diff_stat))
        self.put(text)


class TaskTable(KeyTable):
    """The task list, its subject always readable: where the table is too narrow for every column (the
    side panel of an 80-column terminal), the owner goes first (the agent list says it), then the
    status; the subject takes the width left, and ends in an ellipsis when it is cut."""

    LAYOUTS: tuple[tuple[str, ...], ...] = (
        ("#", "status", "owner", "subject"), ("#", "status", "subject"), ("#", "subject")
    )  # fmt: skip
    SUBJECT_MIN = 12  # the subject's width below which a narrower layout is taken
    STATUS = 11  # in_progress

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="none", **kwargs)  # type: ignore[arg-type]
        self._shown: tuple[tuple[TaskRecord, ...], int] | None = None

    def show(self, tasks: tuple[TaskRecord, ...]) -> None:
        width = self.size.width  # 0 before the first layout: every column, until ``on_resize``
        if (tasks, width) == self._shown:
            return
        cells = {t.id: {"#": f"#{t.id}", "status": t.status, "owner": t.owner or "-", "subject": t.subject}
                 for t in tasks}  # fmt: skip
        longest = max([len("subject"), *(cell_len(c["subject"]) for c in cells.values())])
        # a cell is padded by one on each side. The first layout with a status where every subject fits
        # whole, else the first where a subject keeps SUBJECT_MIN cells, else the narrowest
        room = {layout: width - sum(self._width(c, cells.values()) + 2 for c in layout[:-1]) - 2
                for layout in self.LAYOUTS}  # fmt: skip
        tries = [(layout, longest) for layout in self.LAYOUTS[:-1]]
        tries += [(layout, self.SUBJECT_MIN) for layout in self.LAYOUTS]
        fallback = self.LAYOUTS[-1] if width else self.LAYOUTS[0]
        columns = next((layout for layout, need in tries if room[layout] >= need), fallback)
        left = room[columns]
        fixed = {"status": self.STATUS} if "status" in columns else {}
        if width and left < longest:  # cut with a mark, not mid-word in silence
            fixed["subject"] = max(1, left)
            for c in cells.values():
                c["subject"] = _cut(c["subject"], max(1, left))
        rows = [(str(i), tuple(c[name] for name in columns)) for i, c in cells.items()]
        self.fill(columns, rows, fixed)
        self._shown = (tasks, width)

    def _width(self, column: str, cells: Iterable[Mapping[str, str]]) -> int:
        return self.STATUS if column == "status" else max([len(column), *(len(c[column]) for c in cells)])

    def on_resize(self) -> None:
        if self._shown is not None:
            self.show(self._shown[0])


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` cells, ending in an ellipsis when it was cut."""
    if cell_len(text) <= width:
        return text
    cut = Text(text)
    cut.truncate(width, overflow="ellipsis")
    return cut.plain


def _event_line(event: EventRecord, started: float) -> Text:
    """``+12.3s coder-1 merge.merged attempt 1, ...``: ``teamrt logs``'s line, narrower."""
    line = Text(f"+{max(0.0, event.at - started):.1f}s ", style="dim")
    line.append_text(plain(f"{event.agent or 'run'} ", "bold"))
    style = LOSS_STYLE if event.kind in LOSSES else EVENT_STYLE.get(event.kind.split(".")[0], "")
    line.append_text(plain(f"{event.kind} ", style))
    line.append_text(plain(describe_event(event)))
    return line


LOSS_STYLE = "bold white on red"
"""A loss the run named (``runtime.losses``): in the header and in the event log."""
EVENT_STYLE = {
    "agent": "cyan",
    "merge": "magenta",
    "task": "green",
    "ask": "bold yellow",
    "control": "yellow",
}


class EventLog(Panel):
    """The newest events of the run, as many as fit, newest last (``teamrt logs`` has them all).

    A tail rather than a scrolling log: its size never changes, so new events
    repaint it without a layout of the screen.
    """

    FIXED = True

    def show(self, state: RunState) -> None:
        width, height = self.content_size
        lines = [_event_line(e, state.run.created_at) for e in state.events[-max(1, height) :]]
        for line in lines:
            line.truncate(max(1, width), overflow="ellipsis")
        self.put(Text("\n").join(lines))
