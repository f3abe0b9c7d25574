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

The repository is not trusted, and its agents may be changing it while a run
starts (a shell swapping a directory for a symlink between two steps). So
every project file, imports included, is reached as the file tools reach
files (``teamrt.tools.files.beneath``): walked from a descriptor of the project's
directory one name at a time with ``O_NOFOLLOW``, symlinks followed by hand
only while they stay inside the project, then opened through the descriptor
of the directory the walk ended in and checked to be the very file walked to.
What the user's file imports stays in ``claude_home()`` the same way (the
user's file itself may be a link to their dotfiles). Refused, each with one
warning, the rest read on: a path leading out, so a cloned repository cannot
put ``~/.ssh`` or the user's credentials into the prompt the model sees;
teamrt's home (wherever ``TEAMRT_HOME`` points, and any ``.teamrt``
directory: every run's store, mailboxes and output); ``.git`` internals; what
is no regular file (a FIFO or a device is never opened). A file larger than
``MAX_FILE_BYTES`` is cut, one that is not UTF-8 is left out, files beyond
``MAX_TOTAL_BYTES`` in all are left out, and ``MAX_IMPORTS`` imports at most
are followed. Loading never raises: an error on the way leaves out that one
file, with a warning.

Rules (``teamrt.claudecode.rules``): the ``*.md`` files under the user's
``rules`` folder follow the user's ``CLAUDE.md``, and those under the project's
``.claude/rules`` follow ``.claude/CLAUDE.md``, read with the same care. A rule
without ``paths`` is memory like the others (its imports followed); a
path-scoped one is kept aside (``Memory.scoped``) for the agents that touch its
files (``teamrt.runtime.scopedrules``).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from teamrt.claudecode.paths import claude_home
from teamrt.claudecode.reading import read_up_to
from teamrt.claudecode.rules import RULES_FOLDER, ScopedRule, parse_rule, rule_files
from teamrt.home import DEFAULT_HOME, home_path
from teamrt.terminal import clean_line
from teamrt.tools.files import beneath
from teamrt.tools.files.confine import reason

MAX_DEPTH = 5
"""How deep imports nest: the memory files themselves are level 0."""
MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_BYTES = 1024 * 1024
MAX_IMPORTS = 256
"""Imports met in one load, all files together, before the rest are left out (each is a walk)."""
MAX_WARNINGS = 50
"""Warnings kept; the rest are counted in one last line."""

PROJECT = "project instructions, checked into the codebase"
ROOTS = (
    ("CLAUDE.md", PROJECT),
    (".claude/CLAUDE.md", PROJECT),
    ("AGENTS.md", "project instructions for coding agents, checked into the codebase"),
    ("CLAUDE.local.md", "user's private project instructions, not checked in"),
)
"""The project's memory files, relative to its root, and what each is."""
USER = "user's private global instructions for all projects"
USER_RULE = "user's private global rule for all projects"
PROJECT_RULE = "project rule, checked into the codebase"
RULES_AFTER = ".claude/CLAUDE.md"
"""The project memory file the project's rules follow (they weigh as much as it, Claude Code's docs say)."""
HEADING = (
    "# Memory\n\nInstructions from the project's and the user's memory files follow. Follow them: they"
    " take precedence over your defaults."
)

_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_NO_FILE = (errno.ENOENT, errno.ENOTDIR)
"""Errors of a walk that mean no file is there: the import is text."""
IN_HOME = "is in teamrt's home (the runs' stores, mailboxes and output)"
IN_GIT = "is inside .git"


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
    scoped: tuple[ScopedRule, ...] = ()
    """The path-scoped rules, the user's first: not in ``text``, given to an agent when it touches a file
    one of them matches."""

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
    """The memory files of ``project`` and the user, with their imports; never raises for what it finds."""
    reader = _Reader()
    try:
        _load(reader, project)
    except (OSError, ValueError) as e:  # the project's own path unusable (its current directory gone)
        reader.warn(f"{project}: memory left out: {e}")
    return reader.memory()


def _load(reader: _Reader, project: Path) -> None:
    homes = _homes()
    scope = _Scope.of(project, "the project", homes)
    try:
        user_home = claude_home()
    except (RuntimeError, KeyError, OSError) as e:  # no $HOME and no password entry
        reader.warn(f"the user's CLAUDE.md: left out: the home directory is unknown ({e})")
    else:
        user = _Scope.of(user_home, str(user_home), homes)
        trusted = not user.real.is_relative_to(scope.real)  # the user's folder, not a repository's
        reader.root(user_home / "CLAUDE.md", USER, user, may_link_out=trusted)
        _rules(reader, user_home / RULES_FOLDER, "user", user, may_link_out=trusted)
    for name, description in ROOTS:
        reader.root(project / name, description, scope)
        if name == RULES_AFTER:
            _rules(reader, project / ".claude" / RULES_FOLDER, "project", scope)


