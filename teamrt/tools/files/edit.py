"""The file tools ``Read``, ``Write``, ``Edit`` and ``MultiEdit``; ``Glob``, ``Grep`` and ``LS`` come from
their own modules. ``MultiEdit`` is offered only to agents of older runs that called it
(``teamrt.tools.registry.legacy_tools``): Claude Code 2.1 has none.

Every path goes through ``FileRoots.resolve``: walked name by name from the
root that holds it (``beneath``), symlinks followed by hand within the roots,
then checked (teamrt's home, protected paths, deny rules). The tool then reads,
writes and renames through the descriptors of that walk, so a sandboxed shell
that swaps a directory for a symlink meanwhile cannot send a write (which runs
in teamrt's own process, outside the sandbox) out of the workspace.

Behaviour follows the Anthropic SDK's reference tools
(``anthropic.lib.tools.agent_toolset``: the edit tool's unique-match rule,
binary and size guards), which are not imported: importing ``anthropic`` takes
about 1.5 s. Names and inputs are Claude Code's. Error messages start with the
tool's name (``Read: ...``).
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from typing import Any

from teamrt.tools import toolargs
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema
from teamrt.tools.files import beneath
from teamrt.tools.files.beneath import TEMPORARY_SUFFIX, remove_temporaries
from teamrt.tools.files.confine import FileRoots, reason
from teamrt.tools.files.glob import Glob
from teamrt.tools.files.grep import Grep
from teamrt.tools.files.textfile import LINE_CHARS, line_text, lines, open_text, regular

__all__ = ["TEMPORARY_SUFFIX", "Edit", "Glob", "Grep", "MultiEdit", "Read", "Write", "remove_temporaries"]

READ_LINES = 2000
"""Lines ``Read`` shows when no limit is given."""
EDIT_BYTES = 4 * 1024 * 1024
"""``Edit`` and ``MultiEdit`` load the whole file; larger files are refused, and so are edits whose result
would be larger."""
MULTI_EDITS = 100
"""Edits one ``MultiEdit`` call may make."""

_PATH = "Path relative to the workspace, or absolute."
_REPLACEMENT = {
    "old_string": {"type": "string", "description": "The exact text to replace."},
    "new_string": {"type": "string", "description": "The text to put in its place."},
    "replace_all": {
        "type": "boolean",
        "description": "Replace every occurrence, not just one (default false).",
    },
}
"""The inputs of one replacement: Edit's, and each of MultiEdit's ``edits``."""


# -- read ---------------------------------------------------------------------------


class Read:
    name = "Read"
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
        file_path = toolargs.path(input, "Read")
        offset = toolargs.whole(input, "Read", "offset", 1)
        limit = toolargs.whole(input, "Read", "limit", READ_LINES)
        return ToolResult(await asyncio.to_thread(_read, FileRoots.of(ctx), file_path, offset, limit))


def _read(conf: FileRoots, file_path: str, offset: int, limit: int) -> str:
    with conf.resolve("Read", file_path) as spot:
        f = open_text("Read", spot, file_path, "read")
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
        raise ToolError(f"Read: {file_path} {reason(e)}") from e
    if seen == 0:
        return f"({file_path} is empty)"
    if not shown:
        raise ToolError(f"Read: {file_path} has {seen} lines; offset {offset} is past its end")
    return "\n".join(shown)


# -- write and edit -----------------------------------------------------------------


class Write:
    name = "Write"
    description = (
        "Write a file in the workspace, replacing it whole if it exists; missing parent directories are"
        " created. Prefer Edit to change part of an existing file."
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
        file_path = toolargs.path(input, "Write")
        content = toolargs.text(input, "Write", "content")
        return ToolResult(await asyncio.to_thread(_write, FileRoots.of(ctx), file_path, content))


def _write(conf: FileRoots, file_path: str, content: str) -> str:
    with conf.resolve("Write", file_path, write=True) as spot:
        if spot.stat is not None:
            regular("Write", spot, file_path)
        mode = stat.S_IMODE(spot.stat.st_mode) if spot.stat is not None else 0o666 & ~_umask()
        try:
            parent = beneath.make_parents(spot)
            try:
                beneath.replace(parent, spot.tail[-1], content.encode(), mode)
            finally:
                os.close(parent)
        except OSError as e:
            raise ToolError(f"Write: {file_path} {reason(e)}") from e
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
    name = "Edit"
    description = (
        "Replace text in a file in the workspace. old_string must match the file exactly, indentation"
        " included, and occur exactly once (add surrounding lines to make it unique), unless replace_all"
        " is true, which replaces every occurrence. Read the file first."
    )
    input_schema = object_schema({"file_path": {"type": "string", "description": _PATH}, **_REPLACEMENT},
                                 "file_path", "old_string", "new_string")  # fmt: skip
    read_only = False

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if "edits" in input and "old_string" not in input:  # MultiEdit's input, under Edit's name
            raise ToolError(
                "Edit: takes one old_string and new_string, not a list of edits (MultiEdit's input); make"
                " one Edit call per change"
            )
        file_path = toolargs.path(input, "Edit")
        old = toolargs.text(input, "Edit", "old_string")
        new = toolargs.text(input, "Edit", "new_string")
        replace_all = toolargs.flag(input, "Edit", "replace_all")
        change = _Change(old, new, replace_all)
        change.check("Edit")
        conf = FileRoots.of(ctx)
        return ToolResult(await asyncio.to_thread(_edit, conf, file_path, change))


def _edit(conf: FileRoots, file_path: str, change: _Change) -> str:
    with conf.resolve("Edit", file_path, write=True) as spot:
        st = regular("Edit", spot, file_path)
        text = _load("Edit", conf, spot, file_path)
        changed, count = change.apply("Edit", text, file_path)
        _replace("Edit", spot, file_path, changed, stat.S_IMODE(st.st_mode))
    return f"edited {conf.show(spot.path)}: {count} replacement(s)"


@dataclass(frozen=True)
class _Change:
    """One replacement: ``old`` by ``new``, once or (``replace_all``) everywhere."""

    old: str
    new: str
    replace_all: bool

    def check(self, op: str, where: str = "") -> None:
        """A ToolError when the change could never apply; ``where`` names it among several."""
        if not self.old:
            raise ToolError(f"{op}: {where}old_string is empty; to create a file, use Write")
        if self.old == self.new:
            raise ToolError(f"{op}: {where}old_string and new_string are the same; nothing would change")

    def apply(self, op: str, text: str, file_path: str, where: str = "") -> tuple[str, int]:
        """``text`` changed, and how many replacements that made; a ToolError when ``old`` is not found,
        is not unique without ``replace_all``, or the result would be over EDIT_BYTES."""
        count = text.count(self.old)
        if count == 0:
            raise ToolError(
                f"{op}: {where}old_string was not found in {file_path}; read the file and copy the text"
                " exactly"
            )
        if count > 1 and not self.replace_all:
            raise ToolError(
                f"{op}: {where}old_string occurs {count} times in {file_path}; add surrounding lines to make"
                " it unique, or set replace_all to true"
            )
        count = count if self.replace_all else 1
        if len(text) + count * (len(self.new) - len(self.old)) > EDIT_BYTES:  # characters: at most its bytes
            raise _too_large(op, file_path, f"{where}the edited file would be")
        return text.replace(self.old, self.new, count), count


def _too_large(op: str, file_path: str, what: str = "") -> ToolError:
    mib = EDIT_BYTES // 2**20
    return ToolError(f"{op}: {what or file_path + ' is'} over {mib} MiB, too large to edit; use Bash")


def _load(op: str, conf: FileRoots, spot: beneath.Spot, file_path: str) -> str:
    """The whole existing file ``spot`` names as UTF-8 text (at most EDIT_BYTES of it), or a ToolError.

    A file the agent's deny rules keep it from reading is refused: what an edit answers (not found,
    found 3 times) would tell what it holds."""
    rule = conf.rule(spot.path)
    if rule is not None:
        raise ToolError(
            f"{op}: {file_path} is denied by the rule {rule}; a file the agent may not read cannot be edited"
        )
    if spot.stat is not None and spot.stat.st_size > EDIT_BYTES:
        raise _too_large(op, file_path)
    try:
        with open(beneath.open_file(spot), "rb") as f:
            data = f.read(EDIT_BYTES + 1)
    except OSError as e:
        raise ToolError(f"{op}: {file_path} {reason(e)}") from e
    if len(data) > EDIT_BYTES:
        raise _too_large(op, file_path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(f"{op}: {file_path} is not UTF-8 text, so it cannot be edited") from e


def _replace(op: str, spot: beneath.Spot, file_path: str, text: str, mode: int) -> None:
    """Put ``text`` in the place of the existing file ``spot`` names, all or nothing."""
    data = text.encode()
    if len(data) > EDIT_BYTES:
        raise _too_large(op, file_path, "the edited file would be")
    try:
        beneath.replace(spot.dir_fd, spot.tail[0], data, mode)
    except OSError as e:
        raise ToolError(f"{op}: {file_path} {reason(e)}") from e


# -- multiedit ----------------------------------------------------------------------


class MultiEdit:
    name = "MultiEdit"
    description = (
        "Make several replacements in one file in the workspace at once. The edits apply in order, each to"
        " the text the ones before it left, and are written all together or, if any fails, not at all."
        " Each edit follows Edit's rules: old_string must match exactly and occur once, unless replace_all"
        " is true. To create a file, give a path that does not exist and a first edit whose old_string is"
        f" empty (its new_string is the new file's text). At most {MULTI_EDITS} edits. Read the file first."
    )
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": _PATH},
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "The replacements, applied in this order.",
                "items": object_schema(_REPLACEMENT, "old_string", "new_string"),
            },
        },
        "file_path",
        "edits",
    )
    read_only = False

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = toolargs.path(input, "MultiEdit")
        changes = _changes(input.get("edits"))
        conf = FileRoots.of(ctx)
        return ToolResult(await asyncio.to_thread(_multi_edit, conf, file_path, changes))


def _changes(edits: Any) -> list[_Change]:
    """The ``edits`` of a MultiEdit call, checked; only the first may have an empty old_string (it
    creates the file)."""
    if not isinstance(edits, list) or not edits or len(edits) > MULTI_EDITS:
        raise ToolError(f"MultiEdit: edits must be a list of 1 to {MULTI_EDITS} edits")
    changes = []
    for i, edit in enumerate(edits, 1):
        where = f"edit {i}: "
        if not isinstance(edit, dict):
            raise ToolError(f"MultiEdit: {where}must be an object with old_string and new_string")
        unknown = sorted(set(edit) - {"old_string", "new_string", "replace_all"})
        if unknown:
            raise ToolError(f"MultiEdit: {where}unknown key {unknown[0]!r}")
        op = f"MultiEdit: edit {i}"
        change = _Change(
            toolargs.text(edit, op, "old_string"),
            toolargs.text(edit, op, "new_string"),
            toolargs.flag(edit, op, "replace_all"),
        )
        if i > 1 or change.old:
            change.check("MultiEdit", where)
        changes.append(change)
    return changes


def _multi_edit(conf: FileRoots, file_path: str, changes: list[_Change]) -> str:
    with conf.resolve("MultiEdit", file_path, write=True) as spot:
        creating = not changes[0].old
        if creating:
            if spot.stat is not None:
                raise ToolError(
                    f"MultiEdit: edit 1: old_string is empty, but {file_path} exists; an empty old_string"
                    " only creates a file"
                )
            text, rest = changes[0].new, changes[1:]
        else:
            regular("MultiEdit", spot, file_path)
            text, rest = _load("MultiEdit", conf, spot, file_path), changes
        made = 0
        for i, change in enumerate(rest, 2 if creating else 1):
            text, count = change.apply("MultiEdit", text, file_path, f"edit {i}: ")
            made += count
        if creating:
            _create("MultiEdit", spot, file_path, text)
        else:
            assert spot.stat is not None
            _replace("MultiEdit", spot, file_path, text, stat.S_IMODE(spot.stat.st_mode))
    shown = conf.show(spot.path)
    if creating:
        return f"created {shown} ({len(text.splitlines())} lines) and made {made} replacement(s)"
    return f"edited {shown}: {len(changes)} edit(s), {made} replacement(s)"


def _create(op: str, spot: beneath.Spot, file_path: str, text: str) -> None:
    """Create the file ``spot`` names, which does not exist, with its missing parent directories."""
    data = text.encode()
    if len(data) > EDIT_BYTES:
        raise _too_large(op, file_path, "the new file would be")
    try:
        parent = beneath.make_parents(spot)
        try:
            beneath.replace(parent, spot.tail[-1], data, 0o666 & ~_umask())
        finally:
            os.close(parent)
    except OSError as e:
        raise ToolError(f"{op}: {file_path} {reason(e)}") from e
