"""What the crash-and-resume harness and its checks share: the kinds of fault, a plan's steps (``Kill``,
``Step``), the notes kept in files beside a run (outside its store) for the checks to read, and what the
checks compare (``Mail``, ``Reference``) and find (``Result``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

EXECUTIONS = "executions.log"
RESUMES = "resumes.log"
HITS = "hits.json"
ERROR = "error.txt"
INJECTED = "faults.log"
"""One line per fault injected: its kind, then what it hit (a point, a file, an agent)."""
HANGS = "hangs.log"
REFUSED = "refused.log"
"""One line per resume that refused (the line it said); the harness then resumed accepting the loss."""
STOPS = "stops.log"
"""One line per incarnation that ended with an error line after a fault that may stop a run: what it said."""
ERRORS = "errors.log"
"""One line per incarnation that ended with an error no injected fault explains: what it said."""
KILLED = "killed.txt"
"""Where the last kill hit: its point and detail (and, for a coder's write, the coder)."""
KILL, DISK, INODES, WAL, BRANCH, WORKTREE, MAIL, PG_RESTART = (
    "kill", "disk", "inodes", "wal", "branch", "worktree", "mail", "pg-restart",
)  # fmt: skip
FAULTS = (KILL, DISK, INODES, WAL, BRANCH, WORKTREE, MAIL, PG_RESTART)
"""The kinds of fault a plan injects; ``kill`` (SIGKILL of the owner) is always among them."""
CODING_ONLY = frozenset({BRANCH, WORKTREE})
"""Faults that need merges and worktrees: the coding example's."""
POSTGRES_ONLY = frozenset({PG_RESTART})
STOPPING = frozenset({DISK, INODES, PG_RESTART})
"""Faults after which an incarnation may rightly stop with an error line, to be resumed."""
CODER_WRITE = "coder-write"
"""``Kill.only``: count only hits at a write or edit call of an agent with a worktree (a coder)."""
WRITES = ("Write", "Edit", "MultiEdit", "NotebookEdit")


@dataclass(frozen=True)
class Kill:
    """Where an incarnation dies: the ``hit``-th time it reaches ``point``, or after ``after_s``.
    With ``disk_full``, it does not die there: from that hit on, the point raises ENOSPC."""

    point: str | None
    hit: int = 1
    after_s: float = 0.0
    disk_full: bool = False
    only: str | None = None
    """``CODER_WRITE``: count only the point's hits at a coder's write or edit call."""


@dataclass(frozen=True)
class Step:
    """One incarnation of a plan: where it dies (``kill``; None: it runs to the end), the ``fault`` kind it
    injects (``kill``: none besides the kill), the damage's ``variant`` (the WAL ``empty`` or ``half``),
    and, for ``pg-restart``, when the server restarts while it runs."""

    kill: Kill | None
    fault: str = KILL
    variant: str = ""
    restart_after_s: float | None = None


@dataclass
class Result:
    """One example run to its end through crashes, and how it compares with an uninterrupted run."""

    example: str
    kills: int = 0
    resumes: int = 0
    resume_ms: list[float] = field(default_factory=list)
    lost: int = 0
    """Messages the uninterrupted run delivered (or read) that this one did not, or kept only in part."""
    duplicated: int = 0
    """Messages there more often than in the uninterrupted run."""
    corrupted: int = 0
    twice: list[str] = field(default_factory=list)
    """Side-effecting tool calls that ran to the end more than once, or (other than the team tools a
    resume completes exactly once) were started more than once."""
    differences: list[str] = field(default_factory=list)
    """What differs from the uninterrupted run (the status it ended with, the answer, the result); empty
    when all is the same."""
    faults: list[str] = field(default_factory=list)
    """The kinds of fault injected (``kill`` among them when a kill fired), each once."""
    hangs: int = 0
    """Incarnations that did not end by their deadline: killed, and the run resumed."""
    refused: list[str] = field(default_factory=list)
    """What each resume that refused said (a store behind its files); the run then went on with the loss
    accepted."""
    losses: list[str] = field(default_factory=list)
    """The loss events the run recorded (``losses.KINDS``), each ``kind: note``."""
    quarantined: int = 0
    """Messages in a ``bad/`` that a ``mail.quarantined`` event names and that were not delivered again:
    named, so counted here and in ``named_losses``, not in ``lost``."""
    named_losses: int = 0
    """Losses named to the person: loss events plus refused resumes."""
    silent: list[str] = field(default_factory=list)
    """What differs from the uninterrupted run with nothing naming it (see ``SILENT``)."""
    silent_losses: int = 0
    """1 when anything in ``silent``: the run lost or doubled something without a word."""
    stops: list[str] = field(default_factory=list)
    """Incarnations that ended with an error line after a fault that may stop a run (a full disk, inodes
    exhausted, a server restart): what they said. The run was resumed."""
    errors: list[str] = field(default_factory=list)
    """Incarnations that ended with an error no injected fault explains: what they said."""


Key = tuple[str, str, str, str]
"""A message as the checks compare it: to, from, kind and body, run ids and hashes masked."""


@dataclass(frozen=True)
class Mail:
    """A run's mail: every message in its agents' ``new/`` and ``cur/`` (the supervisor's own, a person's
    control mail it records as events, left out) and every ingest row of its store, each message once
    by its id. Control mail (an agent idles: a matter of timing) is counted only by state, in ``broken``
    and ``doubled``."""

    delivered: Counter[Key]
    """Every message: a file in ``new/`` or ``cur/``, an ingest row, or both."""
    read: Counter[Key]
    """Those ingested or acknowledged (an ingest row, a file in ``cur/``); the rest wait in ``new/``,
    as mail to an agent that had ended does."""
    broken: int
    """Messages acknowledged and never ingested (in ``cur/`` with no row), or ingested and gone from the
    mailbox (a row with no file)."""
    doubled: int
    """Messages both in ``new/`` and ``cur/``: there to be read again."""

    def against(self, ref: Mail) -> tuple[int, int]:
        """How many messages are lost and how many duplicated, compared with ``ref``. A message ``ref``
        read and this run left unread is lost; one this run read and ``ref`` left unread is no more."""
        missing = sum(((ref.delivered - self.delivered) | (ref.read - self.read)).values())
        extra = sum((self.delivered - ref.delivered).values())
        return missing + max(self.broken - ref.broken, 0), extra + max(self.doubled - ref.doubled, 0)


@dataclass(frozen=True)
class Reference:
    """An uninterrupted run of an example, as the checks compare with it."""

    answer: str
    outcome: str
    mail: Mail
    hits: dict[str, int]
    """How often the uninterrupted run reached each fault point."""
    seconds: float
    writes: int = 0
    """How many write or edit calls its coders made (``Kill.only`` ``CODER_WRITE``)."""


def note(path: Path, line: str) -> None:
    """Add ``line`` (on one line) to the note file ``path`` beside a run."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line.replace("\n", " ") + "\n")


def read_notes(path: Path) -> list[str]:
    """The lines of the note file ``path``; none when nothing was noted."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []
