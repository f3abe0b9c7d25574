"""The file tools: ``read``, ``write``, ``edit``, ``glob`` and ``grep``, confined to the workspace.

Every path the model gives goes through ``_Roots.resolve``: a relative path
is taken from the workspace, ``..`` is collapsed, and every symlink is
followed, also in parts that do not exist yet. The canonical result must lie
in the workspace (or, for reading, in one of ``extra_roots``) and outside the
run directory, and the tool then works on that canonical path, so a symlink
cannot send it anywhere else after the check. Walks (glob, grep) never enter
a symlinked directory, ``.git`` or the run directory.

The run directory is refused unless the path also lies in a root that is
itself inside it: a worktree agent's workspace (``runs/<run>/worktrees/<a>``)
and the spill directory (an extra root) are, the store and mailboxes are not.

Behaviour follows the Anthropic SDK's reference tools
(``anthropic.lib.tools.agent_toolset``: ``_canonicalize``, the edit tool's
unique-match rule, binary and size guards), which are not imported: importing
``anthropic`` takes about 1.5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .base import ToolContext, ToolError, ToolResult, object_schema

READ_LINES = 2000
"""Lines ``read`` shows when no limit is given."""
LINE_CHARS = 2000
"""Longer lines are cut, in ``read`` and in ``grep``'s content."""
_LINE_BYTES = 4 * LINE_CHARS + 4
"""Bytes read of one line: enough for LINE_CHARS characters of any UTF-8."""
_PROBE_BYTES = 8192
"""A file with a NUL byte in its first _PROBE_BYTES is binary."""
EDIT_BYTES = 4 * 1024 * 1024
"""``edit`` loads the whole file; larger files are refused."""
GLOB_RESULTS = 100
GREP_FILES = 200
"""Files listed by ``grep`` in files_with_matches and count modes."""
GREP_LINES = 300
"""Matching lines shown by ``grep`` in content mode."""
GREP_FILE_BYTES = 5 * 1024 * 1024
"""``grep`` skips larger files."""
GREP_SECONDS = 20.0
WALK_FILES = 50_000
"""A glob or grep looks at no more files than this."""
_MAX_HOPS = 40
"""Dangling symlinks followed by hand before a path counts as a loop (Linux's own limit)."""


TEMPORARY_SUFFIX = ".teamrt-tmp"
"""Of the file ``write`` and ``edit`` write before renaming it over the real one."""

_PATH = "Path relative to the workspace, or absolute."
_DIR = "Directory to search, relative to the workspace or absolute (default: the workspace)."


# -- paths ---------------------------------------------------------------------------


def _canonical(path: str) -> Path:
    """``path`` made absolute with every symlink followed, also for a tail that does not exist yet.

    Raises OSError on a symlink loop. Follows the SDK's ``_canonicalize``: a
    dangling symlink met on the way is read and followed by hand.
    """
    prefix = os.path.normpath(path)
    missing: list[str] = []
    hops = 0
    while True:
        try:
            return Path(os.path.realpath(prefix, strict=True), *reversed(missing))
        except (FileNotFoundError, NotADirectoryError) as e:
            unresolved = e
        if os.path.islink(prefix):
            hops += 1
            if hops > _MAX_HOPS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            parent = os.path.realpath(os.path.dirname(prefix), strict=True)
            prefix = os.path.normpath(os.path.join(parent, os.readlink(prefix), *reversed(missing)))
            missing.clear()
        elif os.path.lexists(prefix) or os.path.dirname(prefix) == prefix:
            raise unresolved
        else:
            missing.append(os.path.basename(prefix))
            prefix = os.path.dirname(prefix)


def _reason(e: OSError) -> str:
    """An OSError in words the model can act on, without errno numbers."""
    if isinstance(e, FileNotFoundError):
        return "does not exist"
    if isinstance(e, NotADirectoryError):
        return "has a part that is not a directory"
    if isinstance(e, IsADirectoryError):
        return "is a directory"
    if isinstance(e, PermissionError):
        return "is not permitted"
    if e.errno == errno.ELOOP:
        return "has a symlink loop"
    return (e.strerror or "could not be used").lower()


