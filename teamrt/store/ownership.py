"""Who owns a run: an flock on ``runs/<run>/owner.lock`` plus the heartbeat in the runs row.

The kernel drops the lock the moment its owner dies, so on one machine a
second owner is refused exactly while the first lives, with no stale-lock
guessing. The heartbeat (renewed by the writer every ``HEARTBEAT_S``) tells
readers such as ``teamrt ls`` whether the owner still works, and refuses an
owner on another machine sharing a server database while a fresh one beats.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from ..procs import is_running, own_identity
from .errors import RunOwned
from .records import Owner, RunRecord

LOCK_FILE = "owner.lock"
HEARTBEAT_S = 2.0
STALE_AFTER_S = 15.0  # several missed heartbeats: the owner is gone or wedged


class OwnerLock:
    """This process's exclusive hold on one run directory."""

    def __init__(self, run_dir: Path, run: str) -> None:
        self.path = run_dir / LOCK_FILE
        self.run = run
        self._fd: int | None = None

    def acquire(self) -> Owner:
        """Take the lock or raise RunOwned naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunOwned(  # noqa: B904 - the lock being held is the news, not a cause
                self.run, holder.host if holder else "this machine", holder.pid if holder else 0, None
            )
        except BaseException:
            os.close(fd)
            raise
        pid, start = own_identity()
        owner = Owner(socket.gethostname(), pid, start, time.time())
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": owner.host, "pid": pid, "start_time": start}).encode(), 0)
        self._fd = fd
        return owner

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _read_holder(fd: int) -> Owner | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
        return Owner(str(data["host"]), int(data["pid"]), int(data["start_time"]), 0.0)
    except (ValueError, TypeError, KeyError):
        return None


def check_not_live_elsewhere(run: RunRecord, me: Owner) -> None:
    """Refuse a run another machine's owner still heartbeats (the lock file only covers this one)."""
    owner = run.owner
    if owner is None or owner.host == me.host or run.heartbeat_at is None:
        return
    age = time.time() - run.heartbeat_at
    if age < STALE_AFTER_S:
        raise RunOwned(run.id, owner.host, owner.pid, age)


def owner_alive(run: RunRecord) -> bool:
    """Whether the run's recorded owner still works: its process exists (here) and its heartbeat is fresh."""
    owner = run.owner
    if owner is None or run.heartbeat_at is None:
        return False
    if time.time() - run.heartbeat_at >= STALE_AFTER_S:
        return False
    if owner.host == socket.gethostname():
        return is_running(owner.pid, owner.start_time)
    return True
