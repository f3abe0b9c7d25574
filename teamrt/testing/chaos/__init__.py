"""Crash a team run again and again, resume it each time, and check nothing was lost or done twice.

The harness of the fault-injection suite (``tests/system/test_chaos.py``) and of
``benchmarks/chaos.py``. Each incarnation of the run's owner is a process
forked from a server that has already imported teamrt (``multiprocessing``'s
forkserver), so a kill-and-resume costs milliseconds, not an interpreter
start. A kill is armed at a named fault point (``teamrt.faults``) on its Nth
hit, or on a timer; the process SIGKILLs itself there. The first incarnation
runs the example team, every later one runs ``resume_run``, until one ends
the run.

The checks compare with an uninterrupted run of the same example: the same
final answer and result (the integration branch's tree, or the report); the
same mail, every message in every agent's ``new/`` and ``cur/`` and every
ingest row of the store counted against the uninterrupted run's, whether or
not the answer and result are the same (``Mail``: none lost, none there
twice); no side-effecting tool call started twice (counted in a file outside
the store, at ``tool.before``); and SQLite's ``integrity_check``.

With ``TEAMRT_DB`` set, every incarnation stores the run in that server
database (the value the caller's environment holds when it forks the
incarnation), and every check reads it back through the store. There is no
file to check for integrity: a client killed mid-transaction cannot damage
the server's files, so the corruption check is the run's rows instead, read
back whole and consistent (``inconsistencies``).

Besides kills, a plan can inject the faults a person or the machine brings
(``FAULTS``; ``plan_for``): a full disk under the store or under the mailbox
(ENOSPC raised at a fault point, then space "freed" for the next
incarnation), and, after a kill, damage to the run's world before it is
resumed: its SQLite WAL emptied or cut in half (on PostgreSQL the server
stopped ``immediate`` and started: its own crash recovery), its integration
branch deleted after a merge, a coder's worktree deleted after a write, a
message file corrupted in ``new/``; on PostgreSQL also a server restart
(``fast``) while an owner runs. What was injected, what hung past its
deadline (killed and resumed, never an exception), and what a resume refused
(then resumed with the loss accepted) are noted in files beside the run,
outside its store, for ``check`` to read: a run that ends unlike the
uninterrupted one while nothing named the loss to the person (an event of
``teamrt.runtime.losses.KINDS``, or a refused resume) is a *silent loss*.
The harness is in four parts: ``base`` (the kinds of fault, a plan's steps,
the notes beside a run, what the checks compare), ``plan`` (the seeded plan
and the damage done between incarnations), ``harness`` (the incarnations
themselves) and ``check`` (the comparison with the uninterrupted run).
"""

from teamrt.testing.chaos.base import (
    BRANCH,
    CODER_WRITE,
    CODING_ONLY,
    DISK,
    ERROR,
    ERRORS,
    FAULTS,
    HANGS,
    INJECTED,
    INODES,
    KILL,
    MAIL,
    PG_RESTART,
    REFUSED,
    RESUMES,
    STOPS,
    WAL,
    WORKTREE,
    Kill,
    Mail,
    Reference,
    Result,
    Step,
    read_notes,
)
from teamrt.testing.chaos.check import (
    check,
    inconsistencies,
    observe,
    reference,
)
from teamrt.testing.chaos.harness import (
    POINTS,
    context,
    deadline_for,
    incarnate,
    prepare,
    resume,
    run_through_crashes,
    status_of,
)
from teamrt.testing.chaos.plan import (
    World,
    applicable,
    damage,
    kills_for,
    plan_for,
)

__all__ = [
    "BRANCH",
    "CODER_WRITE",
    "CODING_ONLY",
    "DISK",
    "ERROR",
    "ERRORS",
    "FAULTS",
    "HANGS",
    "INJECTED",
    "INODES",
    "KILL",
    "MAIL",
    "PG_RESTART",
    "POINTS",
    "REFUSED",
    "RESUMES",
    "STOPS",
    "WAL",
    "WORKTREE",
    "Kill",
    "Mail",
    "Reference",
    "Result",
    "Step",
    "World",
    "applicable",
    "check",
    "context",
    "damage",
    "deadline_for",
    "incarnate",
    "inconsistencies",
    "kills_for",
    "observe",
    "plan_for",
    "prepare",
    "read_notes",
    "reference",
    "resume",
    "run_through_crashes",
    "status_of",
]
