"""Toasts held while the help is open, so that the help stays readable (toasts are drawn over the screen
on top, bottom right, where the help's last lines are at 80x24).

Opening the help takes the toasts still showing off the screen (``hold``) and keeps those that come while
it is open; closing it shows them all again (``release``), none lost, in the order they came.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from textual.notifications import SeverityLevel


@dataclass(frozen=True, slots=True)
class Toast:
    message: str
    title: str
    severity: SeverityLevel
    timeout: float
    until: float
    """When it leaves the screen on its own (monotonic clock)."""


class HeldToasts:
    """The toasts shown lately, and those held while the help is open. ``notify`` may come from any
    thread (Textual's is thread-safe), hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shown: list[Toast] = []
        self._held: list[Toast] | None = None  # None: not holding

    def keep(self, message: str, title: str, severity: SeverityLevel, timeout: float) -> bool:
        """Note a toast about to be shown; True when it is held instead (the help is open)."""
        now = time.monotonic()
        toast = Toast(message, title, severity, timeout, now + timeout)
        with self._lock:
            if self._held is not None:
                self._held.append(toast)
                return True
            self._shown = [t for t in self._shown if t.until > now]
            self._shown.append(toast)
            return False

    def hold(self) -> None:
        """From now until ``release``, hold every toast, those still on the screen first."""
        now = time.monotonic()
        with self._lock:
            if self._held is None:
                self._held = [t for t in self._shown if t.until > now]
                self._shown = []

    def release(self) -> list[Toast]:
        """Stop holding; the toasts held, to be shown again."""
        with self._lock:
            held, self._held = self._held or [], None
        return held
