"""The ``glob`` tool: files by name pattern, newest first, found by a walk that stays in its roots.

The walk goes by directory descriptor (``beneath.entries``) and never through
a symlinked directory; it does not enter ``.git`` or teamrt's home. A symlinked
file is listed only when the file it leads to may be read; files a deny rule
hides are left out and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import beneath, toolargs
from .base import ToolContext, ToolError, ToolResult, object_schema
from .confine import Confinement, hidden_note

GLOB_RESULTS = 100
WALK_FILES = 50_000
"""A glob looks at no more files than this."""

_DIR = "Directory to search, relative to the workspace or absolute (default: the workspace)."


def glob_regex(pattern: str, op: str = "glob") -> re.Pattern[str]:
    """A regex matching the '/'-separated paths ``pattern`` matches, to use with ``fullmatch``.

    ``*`` and ``?`` stay within one name, ``**/`` is any number of directories
    (a final ``**``: everything below), ``[...]`` is a set (``[!...]`` its
    complement) and ``{a,b}`` alternatives.
    """
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        c = pattern[i]
        at_name_start = i == 0 or pattern[i - 1] == "/"
        if at_name_start and pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if at_name_start and pattern[i:] == "**":
            out.append(".*")
            break
        if c == "[" and (end := _set_end(pattern, i)) > 0:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = "".join("\\" + ch if ch in "\\^[]&~|" else ch for ch in (body[1:] if negate else body))
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end + 1
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "," and depth:
            out.append("|")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ToolError(f"{op}: {pattern!r} has a '{{' without its '}}'")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as e:
        raise ToolError(f"{op}: {pattern!r} is not a valid glob pattern: {e}") from e


def _set_end(pattern: str, start: int) -> int:
    """Index of the ']' closing the set opened at ``start`` (a ']' first in the set is literal), or -1."""
    i = start + 1
    if pattern.startswith("!", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    return pattern.find("]", i)


class Glob:
    name = "glob"
    description = (
        "Find files by name pattern, newest first. `*` and `?` match within one name, `**/` any number"
        " of directories (`**/*.py`: every Python file), `{a,b}` either. The pattern is relative to"
        f" path. At most {GLOB_RESULTS} files are listed; .git and teamrt's home are skipped."
    )
    input_schema = object_schema(
        {
            "pattern": {"type": "string", "description": "Glob pattern, such as `src/**/*.ts`."},
            "path": {"type": "string", "description": _DIR},
        },
        "pattern",
    )
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = toolargs.text(input, "glob", "pattern")
        path = toolargs.path(input, "glob", "path")
        if not pattern or pattern.startswith("/"):
            raise ToolError("glob: pattern must be a relative pattern; give the directory as path")
        if ".." in pattern.split("/"):
            raise ToolError("glob: '..' is not allowed in the pattern; give the directory as path")
        rx = glob_regex(pattern)
        return ToolResult(await asyncio.to_thread(_Glob(Confinement.of(ctx), rx).run, pattern, path))


@dataclass
class _Glob:
    """One glob: walks, matches, and counts what a deny rule hid."""

    conf: Confinement
    rx: re.Pattern[str]
    hidden: int = 0

    def run(self, pattern: str, path: str) -> str:
        with self.conf.resolve("glob", path) as top:
            if top.tail or top.stat is None or not stat.S_ISDIR(top.stat.st_mode):
                raise ToolError(f"glob: {path} {'is not a directory' if top.stat else 'does not exist'}")
            matches, stopped = self._matches(top)
        if not matches:
            lines = [f"no files match {pattern} in {path}"]
        else:
            matches.sort()
            lines = [self.conf.show(file) for _, file in matches[:GLOB_RESULTS]]
            if len(matches) > GLOB_RESULTS:
                shown = f"{GLOB_RESULTS} of {len(matches)} files shown"
                lines.append(f"({shown}, newest first; narrow the pattern or path)")
        if self.hidden:
            lines.append(hidden_note(self.hidden))
        if stopped:
            lines.append(f"(stopped after looking at {WALK_FILES} files; narrow the path)")
        return "\n".join(lines)

    def _matches(self, top: beneath.Spot) -> tuple[list[tuple[float, Path]], bool]:
        """The matching files that may be read, with their modification times negated; whether the walk
        stopped early."""
        matches: list[tuple[float, Path]] = []

        def enter(directory: Path) -> bool:
            return directory.name != ".git" and self.conf.read_refusal(directory, top.root) is None

        with contextlib.closing(beneath.entries(top.dir_fd, top.path, enter)) as walk:
            for seen, entry in enumerate(walk, 1):
                if seen > WALK_FILES:
                    return matches, True
                if not self.rx.fullmatch(str(entry.path.relative_to(top.path))):
                    continue
                st = self._readable(entry, top.root)
                if st is not None:
                    matches.append((-st.st_mtime, entry.path))
        return matches, False

    def _readable(self, entry: beneath.Entry, root: Path) -> os.stat_result | None:
        """The stat of the regular file ``entry`` is or leads to, when it may be read; else None."""
        if self.conf.in_home(entry.path, root):
            return None
        if self.conf.rule(entry.path) is not None:
            self.hidden += 1
            return None
        if entry.is_link:
            return self._link_target(entry)
        try:
            st = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
        except OSError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def _link_target(self, entry: beneath.Entry) -> os.stat_result | None:
        """The stat of the regular file the symlink ``entry`` leads to, when that may be read; else None."""
        try:
            with beneath.resolve(entry.path, self.conf.roots) as target:
                found, root, st = target.path, target.root, target.stat
        except (beneath.Escape, OSError):
            return None
        if st is None or not stat.S_ISREG(st.st_mode) or self.conf.in_home(found, root):
            return None
        if self.conf.rule(found) is not None:
            self.hidden += 1
            return None
        return st
