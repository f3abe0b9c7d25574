"""The run view's status line: the ``statusLine`` command of the run's project, run as the run moves,
shown in rows above the footer (``teamrt.claudecode.statusline`` chooses and runs it).

``StatusBar.seen`` is given each state the run view reads. A state that moved (a new event or turn, the
cost, the status, the lead's model) asks for a run; runs are at least ``GAP_S`` apart, one at a time,
in an asyncio worker of the screen (the command is a subprocess: nothing blocks the UI); a request made
while one runs is run after it, with the newest state. ``refreshInterval`` asks for one every so many
seconds besides. Leaving the run view cancels the worker, which kills the command's process group.

What the command prints is someone's program output, shown on a person's terminal: ``ansi_lines`` keeps
its colours and styles (SGR, which Rich turns into styles: only colour and weight reach the screen,
never the codes) and makes every other control inert through ``teamrt.terminal.clean_line`` (an OSC
string, a cursor move, a bidi override shows as text, its ESC as U+FFFD); an OSC 8 link shows its text;
concealed text is shown.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.widgets import Static
from textual.worker import Worker

from teamrt.claudecode.hooks import Ran
from teamrt.claudecode.statusline import (
    GAP_S,
    MAX_LINES,
    Chosen,
    RunFacts,
    choose,
    run_status_line,
    status_input,
)
from teamrt.sandbox.confinement import Confinement
from teamrt.terminal import clean_line
from teamrt.tui.state import RunState

MAX_CHARS = 2000
"""Of each line printed, what is read (a row shows far less; the rest is not parsed)."""
_SGR = re.compile(r"(?:\x1b\[|\x9b)([0-9;:]*)m")
_LINK = re.compile(r"\x1b\]8;[^;\x07\x1b]*;[\x20-\x7e]*(?:\x07|\x1b\\)")
"""An OSC 8 hyperlink's opening or closing (``ESC ] 8 ; params ; URI ST``), its URI printable ASCII."""
NOTE_STYLE = "dim italic"


