"""The commit messages teamrt writes for an agent's work, and for merging it onto the integration branch.

A commit is read later, by a person, in ``git log``: it should say what was done (a subject of at most
72 characters, cut only between words), why and by whom (a body: the agent's own summary, wrapped), and
where it came from (trailers: ``Agent:``, ``Task:``, ``Run:``). Everything in it but teamrt's own words
is an agent's text, so none of it may carry a control character: ``git log`` prints the message raw in a
terminal, where an escape sequence would act and a carriage return would draw over what came before it.
``plain`` removes them (the terminal sanitizer's set, with nothing left in their place). The trailers are
teamrt's own last paragraph, each value on one line: an agent's summary that writes ``Agent: someone`` on
a line of its own stays in the body, where git's trailer parsing (which reads the last paragraph only)
never takes it, and cannot add a line to the trailers.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from teamrt.terminal import REPLACEMENT, clean

SUBJECT_CHARS = 72
BODY_WIDTH = 72
BODY_LINES = 40
"""The agent's summary kept in a commit's body; the rest is said to be cut (the run keeps it all)."""
TRAILER_CHARS = 100


@dataclass(frozen=True)
class Work:
    """What a commit of an agent's work is about."""

    agent: str
    summary: str = ""
    """What the agent said it did: its final answer (empty when it ended without one)."""
    task: str | None = None
    """The task it worked on, as ``#3 "fix the parser"`` (a claimed task) or its directive's first line."""
    run: str | None = None
    note: str | None = None
    """teamrt's own word on the work, for the body's end (why it is kept and not merged)."""
    task_title: str | None = None
    """The task's title alone, for the subject when the agent said nothing."""


def as_work(agent: str, work: Work | str) -> Work:
    """``work``, or a summary given alone made the work of ``agent``."""
    return work if isinstance(work, Work) else Work(agent, summary=work)


def plain(text: str) -> str:
    """``text`` without control characters (colour codes, escape sequences' introducers, carriage returns,
    bidi overrides: removed, not shown) and with tabs as spaces; newlines stay."""
    return clean(text).replace(REPLACEMENT, "").replace("\t", "    ")


def one_line(text: str, limit: int = SUBJECT_CHARS) -> str:
    """``text`` (``plain``) on one line of at most ``limit`` characters, cut between words and then
    marked ``...`` (a single word longer than the line is cut within it: there is no other place)."""
    line = " ".join(plain(text).split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 3]
    if " " in cut and line[limit - 3] != " ":
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:.-") + "..."


def headline(summary: str) -> str:
    """The line of an agent's summary that says what it did: its first line of text, a Markdown heading
    (``## Summary``) skipped when text follows it, list markers and emphasis removed."""
    lines = [_bare(x) for x in plain(summary).splitlines()]
    said = [(x, heading) for x, heading in lines if x]
    return next((x for x, heading in said if not heading), said[0][0] if said else "")


def _bare(line: str) -> tuple[str, bool]:
    stripped = line.strip()
    heading = stripped.startswith("#")
    return stripped.strip("#*-_ ").replace("**", "").replace("__", "").strip(), heading


def commit_message(work: Work) -> str:
    """The message of the commit holding what ``work``'s agent left: its summary's headline as the
    subject (else the task's title), the summary wrapped as the body, then the trailers."""
    first = headline(work.summary)
    subject = one_line(first or work.task_title or f"Work of {work.agent}")
    body = wrap(_rest(work.summary, first, keep=subject != " ".join(first.split())))
    if work.note:
        body.extend(["", *wrap(work.note)] if body else wrap(work.note))
    return _join(subject, body, trailers(work))


def merge_message(work: Work, gates: Sequence[str] | None) -> str:
    """The message of the merge of ``work`` onto the integration branch: ``Merge <agent>: <what it did>``,
    the agent's headline when the subject had to shorten it, and ``gates``: a line per gate saying how it
    passed (none: the team has no gates; None: they have not run yet)."""
    first = headline(work.summary) or work.task_title or f"work of {work.agent}"
    head = f"Merge {one_line(work.agent, 40)}: "
    subject = head + one_line(first, SUBJECT_CHARS - len(head))
    body = wrap(first) if subject.endswith("...") else []
    if gates is None:
        said = ["The gates have not run yet."]
    elif gates:
        said = ["Gates passed:", *(f"- {one_line(g, BODY_WIDTH * 3)}" for g in gates)]
    else:
        said = ["No gates: the team has none."]
    body.extend(["", *said] if body else said)
    return _join(subject, body, trailers(work))


def trailers(work: Work) -> list[str]:
    """``Agent:``, ``Task:`` and ``Run:``, each value on one line."""
    said = [f"Agent: {one_line(work.agent, TRAILER_CHARS)}"]
    if work.task:
        said.append(f"Task: {one_line(work.task, TRAILER_CHARS)}")
    if work.run:
        said.append(f"Run: {one_line(work.run, TRAILER_CHARS)}")
    return said


def _rest(summary: str, first: str, *, keep: bool) -> str:
    """``summary`` from the line ``first`` came from (``keep``: the subject shortened it) or after it,
    without the headings before it."""
    lines = plain(summary).splitlines()
    for n, line in enumerate(lines):
        if first and _bare(line)[0] == first:
            return "\n".join(lines[n if keep else n + 1 :])
    return "\n".join(lines)


def wrap(text: str) -> list[str]:
    """``text``'s lines wrapped at ``BODY_WIDTH`` (a list item's continuation indented under its text),
    runs of blank lines made one, at most ``BODY_LINES`` lines; a line starting ``---`` is indented, so
    that no trailer parser takes what comes before it for the message's end."""
    out: list[str] = []
    for line in plain(text).splitlines():
        stripped = line.rstrip()
        if stripped.startswith("---"):  # git interpret-trailers reads such a line as a patch's start
            stripped = f" {stripped}"
        if not stripped:
            if out and out[-1]:
                out.append("")
            continue
        indent = len(stripped) - len(stripped.lstrip())
        marker = stripped.lstrip()[:2] if stripped.lstrip()[:2] in ("- ", "* ") else ""
        hanging = " " * (indent + len(marker))
        wrapper = textwrap.TextWrapper(BODY_WIDTH, subsequent_indent=hanging, break_long_words=False,
                                       break_on_hyphens=False)  # fmt: skip
        out.extend(wrapper.wrap(stripped))
    while out and not out[-1]:
        out.pop()
    if len(out) > BODY_LINES:
        cut = len(out) - BODY_LINES
        out = [
            *out[:BODY_LINES],
            "",
            f"[{cut} more line{'s' if cut != 1 else ''} cut; the run keeps them all]",
        ]
    return out


def _join(subject: str, body: list[str], trailer_lines: list[str]) -> str:
    parts = [subject]
    if body:
        parts.append("\n".join(body))
    parts.append("\n".join(trailer_lines))
    return "\n\n".join(parts) + "\n"
