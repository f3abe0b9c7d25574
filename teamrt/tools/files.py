"""The file tools ``read``, ``write`` and ``edit``; ``glob`` and ``grep`` come from their own modules.

Every path goes through ``Confinement.resolve``: walked name by name from the
root that holds it (``beneath``), symlinks followed by hand within the roots,
then checked (teamrt's home, protected paths, deny rules). The tool then reads,
writes and renames through the descriptors of that walk, so a sandboxed shell
that swaps a directory for a symlink meanwhile cannot send a write (which runs
in teamrt's own process, outside the sandbox) out of the workspace.

Behaviour follows the Anthropic SDK's reference tools
(``anthropic.lib.tools.agent_toolset``: the edit tool's unique-match rule,
binary and size guards), which are not imported: importing ``anthropic`` takes
about 1.5 s.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any

from . import beneath, toolargs
from .base import ToolContext, ToolError, ToolResult, object_schema
from .beneath import TEMPORARY_SUFFIX, remove_temporaries
from .confine import Confinement, reason
from .globbing import Glob
from .grep import Grep
from .textfile import LINE_CHARS, line_text, lines, open_text, regular

__all__ = ["TEMPORARY_SUFFIX", "Edit", "Glob", "Grep", "Read", "Write", "remove_temporaries"]

READ_LINES = 2000
"""Lines ``read`` shows when no limit is given."""
EDIT_BYTES = 4 * 1024 * 1024
"""``edit`` loads the whole file; larger files are refused."""

_PATH = "Path relative to the workspace, or absolute."


# -- read ---------------------------------------------------------------------------


class Read:
    name = "read"
    description = (
        "Read a text file in the workspace. Lines come numbered like `cat -n` (number, tab, text);"
        f" at most {READ_LINES} lines from `offset`, and lines over {LINE_CHARS} characters are cut."
        " Use offset and limit to page through long files. Binary files are refused."
    )
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": _PATH},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1 = the first)."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"Lines to show (default {READ_LINES}).",
            },
        },
        "file_path",
    )
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = toolargs.path(input, "read")
        offset = toolargs.whole(input, "read", "offset", 1)
        limit = toolargs.whole(input, "read", "limit", READ_LINES)
        return ToolResult(await asyncio.to_thread(_read, Confinement.of(ctx), file_path, offset, limit))


def _read(conf: Confinement, file_path: str, offset: int, limit: int) -> str:
    with conf.resolve("read", file_path) as spot:
        f = open_text("read", spot, file_path, "read")
    shown: list[str] = []
    seen = 0
    try:
        with f:
            for seen, raw in enumerate(lines(f), 1):
                if seen < offset:
                    continue
                if len(shown) == limit:
                    last = offset + limit - 1
                    shown.append(
                        f"(lines {offset}-{last} shown; more follow: read on with offset={last + 1})"
                    )
                    break
                shown.append(f"{seen:6}\t{line_text(raw)}")
    except OSError as e:
        raise ToolError(f"read: {file_path} {reason(e)}") from e
    if seen == 0:
        return f"({file_path} is empty)"
    if not shown:
        raise ToolError(f"read: {file_path} has {seen} lines; offset {offset} is past its end")
    return "\n".join(shown)


# -- write and edit -----------------------------------------------------------------


class Write:
    name = "write"
    description = (
        "Write a file in the workspace, replacing it whole if it exists; missing parent directories are"
        " created. Prefer edit to change part of an existing file."
    )
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": _PATH},
            "content": {"type": "string", "description": "The file's complete new text."},
        },
        "file_path",
        "content",
    )
    read_only = False

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = toolargs.path(input, "write")
        content = toolargs.text(input, "write", "content")
        return ToolResult(await asyncio.to_thread(_write, Confinement.of(ctx), file_path, content))


def _write(conf: Confinement, file_path: str, content: str) -> str:
    with conf.resolve("write", file_path, write=True) as spot:
        if spot.stat is not None:
            regular("write", spot, file_path)
        mode = stat.S_IMODE(spot.stat.st_mode) if spot.stat is not None else 0o666 & ~_umask()
        try:
            parent = beneath.make_parents(spot)
            try:
                beneath.replace(parent, spot.tail[-1], content.encode(), mode)
            finally:
                os.close(parent)
        except OSError as e:
            raise ToolError(f"write: {file_path} {reason(e)}") from e
    verb = "overwrote" if spot.stat is not None else "created"
    return f"{verb} {conf.show(spot.path)} ({len(content.splitlines())} lines)"


def _umask() -> int:
    """The process's umask, read without setting it (``os.umask`` would, for every thread at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        return 0o022


class Edit:
    name = "edit"
    description = (
        "Replace text in a file in the workspace. old_string must match the file exactly, indentation"
        " included, and occur exactly once (add surrounding lines to make it unique), unless replace_all"
        " is true, which replaces every occurrence. Read the file first."
    )
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": _PATH},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence, not just one (default false).",
            },
        },
        "file_path",
        "old_string",
        "new_string",
    )
    read_only = False

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = toolargs.path(input, "edit")
        old = toolargs.text(input, "edit", "old_string")
        new = toolargs.text(input, "edit", "new_string")
        replace_all = toolargs.flag(input, "edit", "replace_all")
        if not old:
            raise ToolError("edit: old_string is empty; to create a file, use write")
        if old == new:
            raise ToolError("edit: old_string and new_string are the same; there is nothing to change")
        conf = Confinement.of(ctx)
        return ToolResult(await asyncio.to_thread(_edit, conf, file_path, old, new, replace_all))


def _edit(conf: Confinement, file_path: str, old: str, new: str, replace_all: bool) -> str:
    with conf.resolve("edit", file_path, write=True) as spot:
        st = regular("edit", spot, file_path)
        if st.st_size > EDIT_BYTES:
            raise ToolError(
                f"edit: {file_path} is over {EDIT_BYTES // 2**20} MiB, too large to edit; use bash"
            )
        text = _load(spot, file_path)
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"edit: old_string was not found in {file_path}; read the file and copy the text exactly"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"edit: old_string occurs {count} times in {file_path}; add surrounding lines to make it"
                " unique, or set replace_all to true"
            )
        changed = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        try:
            beneath.replace(spot.dir_fd, spot.tail[0], changed.encode(), stat.S_IMODE(st.st_mode))
        except OSError as e:
            raise ToolError(f"edit: {file_path} {reason(e)}") from e
    return f"edited {conf.show(spot.path)}: {count if replace_all else 1} replacement(s)"


def _load(spot: beneath.Spot, file_path: str) -> str:
    """The whole file ``spot`` names as UTF-8 text (at most EDIT_BYTES of it), or a ToolError."""
    try:
        with open(beneath.open_file(spot), "rb") as f:
            data = f.read(EDIT_BYTES + 1)
    except OSError as e:
        raise ToolError(f"edit: {file_path} {reason(e)}") from e
    if len(data) > EDIT_BYTES:
        raise ToolError(f"edit: {file_path} is over {EDIT_BYTES // 2**20} MiB, too large to edit; use bash")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(f"edit: {file_path} is not UTF-8 text, so it cannot be edited") from e
