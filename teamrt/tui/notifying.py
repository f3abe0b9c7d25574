"""The TUI's notifications of an open run: when an ask waits for the person, the run ends or its budget
is near, a toast says so, and the terminal's bell rings with a desktop notification (OSC 9/777/99, as
``teamrt.runs.alerts`` picks it), at most one ring every ``alerts.MIN_GAP_S``.

The OSC goes through Textual's driver, which is how Textual writes its own escapes (``App.bell``, the
pointer's shape) between frames: it moves no cursor and its text is ``notices.plain``. Only what happens
while the view is open notifies: the events it reads first, older than the view, are not news.
"""

from __future__ import annotations

import os
import time

from textual.app import App
from textual.notifications import SeverityLevel
from textual.screen import Screen

from teamrt.runs.alerts import Alerts
from teamrt.runtime.notices import Notice
from teamrt.settings import NotifySettings, SettingsError, load_settings
from teamrt.tui.state import RunState


class RunAlerts:
    """One run view's notifications; ``seen`` with each state it shows."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.opened = time.time()  # the writer's clock, which events are stamped in (not the view's clock)
        self._last_id = 0
        self._alerts: Alerts | None = None

    def seen(self, screen: Screen[None], state: RunState) -> None:
        """Notify of each event of ``state`` not seen before that happened since the view opened."""
        if self._alerts is None:
            self._alerts = self._made(screen)
        for event in state.events:
            if event.id <= self._last_id:
                continue
            self._last_id = event.id
            if event.at < self.opened:
                continue
            notice = self._alerts.seen(event)
            if notice is not None:
                screen.notify(notice.message, title=notice.title, severity=_severity(notice), markup=False)

    def _made(self, screen: Screen[None]) -> Alerts:
        try:
            settings = load_settings().notify
        except SettingsError as e:
            screen.notify(f"notifications use their defaults: {e}", severity="warning", markup=False)
            settings = NotifySettings()
        app = screen.app
        return Alerts(self.run_id, settings, os.environ, ring=lambda osc: ring(app, osc))


def ring(app: App[None], osc: str) -> None:
    """Write ``osc`` through the app's driver (not when headless) and ring the bell."""
    driver = app._driver  # Textual's own bell writes through it too: between frames, in order
    if osc and not app.is_headless and driver is not None:
        driver.write(osc)
    app.bell()


def _severity(notice: Notice) -> SeverityLevel:
    if notice.what == "end":
        return "information" if notice.facts.get("status") == "done" else "error"
    return "warning"
