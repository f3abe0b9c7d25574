"""Memory rules: the Markdown files under ``.claude/rules/`` (and the user's ``~/.claude/rules/``), as Claude
Code reads them.

Every ``*.md`` file under a rules folder counts, at any depth (subfolders only organise them); hidden files
and folders are skipped. A rule without ``paths`` in its front matter loads with the memory at the start,
as ``.claude/CLAUDE.md`` does (the user's rules before the project's, so the project's come later and
weigh more). A rule with ``paths`` (a YAML list, one string, or strings separated by commas) is
*path-scoped*: it reaches an agent only once that agent reads or changes a file one of its globs matches,
with that tool's result (``teamrt.runtime.scopedrules``). Globs are relative to the agent's workspace:
``**`` any folders, ``*`` and ``?`` within one name, ``{ts,tsx}`` alternatives, ``[abc]`` a class; a glob
without a ``/`` matches a file's name at any depth (``*.ts``), as in ``.gitignore``, a reading of
Claude Code's documented examples (its docs give no rule for it).

Front matter is YAML between ``---`` lines. Hand-written files often hold globs YAML refuses (``paths:
**/*.ts``, an unquoted ``*`` being an alias in YAML); Claude Code takes those, so a value YAML refuses is
read as the text after ``paths:`` and the ``- item`` lines under it. ``globs`` (Cursor's name) is not
Claude Code's: a rule with ``globs`` and no ``paths`` loads unconditionally, with a warning.

This module only reads text it is given; ``teamrt.claudecode.memory`` finds and reads the files with its
hostile-file care (no link leading out, regular files only, size limits).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

RULES_FOLDER = "rules"
"""Beneath ``.claude`` (the project's) and ``claude_home()`` (the user's)."""
MAX_RULE_FILES = 200
"""Rule files looked at in one rules folder; past it the rest are left out with a warning."""
MAX_ENTRIES = 5_000
"""Files and folders walked in one rules folder."""
MAX_DEPTH = 8
"""Subfolders deep; deeper ones are not walked."""
MAX_GLOBS = 64
"""Globs one rule's ``paths`` may hold; the rest are left out with a warning."""
MAX_GLOB_CHARS = 512

_DELIMITER = "---"
_ITEM = re.compile(r"\s*-\s*(.*?)\s*")
_PATHS_LINE = re.compile(r"paths\s*:(.*)")


class RuleError(ValueError):
    """A rule's front matter or a glob that cannot be used; the message says why, without the file."""


@dataclass(frozen=True)
class Rule:
    """One rule file read."""

    path: Path
    """As reached (under the rules folder)."""
    scope: str
    """``user`` or ``project``."""
    text: str
    """The body, front matter taken off."""
    globs: tuple[str, ...] = ()
    """``paths`` as written; () for a rule that loads at the start."""

    @property
    def scoped(self) -> bool:
        return bool(self.globs)


@dataclass(frozen=True)
class ScopedRule:
    """A path-scoped rule, ready to match the files an agent touches."""

    path: Path
    scope: str
    text: str
    globs: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, rule: Rule) -> ScopedRule:
        return cls(rule.path, rule.scope, rule.text, rule.globs, tuple(compile_glob(g) for g in rule.globs))

    def matches(self, relative: str) -> bool:
        """Whether a file, by its path relative to the workspace (``/`` separated), is one of the rule's."""
        return any(pattern.fullmatch(relative) for pattern in self.patterns)

    @property
    def key(self) -> str:
        """How the journal names the rule: its path."""
        return str(self.path)


def rule_files(folder: Path, warnings: list[str]) -> list[Path]:
    """The visible ``*.md`` files under ``folder``, at most ``MAX_DEPTH`` folders deep, sorted by path. No
    link to a folder is followed (the files themselves are read by the caller, which refuses a link
    leading out); a folder that cannot be listed is said once."""
    try:
        info = os.lstat(folder)
    except OSError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        if stat.S_ISLNK(info.st_mode) and os.path.isdir(folder):
            warnings.append(f"{folder}: a link to a folder; rules are read only from the folder itself")
        return []
    found: list[Path] = []
    for entries, path in enumerate(_walk(folder, 0, warnings), start=1):
        if entries > MAX_ENTRIES or len(found) >= MAX_RULE_FILES:
            warnings.append(
                f"{folder}: more than {MAX_RULE_FILES} rule files or {MAX_ENTRIES} entries; the rest are"
                " left out"
            )
            break
        if path.name.endswith(".md"):
            found.append(path)
    return sorted(found)


def _walk(folder: Path, depth: int, warnings: list[str]) -> Iterator[Path]:
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as e:
        warnings.append(f"{folder}: rules not read: {e.strerror or e}")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_symlink() and entry.is_dir():
            warnings.append(f"{entry.path}: a link to a folder; rules in it are left out")
            continue
        if entry.is_dir(follow_symlinks=False):
            if depth + 1 > MAX_DEPTH:
                warnings.append(f"{entry.path}: rules nested over {MAX_DEPTH} folders deep are left out")
                continue
            yield from _walk(Path(entry.path), depth + 1, warnings)
        else:
            yield Path(entry.path)


