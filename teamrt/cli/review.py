"""``teamrt diff`` and ``teamrt transcript``: a run's work and an agent's conversation, read in the terminal.

``diff`` prints git's diff of an agent's work or of the run's integration branch (``runs.diffs``):
through a pipe the patch itself, every control made inert but the bytes otherwise as git wrote them
(``teamrt diff RUN | git apply`` works); on a terminal (``--color``), each line cleaned, then coloured
as git colours it. ``transcript`` prints an agent's conversation (``runs.transcript``) with tool calls
folded, or its stored messages as JSON. What either prints is an agent's, so nothing of it reaches the
terminal unclean.
"""

from __future__ import annotations

import argparse
import os
import sys

from teamrt import home
from teamrt.cli.output import notice, print_json
from teamrt.runs import diffs
from teamrt.runs import transcript as conversation
from teamrt.runs.transcript import Entry
from teamrt.terminal import clean, clean_line

SGR = {"bold": "1", "dim": "2", "italic": "3", "red": "31", "green": "32", "yellow": "33", "magenta": "35",
       "cyan": "36"}  # fmt: skip
ENTRY_STYLE = {
    "prompt": "cyan",
    "user": "cyan",
    "thinking": "dim italic",
    "call": "yellow",
    "result": "dim",
    "error": "red",
    "mail": "magenta",
    "mark": "dim",
}
ENTRY_MARK = {"call": "▸ ", "result": "  ↳ ", "error": "  ↳ "}


def handle(args: argparse.Namespace) -> int:
    if args.command == "diff":
        return _diff(args)
    return _transcript(args)


def colour_wanted(choice: str) -> bool:
    """``--color``: always, never, or (auto) when stdout is a terminal and NO_COLOR is not set."""
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def paint(text: str, style: str) -> str:
    """``text`` (clean already) in ``style``'s colours, as SGR codes."""
    codes = ";".join(SGR[word] for word in style.split() if word in SGR)
    return f"\x1b[{codes}m{text}\x1b[0m" if codes and text else text


# -- diff --------------------------------------------------------------------------------------------


def _diff(args: argparse.Namespace) -> int:
    run_dir = home.existing_run_dir(args.run)
    subject = diffs.subject(run_dir, args.run, args.agent)
    mode: diffs.Mode = "stat" if args.stat else "name-only" if args.name_only else "patch"
    coloured = colour_wanted(args.color)
    found = diffs.diff_bytes(subject, mode, stat_width=diffs.terminal_width()).data
    if subject.live:
        notice(
            f"teamrt: note: {subject.agent} is still at work; this is its worktree as it is now"
            " (uncommitted changes and new files included)"
        )
    if not found:
        notice(f"teamrt: no changes: the {subject.label} is as {subject.against}")
        return 0
    if not coloured:
        sys.stdout.buffer.write(diffs.inert(found))
        sys.stdout.flush()
        return 0
    text = clean(found.decode("utf-8", "replace")).removesuffix("\n")
    lines = text.split("\n")
    if mode == "patch":
        shown = [paint(line, diffs.LINE_STYLE.get(kind, "")) for kind, line in diffs.line_kinds(lines)]
    else:
        shown = lines
    sys.stdout.write("\n".join(shown) + "\n")
    sys.stdout.flush()
    return 0


# -- transcript --------------------------------------------------------------------------------------


def _transcript(args: argparse.Namespace) -> int:
    run_dir = home.existing_run_dir(args.run)
    record, turns, rounds = conversation.read(run_dir, args.run, args.agent)
    if args.json:
        print_json(conversation.messages_json(turns))
        return 0
    coloured = colour_wanted(args.color)
    role = f", role {record.role}" if record.role and record.role != record.kind else ""
    head = f"{record.name} ({record.kind} agent{role}) of run {args.run}: {record.status}"
    if record.status_reason:
        head += f": {record.status_reason}"
    out = [paint(clean_line(head), "bold") if coloured else clean_line(head)]
    found = conversation.entries(turns, rounds, thinking=args.thinking)
    out += render_entries(found, record.name, full=args.full, coloured=coloured)
    if not found:
        out.append("(nothing yet)")
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()
    return 0


def render_entries(entries: list[Entry], agent: str, *, full: bool, coloured: bool) -> list[str]:
    """The entries as lines: a heading whenever the speaker changes (the prompt, the agent, mail), then
    what was said, indented; a call on a line, its result under it; marks as rules."""

    def put(text: str, style: str = "") -> None:
        out.append(paint(text, style) if coloured else text)

    out: list[str] = []
    speaker = ""
    for entry in entries:
        if entry.kind == "mark":
            out.append("")
            put(f"── {clean_line(entry.text)} ──", "dim")
            speaker = ""
            continue
        who = {"prompt": "prompt", "user": "user", "mail": f"mail:{entry.who}"}.get(entry.kind, agent)
        if entry.kind == "mail" or who != speaker:
            out.append("")
            heading = clean_line(entry.text) if entry.kind == "mail" else who
            put(heading, f"bold {ENTRY_STYLE.get(entry.kind, '')}".strip())
            speaker = who
            if entry.kind == "mail":
                _indented(out, entry.more, "", coloured, depth=2)
                continue
        mark = ENTRY_MARK.get(entry.kind, "")
        style = ENTRY_STYLE.get(entry.kind, "")
        text = entry.more if full and entry.more and entry.kind in ("result", "error") else entry.text
        _indented(out, text, style, coloured, depth=2, mark=mark)
        if full and entry.more and entry.kind == "call":
            _indented(out, entry.more, "dim", coloured, depth=6)
    return out


def _indented(out: list[str], text: str, style: str, coloured: bool, *, depth: int, mark: str = "") -> None:
    """``text``, cleaned, a line each, indented by ``depth`` (the first after ``mark``)."""
    if not text.strip():
        return
    pad = " " * depth
    for i, line in enumerate(clean(text).split("\n")):
        lead = pad + (mark if i == 0 else " " * len(mark))
        out.append(lead + (paint(line, style) if coloured else line))
