"""``runs/<run>/stream/<agent>``: each agent's text as the model streams it (docs/architecture.md, Contracts).

The store keeps whole turns; a watcher (the TUI) that wants what an agent is
saying *now* reads the tail of this file. Plain UTF-8 text, appended as it
arrives, not fsynced (it is a view; the store is the record); each model call
begins on a line of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

STREAM_DIR = "stream"


class TextStream:
    """Appends one agent's streamed text to its file; opened on the first text, closed with ``close``."""

    def __init__(self, run_dir: Path, agent: str) -> None:
        self.path = run_dir / STREAM_DIR / agent
        self._file: IO[str] | None = None
        self._at_line_start = True

    def write(self, text: str) -> None:
        if self._file is None:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            # kept open while the agent runs; a lone surrogate a model sends becomes "?"
            self._file = open(self.path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._file.write(text)
        self._file.flush()
        self._at_line_start = text.endswith("\n")

    def end_turn(self) -> None:
        """Start the next model call's text on a line of its own."""
        if self._file is not None and not self._at_line_start:
            self.write("\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
