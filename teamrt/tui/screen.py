"""What the two screens share: their app, a filter box, and actions run off the app's thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.screen import Screen
from textual.widgets import Input

from . import actions

if TYPE_CHECKING:
    from .app import TeamApp


class TeamScreen(Screen[None]):
    @property
    def team_app(self) -> TeamApp:
        return self.app  # type: ignore[return-value]

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("hidden")
        box.focus()

    def resume(self, run_id: str, status: str) -> None:
        """``r``: start ``teamrt resume RUN --detach`` for a crashed run; say why not for another."""
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
