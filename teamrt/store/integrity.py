"""Whether a run's store is behind what was committed: the commit counter and its sidecar file.

Every group commit of a run's writer also bumps ``runs.commits`` in the same
transaction and, once the commit is durable (SQLite's fsync of the WAL, the
server's commit), writes the new count into ``runs/<run>/commits``
(``CommitStamp``). The file is written in place, with no fsync of its own:
written only after the database's own, it can lag the database (a crash in
between, a power cut that drops it), never lead it. So a file *ahead* of the
column proves the database lost commits it once made durable: a WAL emptied
or cut, a server restored from an older backup. ``behind`` says by how many.

``quick_check`` is SQLite's own check of the file's structure (SQLite only).
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from pathlib import Path

from sqlalchemy import Connection, select

from teamrt.errors import UserError
from teamrt.store import engine as eng
from teamrt.store import tables as t
from teamrt.store.errors import StoreError

log = logging.getLogger(__name__)

SIDECAR = "commits"
"""The file in the run directory that follows ``runs.commits``."""
_WIDTH = 20  # digits: the file keeps one size, so a write in place never leaves a longer number's tail
ACCEPT_LOSS = "--accept-loss"


class StoreBehind(StoreError, UserError):
    """A resume (or a follow-up, ``command``) refused: the store lacks what the run's directory shows was
    committed or acknowledged.

    Its text is one line naming what is missing and how to go on anyway.
    """

    def __init__(self, run: str, findings: list[str], *, command: str = "resume") -> None:
        self.run = run
        self.findings = findings
        done = {"resume": "resumed", "continue": "continued"}[command]
        super().__init__(
            f"run {run} was not {done}: {'; '.join(findings)}. Going on would redo that work from an older"
            f" state; teamrt {command} {run} {ACCEPT_LOSS} goes on from what the store has, and records the"
            " loss"
        )


def sidecar_path(run_dir: Path) -> Path:
    return run_dir / SIDECAR


def read_sidecar(run_dir: Path) -> int | None:
    """The count in the run directory's ``commits`` file; None when there is none (a run of an older
    teamrt, or a run that never committed) or it is not a count (then it proves nothing)."""
    try:
        text = sidecar_path(run_dir).read_bytes()[: _WIDTH + 2]
    except OSError:
        return None
    try:
        value = int(text.strip() or b"-1")
    except ValueError:
        return None
    return value if value >= 0 else None


def behind(run_dir: Path, stored: int, sidecar: int | None = None) -> int:
    """How many commits the store (whose count is ``stored``) lacks against the run directory's file
    (``sidecar``: read already, else read now): 0 when it lacks none."""
    seen = read_sidecar(run_dir) if sidecar is None else sidecar
    return max(0, seen - stored) if seen is not None else 0


def behind_finding(count: int, url: str) -> str:
    """The finding of a store ``count`` commits behind, in words for the person."""
    commits = "commit" if count == 1 else "commits"
    cause = (
        "its WAL was lost or cut"
        if eng.is_sqlite(url)
        else "the database lost them (restored from an older backup?)"
    )
    return f"the store is {count} {commits} behind its run directory: {cause}"


def stored_count(conn: Connection, run: str) -> int:
    """``runs.commits`` of ``run`` as ``conn`` sees it."""
    value = conn.execute(select(t.runs.c.commits).where(t.runs.c.id == run)).scalar()
    return int(value or 0)


def quick_check(path: Path) -> str | None:
    """SQLite's ``PRAGMA quick_check`` of the file at ``path``, read only: None when it is ``ok``, else its
    first complaint (or why the file could not be checked), on one line."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=eng.BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as e:
        return f"cannot be opened: {e}"
    try:
        rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.Error as e:
        return " ".join(str(e).split())
    finally:
        conn.close()
    if rows == ["ok"]:
        return None
    return " ".join(" ".join(rows[:2]).split()) or "no answer"


class CommitStamp:
    """Counts the writer's group commits: ``bump`` in each transaction, ``committed`` once it is durable.

    Used by the writer thread alone. The count starts from the store's own
    (``start``), so after an accepted loss the file follows the store again.
    """

    def __init__(self, run: str, run_dir: Path, start: int, dialect: str, *, reset: bool = False) -> None:
        """``reset``: write ``start`` now (a new run: a file left by an earlier run of that name is stale);
        otherwise the file is first written after the first commit, so a store opened and refused keeps
        the file's evidence."""
        self.run = run
        self.value = start
        self._path = sidecar_path(run_dir)
        # A statement built once, with no compilation per commit: this runs in every transaction.
        mark = "?" if dialect == "sqlite" else "%s"
        self._sql = f"UPDATE runs SET commits = {mark} WHERE id = {mark}"
        self._fd: int | None = None
        try:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            log.warning("cannot open %s (%s): this run's lost commits cannot be told", self._path, e)
        if reset:
            self._write(start)

    def bump(self, conn: Connection) -> None:
        """In the group's transaction: the store's count becomes the next one."""
        conn.exec_driver_sql(self._sql, (self.value + 1, self.run))

    def committed(self) -> None:
        """The group is durable: count it, and tell the run directory."""
        self.value += 1
        self._write(self.value)

    def _write(self, value: int) -> None:
        if self._fd is None:
            return
        try:
            os.pwrite(self._fd, f"{value:>{_WIDTH}}\n".encode(), 0)
        except OSError as e:  # the file lags then, which proves nothing: never a false alarm
            if e.errno != errno.ENOSPC:
                log.warning("cannot write %s: %s", self._path, e)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
