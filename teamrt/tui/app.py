"""``teamrt tui``: the Textual app, its screens and its one stylesheet.

It reads stores and run directories and acts only by mail or by starting
``teamrt resume`` (DESIGN.md, Data flow 6). ``clock`` and ``blink`` exist for
tests (fixed ages, a still cursor); ``trace_path`` records, for every agent row
the app changes, the commit it shows and the moment it was applied (the TUI
benchmark reads it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from .dialogs import HelpScreen
from .run_screen import RunScreen
from .runs_screen import RunsScreen
from .state import AgentRow

CSS = """
#totals { height: 2; padding: 0 1; background: $boost; }
#runs-title { height: auto; padding: 0 1; background: $boost; }
#filter { height: 3; }
.hidden { display: none; }
#agents { height: 1fr; min-height: 6; }
#bottom { height: 2fr; }
#detail { width: 3fr; }
#agent-title { height: 1; padding: 0 1; background: $boost; }
#side { width: 2fr; }
#tasks { height: 9; border-top: solid $panel; }
#events { height: 1fr; border-top: solid $panel; overflow: hidden; }
RunScreen.-agent-only #agents, RunScreen.-agent-only #side { display: none; }
RunScreen.-agent-only #bottom { height: 1fr; }
#dialog { width: 80; height: auto; padding: 1 2; border: thick $accent; background: $surface; }
#dialog.help { width: 90; }
ModalScreen { align: center middle; }
"""


class TeamApp(App[None]):
    TITLE = "teamrt"
    ENABLE_COMMAND_PALETTE = False
    CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", show=False),
        Binding("s", "picture", "picture"),
    ]

    def __init__(
        self,
        runs_dir: Path,
        run_id: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        blink: bool = True,
        trace_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.runs_dir = runs_dir
        self.first_run = run_id
        self.clock = clock
        self.blink = blink
        self.rereads = threading.Event()  # set: read the runs list again now
        self._trace: IO[str] | None = open(trace_path, "a", encoding="utf-8") if trace_path else None  # noqa: SIM115

    def on_mount(self) -> None:
        self.push_screen(RunsScreen())
        if self.first_run is not None:
            self.open_run(self.first_run)

    def open_run(self, run_id: str) -> None:
        self.push_screen(RunScreen(self.runs_dir / run_id, run_id))

    def open_runs(self) -> None:
        """Back to the runs list (it is always the screen under a run view)."""
        if isinstance(self.screen, RunScreen):
            self.pop_screen()
            self.rereads.set()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_picture(self) -> None:
        """Save what the screen shows as an SVG picture in the current directory."""
        saved = self.save_screenshot(path=str(Path.cwd()))
        self.notify(f"saved a picture of the screen: {saved}", markup=False)

    def trace(self, rows: Sequence[AgentRow]) -> None:
        if self._trace is None or not rows:
            return
        applied = time.time()
        self._trace.writelines(f"{r.name}\t{r.changed_at:.6f}\t{applied:.6f}\n" for r in rows)
        self._trace.flush()

    def on_unmount(self) -> None:
        if self._trace is not None:
            self._trace.close()
