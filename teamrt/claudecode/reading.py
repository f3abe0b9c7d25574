"""Reading a file a repository holds without trusting it: never blocking on a FIFO, never past a limit."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_head(path: Path, limit: int) -> tuple[bytes, int] | None:
    """The first ``limit`` bytes of ``path`` and its size, or None when it is no regular file (a
    directory, a FIFO, a device). Raises OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), info.st_size
    finally:
        os.close(fd)