def _rules(reader: _Reader, folder: Path, kind: str, scope: _Scope, *, may_link_out: bool = False) -> None:
    """The rule files under ``folder``, read as memory files are (``kind``: ``user`` or ``project``)."""
    found: list[str] = []
    paths = rule_files(folder, found)
    for line in found:
        reader.warn(line)
    for path in paths:
        reader.root(path, USER_RULE if kind == "user" else PROJECT_RULE, scope, may_link_out=may_link_out,
                    rule=kind)  # fmt: skip


def _homes() -> tuple[Path, ...]:
    """teamrt's home where it is configured, canonical (one named ``.teamrt`` is refused by its name)."""
    try:
        return (Path(os.path.realpath(home_path())),)
    except (OSError, RuntimeError, ValueError):  # the current directory is gone
        return ()


class _Refused(Exception):
    """Why a file may not be read, as the end of a warning: ``<path> is inside .git``."""


@dataclass(frozen=True)
class _Scope:
    """The directory a memory file's imports must stay beneath, and the places beneath it refused."""

    given: Path
    """As named (absolute, normalized): imports reached through it are shown so."""
    real: Path
    """Canonical: where walks start."""
    name: str
    homes: tuple[Path, ...]
    """teamrt's homes beneath ``real`` (a home holding ``real`` itself, a worktree's, is not refused)."""

    @classmethod
    def of(cls, root: Path, name: str, homes: tuple[Path, ...]) -> _Scope:
        real = Path(os.path.realpath(root))
        inside = tuple(home for home in homes if not real.is_relative_to(home))
        return cls(Path(os.path.abspath(root)), real, name, inside)

    def canonical(self, path: Path) -> Path:
        """The absolute, normalized ``path`` put under ``real`` when it is under ``given``."""
        if path.is_relative_to(self.given) and not path.is_relative_to(self.real):
            return self.real / path.relative_to(self.given)
        return path

    def refusal(self, path: Path) -> str | None:
        """Why the canonical ``path`` beneath ``real`` may not be read, or None."""
        names = {name.casefold() for name in path.relative_to(self.real).parts}
        if DEFAULT_HOME in names or any(path.is_relative_to(home) for home in self.homes):
            return IN_HOME
        return IN_GIT if ".git" in names else None


@dataclass
class _Reader:
    files: list[MemoryFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unsaid: int = 0
    """Warnings beyond ``MAX_WARNINGS``."""
    seen: set[tuple[int, int]] = field(default_factory=set)
    """The files read, by device and inode."""
    total: int = 0
    """Bytes read in all."""
    followed: int = 0
    """Imports met in all."""
    capped: str | None = None
    """The warning that ``MAX_IMPORTS`` were followed, said last however many came before."""
    scoped: list[ScopedRule] = field(default_factory=list)

    def memory(self) -> Memory:
        unsaid = [f"memory: {self.unsaid} more warnings left unsaid"] if self.unsaid else []
        capped = [clean_line(self.capped)] if self.capped else []
        return Memory(tuple(self.files), (*self.warnings, *unsaid, *capped), tuple(self.scoped))

    def warn(self, line: str) -> None:
        """Keep one warning line (made safe for a terminal: it quotes the repository's text)."""
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(clean_line(line))
        else:
            self.unsaid += 1

    def root(
        self, path: Path, description: str, scope: _Scope, *, may_link_out: bool = False, rule: str = ""
    ) -> None:
        """Read a memory file and its imports; the file must lie in ``scope`` unless ``may_link_out``.
        ``rule``: the file is a rule of that scope (``user``, ``project``), its front matter read."""
        try:
            spot = self._find(path, scope)
        except beneath.Escape as e:
            if not may_link_out:
                self.warn(f"{path}: left out: a link to {e.path}, outside {scope.name}")
                return
            spot = self._linked_out(path, e, scope)
        except _Refused as e:
            self.warn(f"{path}: left out: {e}")
            return
        if spot is not None:
            self._visit(path, spot, description, 0, scope, rule=rule)

    def _linked_out(self, path: Path, escape: beneath.Escape, scope: _Scope) -> beneath.Spot | None:
        """The user's own file where its link leads (their dotfiles), walked beneath that directory."""
        real = Path(os.path.realpath(path))
        try:
            return self._find(real, _Scope.of(real.parent, str(real.parent), scope.homes))
        except (beneath.Escape, _Refused) as e:
            self.warn(f"{path}: left out: a link to {escape.path}, which {e}")
            return None

    def _import(self, importer: Path, target: str, description: str, depth: int, scope: _Scope) -> None:
        self.followed += 1
        if self.followed > MAX_IMPORTS:
            if self.followed == MAX_IMPORTS + 1:
                self.capped = (
                    f"{importer}: import @{target} and those after it left out: {MAX_IMPORTS} at most"
                )
            return
        refused = f"{importer}: import @{target} refused"
        try:
            path = _resolve(importer, target)
            spot = self._find(path, scope)
        except beneath.Escape as e:
            self.warn(f"{refused}: {e.path} is outside {scope.name}")
            return
        except _Refused as e:
            self.warn(f"{refused}: {e}")
            return
        if spot is None:
            return  # no such file: text such as @someone or @src/
        if depth > MAX_DEPTH:
            spot.close()
            self.warn(f"{importer}: import @{target} left out: imports nest {MAX_DEPTH} levels at most")
            return
        self._visit(path, spot, description, depth, scope)

    def _find(self, path: Path, scope: _Scope) -> beneath.Spot | None:
        """The existing file ``path`` names, walked beneath ``scope``, held open; None when nothing or a
        directory is there. Raises beneath.Escape for a path or link leading out, _Refused for a
        refused place or an error on the way."""
        try:
            spot = beneath.resolve(scope.canonical(path), [scope.real])
        except OSError as e:
            if e.errno in _NO_FILE:
                return None
            raise _Refused(f"{path} {reason(e)}") from e
        except ValueError as e:  # a name no file system takes (lone surrogates)
            raise _Refused(f"{path} cannot be a file's name") from e
        if spot.stat is None or stat.S_ISDIR(spot.stat.st_mode):
            spot.close()
            return None
        why = scope.refusal(spot.path)
        if why is not None:
            spot.close()
            raise _Refused(f"{spot.path} {why}")
        return spot

    def _visit(
        self, path: Path, spot: beneath.Spot, description: str, depth: int, scope: _Scope, *, rule: str = ""
    ) -> None:
        """Read the file ``spot`` holds (closing it), unless read before, then its imports. A rule
        (``rule``: its scope) loses its front matter; a path-scoped one is kept aside, its imports not
        followed (it is given whole when its files are touched)."""
        with spot:
            assert spot.stat is not None
            key = (spot.stat.st_dev, spot.stat.st_ino)
            if key in self.seen:  # read before, or a cycle closing
                return
            self.seen.add(key)
            text = self._text(path, spot)
        if text is None:
            return
        if rule:
            warnings: list[str] = []
            parsed = parse_rule(text, path, rule, warnings)
            for line in warnings:
                self.warn(line)
            if parsed.scoped:
                self.scoped.append(ScopedRule.of(parsed))
                return
            if not parsed.text.strip():
                return
            text = parsed.text
        self.files.append(MemoryFile(path, description, text))
        for target in imports(text):
            self._import(path, target, description, depth + 1, scope)

    def _text(self, path: Path, spot: beneath.Spot) -> str | None:
        """The file's text, cut to what the limits leave; None (with a warning) when it is left out."""
        room = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - self.total)
        if room <= 0:
            self.warn(f"{path}: left out: memory holds {MAX_TOTAL_BYTES // 1024} KiB at most in all")
            return None
        assert spot.stat is not None
        if not stat.S_ISREG(spot.stat.st_mode):  # a FIFO or a device is never opened
            self.warn(f"{path}: left out: not a regular file")
            return None
        try:
            raw, size = _read_head(spot, room)
        except beneath.Changed:
            self.warn(f"{path}: left out: it changed while being read (another process is moving it)")
            return None
        except OSError as e:
            self.warn(f"{path}: left out: {reason(e)}")
            return None
        try:
            text = _decode(raw, cut=size > room)
        except UnicodeDecodeError:
            self.warn(f"{path}: left out: not UTF-8 text")
            return None
        if size > room:
            self.warn(f"{path}: cut to its first {room // 1024} KiB (it has {size} bytes)")
        self.total += len(raw)
        return text


def _read_head(spot: beneath.Spot, limit: int) -> tuple[bytes, int]:
    """The first ``limit`` bytes of the regular file ``spot`` holds, and its size; raises beneath.Changed
    when its name now holds another file."""
    fd = beneath.open_file(spot)
    try:
        return read_up_to(fd, limit), os.fstat(fd).st_size
    finally:
        os.close(fd)


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


def _resolve(importer: Path, target: str) -> Path:
    """The file an import names, ``..`` taken away by name (symlinks are followed by the walk)."""
    if "\0" in target:
        raise _Refused("its name holds a NUL byte")
    try:
        path = Path.home() / target[2:] if target.startswith("~/") else importer.parent / target
    except (RuntimeError, KeyError) as e:  # no $HOME and no password entry
        raise _Refused(f"the home directory is unknown ({e})") from e
    return Path(os.path.normpath(path))  # an absolute target stays absolute


def _decode(raw: bytes, *, cut: bool) -> str:
    """``raw`` as UTF-8 (a BOM dropped); a character split by the cut is dropped too."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if cut and e.reason == "unexpected end of data" and e.start >= len(raw) - 3:
            return raw[: e.start].decode("utf-8-sig")
        raise
