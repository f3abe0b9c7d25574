"""How statuses, agents and figures look: one place for the TUI's colours and number formats."""

from __future__ import annotations

from rich.text import Text

STATUS_STYLE = {
    "pending": "dim",
    "running": "bold green",
    "idle": "cyan",  # alive, waiting for mail
    "merging": "magenta",
    "done": "blue",
    "failed": "bold red",
    "stopped": "yellow",
    "crashed": "bold white on red",  # a live agent of a crashed run
}
ENDED = ("done", "failed", "stopped", "crashed")
LINE_STYLE = {
    "user": "cyan",
    "assistant": "",
    "call": "yellow",
    "result": "dim",
    "error": "red",
    "compaction": "dim italic",
    "streaming": "italic green",
}
LINE_MARK = {
    "user": "› ",
    "assistant": "",
    "call": "▸ ",
    "result": "  ↳ ",
    "error": "  ↳ ",
    "streaming": "… ",
}


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def name_text(name: str, depth: int, status: str) -> Text:
    """The agent's name indented under its parent; an ended agent's is dimmed."""
    prefix = "  " * (depth - 1) + "└ " if depth else ""
    return Text(prefix + name, style="dim" if status in ENDED else "bold")


def tokens_text(n: int) -> str:
    """``950``, ``12.3k``, ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"
