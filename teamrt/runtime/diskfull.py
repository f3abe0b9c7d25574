"""A full disk under the run's own files stops the run as a full store does, in one line.

The store may live elsewhere (a PostgreSQL server) or still have room (SQLite's
files exist before the inodes run out) while the mailbox, the worktrees and git
meet the full disk. Every agent would hit the same wall again and again, so
teamrt's own failures there (a delivery, a commit, a maildir) are not retried:
the supervisor records what was refused, then stops the store with ``DiskFull``
(a ``StoreWriteFailed``), so nothing after it is kept, no agent is restarted or
marked failed, and the run ends as after a crash: ``teamrt resume`` goes on once
space is freed. An agent's own command meeting the full disk is its tool error.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from teamrt.mailbox.mailbox import FULL_ERRNOS, MailNotDelivered
from teamrt.store import StoreWriteFailed
from teamrt.worktree import GitError

HALTING = FULL_ERRNOS
"""What stops the run when teamrt's own files meet it (the mailbox's lasting refusals): it stays until a
person acts."""


class DiskFull(StoreWriteFailed):
    """The disk (its space, its inode table or a quota) under ``where`` refused teamrt's own write."""

    def __init__(self, run: str, where: Path, code: int, what: str) -> None:
        self.run = run
        self.code = code
        self.what = what
        said = _what_is_wrong(where, code)
        self.reason = f"{said}: {what}"
        self.where = str(where)
        fix = "fix the disk" if code == errno.EIO else "free space there"
        Exception.__init__(self, f"run {run} stopped: {said}, so {what}; {fix}, then: teamrt resume {run}")


def full_disk_errno(error: BaseException) -> int | None:
    """The errno (``HALTING``) of a full or failing disk behind ``error`` or its causes, else None."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, MailNotDelivered):
            return seen.errno if seen.lasting else None
        if isinstance(seen, GitError):
            return seen.full_disk
        if isinstance(seen, OSError) and seen.errno in HALTING:
            return seen.errno
        seen = seen.__cause__ or seen.__context__
    return None


def where_of(error: BaseException, default: Path) -> Path:
    """The directory ``error`` (or a cause) names, else ``default``: where the disk is full."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            break
        if isinstance(seen, MailNotDelivered):
            return seen.where
        name = getattr(seen, "filename", None)
        if isinstance(name, str) and os.path.isabs(name):
            return _existing(Path(name))
        seen = seen.__cause__ or seen.__context__
    return default


def _existing(path: Path) -> Path:
    """``path``'s nearest existing directory (a file that could not be made names one below it)."""
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return path


def _what_is_wrong(where: Path, code: int) -> str:
    """``the disk under D is full``, or its inode table, quota or failure: as the errno and statvfs say."""
    if code == errno.EDQUOT:
        return f"the disk quota under {where} is exceeded"
    if code == errno.EIO:
        return f"the disk under {where} failed (input/output error)"
    try:
        st = os.statvfs(where)
    except OSError:
        return f"the disk under {where} is full"
    if st.f_files > 0 and st.f_favail == 0 and st.f_bavail > 0:
        return f"the inode table of the disk under {where} is full"
    return f"the disk under {where} is full"
