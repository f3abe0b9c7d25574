"""The terminal's part of notifications: the bell, and a desktop notification by an OSC escape sequence,
when a run watched in this terminal needs the person or ends.

``teamrt run`` and ``resume`` in the foreground (``progress.watching`` hands
them every event it reads) and the TUI (``teamrt.tui.notifying``) ring for the
same events the run's own notifier tells hooks and the ``[notify] command`` of
(``teamrt.runtime.notices``): an ask waiting for a person, the run's end, its
budget near. The channel is ``[notify] terminal``; ``auto`` picks it from the
terminal, as other terminal tools do:

- iTerm2 (``TERM_PROGRAM=iTerm.app``, or ``LC_TERMINAL=iTerm2`` over ssh): OSC 9;
- kitty (``KITTY_WINDOW_ID``, ``TERM=xterm-kitty``): OSC 99, kitty's own;
- Ghostty, WezTerm, foot, rxvt: OSC 777 (``notify;title;body``);
- anything else (Terminal.app, GNOME's, Alacritty, GNU screen, an unknown
  terminal): the bell alone. Windows Terminal and ConEmu read OSC 9 as their
  own commands (``9;4`` is a progress bar), so they get the bell too.

Every channel rings the bell as well. Under tmux an OSC is wrapped in tmux's
passthrough (``ESC P tmux; ... ESC \\``, shown where ``allow-passthrough`` is
on); the bell is tmux's own alert. The text is ``notices.plain`` at this
boundary too: no BEL, ESC, ST or other control can end the OSC early and start
a sequence of its own, and no ``;`` can add a field.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Literal, TextIO

from teamrt.runtime.notices import MESSAGE_CHARS, TITLE_CHARS, Notice, notice_of, plain
from teamrt.settings import NotifySettings
from teamrt.store import EventRecord

Channel = Literal["bell", "osc9", "osc777", "osc99"]
BELL = "\a"
MIN_GAP_S = 2.0
"""Between two rings: a burst of asks rings once (a run's end always rings)."""


def choose_channel(setting: str, env: Mapping[str, str]) -> Channel | None:
    """How to tell this terminal: ``setting`` (``[notify] terminal``) unless ``auto``; None for ``off``
    and for a dumb terminal."""
    term = env.get("TERM", "")
    if setting == "off" or term == "dumb":
        return None
    if setting in ("bell", "osc9", "osc777", "osc99"):
        return setting  # type: ignore[return-value]  # checked against the literals just above
    program = env.get("TERM_PROGRAM", "")
    if program == "iTerm.app" or env.get("LC_TERMINAL") == "iTerm2":
        return "osc9"
    if env.get("KITTY_WINDOW_ID") or term == "xterm-kitty":
        return "osc99"
    if (
        program in ("ghostty", "WezTerm")
        or env.get("GHOSTTY_RESOURCES_DIR")
        or env.get("WEZTERM_PANE")
        or term == "xterm-ghostty"
        or term.startswith(("rxvt", "foot"))
    ):
        return "osc777"
    return "bell"


def sequence(notice: Notice, channel: Channel, *, tmux: bool = False, ident: int = 0) -> str:
    """The OSC that shows ``notice`` on ``channel`` ("" for the bell alone, which the caller rings);
    wrapped for tmux's passthrough when ``tmux``. ``ident`` tells kitty's notifications apart."""
    title, message = plain(notice.title, TITLE_CHARS), plain(notice.message, MESSAGE_CHARS)
    if channel == "osc9":
        text = f"{title}: {message}"
        # ConEmu-like terminals read "9;<digit>" as a command of their own: the text never starts so
        seq = f"\x1b]9;{text if not text[:1].isdigit() else 'teamrt: ' + text}\a"
    elif channel == "osc777":
        seq = f"\x1b]777;notify;{title};{message}\a"
    elif channel == "osc99":
        seq = f"\x1b]99;i=teamrt{ident}:d=0;{title}\x1b\\\x1b]99;i=teamrt{ident}:p=body;{message}\x1b\\"
    else:
        return ""
    if tmux:
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


class Alerts:
    """Rings for the events of one run as they are read: ``seen(event)`` for each."""

    def __init__(
        self,
        run_id: str,
        settings: NotifySettings,
        env: Mapping[str, str],
        *,
        ring: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``ring(osc)``: what puts the OSC (possibly "") on the terminal and rings its bell."""
        self.run_id = run_id
        self.events = settings.events
        self.channel = choose_channel(settings.terminal, env)
        self.tmux = bool(env.get("TMUX"))
        self._ring = ring
        self._clock = clock
        self._last = -MIN_GAP_S
        self._count = 0

    def seen(self, event: EventRecord) -> Notice | None:
        """The notice ``event`` makes (None: it makes none, or ``[notify] events`` leaves it out), rung
        unless the terminal is not to be told or it rang less than ``MIN_GAP_S`` ago (a run's end always
        rings)."""
        notice = notice_of(event.kind, event.data, event.agent, self.run_id)
        if notice is None or notice.what not in self.events:
            return None
        now = self._clock()
        if self.channel is None or (notice.what != "end" and now - self._last < MIN_GAP_S):
            return notice
        self._last = now
        self._count += 1
        self._ring(sequence(notice, self.channel, tmux=self.tmux, ident=self._count))
        return notice


def terminal_alerts(run_id: str, settings: NotifySettings, stream: TextIO) -> Alerts | None:
    """The alerts of a run watched in the foreground, written to ``stream`` (stderr: stdout may be
    a pipe, or JSON); None when ``stream`` is not a terminal or ``[notify] terminal`` is off."""
    if not stream.isatty() or choose_channel(settings.terminal, os.environ) is None:
        return None

    def ring(osc: str) -> None:
        stream.write(osc + BELL)  # one write: never split by a progress line
        stream.flush()

    return Alerts(run_id, settings, os.environ, ring=ring)
