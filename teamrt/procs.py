"""Process identity that survives pid reuse: a pid plus its start time.

The start time is field 22 of ``/proc/<pid>/stat`` (clock ticks since boot);
a pid whose start time differs from the recorded one is another process.
"""

from __future__ import annotations

import os


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid``, or None when no such process exists."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[19])


def is_running(pid: int, start_time: int) -> bool:
    """True while the process recorded as (pid, start_time) exists and is not a zombie."""
    if process_start_time(pid) != start_time:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != b"Z"


def own_identity() -> tuple[int, int]:
    """(pid, start time) of this process."""
    pid = os.getpid()
    start = process_start_time(pid)
    assert start is not None  # this process exists
    return pid, start
