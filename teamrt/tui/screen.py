"""What the two screens share: the app's options, the messages they send it, a footer fit to the
width, a filter box, and actions run off the app's thread.

The screens never call the app: they read ``TuiOptions`` and post ``OpenRun`` and ``OpenRuns``, which
the app handles (so this module, below the app, imports nothing of it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input

from teamrt.tui import actions
from teamrt.tui.look import NARROW
from teamrt.tui.state import AgentRow


@dataclass(frozen=True)
class TuiOptions:
    """What the app gives its screens."""

    runs_dir: Path
    clock: Callable[[], float]
    """Now, for ages (fixed in tests)."""
    blink: bool
    """Whether a text cursor blinks (still in tests)."""
    trace: Callable[[Sequence[AgentRow]], None]
    """Called with the agent rows a run view changed, as it applies them (the TUI benchmark's trace)."""


class OpenRun(Message):
    """Open the run view of ``run_id``."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id


class OpenRuns(Message):
    """Back to the runs list."""


class TeamScreen(Screen[None]):
    def __init__(self, options: TuiOptions) -> None:
        super().__init__()
        self.options = options

    def on_resize(self) -> None:
        for footer in self.query(Footer):
            footer.compact = self.size.width < NARROW
        self.refresh_bindings()  # some keys are offered only on a wide screen
        self.resized()

    def resized(self) -> None:
        """After the screen changed size."""

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("hidden")
        box.focus()

    def resume(self, run_id: str, status: str) -> None:
        """``r``: start ``teamrt resume RUN --detach`` for a crashed run; say why not for another."""
        if status == "not responding":  # its process is here, stopped or overloaded: as teamrt resume says
            self.notify(
                f"run {run_id} is not responding: it may be stopped (SIGSTOP) or overloaded; kill it or wait,"
                " then resume",
                severity="warning",
            )
            return
        if status != "crashed":
            self.notify(f"run {run_id} is {status}; only a crashed run can be resumed", severity="warning")
            return
        self.notify(f"starting teamrt resume {run_id} --detach ...")
        self.act(lambda: actions.resume(run_id))

    @work(thread=True, group="actions")
    def act(self, do: actions.Action) -> None:
        """Do ``do`` (it blocks: mail, a process) in a worker; say what came of it in a toast."""
        try:
            said = do()
        except actions.ActionFailed as e:
            self.app.call_from_thread(self.notify, str(e), severity="error", timeout=8, markup=False)
        else:
            self.app.call_from_thread(self.notify, said, markup=False)
        self.acted()

    def acted(self) -> None:
        """After an action (called from the worker): read what it changed."""
