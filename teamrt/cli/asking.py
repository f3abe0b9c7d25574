"""Asks in the terminal you are in: a foreground run's permission asks, put to the person at its terminal.

When ``teamrt run`` (``resume``, ``continue``) runs in the foreground with its
stdin and stderr on a terminal, each permission ask of the run is shown inline,
as Claude Code shows them, and waits for the person (the team's ``ask_wait``
and ``on_ask`` apply only without a terminal, or when ``--on-ask`` is given)::

    teamrt: coder asks to use Bash: python3 -m pytest -q
            why: Bash needs approval in default mode
      1/y  allow once
      2/a  allow always: add Bash(python3 -m pytest:*) to .claude/settings.local.json
      3/n  deny
      4/m  deny, with a note to the agent
      ask-1a2b3c4d? _

Keys: ``1`` or ``y`` allows once; ``2`` or ``a`` allows and adds the rule
(``teamrt.runtime.always``), said in one line; ``3`` or ``n`` denies; ``4`` or
``m`` denies with a line of text the agent reads. Several asks waiting are shown
one at a time, oldest first, and the run's progress lines are held while one is
on screen and printed after it (``Held``). An ask answered meanwhile by other
means (``teamrt answer``, the TUI) comes down. Ctrl-C interrupts the run as it
always does; the terminal's modes are put back whatever happens.

Everything an agent or a model wrote (the call, the reason, the rule) reaches the
terminal through ``teamrt.terminal.clean``. Keys are read without blocking the
run's event loop (``loop.add_reader`` on stdin), in cbreak mode for a key and in
the terminal's own line mode for the note.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import termios
import threading
import tty
from collections.abc import Callable, Iterator
from typing import TextIO

from teamrt.claudecode.local_rules import LOCAL_FILE
from teamrt.mcp.capabilities import ELICITATION_ASK
from teamrt.runs.render import describe_call
from teamrt.runtime.asking import Choice, NobodyThere, Shown, attending
from teamrt.terminal import clean, clean_line

Out = Callable[[str], None]

KEYS = {
    "1": "once", "y": "once", "2": "always", "a": "always",
    "3": "deny", "n": "deny", "4": "note", "m": "note",
}  # fmt: skip
"""The keys a prompt takes, and what each answers."""
MAX_NOTE = 2000
"""Characters of a note the agent gets; the rest is cut."""
COMMAND_LINES = 12
"""Lines of a long command shown; the rest is counted."""


class Held:
    """A foreground run's lines on stderr (progress, notes), held while an ask is on screen and printed
    after it, never interleaved with it. Thread-safe: progress lines come from their own thread."""

    def __init__(self, out: Out) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._held: list[str] | None = None

    def __call__(self, line: str) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(line)
                return
            self._out(line)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        with self._lock:
            self._held = []
        try:
            yield
        finally:
            with self._lock:
                held, self._held = self._held or [], None
                for line in held:
                    self._out(line)


class TerminalAsks:
    """The ``Attendant`` of a foreground run: asks shown and answered on this terminal, one at a time."""

    def __init__(self, fd: int, screen: TextIO, held: Held) -> None:
        self.fd = fd
        self.screen = screen
        self.held = held
        self._turn: asyncio.Lock | None = None
        self._gone = False

    async def ask(self, shown: Shown) -> Choice:
        if self._turn is None:
            self._turn = asyncio.Lock()  # first come, first shown
        async with self._turn:
            if self._gone:
                raise NobodyThere
            with self.held.holding():
                self._write(prompt(shown))
                try:
                    return await self._choose(shown)
                except asyncio.CancelledError:
                    self._write(f"\n  {clean_line(shown.id)}: answered elsewhere, or the run is ending\n")
                    raise

    def tell(self, line: str) -> None:
        self.held(line)

    async def _choose(self, shown: Shown) -> Choice:
        while True:
            key = (await self._read(line_mode=False)).decode(errors="replace")
            pressed = next((c for c in key.lower() if c in KEYS), None)
            if pressed is None:
                continue  # arrows, stray keys: the prompt stays
            picked = KEYS[pressed]
            if picked == "always" and shown.rule is None:
                why = clean_line(shown.no_rule)
                self._write(f"{pressed}\n  allow always is not offered: {why}\n  {_question(shown)}")
                continue
            said = {"once": "allowed once", "always": "allowed always", "deny": "denied", "note": "denied"}
            self._write(f"{pressed}\n")
            if picked == "note":
                self._write("  note to the agent (enter sends): ")
                text = (await self._read(line_mode=True)).decode(errors="replace")
                note = " ".join(text.split())[:MAX_NOTE] or None
                self._write(f"  {clean_line(shown.id)}: denied{', with your note' if note else ''}\n")
                return Choice(False, note=note)
            if picked == "once" and shown.tool == ELICITATION_ASK and shown.input.get("fields"):
                # an MCP server's form (teamrt.mcp.elicitation): allowing it answers its fields
                self._write("  values (name=value; name=value, or a JSON object; enter sends): ")
                text = (await self._read(line_mode=True)).decode(errors="replace")
                self._write(f"  {clean_line(shown.id)}: answered\n")
                return Choice(True, note=" ".join(text.split())[:MAX_NOTE] or None)
            self._write(f"  {clean_line(shown.id)}: {said[picked]}\n")
            return Choice(picked != "deny", always=picked == "always")

    async def _read(self, *, line_mode: bool) -> bytes:
        """What the person types next: a key (cbreak: no echo, no line editing) or a line (the terminal's
        own line mode, echoed); the terminal's modes put back after. Raises ``NobodyThere`` at the input's
        end."""
        loop = asyncio.get_running_loop()
        got: asyncio.Future[bytes] = loop.create_future()

        def readable() -> None:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not got.done():
                got.set_result(data)

        try:
            saved = termios.tcgetattr(self.fd)
        except termios.error:
            saved = None
        try:
            if saved is not None:
                if line_mode:
                    mode = termios.tcgetattr(self.fd)
                    mode[3] |= termios.ICANON | termios.ECHO
                    termios.tcsetattr(self.fd, termios.TCSANOW, mode)
                else:
                    tty.setcbreak(self.fd, termios.TCSANOW)  # ISIG stays: Ctrl-C interrupts the run
            loop.add_reader(self.fd, readable)
            data = await got
        finally:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(self.fd)
            if saved is not None:
                with contextlib.suppress(termios.error):
                    termios.tcsetattr(self.fd, termios.TCSANOW, saved)
        if not data:
            self._gone = True
            self._write("\n  the terminal's input ended: the team's on_ask answers from now on\n")
            raise NobodyThere
        return data

    def _write(self, text: str) -> None:
        self.screen.write(text)
        self.screen.flush()


def prompt(shown: Shown) -> str:
    """The ask as the person reads it, ending in the question; inert on a terminal (``clean``)."""
    command = shown.input.get("command") if shown.tool == "Bash" else None
    if isinstance(command, str):
        lines = clean(command).splitlines() or [""]
        more = ""
        if len(lines) > COMMAND_LINES:
            more = f"\n        ... and {len(lines) - COMMAND_LINES} more lines"
        call = f"Bash: {lines[0]}" + "".join(f"\n        {line}" for line in lines[1:COMMAND_LINES]) + more
    else:
        call = clean_line(describe_call(shown.tool, shown.input))
    if shown.rule is not None:
        always = f"allow always: add {clean_line(shown.rule)} to {LOCAL_FILE.as_posix()}"
    else:
        always = f"(allow always is not offered: {clean_line(shown.no_rule)})"
    return (
        f"\nteamrt: {clean_line(shown.agent)} asks to use {call}\n"
        f"        why: {clean_line(shown.reason)}\n"
        f"  1/y  allow once\n  2/a  {always}\n  3/n  deny\n  4/m  deny, with a note to the agent\n"
        f"  {_question(shown)}"
    )


def _question(shown: Shown) -> str:
    return f"{clean_line(shown.id)}? "


def at_a_terminal() -> bool:
    """Whether a person can be asked here: stdin and stderr are both terminals."""
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


@contextlib.contextmanager
def asking_here(out: Out, *, policy_given: bool = False) -> Iterator[Out]:
    """For a foreground run in the body: its asks put to the person at this terminal, unless stdin or
    stderr is not one or the command line chose a policy (``policy_given``: ``--on-ask``). Yields what to
    print the run's lines through: ``out``, held while an ask is on screen."""
    if policy_given or not at_a_terminal():
        yield out
        return
    held = Held(out)
    fd = sys.stdin.fileno()
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        saved = None
    try:
        with attending(TerminalAsks(fd, sys.stderr, held)):
            yield held
    finally:
        if saved is not None:  # whatever ended the run, the terminal is as it was
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, saved)