def ansi_lines(output: str, padding: int = 0) -> list[Text]:
    """The first ``MAX_LINES`` lines of ``output`` as styled, inert text, each ``padding`` cells in."""
    lines = output.replace("\r\n", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return [_line(line[:MAX_CHARS], padding) for line in lines[:MAX_LINES]]


def _line(raw: str, padding: int) -> Text:
    raw = _LINK.sub("", raw)
    parts: list[str] = []
    at = 0
    for sgr in _SGR.finditer(raw):
        parts += [clean_line(raw[at : sgr.start()]), f"\x1b[{sgr.group(1).replace(':', ';')}m"]
        at = sgr.end()
    parts.append(clean_line(raw[at:]))
    text = Text.from_ansi("".join(parts), no_wrap=True, overflow="ellipsis")
    shown = Style(conceal=False)
    text.spans = [s._replace(style=_seen(s.style, shown)) for s in text.spans]
    return Text(" " * padding, no_wrap=True, overflow="ellipsis") + text if padding else text


def _seen(style: str | Style, shown: Style) -> str | Style:
    return style + shown if isinstance(style, Style) and style.conceal else style


def outcome_lines(ran: Ran, padding: int) -> list[Text]:
    """What a run of the command shows: its lines, or one dim line naming its failure (nothing when it
    succeeded and printed nothing, as in Claude Code)."""
    if ran.failure:
        return [_note(f"statusLine: {ran.failure}")]
    if ran.code != 0:
        why = next((x.strip() for x in ran.stderr.splitlines() if x.strip()), "")
        ended = f"exit code {ran.code}" if (ran.code or 0) > 0 else f"killed by signal {-(ran.code or 0)}"
        return [_note(f"statusLine: {ended}{f': {why}' if why else ''}")]
    return ansi_lines(ran.stdout, padding)


def _note(said: str) -> Text:
    return Text(clean_line(said)[:MAX_CHARS], style=NOTE_STYLE, no_wrap=True, overflow="ellipsis")


@dataclass(frozen=True)
class Prepared:
    """What the bar needs once per run view: the status line chosen, and where its command runs."""

    chosen: Chosen
    ctx: Confinement


def prepare(run_dir: Path, project: Path, team: dict[str, Any] | None) -> Prepared:
    """The status line of ``project`` and its confinement under the run's sandbox policy (``team``: the
    run's team as the store keeps it). Reads files: called off the app's thread."""
    from teamrt.claudecode.setup_hooks import outside_run

    policy = None
    if team is not None:
        from teamrt.team import team_from_json

        try:
            policy = team_from_json(team).sandbox
        except (ValueError, KeyError, TypeError):  # an older run's team: the default policy confines more
            policy = None
    return Prepared(choose(project), outside_run(project, run_dir, policy))


def facts(state: RunState, now: float, version: str) -> RunFacts:
    """The status line's input, from what the run view read."""
    from teamrt.models.catalog import lookup

    run = state.run
    lead = next((a for a in state.agents if a.kind == "lead"), None)
    model = lead.model if lead is not None else ""
    info = lookup(model) if model else None
    ended = run.finished_at if run.finished_at is not None else now
    waiting = len(state.asks)
    return RunFacts(
        run_id=run.id,
        project=Path(run.workdir),
        model=model,
        cost_usd=run.usage.cost_usd,
        duration_ms=max(0, int((ended - run.created_at) * 1000)),
        input_tokens=run.usage.input_tokens + run.usage.cache_creation_tokens + run.usage.cache_read_tokens,
        output_tokens=run.usage.output_tokens,
        context_window=info.context_window if info is not None else None,
        version=version,
        teamrt={
            "run_id": run.id,
            "status": state.status,
            "agents": len(state.agents),
            "asks_waiting": waiting,
        },
    )


def moved(state: RunState) -> tuple[Any, ...]:
    """What, changed, makes the line run again: the newest event, the turns, the cost, status and model."""
    last = state.events[-1].id if state.events else 0
    turns = sum(a.turns for a in state.agents)
    lead = next((a.model for a in state.agents if a.kind == "lead"), "")
    return (state.status, last, turns, round(state.run.usage.cost_usd, 6), lead, len(state.asks))


class StatusBar(Static):
    """The rows of the status line; hidden while there is nothing to show."""

    def __init__(self, run_dir: Path, *, clock: Any = time.time, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.run_dir = run_dir
        self.clock = clock
        self.prepared: Prepared | None = None
        self.runs = 0
        """How many times the command ran (for tests and the benchmark's eye)."""
        self.lines: list[Text] = []
        """The rows shown."""
        self._payload: dict[str, Any] | None = None
        self._key: tuple[Any, ...] | None = None
        self._wanted = asyncio.Event()
        self._worker: Worker[None] | None = None
        self.display = False

    def seen(self, state: RunState) -> None:
        """A state the run view read: ask for a run when it moved (the first one starts the bar)."""
        key = moved(state)
        if key == self._key:
            return
        from teamrt import __version__

        self._key = key
        self._payload = status_input(facts(state, self.clock(), __version__))
        self._wanted.set()
        if self._worker is None:
            team = state.run.settings.get("team")
            project = Path(state.run.workdir)
            self._worker = self.run_worker(
                self._go(project, team if isinstance(team, dict) else None),
                group="statusline",
                exclusive=True,
            )

    async def _go(self, project: Path, team: dict[str, Any] | None) -> None:
        prepared = await asyncio.to_thread(prepare, self.run_dir, project, team)
        self.prepared = prepared
        line = prepared.chosen.line
        for note in prepared.chosen.notes:  # a repository's line left out, a field ignored: said once
            self.notify(clean_line(note), severity="warning", timeout=8, markup=False)
        if line is None:
            if prepared.chosen.notes:
                self._show([_note(prepared.chosen.notes[-1])])
            return
        if line.refresh_s is not None:
            self.set_interval(line.refresh_s, self._wanted.set)
        last = 0.0
        while True:
            await self._wanted.wait()
            wait = last + GAP_S - time.monotonic()
            if wait > 0:  # debounced: what came meanwhile is run once, with the newest state
                await asyncio.sleep(wait)
            self._wanted.clear()
            payload = self._payload
            assert payload is not None
            last = time.monotonic()
            ran = await run_status_line(line, payload, prepared.ctx)
            self.runs += 1
            self._show(outcome_lines(ran, line.padding))

    def _show(self, lines: list[Text]) -> None:
        self.lines = lines
        self.display = bool(lines)
        self.update(Text("\n").join(lines) if lines else "")
