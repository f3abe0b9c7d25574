"""``teamrt ARGS`` as a user runs it, with a fault the test controls (``tests/system/test_fault_disk.py``).

``python diskrunner.py FILLER MODE ARGS...``: at the ``mail.deliver`` fault point of the third message
to the reviewer (every coder has finished its edits by then), MODE ``inodes`` fills the disk holding
FILLER with empty files until no inode is left, ``space`` with data until no byte is left, ``lock``
plants git's index lock in every coder's worktree (committing its work fails, not for space) and
SIGKILLs the run once a coder's landing failed for it, as when a run that hung is killed; ``none``
does nothing.
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import sys
from contextlib import ExitStack
from pathlib import Path

from teamrt import cli, faults

COMMIT_FAILED = "its work could not be committed"


def fill(filler: Path, mode: str) -> None:
    """Files in ``filler`` until the disk refuses one: empty ones (inodes), or of data (space)."""
    filler.mkdir()
    try:
        for n in range(1 << 30):
            with open(filler / f"f{n}", "wb") as f:
                while mode == "space":
                    f.write(b"x" * 65536)
                    f.flush()
    except OSError as e:
        assert e.errno == errno.ENOSPC, e


def lock_coders() -> None:
    for admin in Path(".git", "worktrees").glob("coder*"):
        (admin / "index.lock").write_text("")


def kill_once_a_commit_failed(run_db: Path) -> None:
    with sqlite3.connect(run_db) as conn:
        reasons = conn.execute("SELECT status_reason FROM agents WHERE status = 'failed'").fetchall()
    if any(str(reason).startswith(COMMIT_FAILED) for (reason,) in reasons):
        os.kill(os.getpid(), signal.SIGKILL)


def main(filler: Path, mode: str, argv: list[str]) -> int:
    reviews: list[str] = []

    def at_delivery(detail: str) -> None:
        if detail.startswith("reviewer/"):
            reviews.append(detail)
            if len(reviews) == 3:
                lock_coders() if mode == "lock" else fill(filler, mode)

    with ExitStack() as faulted:
        if mode != "none":
            faulted.enter_context(faults.inject("mail.deliver", at_delivery))
        if mode == "lock":
            run_db = Path(os.environ["TEAMRT_HOME"], "runs", argv[argv.index("--run-id") + 1], "run.db")
            faulted.enter_context(
                faults.inject("store.after_commit", lambda _: kill_once_a_commit_failed(run_db))
            )
        return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:]))
