"""What may reach a person's terminal: text from agents, models, tools, MCP servers, files and git refs,
with every control sequence taken out.

An agent's output is data, never instructions to the terminal that shows it: an escape sequence in a
branch name, a tool result or a file name could retitle the window, write the clipboard (OSC 52), move
the cursor over earlier lines, or reverse the text around it (bidi overrides). ``clean`` is the one
function every surface calls before it prints or renders such text: the TUI, ``show``, ``logs``, ``ls``,
progress lines, ``mcp``, ``trust``, ``apply`` and ``agents``.
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(
    r"""
      \x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?            # CSI: ESC [ params intermediates final
    | \x9b[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?              # CSI, 8-bit
    | (?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])               # OSC, DCS, SOS, PM, APC (7- or 8-bit) ...
      [^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?                 # ... up to BEL or ST (or the end)
    | \x1b[\x20-\x2f]*[\x30-\x7e]?                          # any other escape: ESC intermediates final
    """,
    re.VERBOSE,
)
"""Whole escape sequences, cut short ones included: removing only ESC would leave ``]52;c;...`` on
screen, and a sequence split across two writes must not come back together."""

_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufff9-\ufffb]"
)
"""C0 but tab and newline, DEL, C1, and the marks and overrides that reorder text (bidi)."""


def clean(text: str) -> str:
    """``text`` with escape sequences removed and every other control character shown as U+FFFD;
    newlines and tabs stay. A carriage return is a control too: it could draw over a line's start."""
    return _CONTROL.sub("\ufffd", _SEQUENCE.sub("", text))


def clean_line(text: str) -> str:
    """``clean``, on one line: newlines and tabs become spaces (a name, a status, a progress line)."""
    return clean(text).replace("\n", " ").replace("\t", " ")
