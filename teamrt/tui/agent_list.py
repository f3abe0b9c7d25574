"""The agent tree as a list drawn line by line (Textual's Line API).

A DataTable repaints every visible line when any one cell changes; with 200
agents changing once a second that is most of a core. Here each row's line
is rendered once per change and kept, and an update repaints only the lines
of the rows that changed and are in view. The header stays on the first line
while the rows scroll under it. A narrow list leaves columns out (``GIVEN_UP``)
so that what each agent is doing stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from teamrt.models.registry import is_sim
from teamrt.runs.render import money
from teamrt.tui.look import name_text, plain, status_text, tokens_text
from teamrt.tui.state import AgentRow

COLUMNS = ("agent", "kind", "role", "model", "status", "turns", "tokens", "cache", "cost", "activity")
ACTIVITY = len(COLUMNS) - 1  # the last column: as wide as what is left
RIGHT = ("turns", "tokens", "cache", "cost")
FIXED = {"kind": 8, "status": 7, "turns": 5, "tokens": 6, "cache": 5, "cost": 8}
"""Widths of the columns whose cells change as a run goes on: as wide as their widest value can be."""
SIM_LABEL = len(money(0.0, True)) - len(money(0.0, False))  # a sim agent's cost is labelled
GAP = 2
ACTIVITY_MIN = 30
GIVEN_UP = ("cache", "turns", "kind", "model", "tokens", "role", "cost")
"""The columns a narrow list leaves out, first to last, until the activity has ``ACTIVITY_MIN`` cells."""


def agent_cells(row: AgentRow) -> tuple[Text, ...]:
    """The row's cells, each on one line with its controls inert (a model's name, an activity that
    quotes a command: agent data)."""
    return (
        name_text(row.name, row.depth, row.status),
        plain(row.kind),
        plain(row.role),
        plain(row.model),
        status_text(row.status),
        Text(str(row.turns)),
        Text(tokens_text(row.tokens)),
        Text(f"{row.cache_share:.0%}"),
        Text(money(row.cost_usd, is_sim(row.model))),
        plain(row.activity),
    )


class AgentList(ScrollView, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"agent-list--header", "agent-list--cursor"}
    DEFAULT_CSS = """
    AgentList { overflow-x: hidden; }
    AgentList > .agent-list--header { text-style: bold; color: $text-primary; }
    AgentList > .agent-list--cursor { background: $block-cursor-blurred-background; }
    AgentList:focus > .agent-list--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "down", show=False),
        Binding("k,up", "move(-1)", "up", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("home", "go(0)", show=False),
        Binding("end", "go(-1)", show=False),
        Binding("enter", "select", "open", show=False),
    ]

    class Highlighted(Message):
        def __init__(self, name: str | None) -> None:
            super().__init__()
            self.name = name

    class Selected(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows: list[AgentRow] = []
        self.cursor = 0
        self._index: dict[str, int] = {}
        self._widths: list[int] = [len(c) for c in COLUMNS]
        self._shown: list[int] = list(range(len(COLUMNS)))  # the columns that fit, by index
        self._lines: dict[int, Strip] = {}  # rendered rows, by index; dropped when a row changes

    # -- what it shows --------------------------------------------------------------

    @property
    def selected(self) -> str | None:
        return self.rows[self.cursor].name if self.rows else None

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def columns(self) -> list[str]:
        """The columns the list's width has room for."""
        return [COLUMNS[i] for i in self._shown]

    def cells(self, name: str) -> list[str]:
        """The row of agent ``name`` as plain text, column by column (all of them, shown or not)."""
        return [cell.plain for cell in agent_cells(self.rows[self._index[name]])]

    def apply(self, rows: Sequence[AgentRow]) -> list[AgentRow]:
        """Show ``rows``; returns those that changed (all of them when the tree changed shape)."""
        if [r.name for r in rows] != [r.name for r in self.rows]:
            selected = self.selected
            self.rows = list(rows)
            self._index = {r.name: i for i, r in enumerate(self.rows)}
            sim = SIM_LABEL if any(is_sim(r.model) for r in self.rows) else 0
            self._widths = [
                FIXED[column] + (sim if column == "cost" else 0)
                if column in FIXED
                else max([len(column), *(agent_cells(r)[i].cell_len for r in self.rows)])
                for i, column in enumerate(COLUMNS[:ACTIVITY])
            ]
            self._fit()
            self._lines.clear()
            self.virtual_size = Size(self.size.width, len(self.rows) + 1)
            self.cursor = min(self._index.get(selected or "", self.cursor), max(0, len(self.rows) - 1))
            self.refresh()
            if self.selected != selected:
                self.post_message(self.Highlighted(self.selected))
            return list(rows)
        changed = []
        for i, (new, old) in enumerate(zip(rows, self.rows, strict=True)):
            if new != old:
                changed.append(new)
                self.rows[i] = new
                self._lines.pop(i, None)
                self._refresh_row(i)
        return changed

    # -- drawing ---------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._strip(Text(" " * GAP).join(self._pad(COLUMNS)), "agent-list--header", width)
        index = self.scroll_offset.y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        if index == self.cursor:
            return self._row_strip(index, width, "agent-list--cursor")
        if index not in self._lines:
            self._lines[index] = self._row_strip(index, width, None)
        return self._lines[index]

    def _row_strip(self, index: int, width: int, component: str | None) -> Strip:
        cells = agent_cells(self.rows[index])
        line = Text(" " * GAP).join(self._pad(cells))
        return self._strip(line, component, width)

    def _fit(self) -> None:
        """Leave out columns (``GIVEN_UP``, in order) until the activity has ``ACTIVITY_MIN`` cells."""
        shown = list(range(len(COLUMNS)))
        for column in GIVEN_UP:
            if self.size.width - self._used(shown) >= ACTIVITY_MIN:
                break
            shown.remove(COLUMNS.index(column))
        self._shown = shown

    def _used(self, shown: Sequence[int]) -> int:
        """The cells taken by the shown columns before the activity (and the line's first blank)."""
        return 1 + sum(self._widths[i] + GAP for i in shown if i != ACTIVITY)

    def _pad(self, cells: Sequence[Text | str]) -> list[Text]:
        out = []
        for i in self._shown:
            cell = cells[i]
            text = cell.copy() if isinstance(cell, Text) else Text(cell)
            width = self._widths[i] if i < ACTIVITY else max(1, self.size.width - self._used(self._shown))
            text.truncate(width, overflow="ellipsis")
            if COLUMNS[i] in RIGHT:
                text.pad_left(width - text.cell_len)
            elif i < ACTIVITY:
                text.pad_right(width - text.cell_len)
            out.append(text)
        return out

    def _strip(self, line: Text, component: str | None, width: int) -> Strip:
        base = self.rich_style + (self.get_component_rich_style(component) if component else Style())
        segments = [Segment(" ", base), *line.render(self.app.console)]
        return Strip(segments).apply_style(base).crop_extend(0, width, base)

    def _refresh_row(self, index: int) -> None:
        y = index - self.scroll_offset.y + 1
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def on_resize(self, event: events.Resize) -> None:
        self._fit()
        self._lines.clear()
        self.virtual_size = Size(event.size.width, len(self.rows) + 1)

    # -- moving ----------------------------------------------------------------------

    def move_to(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(index, len(self.rows) - 1))
        if index == self.cursor:
            return
        old, self.cursor = self.cursor, index
        self._refresh_row(old)
        self._refresh_row(index)
        top = self.scroll_offset.y
        visible = max(1, self.size.height - 1)
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + visible:
            self.scroll_to(y=index - visible + 1, animate=False)
        self.post_message(self.Highlighted(self.selected))

    def action_move(self, by: int) -> None:
        self.move_to(self.cursor + by)

    def action_page(self, by: int) -> None:
        self.move_to(self.cursor + by * max(1, self.size.height - 2))

    def action_go(self, index: int) -> None:
        self.move_to(index if index >= 0 else len(self.rows) - 1)

    def action_select(self) -> None:
        if self.selected is not None:
            self.post_message(self.Selected(self.selected))

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self.move_to(self.scroll_offset.y + event.y - 1)
            if event.chain == 2:
                self.action_select()
