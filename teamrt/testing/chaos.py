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
"""

from __future__ import annotations

import asyncio
import errno
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrt import faults
from teamrt.demos.examples import coding_repo, copy_tree, team_file
from teamrt.mailbox.maildir import REASON_SUFFIX as REASON
from teamrt.runs.query import SUPERVISOR
from teamrt.runtime import losses
from teamrt.runtime.restore import REPEATABLE
from teamrt.store.engine import DB_ENV, run_file

if TYPE_CHECKING:
    from teamrt.testing.pgserver import PgServer

POINTS = (
    "store.before_commit", "store.after_commit", "tool.before", "tool.after", "mail.written",
    "mail.delivered", "merge.merged", "merge.before_ref", "merge.after_ref",
)  # fmt: skip
INCARNATION_TIMEOUT_S = 120.0
"""How long an incarnation may take unless the caller says (``deadline_for``): past it, it hung."""
HANG_FLOOR_S = 30.0
HANG_FACTOR = 10.0
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
EXTRA = 2
"""Incarnations past a plan's end a run may take (after a hang or a stop) before the harness gives up;
a run given up on is left running, which ``check`` reports."""
KILLED = "killed.txt"
"""Where the last kill hit: its point and detail (and, for a coder's write, the coder)."""
HUNG = 256
"""``incarnate``'s exit code for an incarnation that did not end by its deadline (no process exits so)."""

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
ACCEPT_LOSS = "--accept-loss"
"""What a resume's refusal tells the person to add to go on; how the harness knows a refusal."""


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


def prepare(example: str, where: Path, tree: Path | None = None) -> Path:
    """A project for ``example`` under ``where``: a copy of the coding repository (a git repository),
    or of the tree to survey (teamrt's own package by default)."""
    if example == "coding":
        return coding_repo(where / "project")
    return copy_tree(tree or Path(__file__).resolve().parent, where / "project")


def context() -> Any:
    """The forkserver every incarnation is forked from, with teamrt (and the SDK) imported once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        ["teamrt.testing.chaos", "teamrt.runtime.teamrun", "teamrt.models.anthropic_api"]
    )
    return ctx


def run_through_crashes(
    example: str,
    home: Path,
    project: Path,
    plan: Sequence[Kill | Step],
    ctx: Any,
    *,
    server: PgServer | None = None,
    deadline_s: float = INCARNATION_TIMEOUT_S,
    strict: bool = True,
) -> tuple[str, int]:
    """Run ``example`` in ``project``, one incarnation per step of ``plan`` (a ``Kill`` is a step that only
    kills), damaging the run's world after each kill as the step says, resuming after each, to its end.
    The run id and how many kills fired.

    An incarnation past ``deadline_s`` is noted as hung, killed and resumed (at most ``EXTRA`` more
    incarnations than the plan has). One that exits with an error after a fault that may stop a run is a
    stop, resumed; any other error raises with ``strict``, else is noted and resumed. ``server``: the
    PostgreSQL server the run's database is on (``wal`` and ``pg-restart`` act on it)."""
    from teamrt.home import new_run_id

    run_id = new_run_id()
    fired = 0
    first = True
    queue = [s if isinstance(s, Step) else Step(s) for s in plan]
    if not queue or queue[-1].kill is not None:
        queue.append(Step(None))
    queue += [Step(None)] * EXTRA
    for i, step in enumerate(queue):
        injected = len(_lines(home / f"{run_id}.{INJECTED}"))
        (home / f"{run_id}.{KILLED}").unlink(missing_ok=True)
        exitcode = incarnate(ctx, example, home, project, run_id, step.kill, first=first, step=step,
                             server=server, deadline_s=deadline_s)  # fmt: skip
        if exitcode == 0 and (_status(home, run_id) or "running") != "running":
            return run_id, fired
        if exitcode not in (0, HUNG, -signal.SIGKILL):
            said = _said(home, run_id)
            caused = step.fault in STOPPING and len(_lines(home / f"{run_id}.{INJECTED}")) > injected
            if not caused and strict:
                raise RuntimeError(f"incarnation {i} of run {run_id} exited with {exitcode}: {said}")
            _note(home / f"{run_id}.{STOPS if caused else ERRORS}", said)
        fired += exitcode == -signal.SIGKILL
        status = _status(home, run_id)
        if status is None:  # ended before the run existed: there is nothing to resume
            shutil.rmtree(home / "runs" / run_id, ignore_errors=True)
            first = True
            continue
        if status != "running":  # died after the run had ended
            return run_id, fired
        first = False
        if exitcode == -signal.SIGKILL:
            damage(step, World(home, project, run_id, server))
    return run_id, fired


@dataclass(frozen=True)
class World:
    """What a fault between incarnations may damage: the run's home, project and server."""

    home: Path
    project: Path
    run_id: str
    server: PgServer | None = None

    @property
    def run_dir(self) -> Path:
        return self.home / "runs" / self.run_id


def damage(step: Step, world: World) -> str | None:
    """Do to ``world`` what ``step``'s fault does after its kill, as a person or the machine would, and
    note it as injected; what was done, or None when there was nothing to damage (no WAL, no branch, no
    coder's write, no unread message) or the fault acts elsewhere."""
    act = {WAL: _damage_wal, BRANCH: _damage_branch, WORKTREE: _damage_worktree, MAIL: _damage_mail}
    done = act[step.fault](step, world) if step.fault in act else None
    if done is not None:
        _note(world.home / f"{world.run_id}.{INJECTED}", f"{step.fault} {done}")
    return done


def _damage_wal(step: Step, world: World) -> str | None:
    """SQLite: the run's ``run.db-wal`` emptied, or cut in half. PostgreSQL: the server stopped as
    ``pg_ctl stop -m immediate`` does and started again: it recovers from its own WAL."""
    if run_file(world.run_dir) is None:
        if world.server is None:
            return None
        world.server.restart("immediate")
        return "server stopped immediate, started"
    wal = world.run_dir / "run.db-wal"
    size = wal.stat().st_size if wal.exists() else 0
    if size == 0:
        return None
    keep = size // 2 if step.variant == "half" else 0
    os.truncate(wal, keep)
    return f"run.db-wal {size} -> {keep} bytes"


def _damage_branch(step: Step, world: World) -> str | None:
    """The integration branch ``teamrt/<run>`` deleted (as ``git update-ref -d``: a worktree holds it)."""
    ref = f"refs/heads/teamrt/{world.run_id}"
    done = subprocess.run(["git", "update-ref", "-d", ref], cwd=world.project, capture_output=True,
                          text=True, check=False)  # fmt: skip
    exists = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=world.project,
                            capture_output=True, check=False)  # fmt: skip
    return f"{ref} deleted" if done.returncode == 0 and exists.returncode != 0 else None


