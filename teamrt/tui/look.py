"""How statuses, agents and figures look: one place for the TUI's colours, number formats and narrow
width, and for what makes text from agents safe to draw (``plain``, ``inert``)."""

from __future__ import annotations

from itertools import pairwise

from rich.text import Text

from teamrt.terminal import clean, clean_line

NARROW = 100
"""A screen narrower than this has a compact footer without the less needed keys (an 80-column one
keeps ``? help q quit`` in view)."""
STATUS_STYLE = {
    "pending": "dim",
    "running": "bold green",
    "idle": "cyan",  # alive, waiting for mail
    "merging": "magenta",
    "done": "blue",
    "failed": "bold red",
    "stopped": "yellow",
    "blocked": "bold red",  # a run that ended having done nothing
    "abandoned": "dim yellow",  # a task not done when its run ended
    "crashed": "bold white on red",  # a live agent of a crashed run
    "not responding": "bold black on yellow",  # a run whose owner lives here, its heartbeat stale
}
ENDED = ("done", "failed", "stopped", "blocked", "crashed")
LINE_STYLE = {
    "user": "cyan",
    "assistant": "",
    "call": "yellow",
    "result": "dim",
    "error": "red",
    "compaction": "dim italic",
    "streaming": "italic green",
    "mail": "magenta",
}
LINE_MARK = {
    "user": "› ",
    "assistant": "",
    "call": "▸ ",
    "result": "  ↳ ",
    "error": "  ↳ ",
    "streaming": "… ",
    "mail": "✉ ",
}


def plain(text: str, style: str = "") -> Text:
    """Text from an agent, a tool or the store on one line: never read as markup, its controls inert."""
    return Text(clean_line(text), style=style)


def inert(text: Text, *, one_line: bool = False) -> Text:
    """``text`` as ``clean`` (``clean_line`` when ``one_line``) leaves it, its styles kept: every panel,
    table cell and row goes through this before it is drawn, whatever built it."""
    fix = clean_line if one_line else clean
    whole = text.plain
    if fix(whole) == whole:
        return text
    cuts = sorted({0, len(whole), *(o for s in text.spans for o in (s.start, s.end) if 0 < o < len(whole))})
    out = text.blank_copy()
    for start, end in pairwise(cuts):
        at, part = len(out), fix(whole[start:end])
        out.append(part)
        for span in text.spans:
            if span.start <= start and span.end >= end:
                out.stylize(span.style, at, at + len(part))
    return out


def status_text(status: str) -> Text:
    return plain(status, STATUS_STYLE.get(status, ""))


def name_text(name: str, depth: int, status: str) -> Text:
    """The agent's name indented under its parent; an ended agent's is dimmed."""
    prefix = "  " * (depth - 1) + "└ " if depth else ""
    return plain(prefix + name, "dim" if status in ENDED else "bold")


def tokens_text(n: int) -> str:
    """``950``, ``12.3k``, ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"