def parse_rule(text: str, path: Path, scope: str, warnings: list[str]) -> Rule:
    """A rule file's text read: its ``paths`` and its body. Front matter that cannot be read makes the
    rule load unconditionally (the file is still the person's instructions), with a warning."""
    header, body = _split(text)
    if header is None:
        return Rule(path, scope, body, ())
    try:
        globs = _paths(header)
    except RuleError as e:
        warnings.append(f"{path}: front matter: {e}; the rule loads for every file")
        return Rule(path, scope, body, ())
    if not globs and _has_key(header, "globs"):
        warnings.append(
            f"{path}: 'globs' is Cursor's key, not Claude Code's ('paths'); the rule loads for every file"
        )
    kept: list[str] = []
    for glob in globs[:MAX_GLOBS]:
        try:
            compile_glob(glob)
        except RuleError as e:
            warnings.append(f"{path}: paths: {e}; that glob is left out")
            continue
        kept.append(glob)
    if len(globs) > MAX_GLOBS:
        warnings.append(f"{path}: paths: {MAX_GLOBS} globs at most; the rest are left out")
    if globs and not kept:
        warnings.append(f"{path}: paths: no glob can be used; the rule is left out")
        return Rule(path, scope, "", ())
    return Rule(path, scope, body, tuple(kept))


def _split(text: str) -> tuple[str | None, str]:
    """The front matter (None when there is none) and the body of ``text``."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != _DELIMITER:
        return None, text
    for end in range(1, len(lines)):
        if lines[end].rstrip() == _DELIMITER:
            return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :])
    return None, text  # never closed: no front matter, the whole file is the rule


def _has_key(header: str, key: str) -> bool:
    return any(line.split(":", 1)[0].strip() == key for line in header.split("\n") if ":" in line)


def _paths(header: str) -> list[str]:
    """The globs ``paths`` names ([] when it names none)."""
    try:
        fields = yaml.safe_load(header)
    except (yaml.YAMLError, RecursionError):
        return _lenient_paths(header)
    if fields is None:
        return []
    if not isinstance(fields, dict):
        raise RuleError("not a mapping of fields")
    return _globs(fields.get("paths"))


def _globs(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [g for g in _commas(value) if g]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [g.strip() for v in value for g in _commas(v) if g.strip()]
    raise RuleError("paths must be a glob, globs separated by commas, or a list of globs")


def _lenient_paths(header: str) -> list[str]:
    """``paths`` read line by line, for front matter YAML refuses (``paths: **/*.ts``)."""
    lines = header.split("\n")
    for i, line in enumerate(lines):
        match = _PATHS_LINE.fullmatch(line.rstrip())
        if match is None:
            continue
        rest = match.group(1).strip()
        if rest:
            return _globs(rest.strip("[]").replace('"', "").replace("'", ""))
        items: list[str] = []
        for item in lines[i + 1 :]:
            found = _ITEM.fullmatch(item)
            if found is None:
                break
            items.append(found.group(1).strip("\"'"))
        return _globs(items)
    raise RuleError("not YAML, and no readable 'paths' line")


def _commas(text: str) -> list[str]:
    """``text`` split at the commas outside ``{...}``."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        depth += char == "{"
        depth -= char == "}" and depth > 0
        current.append(char)
    parts.append("".join(current).strip())
    return parts


def compile_glob(glob: str) -> re.Pattern[str]:
    """The regular expression a ``paths`` glob means over ``/``-separated paths relative to the workspace;
    raises RuleError for one that cannot be a glob."""
    text = glob.strip()
    if not text or len(text) > MAX_GLOB_CHARS or "\0" in text:
        raise RuleError(f"{text[:60]!r} is not a glob of 1 to {MAX_GLOB_CHARS} characters")
    text = text.removeprefix("./").lstrip("/")
    if text.endswith("/"):
        text += "**"
    anywhere = "/" not in text
    try:
        body = _translate(text, 0)
        return re.compile(("(?:.*/)?" if anywhere else "") + body)
    except (re.error, RecursionError) as e:
        raise RuleError(f"{glob[:60]!r} is not a glob ({e})") from None


def _translate(text: str, depth: int) -> str:
    if depth > 8:
        raise RuleError("braces nested too deeply")
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if text.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif text.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = text.find("]", i + 2)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            inner = text[i + 1 : end].replace("\\", "\\\\")
            negate = inner[:1] in ("!", "^")
            out.append("[" + ("^" if negate else "") + (inner[1:] if negate else inner) + "]")
            i = end + 1
        elif char == "{":
            end = _closing(text, i)
            if end < 0:
                out.append(re.escape(char))
                i += 1
                continue
            options = _commas(text[i + 1 : end])
            out.append("(?:" + "|".join(_translate(o, depth + 1) for o in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == "{"
        depth -= text[i] == "}"
        if depth == 0:
            return i
    return -1


def relative(path: str, workspace: Path) -> str | None:
    """``path`` (as a tool took it: absolute, or relative to ``workspace``) relative to ``workspace``,
    ``/``-separated; None when it lies outside it."""
    full = Path(os.path.normpath(workspace / path))
    try:
        inside = full.relative_to(os.path.normpath(workspace))
    except ValueError:
        return None
    shown = PurePosixPath(*inside.parts).as_posix()
    return None if shown in ("", ".") else shown