def _damage_worktree(step: Step, world: World) -> str | None:
    """The worktree of the coder whose write the kill came after, deleted."""
    where = world.home / f"{world.run_id}.{KILLED}"
    killed = where.read_text().split() if where.exists() else []
    if len(killed) < 3:
        return None
    path = world.run_dir / "worktrees" / killed[2]
    if not path.is_dir():
        return None
    shutil.rmtree(path)
    return f"worktrees/{killed[2]} deleted after {killed[1]}"


def _damage_mail(step: Step, world: World) -> str | None:
    """The newest unread message (not control mail, not the supervisor's) cut in half where it lies."""
    waiting = []
    for path in (world.run_dir / "mailbox").glob("*/new/*.json"):
        if path.parent.parent.name == SUPERVISOR:
            continue
        try:
            control = json.loads(path.read_bytes()).get("kind") == "control"
        except (OSError, ValueError):
            continue
        if not control:
            waiting.append(path)
    if not waiting:
        return None
    path = max(waiting, key=lambda p: p.name)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return f"{path.parent.parent.name}/new/{path.name} cut to {len(raw) // 2} of {len(raw)} bytes"


def _note(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line.replace("\n", " ") + "\n")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _said(home: Path, run_id: str) -> str:
    """What the last incarnation that failed said (and forget it, for the next)."""
    error = home / f"{run_id}.{ERROR}"
    if not error.exists():
        return "no error was written (it died outside the run)"
    said = error.read_text(encoding="utf-8")
    error.unlink()
    return said


def deadline_for(ref: Reference) -> float:
    """How long an incarnation of ``ref``'s example may take before it is taken to hang: ten times the
    uninterrupted run, at least 30 s (a loaded machine is slow, a hang is forever)."""
    return max(HANG_FLOOR_S, HANG_FACTOR * ref.seconds)


