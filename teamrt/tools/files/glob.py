"""The ``Glob`` tool: files by name pattern, newest first, listed by ``rg --files``.

ripgrep lists the files and matches the pattern (``teamrt.tools.files.rg``: confined
as ``Grep`` is, so it never enters ``.git`` or teamrt's home). The pattern is
given to it anchored (``--glob=/<pattern>``), which gives it the meaning the
description states: relative to ``path``, ``*`` within one name. A file such a
glob matches is listed even when ``.gitignore`` excludes it, so a second
listing without the glob, run at the same time, says which files the ignore
files leave in. ripgrep's glob engine is a linear-time regex, so no
pattern can keep a thread busy, as one like ``*a*a*a*a*a*a*a*a*b`` does
Python's ``re``. Every file listed is checked by ``rg.Paths`` before it is
shown: a regular file reached without a symlink that the agent may read.
Symlinks are not listed (ripgrep does not follow them); files a deny rule
hides are left out and counted.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from teamrt.tools import toolargs
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema
from teamrt.tools.files import rg
from teamrt.tools.files.confine import FileRoots, hidden_note

OP = "Glob"
GLOB_RESULTS = 100
GLOB_SECONDS = 20.0
"""Time limit of ripgrep's listing."""
PATTERN_CHARS = 10_000

_SLASH_INSIDE = re.compile(r"[\[{][^\]}]*/")
"""A '/' inside a set or alternatives: the pattern's depth is not its number of names."""
_DIR = "Directory to search, relative to the workspace or absolute (default: the workspace)."


class Glob:
    name = OP
    description = (
        "Find files by name pattern, newest first. `*` and `?` match within one name, `**/` any number"
        " of directories (`**/*.py`: every Python file; `*.py`: those directly in path), `[abc]` one of"
        " these characters, `{a,b}` either; `\\` makes the next character plain. The pattern is relative"
        f" to path. At most {GLOB_RESULTS} files are listed; files that .gitignore excludes, symlinks, .git"
        " and teamrt's home are not."
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
        pattern = toolargs.text(input, OP, "pattern")
        path = toolargs.path(input, OP, "path")
        while pattern.startswith("./"):
            pattern = pattern[2:]
        if "\0" in pattern or len(pattern) > PATTERN_CHARS:
            raise ToolError(f"{OP}: pattern must be at most {PATTERN_CHARS} characters, without NUL")
        if not pattern or pattern.startswith("/"):
            raise ToolError(f"{OP}: pattern must be a relative pattern; give the directory as path")
        if ".." in pattern.split("/"):
            raise ToolError(f"{OP}: '..' is not allowed in the pattern; give the directory as path")
        binary = rg.required(OP)
        conf = FileRoots.of(ctx)
        scope = await asyncio.to_thread(rg.Scope.of, conf, OP, path)
        files, matches = await _listings(scope, binary, pattern)
        if (why := matches.glob_error()) is not None:
            raise ToolError(f"{OP}: {pattern!r} is not a valid glob pattern: {why}")
        for found in (files, matches):
            if (failure := found.failure(OP)) is not None:
                raise ToolError(failure)
        return ToolResult(
            await asyncio.to_thread(_render, rg.Paths(conf, scope), pattern, path, files, matches)
        )


async def _listings(scope: rg.Scope, binary: str, pattern: str) -> tuple[rg.Output, rg.Output]:
    """Two listings by ripgrep, at once: the files ignore files leave in, and the files ``pattern`` matches.

    Both are needed because ripgrep takes a file a ``--glob`` matches even when
    ``.gitignore`` excludes it; the files in both are the answer.
    """
    options = ["--files", "--null", *_depth(pattern)]
    files, matches = await asyncio.gather(
        _list(scope, options, binary),
        _list(scope, [*options, f"--glob=/{pattern}"], binary),
        return_exceptions=True,
    )
    for failed in (files, matches):
        if isinstance(failed, BaseException):
            raise failed
    assert isinstance(files, rg.Output) and isinstance(matches, rg.Output)
    return files, matches


async def _list(scope: rg.Scope, options: list[str], binary: str) -> rg.Output:
    return await rg.run(
        OP, scope.argv(binary, options), scope.directory, GLOB_SECONDS, "narrow the pattern or path"
    )


def _depth(pattern: str) -> list[str]:
    """``--max-depth`` of the files ``pattern`` can match, when it has a depth, so ripgrep goes no deeper."""
    if "**" in pattern or _SLASH_INSIDE.search(pattern):
        return []
    return [f"--max-depth={pattern.count('/') + 1}"]


def _render(paths: rg.Paths, pattern: str, path: str, files: rg.Output, matches: rg.Output) -> str:
    """The files in both listings that may be seen, newest first (then by path), within the cap."""
    kept = set(files.out.split(b"\0")[:-1])
    listed = sorted(raw for raw in matches.out.split(b"\0")[:-1] if raw in kept)  # by directory
    with paths:
        found = sorted((-file.stat.st_mtime, file.shown) for raw in listed if (file := paths.check(raw)))
    lines = [shown for _, shown in found[:GLOB_RESULTS]] or [f"no files match {pattern} in {path}"]
    if len(found) > GLOB_RESULTS:
        lines.append(
            f"({GLOB_RESULTS} of {len(found)} files shown, newest first; narrow the pattern or path)"
        )
    if files.cut or matches.cut:
        lines.append(
            f"(ripgrep's listing was cut at {rg.OUTPUT_BYTES // 2**20} MiB; narrow the pattern or path)"
        )
    if paths.hidden:
        lines.append(hidden_note(paths.hidden))
    return "\n".join(lines)
