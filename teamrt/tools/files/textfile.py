"""The text file a walk found: checked to be a regular, non-binary file, opened and read by lines."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import IO

from teamrt.tools.base import ToolError
from teamrt.tools.files import beneath
from teamrt.tools.files.confine import reason

LINE_CHARS = 2000
"""Longer lines are cut, in ``read`` and in ``grep``'s content."""
_LINE_BYTES = 4 * LINE_CHARS + 4
"""Bytes read of one line: enough for LINE_CHARS characters of any UTF-8."""
PROBE_BYTES = 8192
"""A file with a NUL byte in its first PROBE_BYTES is binary."""


def regular(op: str, spot: beneath.Spot, file_path: str) -> os.stat_result:
    """The stat of the file ``spot`` names, or a ToolError unless it is an existing regular file."""
    if spot.stat is None:
        raise ToolError(f"{op}: {file_path} does not exist")
    if stat.S_ISDIR(spot.stat.st_mode):
        raise ToolError(f"{op}: {file_path} is a directory{'; list it with LS' if op == 'Read' else ''}")
    if not stat.S_ISREG(spot.stat.st_mode):
        raise ToolError(f"{op}: {file_path} is not a regular file")
    return spot.stat


def open_text(op: str, spot: beneath.Spot, file_path: str, verb: str) -> IO[bytes]:
    """The regular file ``spot`` names, open for reading; a ToolError when it is binary (the message says
    only text files can be ``verb``)."""
    regular(op, spot, file_path)
    try:
        fd = beneath.open_file(spot)
    except OSError as e:
        raise ToolError(f"{op}: {file_path} {reason(e)}") from e
    f = os.fdopen(fd, "rb")
    if b"\0" in f.read(PROBE_BYTES):
        f.close()
        raise ToolError(f"{op}: {file_path} is a binary file; only text files can be {verb}")
    f.seek(0)
    return f


def lines(f: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``f``, each at most _LINE_BYTES: the rest of a longer line is skipped unread."""
    while line := f.readline(_LINE_BYTES):
        yield line
        while len(line) == _LINE_BYTES and not line.endswith(b"\n"):
            line = f.readline(_LINE_BYTES)


def line_text(raw: bytes | str) -> str:
    """A line to show: decoded (bad UTF-8 replaced), without its line break, cut at LINE_CHARS."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\r\n")
    if len(text) > LINE_CHARS:
        return f"{text[:LINE_CHARS]} [... line cut at {LINE_CHARS} characters]"
    return text