def incarnate(
    ctx: Any,
    example: str,
    home: Path,
    project: Path,
    run_id: str,
    kill: Kill | None,
    *,
    first: bool,
    step: Step | None = None,
    server: PgServer | None = None,
    deadline_s: float = INCARNATION_TIMEOUT_S,
) -> int:
    """One owner of the run, forked: it runs the example (``first``) or resumes it, and dies where
    ``kill`` says. Its exit code (negative: the signal that ended it; ``HUNG``: it did not end within
    ``deadline_s``, was killed, and the hang noted). With a ``pg-restart`` ``step``, ``server`` restarts
    while it runs."""
    fault = step.fault if step is not None else DISK if kill is not None and kill.disk_full else KILL
    spec = {"example": example, "home": str(home), "project": str(project), "run_id": run_id,
            "first": first, "kill": kill, "fault": fault, "db": os.environ.get(DB_ENV)}  # fmt: skip
    process = ctx.Process(target=_incarnation, args=(spec,))
    process.start()
    restart = None
    if step is not None and step.restart_after_s is not None and server is not None:
        restart = threading.Timer(step.restart_after_s, _restart, (process, server, home, run_id))
        restart.start()
    process.join(deadline_s)
    if restart is not None:
        restart.cancel()
        restart.join()
    if process.exitcode is None:
        process.kill()
        process.join()
        _note(home / f"{run_id}.{HANGS}", f"an owner did not end in {deadline_s:g} s (kill: {kill})")
        return HUNG
    return int(process.exitcode)


def _restart(process: Any, server: PgServer, home: Path, run_id: str) -> None:
    """``pg_ctl restart -m fast`` while the owner runs; noted only if it was still running."""
    if process.is_alive():
        server.restart("fast")
        _note(home / f"{run_id}.{INJECTED}", f"{PG_RESTART} server restarted fast while the owner ran")


def _status(home: Path, run_id: str) -> str | None:
    """The run's stored status, or None when its store does not hold it (a kill can come before)."""
    from teamrt.store import RunNotFound, StoreError, open_reader

    try:
        reader = open_reader(home / "runs" / run_id, run_id)
    except (RunNotFound, StoreError, OSError):
        return None
    try:
        return reader.run().status
    except (RunNotFound, StoreError):
        return None
    finally:
        reader.close()


def _incarnation(spec: dict[str, Any]) -> None:
    """One owner of the run: the first runs the example, the rest resume it; dies where told."""
    os.environ["TEAMRT_HOME"] = spec["home"]
    if spec.get("db"):  # the caller's, not the forkserver's (it started with the environment of its day)
        os.environ[DB_ENV] = spec["db"]
    else:
        os.environ.pop(DB_ENV, None)
    os.chdir(spec["project"])
    home, run_id = Path(spec["home"]), spec["run_id"]
    hits = _arm(spec["kill"], home, run_id, spec.get("fault", KILL))
    try:
        _own(spec, hits)
    except Exception as e:  # the run stopped (a full disk): what it said, for the harness to read
        (home / f"{run_id}.{ERROR}").write_text(f"{type(e).__name__}: {e}")
        raise SystemExit(1) from None  # exit code 1, and no traceback on the harness's terminal


def _own(spec: dict[str, Any], hits: Counter[str]) -> None:
    from teamrt.runtime.teamrun import Choices, run_team_file

    if spec["first"]:
        team = team_file(spec["example"])
        work = run_team_file(
            team,
            prompt=None,
            project=Path(spec["project"]),
            choices=Choices(model="sim"),
            run_id=spec["run_id"],
        )
        asyncio.run(work)
        (Path(spec["home"]) / f"{spec['run_id']}.{HITS}").write_text(json.dumps(hits))
        return
    with open(Path(spec["home"]) / f"{spec['run_id']}.{RESUMES}", "a", encoding="utf-8") as f:
        f.write(f"{time.time()}\n")
    resume(Path(spec["home"]), spec["run_id"])


def resume(home: Path, run_id: str) -> None:
    """Resume the run as a person would: when the resume refuses (its one line names the loss and says
    ``--accept-loss``), note the refusal and resume again, accepting the loss. The one place that knows
    how a refusal looks and how the loss is accepted."""
    from teamrt.runtime import teamrun

    try:
        asyncio.run(teamrun.resume_run(run_id))
    except Exception as e:
        if not refusal(e):
            raise
        _note(home / f"{run_id}.{REFUSED}", str(e))
        asyncio.run(teamrun.resume_run(run_id, accept_loss=True))  # type: ignore[call-arg,unused-ignore]


