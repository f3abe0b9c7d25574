"""Memory: the instructions in CLAUDE.md files, read once as a run starts, for every agent's system prompt.

The files, in this order: the user's ``CLAUDE.md`` (in ``claude_home()``), then
at the project root ``CLAUDE.md``, ``.claude/CLAUDE.md``, ``AGENTS.md`` and
``CLAUDE.local.md``. A file read once is not read again (``CLAUDE.md`` is often
a link to ``AGENTS.md``).

A line may import another file with ``@path`` (after the start of the line or
a space; ``\\ `` is a space in the path): relative to the importing file, ``~/``
under the home directory, or absolute. Imports in code spans and fenced code
blocks are text. Imported files follow their importer, nest at most
``MAX_DEPTH`` levels, and a cycle ends where it closes. A name that is no file
(``@someone``, ``@src/``) is text too.

The repository is not trusted: every project file, imports included, must
resolve (symlinks followed) inside the project, and what the user's file
imports inside ``claude_home()``; others are refused with a warning, so a
cloned repository cannot put ``~/.ssh`` or the user's credentials into the
prompt the model sees. A file larger than ``MAX_FILE_BYTES`` is cut, one that
is not UTF-8 is left out, and files beyond ``MAX_TOTAL_BYTES`` in all are left
out; each with a warning.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .paths import claude_home
from .reading import read_head

MAX_DEPTH = 5
"""How deep imports nest: the memory files themselves are level 0."""
MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_BYTES = 1024 * 1024

PROJECT = "project instructions, checked into the codebase"
ROOTS = (
    ("CLAUDE.md", PROJECT),
    (".claude/CLAUDE.md", PROJECT),
    ("AGENTS.md", "project instructions for coding agents, checked into the codebase"),
    ("CLAUDE.local.md", "user's private project instructions, not checked in"),
)
"""The project's memory files, relative to its root, and what each is."""
USER = "user's private global instructions for all projects"
HEADING = (
    "# Memory\n\nInstructions from the project's and the user's memory files follow. Follow them: they"
    " take precedence over your defaults."
)

_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


@dataclass(frozen=True)
class MemoryFile:
    path: Path
    """As reached (the link, not its target)."""
    description: str
    text: str


@dataclass(frozen=True)
class Memory:
    files: tuple[MemoryFile, ...] = ()
    warnings: tuple[str, ...] = ()
    """One line each, ``<file>: <what is left out and why>``."""

    @cached_property
    def text(self) -> str:
        """The system prompt's memory section, "" when there is no file; the same string every time."""
        if not self.files:
            return ""
        parts = [HEADING]
        parts += [
            f"Contents of {file.path} ({file.description}):\n\n{file.text.strip()}" for file in self.files
        ]
        return "\n\n".join(parts)


def load_memory(project: Path) -> Memory:
    """The memory files of ``project`` and the user, with their imports."""
    reader = _Reader()
    home = claude_home()
    reader.root(home / "CLAUDE.md", USER, _Scope(Path(os.path.realpath(home)), str(home)), confined=False)
    scope = _Scope(Path(os.path.realpath(project)), "the project")
    for name, description in ROOTS:
        reader.root(project / name, description, scope, confined=True)
    return Memory(tuple(reader.files), tuple(reader.warnings))


@dataclass(frozen=True)
class _Scope:
    """Where a memory file's imports must resolve."""

    real: Path
    name: str


@dataclass
class _Reader:
    files: list[MemoryFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    """The files read, symlinks resolved."""
    total: int = 0
    """Bytes read in all."""

    def root(self, path: Path, description: str, scope: _Scope, *, confined: bool) -> None:
        """Read a memory file and its imports; ``confined``: the file itself must resolve in ``scope``."""
        if not _exists(path):
            return
        if confined and not _inside(path, scope):
            self.warnings.append(
                f"{path}: left out: a link to {os.path.realpath(path)}, outside {scope.name}"
            )
            return
        self._read(path, description, 0, scope)

    def _read(self, path: Path, description: str, depth: int, scope: _Scope) -> None:
        real = os.path.realpath(path)
        if real in self.seen:  # read before, or a cycle closing
            return
        self.seen.add(real)
        text = self._text(path)
        if text is None:
            return
        self.files.append(MemoryFile(path, description, text))
        for target in imports(text):
            self._import(path, target, description, depth + 1, scope)

    def _import(self, importer: Path, target: str, description: str, depth: int, scope: _Scope) -> None:
        path = _resolve(importer, target)
        if path is None or not _exists(path):
            return  # no such file: text such as @someone or @src/
        if not _inside(path, scope):
            real = os.path.realpath(path)
            self.warnings.append(f"{importer}: import @{target} refused: {real} is outside {scope.name}")
        elif depth > MAX_DEPTH:
            self.warnings.append(
                f"{importer}: import @{target} left out: imports nest {MAX_DEPTH} levels at most"
            )
        else:
            self._read(path, description, depth, scope)

    def _text(self, path: Path) -> str | None:
        """The file's text, cut to what the limits leave; None (with a warning) when it is left out."""
        room = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - self.total)
        if room <= 0:
            self.warnings.append(
                f"{path}: left out: memory holds {MAX_TOTAL_BYTES // 1024} KiB at most in all"
            )
            return None
        try:
            head = read_head(path, room)
        except OSError as e:
            self.warnings.append(f"{path}: left out: {e.strerror or e}")
            return None
        if head is None:
            self.warnings.append(f"{path}: left out: not a regular file")
            return None
        raw, size = head
        try:
            text = _decode(raw, cut=size > room)
        except UnicodeDecodeError:
            self.warnings.append(f"{path}: left out: not UTF-8 text")
            return None
        if size > room:
            self.warnings.append(f"{path}: cut to its first {room // 1024} KiB (it has {size} bytes)")
        self.total += len(raw)
        return text


def imports(text: str) -> list[str]:
    """The ``@path`` imports of ``text`` (escaped spaces unescaped), outside code spans and blocks."""
    found: list[str] = []
    fence = ""
    for line in text.splitlines():
        if fence:
            closing = _CLOSE.fullmatch(line)
            if closing and closing[1][0] == fence[0] and len(closing[1]) >= len(fence):
                fence = ""
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening[1]
            continue
        plain = _CODE_SPAN.sub(" ", line)
        found += [match[1].replace("\\ ", " ") for match in _IMPORT.finditer(plain)]
    return found


def _resolve(importer: Path, target: str) -> Path | None:
    """The file an import names, ``..`` taken away (symlinks are not: that is for ``_inside``)."""
    if "\0" in target:
        return None
    path = Path.home() / target[2:] if target.startswith("~/") else importer.parent / target
    return Path(os.path.normpath(path))  # an absolute target stays absolute


def _inside(path: Path, scope: _Scope) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(scope.real)


def _exists(path: Path) -> bool:
    """Whether ``path`` is there and no directory (a FIFO or a device is, and is refused as it is read)."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _decode(raw: bytes, *, cut: bool) -> str:
    """``raw`` as UTF-8 (a BOM dropped); a character split by the cut is dropped too."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if cut and e.reason == "unexpected end of data" and e.start >= len(raw) - 3:
            return raw[: e.start].decode("utf-8-sig")
        raise