@dataclass(frozen=True)
class _Roots:
    """The context's directories, canonical."""

    workspace: Path
    extra: tuple[Path, ...]
    run_dir: Path

    @classmethod
    def of(cls, ctx: ToolContext) -> _Roots:
        return cls(
            Path(os.path.realpath(ctx.workspace)),
            tuple(Path(os.path.realpath(r)) for r in ctx.extra_roots),
            Path(os.path.realpath(ctx.run_dir)),
        )

    def refusal(self, path: Path, *, write: bool) -> str | None:
        """Why the canonical ``path`` may not be read (or written), or None when it may."""
        roots = (self.workspace, *self.extra)
        if path.is_relative_to(self.run_dir) and not any(
            path.is_relative_to(r) for r in roots if r.is_relative_to(self.run_dir)
        ):
            return "is in the run's own directory, which the file tools do not touch"
        if path.is_relative_to(self.workspace):
            return None
        if any(path.is_relative_to(r) for r in self.extra):
            return "is in a read-only directory; only the workspace can be changed" if write else None
        return f"is outside the workspace {self.workspace}; use a path inside it"

    def resolve(self, op: str, file_path: str, *, write: bool = False) -> Path:
        """The canonical path for ``file_path``, or a ToolError saying why it may not be used."""
        given = Path(file_path) if os.path.isabs(file_path) else self.workspace / file_path
        try:
            path = _canonical(str(given))
        except OSError as e:
            raise ToolError(f"{op}: {file_path} {_reason(e)}") from e
        why = self.refusal(path, write=write)
        if why is None:
            return path
        if path != Path(os.path.normpath(given)):
            raise ToolError(f"{op}: {file_path} (which resolves to {path}) {why}")
        raise ToolError(f"{op}: {file_path} {why}")

    def show(self, path: Path) -> str:
        """``path`` as the model should see it: relative inside the workspace, else absolute."""
        return str(path.relative_to(self.workspace)) if path.is_relative_to(self.workspace) else str(path)

    def walk(self, top: Path) -> Iterator[Path]:
        """The files under the canonical directory ``top``, by name, that may be read.

        Symlinked directories, ``.git`` and the run directory are not entered; a
        symlinked file is kept only when its target may be read.
        """
        run_dir = str(self.run_dir)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d != ".git"
                and not os.path.islink(os.path.join(dirpath, d))
                and os.path.join(dirpath, d) != run_dir
            )
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                if not os.path.islink(full) or self._may_follow(full):
                    yield Path(full)

    def _may_follow(self, link: str) -> bool:
        try:
            return self.refusal(_canonical(link), write=False) is None
        except OSError:
            return False

    def directory(self, op: str, path: str) -> Path:
        """The canonical directory ``path``, or a ToolError."""
        top = self.resolve(op, path)
        if not top.is_dir():
            raise _not_found(op, path, top, "a directory")
        return top


# -- arguments ----------------------------------------------------------------------


def _str(input: dict[str, Any], op: str, key: str, default: str | None = None) -> str:
    value = input.get(key, default)
    if not isinstance(value, str):
        raise ToolError(f"{op}: {key} must be a string")
    return value


def _int(input: dict[str, Any], op: str, key: str, default: int) -> int:
    value = input.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{op}: {key} must be a whole number from 1")
    return value


def _bool(input: dict[str, Any], op: str, key: str) -> bool:
    value = input.get(key, False)
    if not isinstance(value, bool):
        raise ToolError(f"{op}: {key} must be true or false")
    return value


def _path(input: dict[str, Any], op: str, key: str = "file_path") -> str:
    value = _str(input, op, key, "" if key == "file_path" else ".")
    if not value or "\0" in value:
        raise ToolError(f"{op}: {key} must be a non-empty path without NUL characters")
    return value


def _not_found(op: str, path: str, found: Path, wanted: str) -> ToolError:
    return ToolError(f"{op}: {path} {f'is not {wanted}' if found.exists() else 'does not exist'}")


# -- file contents ------------------------------------------------------------------


def _lines(f: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``f``, each at most _LINE_BYTES: the rest of a longer line is skipped unread."""
    while line := f.readline(_LINE_BYTES):
        yield line
        while len(line) == _LINE_BYTES and not line.endswith(b"\n"):
            line = f.readline(_LINE_BYTES)


def _line_text(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    if len(text) > LINE_CHARS:
        return f"{text[:LINE_CHARS]} [... line cut at {LINE_CHARS} characters]"
    return text


def _regular(op: str, path: Path, shown: str) -> os.stat_result:
    """``path``'s stat, or a ToolError unless it is a regular file."""
    try:
        st = path.stat()
    except OSError as e:
        raise ToolError(f"{op}: {shown} {_reason(e)}") from e
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{op}: {shown} is a directory{'; list it with glob' if op == 'read' else ''}")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{op}: {shown} is not a regular file")
    return st


def _is_binary(f: IO[bytes]) -> bool:
    binary = b"\0" in f.read(_PROBE_BYTES)
    f.seek(0)
    return binary


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
        file_path = _path(input, "read")
        offset = _int(input, "read", "offset", 1)
        limit = _int(input, "read", "limit", READ_LINES)
        return ToolResult(await asyncio.to_thread(_read, _Roots.of(ctx), file_path, offset, limit))


