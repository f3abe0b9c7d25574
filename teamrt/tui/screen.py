"""What the two screens share: their app, a footer fit to the width, a filter box, and actions run
off the app's thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.screen import Screen
from textual.widgets import Footer, Input

from teamrt.tui import actions

if TYPE_CHECKING:
    from teamrt.tui.app import TeamApp

NARROW = 100
"""A screen narrower than this has a compact footer without the less needed keys (an 80-column one
keeps ``? help q quit`` in view)."""


class TeamScreen(Screen[None]):
    @property
    def team_app(self) -> TeamApp:
        return self.app  # type: ignore[return-value]

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
