"""Reading a file a repository holds without trusting it: never blocking on a FIFO, never past a limit,
and JSON whose every object has each key once.

A JSON object that names a key twice means one thing to one reader and another to the next (Python
keeps the last value, an editor's outline or ``jq`` may show the first): a settings file or an
``.mcp.json`` could show a person a harmless hook while teamrt runs ``curl | sh``. ``loads_json`` is the
one reader of such files, and refuses them (``DuplicateKey``).
"""

from __future__ import annotations

import json
import os
import stat
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
