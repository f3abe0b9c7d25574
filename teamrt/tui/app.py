"""``teamrt tui``: the Textual app. It holds the runs list, opens and closes run views on the screens'
messages (``OpenRun``, ``OpenRuns``) and loads the one stylesheet (``teamrt.tcss``).

It reads stores and run directories and acts only by mail or by starting
``teamrt resume`` (docs/architecture.md, "Data flow"); the one file it writes
is a picture of the screen, when asked (``s``). ``clock`` and ``blink`` exist for
tests (fixed ages, a still cursor); ``trace_path`` records, for every agent row
the app changes, the commit it shows and the moment it was applied (the TUI
benchmark reads it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel

from teamrt.terminal import clean, clean_line
from teamrt.tui.dialogs import HelpScreen
from teamrt.tui.look import NARROW
from teamrt.tui.run_screen import RunScreen
from teamrt.tui.runs_screen import RunsScreen
from teamrt.tui.screen import OpenRun, OpenRuns, TuiOptions
from teamrt.tui.state import AgentRow
from teamrt.tui.toasts import HeldToasts

PICTURES_DIR = "screenshots"


class TeamApp(App[None]):
    TITLE = "teamrt"
    ENABLE_COMMAND_PALETTE = False
    CSS_PATH = "teamrt.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", show=False),
        Binding("s", "picture", "picture"),  # offered on a wide screen; the key works on any
        Binding("s", "picture(False)", show=False),
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
        self._trace: IO[str] | None = open(trace_path, "a", encoding="utf-8") if trace_path else None  # noqa: SIM115
        self.options = TuiOptions(runs_dir, clock, blink, self.trace)
        self.runs = RunsScreen(self.options)
        self.toasts = HeldToasts()

    def on_mount(self) -> None:
        self.push_screen(self.runs)
        if self.first_run is not None:
            self.open_run(self.first_run)

    @on(OpenRun)
    def _open_run(self, message: OpenRun) -> None:
        self.open_run(message.run_id)

    def open_run(self, run_id: str) -> None:
        self.push_screen(RunScreen(self.options, self.runs_dir / run_id, run_id))

    @on(OpenRuns)
    def open_runs(self) -> None:
        """Back to the runs list (it is always the screen under a run view), read again at once."""
        if isinstance(self.screen, RunScreen):
            self.pop_screen()
            self.runs.rereads.set()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast. What one says often quotes an agent, a tool or an error (an ask's command, a
        refusal), so it is never read as markup, whatever ``markup`` says, and its controls are inert."""
        said, title = clean(message), clean_line(title)
        timeout = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        if not self.toasts.keep(said, title, severity, timeout):  # held while the help is open
            super().notify(said, title=title, severity=severity, timeout=timeout, markup=False)

    def action_help(self) -> None:
        """The help, readable: toasts are taken off it and shown again once it closes (``toasts``)."""
        self.toasts.hold()
        self.clear_notifications()
        self.push_screen(HelpScreen(), lambda _: self._release_toasts())

    def _release_toasts(self) -> None:
        for toast in self.toasts.release():
            self.notify(toast.message, title=toast.title, severity=toast.severity, timeout=toast.timeout)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "picture" and not parameters:
            return self.size.width >= NARROW
        return True

    def action_picture(self, offered: bool = True) -> None:
        """Save what the screen shows as an SVG picture under the run's directory (the runs list's:
        beside the runs), and say where. ``offered``: from the footer's binding (else the hidden one)."""
        runs = [s for s in self.screen_stack if isinstance(s, RunScreen)]
        where = (runs[-1].run_dir if runs else self.runs_dir.parent) / PICTURES_DIR
        name = f"screen-{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}.svg"
        try:
            where.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename=name, path=str(where))
        except OSError as e:
            self.notify(f"could not save a picture of the screen: {e}", severity="error", markup=False)
            return
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