def refusal(error: BaseException) -> bool:
    """Whether ``error`` is a resume refusing a store behind its files (``StoreBehind``, or any error
    whose one line says how to go on: ``--accept-loss``)."""
    from teamrt.store.integrity import StoreBehind

    text = str(error)
    return isinstance(error, StoreBehind) or (ACCEPT_LOSS in text and "\n" not in text.strip())


def _arm(kill: Kill | None, home: Path, run_id: str, fault: str = KILL) -> Counter[str]:
    """Hooks at every point: ``tool.before`` and ``tool.after`` note the call (fsynced); the kill fires,
    or the full disk (``kill.disk_full``) starts, noted as ``fault``. Returns the count of hits per
    point, kept up to date."""
    hits: Counter[str] = Counter()
    executions = home / f"{run_id}.{EXECUTIONS}"
    chosen: Counter[str] = Counter()  # hits of the kill's point that ``kill.only`` lets count

    def hook_for(point: str) -> faults.Hook:
        def hook(detail: str) -> None:
            if point in ("tool.before", "tool.after"):
                fd = os.open(executions, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.write(fd, f"{point} {detail}\n".encode())
                os.fsync(fd)
                os.close(fd)
            hits[point] += 1
            if kill is None or kill.point != point:
                return
            coder = _coder_writing(home, run_id, detail) if kill.only == CODER_WRITE else ""
            if coder is None:
                return
            chosen[point] += 1
            if kill.disk_full and chosen[point] >= kill.hit:
                if chosen[point] == kill.hit:
                    _note(home / f"{run_id}.{INJECTED}", f"{fault} ENOSPC from {point} on")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if chosen[point] == kill.hit:
                (home / f"{run_id}.{KILLED}").write_text(f"{point} {detail or '-'} {coder}".strip())
                os.kill(os.getpid(), signal.SIGKILL)

        return hook

    faults._hooks.clear()
    for point in POINTS:
        faults._hooks[point] = hook_for(point)
    if kill is not None and kill.point is None:
        timer = threading.Timer(kill.after_s, os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()
    return hits


def _coder_writing(home: Path, run_id: str, call_id: str) -> str | None:
    """The coder (an agent with a worktree) whose write or edit call ``call_id`` is, or None."""
    from teamrt.store import open_reader

    reader = open_reader(home / "runs" / run_id, run_id)
    try:
        call = next((c for c in reader.tool_calls() if c.id == call_id), None)
    finally:
        reader.close()
    if call is None or call.name not in WRITES:
        return None
    return call.agent if (home / "runs" / run_id / "worktrees" / call.agent).is_dir() else None


# -- checking ----------------------------------------------------------------------------


def reference(example: str, home: Path, project: Path, ctx: Any) -> Reference:
    started = time.monotonic()
    run_id, _ = run_through_crashes(example, home, project, [], ctx)
    seconds = time.monotonic() - started
    hits = json.loads((home / f"{run_id}.{HITS}").read_text())
    return Reference(*observe(example, home, run_id, project), hits, seconds, _coder_writes(home, run_id))


def _coder_writes(home: Path, run_id: str) -> int:
    """How many write or edit calls the run's coders (its agents with a worktree) ran to the end."""
    from teamrt.store import open_reader

    ran = {line.split(" ", 1)[1] for line in _lines(home / f"{run_id}.{EXECUTIONS}") if " " in line}
    reader = open_reader(home / "runs" / run_id, run_id)
    try:
        coders = {e.agent for e in reader.events(kinds=("worktree.created",))}
        calls = reader.tool_calls()
    finally:
        reader.close()
    return sum(c.id in ran and c.name in WRITES and c.agent in coders for c in calls)


SILENT = {
    "outcome": losses.KINDS,
    "mail": frozenset({losses.MAIL_QUARANTINED, losses.MAIL_FAILED, losses.STORE_BEHIND}),
    "twice": frozenset({losses.STORE_BEHIND}),
}
"""Which loss events name which kind of difference from the uninterrupted run. A different status,
answer or result may follow from any loss; mail lost or doubled only from mail that failed or was
quarantined, or from a store behind its files; a side effect run twice only from the latter. A refused
resume names them all: the person was told and chose to go on."""


def check(example: str, home: Path, run_id: str, project: Path, ref: Reference, kills: int) -> Result:
    """How the run ``run_id`` of ``example``, ended through ``kills`` kills, compares with ``ref``; with
    the faults injected, the hangs, the refused resumes, and the losses named and silent."""
    from teamrt.store import open_reader

    result = Result(example, kills=kills)
    run_dir = home / "runs" / run_id
    starts = [float(line.split()[0]) for line in _lines(home / f"{run_id}.{RESUMES}")]
    result.resumes = len(starts)
    reader = open_reader(run_dir, run_id)
    try:
        events = reader.events()
        resumed = [e.at for e in events if e.kind == "run.resumed"]
        for start, end in pairwise([*starts, float("inf")]):  # a resume may die before it is back
            back = [at for at in resumed if start <= at < end]
            result.resume_ms += [(back[0] - start) * 1000] if back else []
        if reader.run().status != "done":
            result.differences.append(f"the run ended {reader.run().status}")
        side_effecting = {c.id for c in reader.tool_calls() if not c.read_only}
        repeatable = {c.id for c in reader.tool_calls() if c.name in REPEATABLE}
        if run_file(run_dir) is None:  # a server database: no file, the run's rows instead
            result.corrupted = len(inconsistencies(reader))
    finally:
        reader.close()
    noted = Counter(_lines(home / f"{run_id}.{EXECUTIONS}"))
    result.twice = sorted(
        call
        for (point, call), n in ((line.split(" ", 1), n) for line, n in noted.items())
        if n > 1 and call in side_effecting and (point == "tool.after" or call not in repeatable)
    )
    if run_file(run_dir) is not None:
        with closing(sqlite3.connect(run_dir / "run.db")) as db:
            verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        result.corrupted = 0 if verdict == "ok" else 1
    answer, outcome, mail = observe(example, home, run_id, project)
    if answer != ref.answer:
        result.differences.append(f"answer: {answer!r} != {ref.answer!r}")
    if outcome != ref.outcome:
        result.differences.append(f"{'integration tree' if example == 'coding' else 'report'} differs")
    result.lost, result.duplicated = mail.against(ref.mail)
    _faults_and_losses(result, home, run_id, events)
    return result


def _faults_and_losses(result: Result, home: Path, run_id: str, events: Sequence[Any]) -> None:
    """Fill in what was injected, hung, refused and stopped (from the harness's notes), the losses the
    run named, and what differs with nothing naming it."""
    injected = {line.split(" ", 1)[0] for line in _lines(home / f"{run_id}.{INJECTED}")}
    result.faults = sorted(injected | ({KILL} if result.kills else set()))
    result.hangs = len(_lines(home / f"{run_id}.{HANGS}"))
    result.refused = _lines(home / f"{run_id}.{REFUSED}")
    result.stops = _lines(home / f"{run_id}.{STOPS}")
    result.errors = _lines(home / f"{run_id}.{ERRORS}")
    named = [e for e in events if e.kind in losses.KINDS]
    result.losses = [f"{e.kind}: {e.data.get('note', '')}" for e in named]
    result.quarantined = min(result.lost, len(quarantined(home / "runs" / run_id / "mailbox", named)))
    result.lost -= result.quarantined
    result.named_losses = len(named) + len(result.refused)
    kinds = {e.kind for e in named}
    symptoms = {
        "outcome": result.differences,
        "mail": [f"{n} message(s) lost" for n in [result.lost] if n]
        + [f"{n} message(s) duplicated" for n in [result.duplicated] if n],
        "twice": [f"side-effecting call {call} ran twice" for call in result.twice],
    }
    result.silent = [
        what
        for symptom, found in symptoms.items()
        for what in found
        if not result.refused and not kinds & SILENT[symptom]
    ]
    result.silent_losses = int(bool(result.silent))


def quarantined(mailbox: Path, named: Sequence[Any]) -> set[str]:
    """The ids of the messages in the agents' ``bad/`` (by the name their reason note keeps) that a
    ``mail.quarantined`` event among ``named`` names (an id, or the file's name in ``bad/``, in its data)
    and that no ``new/`` or ``cur/`` holds again."""
    said = " ".join(json.dumps(e.data, default=str) for e in named if e.kind == losses.MAIL_QUARANTINED)
    found = set()
    for note in mailbox.glob(f"*/bad/*{REASON}"):
        try:
            original = str(json.loads(note.read_bytes()).get("name") or "")
        except (OSError, ValueError, AttributeError):
            original = ""
        message = original.removesuffix(".json")
        box = note.parent.parent
        again = any((box / sub / original).exists() for sub in ("new", "cur")) if original else False
        bad_name = note.name.removesuffix(REASON)
        if not again and ((message and message in said) or bad_name in said):
            found.add(message or bad_name)
    return found


def inconsistencies(reader: Any) -> list[str]:
    """What is wrong with the run's rows as ``reader`` reads them: a table that does not read back, an
    agent's turns not numbered 1 to n, a tool call or a mail row naming no turn of its agent, the run's
    tokens not the sum of its agents'. Empty when the rows are whole."""
    try:
        run = reader.run()
        agents = reader.agents()
        turns = {a.name: reader.turns(a.name) for a in agents}
        calls, mail = reader.tool_calls(), reader.mail()
        for read_all in (reader.tasks, reader.merges, reader.events):
            read_all()
    except Exception as e:  # any failure to read back is what this reports
        return [f"the run's rows do not read back: {type(e).__name__}: {e}"]
    problems = []
    for agent, agent_turns in turns.items():
        if [turn.seq for turn in agent_turns] != list(range(1, len(agent_turns) + 1)):
            problems.append(f"{agent}'s turns are numbered {[turn.seq for turn in agent_turns]}")
    turn_ids = {(turn.agent, turn.id) for agent_turns in turns.values() for turn in agent_turns}
    problems += [
        f"tool call {c.id} names no turn of {c.agent}" for c in calls if (c.agent, c.turn_id) not in turn_ids
    ]
    problems += [
        f"mail {m.id} names no turn of {m.agent}" for m in mail if (m.agent, m.turn_id) not in turn_ids
    ]
    for name in ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens"):
        total = sum(getattr(a.usage, name) for a in agents)
        if getattr(run.usage, name) != total:
            problems.append(f"the run's {name} {getattr(run.usage, name)} != its agents' {total}")
    return problems


def observe(example: str, home: Path, run_id: str, project: Path) -> tuple[str, str, Mail]:
    """The lead's answer, the result (the integration tree, or the report) and the mail, run ids and
    hashes masked."""
    from teamrt.store import open_reader

    run_dir = home / "runs" / run_id
    reader = open_reader(run_dir, run_id)
    try:
        answer = _mask(next((a for a in _answers(reader, "lead")), ""), run_id)
        rows = {(m.agent, m.id): m.message for m in reader.mail()}
    finally:
        reader.close()
    mail = _mail(run_dir / "mailbox", rows, run_id)
    if example == "coding":  # no integration branch: no tree (it differs)
        rev = ["git", "rev-parse", "-q", "--verify", f"teamrt/{run_id}^{{tree}}"]
        tree = subprocess.run(rev, cwd=project, capture_output=True, text=True, check=False).stdout.strip()
        return answer, tree, mail
    report = project / "REPORT.md"
    return answer, report.read_text(encoding="utf-8") if report.exists() else "", mail


def _mail(mailbox: Path, rows: dict[tuple[str, str], dict[str, Any]], run_id: str) -> Mail:
    """The mail of the run ``run_id``: the files in its ``mailbox`` and its ingest ``rows`` (by agent and
    message id)."""
    messages = dict(rows)
    places: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for message in rows:
        places[message].add("row")
    for path in mailbox.glob("*/*/*.json"):
        agent, box = path.parent.parent.name, path.parent.name
        if box in ("new", "cur") and agent != SUPERVISOR:
            try:
                data = json.loads(path.read_bytes())
            except ValueError:  # damaged where it lies, not yet quarantined: not delivered
                continue
            if not isinstance(data, dict):
                continue
            messages[agent, path.stem] = data
            places[agent, path.stem].add(box)
    delivered: Counter[Key] = Counter()
    read: Counter[Key] = Counter()
    broken = doubled = 0
    for message, where in places.items():
        broken += ("cur" in where and "row" not in where) or where == {"row"}
        doubled += {"new", "cur"} <= where
        data = messages[message]
        if data["kind"] != "control":
            key = (data["to"], data["from"], data["kind"], _mask(str(data["body"]), run_id))
            delivered[key] += 1
            read[key] += bool(where & {"row", "cur"})
    return Mail(delivered, read, broken, doubled)


def _answers(reader: Any, agent: str) -> list[str]:
    texts = []
    for turn in reversed(reader.turns(agent)):
        if turn.role == "assistant":
            text = "".join(b.get("text", "") for b in turn.content if b.get("type") == "text")
            if text:
                texts.append(text)
    return texts


def _mask(text: str, run_id: str) -> str:
    return re.sub(r"\b[0-9a-f]{7,40}\b", "HASH", text.replace(run_id, "RUN"))


def kills_for(seed: int, count: int, ref: Reference) -> list[Kill]:
    """``count`` kills, seeded: at points the run reaches, early enough that each of ``count`` successive
    incarnations still gets there; one in four on a timer instead."""
    rng = random.Random(seed)
    points = sorted(p for p, n in ref.hits.items() if n > 0)
    kills = []
    for _ in range(count):
        if rng.random() < 0.25:
            kills.append(Kill(None, after_s=rng.uniform(0.05, ref.seconds / (count + 1))))
        else:
            point = rng.choice(points)
            kills.append(Kill(point, hit=rng.randint(1, max(1, ref.hits[point] // (count + 1)))))
    return kills


def applicable(kinds: Sequence[str], example: str, db: str) -> list[str]:
    """The faults of ``kinds`` a run of ``example`` on ``db`` (``sqlite``, ``postgres``) can suffer."""
    return [
        k
        for k in kinds
        if k != KILL
        and (example == "coding" or k not in CODING_ONLY)
        and (db == "postgres" or k not in POSTGRES_ONLY)
    ]


def plan_for(seed: int, count: int, ref: Reference, kinds: Sequence[str], db: str = "sqlite") -> list[Step]:
    """``count`` kills (``kills_for``), with a step for each fault of ``kinds`` put in among them at a
    seeded place: a ``pg-restart`` goes on the last incarnation (no kill: it must run on to the end)."""
    rng = random.Random(f"{seed} faults")
    steps = [Step(kill) for kill in kills_for(seed, count, ref)]
    last = Step(None)
    for kind in kinds:
        if kind == PG_RESTART:
            last = Step(None, PG_RESTART, restart_after_s=rng.uniform(0.3, 0.8))
        elif kind != KILL:  # a coder's fault early: its writes and merges are done by mid-run
            where = rng.randint(0, len(steps) // 2 if kind in CODING_ONLY else len(steps))
            steps.insert(where, fault_step(kind, rng, count, ref, db))
    return [*steps, last]


def fault_step(kind: str, rng: random.Random, count: int, ref: Reference, db: str) -> Step:
    """One incarnation that injects ``kind``: ENOSPC from the store (``disk``) or the mailbox (``inodes``)
    from an early hit on; or a kill where the damage that follows makes sense (a kill anywhere before the
    WAL is cut, after a merge before the branch goes, after a coder's write before its worktree goes, once
    a message is delivered before it is corrupted)."""
    early = max(1, ref.hits.get("store.before_commit", 1) // (count + 1))
    if kind == DISK:
        return Step(Kill("store.before_commit", hit=rng.randint(1, early), disk_full=True), DISK)
    if kind == INODES:
        return Step(Kill("mail.written", hit=rng.randint(1, 2), disk_full=True), INODES)
    if kind == WAL:
        kill = kills_for(rng.randrange(1 << 30), count, ref)[0]
        return Step(kill, WAL, "half" if db == "sqlite" and rng.random() < 0.5 else "empty")
    if kind == BRANCH:
        return Step(Kill("merge.after_ref", hit=1), BRANCH)
    if kind == WORKTREE:
        return Step(
            Kill("tool.after", hit=rng.randint(1, max(1, ref.writes // 3)), only=CODER_WRITE), WORKTREE
        )
    if kind == MAIL:
        return Step(Kill("mail.delivered", hit=rng.randint(1, 2)), MAIL)
    raise ValueError(f"no such fault: {kind!r} (the faults: {', '.join(FAULTS)})")
