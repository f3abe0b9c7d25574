"""The ``LS`` tool: a directory as a tree, walked by descriptor so it stays in the agent's roots.

Each directory is opened relative to the one holding it with ``O_NOFOLLOW``,
so a sandboxed shell that swaps a directory for a symlink mid-walk cannot lead
the listing out of the workspace. Symlinks are never entered; one is listed
(marked ``@``) only when what it leads to may be read. ``.git`` and teamrt's
home are left out, and so is whatever a deny rule hides (counted in a note).
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.tools import toolargs
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema
from teamrt.tools.files import beneath
from teamrt.tools.files.confine import FileRoots, shown

LS_ENTRIES = 1000
"""Entries one listing shows."""
WALK_ENTRIES = 50_000
"""Entries one listing looks at, shown or not."""
IGNORE_PATTERNS = 100
PATTERN_CHARS = 1000

_LIST = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SKIPPED = frozenset({".git"})


class LS:
    name = "LS"
    description = (
        "List a directory of the workspace as a tree: its files and subdirectories, all the way down."
        " Directories end in '/', symlinks in '@' (they are not followed). path: the directory, relative to"
        " the workspace or absolute (default: the workspace). ignore: glob patterns of names or relative"
        " paths to leave out, with what is below them (such as `node_modules` or `*.pyc`). At most"
        f" {LS_ENTRIES} entries are shown; .git and teamrt's home never are. To find files by name or"
        " content in a large tree, Glob and Grep are faster."
    )
    input_schema = object_schema(
        {
            "path": {
                "type": "string",
                "description": "Directory to list, relative to the workspace or absolute (default: it).",
            },
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Glob patterns to leave out, matched against each name and relative path.",
            },
        },
    )
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = toolargs.path(input, "LS", "path")
        ignore = _patterns(input.get("ignore", []))
        return ToolResult(await asyncio.to_thread(_Listing(FileRoots.of(ctx), ignore).run, path))


def _patterns(value: Any) -> re.Pattern[str] | None:
    """One regex for the ``ignore`` patterns (``*`` in them matches '/' too), or None when there are none."""
    if not isinstance(value, list) or len(value) > IGNORE_PATTERNS:
        raise ToolError(f"LS: ignore must be a list of at most {IGNORE_PATTERNS} glob patterns")
    patterns = []
    for i, pattern in enumerate(value, 1):
        if (
            not isinstance(pattern, str)
            or not 0 < len(pattern.rstrip("/")) <= PATTERN_CHARS
            or "\0" in pattern
        ):
            raise ToolError(
                f"LS: ignore pattern {i} must be a non-empty string of at most {PATTERN_CHARS} characters"
            )
        patterns.append(fnmatch.translate(pattern.rstrip("/")))
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


@dataclass
class _Listing:
    """One listing: walks, renders, and counts what was left out."""

    conf: FileRoots
    ignore: re.Pattern[str] | None
    """What the ignore patterns match, names and relative paths alike; None when there are none."""
    lines: list[str] = field(default_factory=list)
    hidden: int = 0
    looked: int = 0

    def run(self, path: str) -> str:
        with self.conf.resolve("LS", path) as top:
            if top.stat is None:
                raise ToolError(f"LS: {path} does not exist")
            if top.tail or not stat.S_ISDIR(top.stat.st_mode):
                raise ToolError(f"LS: {path} is not a directory; read it with Read")
            self.lines.append(f"- {shown(str(top.path))}/")
            try:
                fd = os.open(".", _LIST, dir_fd=top.dir_fd)
            except OSError as e:
                raise ToolError(f"LS: {path} could not be listed: {(e.strerror or 'error').lower()}") from e
            complete = self._walk(fd, top.path, top.root, top.path, 1)
        if len(self.lines) == 1:
            self.lines.append("  (empty)")
        if not complete:
            self.lines.append(
                f"(stopped after {LS_ENTRIES} entries shown or {WALK_ENTRIES} looked at; list a subdirectory,"
                " add ignore patterns, or use Glob)"
            )
        if self.hidden:
            self.lines.append(
                f"({self.hidden} {'entry is' if self.hidden == 1 else 'entries are'} hidden by the agent's"
                " deny rules)"
            )
        return "\n".join(self.lines)

    def _walk(self, fd: int, at: Path, root: Path, top: Path, depth: int) -> bool:
        """List the directory ``fd`` (whose path is ``at``; it is closed here) and what is below it,
        indented ``depth`` levels; False when a limit stopped the listing."""
        try:
            for name, kind in _entries(fd):
                self.looked += 1
                if len(self.lines) > LS_ENTRIES or self.looked > WALK_ENTRIES:
                    return False
                path = at / name
                if name in _SKIPPED or self.conf.in_home(path, root) or self._ignored(name, path, top):
                    continue
                if self.conf.rule(path) is not None:
                    self.hidden += 1
                    continue
                indent = "  " * depth
                if kind == "link":
                    if self._readable_link(path):
                        self.lines.append(f"{indent}- {shown(name)}@")
                    continue
                if kind != "dir":
                    self.lines.append(f"{indent}- {shown(name)}")
                    continue
                self.lines.append(f"{indent}- {shown(name)}/")
                if depth >= beneath.MAX_DEPTH:
                    continue
                try:
                    child = os.open(name, _LIST, dir_fd=fd)
                except OSError:
                    continue  # swapped for a symlink meanwhile, or unreadable: listed, not entered
                if not self._walk(child, path, root, top, depth + 1):
                    return False
        finally:
            os.close(fd)
        return True

    def _ignored(self, name: str, path: Path, top: Path) -> bool:
        if self.ignore is None:
            return False
        return bool(self.ignore.match(name) or self.ignore.match(str(path.relative_to(top))))

    def _readable_link(self, path: Path) -> bool:
        """Whether the symlink ``path`` leads, within the roots, to something the agent may read."""
        try:
            with beneath.resolve(path, self.conf.roots) as target:
                found, root, exists = target.path, target.root, target.stat is not None
        except (beneath.Escape, OSError):
            return False
        if not exists or self.conf.in_home(found, root):
            return False
        if self.conf.rule(found) is not None:
            self.hidden += 1
            return False
        return True


def _entries(fd: int) -> Iterator[tuple[str, str]]:
    """The names in the directory ``fd``, sorted, each with its kind: ``dir``, ``link`` or ``file``."""
    try:
        with os.scandir(fd) as listing:
            found = sorted(
                (e.name, "link" if e.is_symlink() else "dir" if e.is_dir(follow_symlinks=False) else "file")
                for e in listing
            )
    except OSError:
        found = []
    return iter(found)
