"""Process identity that survives pid reuse: a pid plus its start time.

The start time is field 22 of ``/proc/<pid>/stat`` (clock ticks since boot);
a pid whose start time differs from the recorded one is another process.
Tools start their programs in process groups of their own; ``kill_group``
ends such a group, whatever it has started in the meantime. ``python_module``
is how teamrt starts itself (or one of its modules) in a process of its own.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

KILL_WAIT = 5.0
"""How long ``kill_group`` waits for SIGKILLed processes to go."""


def python_module(module: str, *args: str) -> list[str]:
    """The command line that runs ``python -m module args`` with this interpreter, with ``-P``: the
    working directory is kept off ``sys.path``, so a ``queue.py`` (or ``json/``, ``sqlalchemy/``) that an
    agent left at the top of the repository a detached run, a queued run's child or a served TUI starts
    in is never imported in place of the library teamrt asked for, outside the sandbox."""
    return [sys.executable, "-P", "-m", module, *args]


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


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``, read from /proc.

    Not ``os.killpg(pgid, 0)``: a zombie nobody reaps keeps that answering
    "alive" (as under an init that never reaps, e.g. in some containers).
    """
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        state, _ppid, pgrp = stat[stat.rindex(b")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != b"Z":
            members.append(int(entry.name))
    return members


def tree(root: int) -> set[int]:
    """``root`` and the processes descended from it (zombies too), read from /proc.

    Follows ``/proc/<pid>/task/<tid>/children``, so it costs what the tree
    holds, not what the machine runs. A process being re-parented at that
    moment may be missed; an orphan re-parented outside the tree is not found.
    """
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone
            continue
        found.add(pid)
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    todo += map(int, f.read().split())
            except OSError:
                continue
    return found


async def kill_group(pgid: int, grace: float = 2.0) -> None:
    """End every process of group ``pgid``: SIGTERM, then SIGKILL for those still there after ``grace`` s.

    Returns once no live member is left, or ``KILL_WAIT`` s after the SIGKILL
    (a process stuck in the kernel cannot be hurried).
    """
    if not _signal_group(pgid, signal.SIGTERM) or await _group_gone(pgid, grace):
        return
    _signal_group(pgid, signal.SIGKILL)
    await _group_gone(pgid, KILL_WAIT)


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


async def _group_gone(pgid: int, within: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while group_members(pgid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True
