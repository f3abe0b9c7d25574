"""What may reach a person's terminal: text from agents, models, tools, MCP servers, files and git refs,
with every control sequence made inert.

An agent's output is data, never instructions to the terminal that shows it: an escape sequence in a
branch name, a tool result or a file name could retitle the window, write the clipboard (OSC 52), move
the cursor over earlier lines, or reverse the text around it (bidi overrides). ``clean`` is the one
function every surface calls before it prints or renders such text: the TUI, ``show``, ``logs``, ``ls``,
progress lines, ``mcp``, ``trust``, ``apply`` and ``agents``.

Nothing is hidden from the person either: a sequence that a terminal would swallow (an OSC string, a
cursor move) is not dropped with what it holds but shown, its ESC (or 8-bit introducer) as U+FFFD and the
rest as plain text. Only colour and style codes (SGR), which hold nothing but digits, are dropped whole:
tools print them all the time. A command shown for trust therefore reads as it will run.
"""

from __future__ import annotations

import re

_SGR = re.compile(r"(?:\x1b\[|\x9b)[0-9;:]*m")
"""Colour and style (``ESC [ 1;31 m``, 7- or 8-bit): dropped whole, since its parameters are digits only
and nothing a person should read can hide in it."""

_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufff9-\ufffb\ud800-\udfff]"
)
"""C0 but tab and newline, DEL, C1 (8-bit CSI, OSC, DCS, ST ...), the marks and overrides that reorder
text (bidi), and lone surrogates (which no terminal encoding can write)."""

_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufff9-\ufffb\ud800-\udfff]")
"""What ``json.dumps(..., ensure_ascii=False)`` leaves raw that a terminal would act on or cannot write
(it escapes C0 itself)."""

REPLACEMENT = "\ufffd"


def clean(text: str) -> str:
    """``text`` with colour codes removed and every other control character shown as U+FFFD (an ESC
    with it: the rest of its sequence stays, as text); newlines and tabs stay, a CRLF ends a line as a
    newline. A lone carriage return is a control too: it could draw over a line's start."""
    return _CONTROL.sub(REPLACEMENT, _SGR.sub("", text.replace("\r\n", "\n")))


def clean_line(text: str) -> str:
    """``clean``, on one line: newlines and tabs become spaces (a name, a status, a progress line)."""
    return clean(text).replace("\n", " ").replace("\t", " ")


def clean_json(dumped: str) -> str:
    """JSON text (``json.dumps``'s, ``ensure_ascii=False``) with C1, DEL, bidi characters and lone
    surrogates written as ``\\uXXXX`` escapes: the same JSON value, inert on a terminal. Such characters
    can only stand inside a JSON string, where the escape means the same character."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