def _read(roots: _Roots, file_path: str, offset: int, limit: int) -> str:
    path = roots.resolve("read", file_path)
    _regular("read", path, file_path)
    shown: list[str] = []
    seen = 0
    with open(path, "rb") as f:
        if _is_binary(f):
            raise ToolError(f"read: {file_path} is a binary file; only text files can be read")
        for seen, raw in enumerate(_lines(f), 1):
            if seen < offset:
                continue
            if len(shown) == limit:
                last = offset + limit - 1
                shown.append(f"(lines {offset}-{last} shown; more follow: read on with offset={last + 1})")
                break
            shown.append(f"{seen:6}\t{_line_text(raw)}")
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
        file_path = _path(input, "write")
        content = _str(input, "write", "content")
        return ToolResult(await asyncio.to_thread(_write, _Roots.of(ctx), file_path, content))


def _write(roots: _Roots, file_path: str, content: str) -> str:
    path = roots.resolve("write", file_path, write=True)
    existed = path.exists()
    if existed:
        _regular("write", path, file_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace_atomically(path, content)
    except OSError as e:
        raise ToolError(f"write: {file_path} {_reason(e)}") from e
    return f"{'overwrote' if existed else 'created'} {roots.show(path)} ({len(content.splitlines())} lines)"


def _replace_atomically(path: Path, content: str) -> None:
    """Write ``path`` all or nothing: a sibling temporary file, fsynced, renamed over it (keeping an
    existing file's mode), so a crash leaves the old text or the new, never a truncated file."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def remove_temporaries(root: Path) -> list[Path]:
    """Remove the temporary files a write cut short by a crash left under ``root`` (``.git`` and
    other hidden directories are not entered); the files removed."""
    removed = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith(".") and name.endswith(TEMPORARY_SUFFIX):
                path = Path(top) / name
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


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
        file_path = _path(input, "edit")
        old = _str(input, "edit", "old_string")
        new = _str(input, "edit", "new_string")
        replace_all = _bool(input, "edit", "replace_all")
        if not old:
            raise ToolError("edit: old_string is empty; to create a file, use write")
        if old == new:
            raise ToolError("edit: old_string and new_string are the same; there is nothing to change")
        return ToolResult(await asyncio.to_thread(_edit, _Roots.of(ctx), file_path, old, new, replace_all))


def _edit(roots: _Roots, file_path: str, old: str, new: str, replace_all: bool) -> str:
    path = roots.resolve("edit", file_path, write=True)
    if _regular("edit", path, file_path).st_size > EDIT_BYTES:
        raise ToolError(f"edit: {file_path} is over {EDIT_BYTES // 2**20} MiB, too large to edit; use bash")
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise ToolError(f"edit: {file_path} is not UTF-8 text, so it cannot be edited") from e
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
    try:
        _replace_atomically(path, text.replace(old, new) if replace_all else text.replace(old, new, 1))
    except OSError as e:
        raise ToolError(f"edit: {file_path} {_reason(e)}") from e
    return f"edited {roots.show(path)}: {count if replace_all else 1} replacement(s)"


# -- glob ---------------------------------------------------------------------------


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
    return re.compile("".join(out))


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
        f" path. At most {GLOB_RESULTS} files are listed; .git and the run directory are skipped."
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
        pattern = _str(input, "glob", "pattern")
        path = _path(input, "glob", "path")
        if not pattern or pattern.startswith("/"):
            raise ToolError("glob: pattern must be a relative pattern; give the directory as path")
        if ".." in pattern.split("/"):
            raise ToolError("glob: '..' is not allowed in the pattern; give the directory as path")
        return ToolResult(await asyncio.to_thread(_glob, _Roots.of(ctx), pattern, path))


def _glob(roots: _Roots, pattern: str, path: str) -> str:
    top = roots.directory("glob", path)
    rx = glob_regex(pattern)
    matches: list[tuple[float, Path]] = []
    stopped = False
    for seen, file in enumerate(roots.walk(top), 1):
        if seen > WALK_FILES:
            stopped = True
            break
        if rx.fullmatch(os.path.relpath(file, top)):
            try:
                matches.append((-file.stat().st_mtime, file))
            except OSError:
                continue
    if not matches:
        return f"no files match {pattern} in {path}"
    matches.sort()
    lines = [roots.show(file) for _, file in matches[:GLOB_RESULTS]]
    if len(matches) > GLOB_RESULTS:
        lines.append(
            f"({GLOB_RESULTS} of {len(matches)} files shown, newest first; narrow the pattern or path)"
        )
    if stopped:
        lines.append(f"(stopped after looking at {WALK_FILES} files; narrow the path)")
    return "\n".join(lines)


# -- grep ---------------------------------------------------------------------------

_GREP_MODES = ("files_with_matches", "content", "count")


class Grep:
    name = "grep"
    description = (
        "Search file contents with a Python regular expression. output_mode: files_with_matches"
        " (default; the files that match), content (matching lines as path:line:text) or count (matches"
        " per file). Narrow with path and with glob (a file pattern such as `*.py`; without a '/' it"
        f" matches file names anywhere). Binary files, files over {GREP_FILE_BYTES // 2**20} MiB, .git"
        f" and the run directory are skipped; at most {GREP_FILES} files or {GREP_LINES} lines are shown."
    )
    input_schema = object_schema(
        {
            "pattern": {"type": "string", "description": "Python regular expression."},
            "path": {
                "type": "string",
                "description": "File or directory to search (default: the workspace).",
            },
            "glob": {"type": "string", "description": "Only files matching this glob pattern."},
            "output_mode": {"type": "string", "enum": list(_GREP_MODES), "description": "What to show."},
            "-i": {"type": "boolean", "description": "Ignore case (default false)."},
        },
        "pattern",
    )
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = _str(input, "grep", "pattern")
        path = _path(input, "grep", "path")
        mode = _str(input, "grep", "output_mode", "files_with_matches")
        if mode not in _GREP_MODES:
            raise ToolError(f"grep: output_mode must be one of {', '.join(_GREP_MODES)}")
        try:
            rx = re.compile(pattern, re.IGNORECASE if _bool(input, "grep", "-i") else 0)
        except re.error as e:
            raise ToolError(f"grep: pattern is not a valid regular expression: {e}") from e
        only = _str(input, "grep", "glob") if "glob" in input else None
        files = None if only is None else (glob_regex(only, "grep"), "/" in only)
        search = _Search(rx, mode, files)
        return ToolResult(await asyncio.to_thread(search.run, _Roots.of(ctx), path))


@dataclass
class _Search:
    """One grep: walks, matches and keeps the output within its caps."""

    rx: re.Pattern[str]
    mode: str
    files: tuple[re.Pattern[str], bool] | None
    """The glob filter and whether it matches the path below the search root (else the file name)."""

    def run(self, roots: _Roots, path: str) -> str:
        top = roots.resolve("grep", path)
        walk: Iterable[Path] = [top] if top.is_file() else roots.walk(roots.directory("grep", path))
        out: list[str] = []
        notes: list[str] = []
        big = 0
        deadline = time.monotonic() + GREP_SECONDS
        for seen, file in enumerate(walk, 1):
            if seen > WALK_FILES:
                notes.append(f"(stopped after looking at {WALK_FILES} files; narrow the path)")
                break
            if time.monotonic() > deadline:
                notes.append(f"(stopped after {GREP_SECONDS:g} s; narrow the path or glob)")
                break
            if not self._wanted(os.path.relpath(file, top) if top != file else file.name):
                continue
            try:
                st = file.stat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > GREP_FILE_BYTES:
                big += 1
                continue
            if not self._scan(file, roots.show(file), out):
                notes.append(self._capped())
                break
        if big:
            notes.append(f"({big} files over {GREP_FILE_BYTES // 2**20} MiB were not searched)")
        return "\n".join(out + notes) if out else "\n".join([f"no matches for {self.rx.pattern!r}", *notes])

    def _wanted(self, relative: str) -> bool:
        if self.files is None:
            return True
        rx, whole_path = self.files
        return rx.fullmatch(relative if whole_path else os.path.basename(relative)) is not None

    def _scan(self, file: Path, shown: str, out: list[str]) -> bool:
        """Add the file's matches to ``out``; False once a cap is reached."""
        limit = GREP_LINES if self.mode == "content" else GREP_FILES
        count = 0
        try:
            with open(file, "rb") as f:
                if _is_binary(f):
                    return True
                for number, raw in enumerate(_lines(f), 1):
                    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if not self.rx.search(text):
                        continue
                    count += 1
                    if self.mode == "files_with_matches":
                        break
                    if self.mode == "content":
                        if len(out) == limit:
                            return False
                        out.append(f"{shown}:{number}:{_line_text(raw)}")
        except OSError:
            return True
        if count and self.mode != "content":
            if len(out) == limit:
                return False
            out.append(shown if self.mode == "files_with_matches" else f"{shown}:{count}")
        return True

    def _capped(self) -> str:
        if self.mode == "content":
            return f"(only the first {GREP_LINES} matching lines are shown; narrow the pattern, path or glob)"
        return f"(only the first {GREP_FILES} files are shown; narrow the pattern, path or glob)"
