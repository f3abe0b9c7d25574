"""Reading a file a repository holds without trusting it: never blocking on a FIFO, never past a limit,
and JSON read either strictly or as Claude Code reads its settings.

A JSON object that names a key twice means one thing to one reader and another to the next (Python
keeps the last value, an editor's outline or ``jq`` may show the first): an ``.mcp.json`` could show a
person a harmless server while teamrt starts ``curl | sh``. ``loads_json`` refuses such text
(``DuplicateKey``).

Claude Code's settings files are read by ``loads_jsonc``, as Claude Code reads them: JSON with comments
(``//`` and ``/* */``) and trailing commas, a key named twice keeping its LAST value (as JavaScript's
``JSON.parse`` and Claude Code's reader do). The duplicates are returned so the caller names each one:
what runs is then what ``teamrt trust`` shows, since both read the same parsed object.

``salvage_rules`` finds the ``deny`` and ``ask`` lists in a settings file that cannot be parsed, so that
its rules that only restrict still apply (fail closed); nothing that grants is ever salvaged.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.errors import TeamrtError


class DuplicateKey(TeamrtError, ValueError):
    """A JSON object names ``key`` twice; the message names the key, escaped (it may hold anything)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"duplicate key {json.dumps(key)[:80]}")


def loads_json(text: str) -> Any:
    """``json.loads(text)``, raising ``DuplicateKey`` for an object, at any depth, that names a key twice
    (and ``json.JSONDecodeError``, ``RecursionError`` as ``json.loads`` does)."""
    return json.loads(text, object_pairs_hook=_unique)


@dataclass(frozen=True)
class Jsonc:
    """A settings file's text read as Claude Code reads it."""

    value: Any
    duplicates: tuple[str, ...] = ()
    """The keys an object named more than once (the last value counted), each once, in order."""


def loads_jsonc(text: str) -> Jsonc:
    """``text`` read as JSON with comments and trailing commas; a key named twice keeps its last value.
    Raises ``json.JSONDecodeError`` (its line and column those of ``text``) and ``RecursionError``."""
    seen: list[str] = []

    def last_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found and key not in seen:
                seen.append(key)
            found[key] = value
        return found

    value = json.loads(strip_jsonc(text), object_pairs_hook=last_wins)
    return Jsonc(value, tuple(seen))


def strip_jsonc(text: str) -> str:
    """``text`` with its comments and trailing commas (before ``]`` or ``}``) made spaces, outside
    strings; newlines kept, so a JSON error's line and column are those of ``text``. An unclosed
    ``/*`` runs to the end, as in Claude Code's reader."""
    out = list(text)
    i, n = 0, len(text)
    comma = -1  # the last comma seen outside a string, until something other than space follows it
    while i < n:
        c = text[i]
        if c == '"':
            comma = -1
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [ch if ch == "\n" else " " for ch in text[i:end]]
            i = end
        else:
            if c in "]}" and comma >= 0:
                out[comma] = " "
            if c == ",":
                comma = i
            elif not c.isspace():
                comma = -1
            i += 1
    return "".join(out)


_LIST = re.compile(r'"(deny|ask)"\s*:\s*\[')
_STRING = re.compile(r'\s*,?\s*("(?:[^"\\\n]|\\.)*")')


def salvage_rules(text: str) -> dict[str, list[str]]:
    """The strings of every ``"deny": [...]`` and ``"ask": [...]`` list in ``text``, a settings file that
    is not valid JSON: the rules that only restrict, read as well as its text allows (comments out)."""
    found: dict[str, list[str]] = {"deny": [], "ask": []}
    text = strip_jsonc(text)
    for match in _LIST.finditer(text):
        at = match.end()
        while (item := _STRING.match(text, at)) is not None:
            try:
                rule = json.loads(item[1])
            except ValueError:
                break
            found[match[1]].append(rule)
            at = item.end()
    return found


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found


def read_head(path: Path, limit: int) -> tuple[bytes, int] | None:
    """The first ``limit`` bytes of ``path`` and its size, or None when it is no regular file (a
    directory, a FIFO, a device). Raises OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return read_up_to(fd, limit), info.st_size
    finally:
        os.close(fd)


def read_up_to(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from the open file ``fd``, from where it stands."""
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_json_object(
    path: Path, limit: int, problems: list[str], *, within: Path | None = None
) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when there is none); a file that cannot be used (a link out of
    ``within``, over ``limit`` bytes, not a regular file, not JSON, a key named twice, not an object) is
    one problem line and {}. For the JSON files Claude Code's set-ups hold beside their settings
    (``.mcp.json``, ``~/.claude.json``, a plugin's registry)."""
    try:
        if within is not None and os.path.lexists(path):
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(os.path.realpath(within)):
                problems.append(f"{path}: a link to {real}, outside the project; not read")
                return {}
        head = read_head(path, limit + 1)
    except FileNotFoundError:
        return {}
    except OSError as e:
        problems.append(f"{path}: {e.strerror or e}; not read")
        return {}
    if head is None or len(head[0]) > limit:
        problems.append(f"{path}: not a regular file of at most {limit >> 20} MiB; not read")
        return {}
    try:
        data = loads_json(head[0].decode("utf-8-sig"))  # a key named twice is refused
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        problems.append(f"{path}: not valid JSON ({str(e)[:80]}); not read")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path}: must hold a JSON object; not read")
        return {}
    return data
