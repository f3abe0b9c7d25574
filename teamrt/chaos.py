"""Crash a team run again and again, resume it each time, and check nothing was lost or done twice.

The harness of the fault-injection suite (``tests/test_chaos.py``) and of
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
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from . import faults
from .examples import coding_repo, copy_tree, team_file
from .runs import SUPERVISOR
from .runtime.resume import REPEATABLE
from .store.engine import DB_ENV, run_file

POINTS = (
    "store.before_commit", "store.after_commit", "tool.before", "tool.after", "mail.written",
    "mail.delivered", "merge.merged", "merge.before_ref", "merge.after_ref",
)  # fmt: skip
INCARNATION_TIMEOUT_S = 120.0
EXECUTIONS = "executions.log"
RESUMES = "resumes.log"
HITS = "hits.json"
ERROR = "error.txt"


@dataclass(frozen=True)
class Kill:
    """Where an incarnation dies: the ``hit``-th time it reaches ``point``, or after ``after_s``.
    With ``disk_full``, it does not die there: from that hit on, the point raises ENOSPC."""

    point: str | None
    hit: int = 1
    after_s: float = 0.0
    disk_full: bool = False


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


def prepare(example: str, where: Path, tree: Path | None = None) -> Path:
    """A project for ``example`` under ``where``: a copy of the coding repository (a git repository),
    or of the tree to survey (teamrt's own package by default)."""
    if example == "coding":
        return coding_repo(where / "project")
    return copy_tree(tree or Path(__file__).resolve().parent, where / "project")


def context() -> Any:
    """The forkserver every incarnation is forked from, with teamrt (and the SDK) imported once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["teamrt.chaos", "teamrt.runtime.teamrun", "teamrt.models.anthropic_api"])
    return ctx


def run_through_crashes(
    example: str, home: Path, project: Path, kills: list[Kill], ctx: Any
) -> tuple[str, int]:
    """Run ``example`` in ``project``, dying at each of ``kills`` in turn and resuming after each, to its
    end. The run id and how many kills fired."""
    from .home import new_run_id

    run_id = new_run_id()
    fired = 0
    first = True
    plan: list[Kill | None] = [*kills, None]
    for i, kill in enumerate(plan):
        exitcode = incarnate(ctx, example, home, project, run_id, kill, first=first)
        first = False
        if exitcode == -signal.SIGKILL:
            fired += 1
            status = _status(home, run_id)
            if status is None:  # died before the run existed: there is nothing to resume
                shutil.rmtree(home / "runs" / run_id, ignore_errors=True)
                first = True
            elif status != "running":  # died after the run had ended
                return run_id, fired
            continue
        if exitcode != 0:
            raise RuntimeError(f"incarnation {i} of run {run_id} exited with {exitcode}")
        return run_id, fired
    raise RuntimeError(f"run {run_id} did not end after {len(plan)} incarnations")


def incarnate(
    ctx: Any, example: str, home: Path, project: Path, run_id: str, kill: Kill | None, *, first: bool
) -> int:
    """One owner of the run, forked: it runs the example (``first``) or resumes it, and dies where
    ``kill`` says. Its exit code (negative: the signal that ended it)."""
    spec = {"example": example, "home": str(home), "project": str(project), "run_id": run_id,
            "first": first, "kill": kill, "db": os.environ.get(DB_ENV)}  # fmt: skip
    process = ctx.Process(target=_incarnation, args=(spec,))
    process.start()
    process.join(INCARNATION_TIMEOUT_S)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise RuntimeError(f"an owner of run {run_id} did not end in {INCARNATION_TIMEOUT_S:g} s")
    return int(process.exitcode)


def _status(home: Path, run_id: str) -> str | None:
    """The run's stored status, or None when its store does not hold it (a kill can come before)."""
    from .store import RunNotFound, StoreError, open_reader

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
    hits = _arm(spec["kill"], Path(spec["home"]) / f"{spec['run_id']}.{EXECUTIONS}")
    try:
        _own(spec, hits)
    except Exception as e:  # the run stopped (a full disk): what it said, for the test to read
        (Path(spec["home"]) / f"{spec['run_id']}.{ERROR}").write_text(f"{type(e).__name__}: {e}")
        raise


def _own(spec: dict[str, Any], hits: Counter[str]) -> None:
    from .runtime.teamrun import Choices, resume_run, run_team_file

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
    asyncio.run(resume_run(spec["run_id"]))


def _arm(kill: Kill | None, executions: Path) -> Counter[str]:
    """Hooks at every point: ``tool.before`` and ``tool.after`` note the call (fsynced); the kill fires.
    Returns the count of hits per point, kept up to date."""
    hits: Counter[str] = Counter()

    def hook_for(point: str) -> faults.Hook:
        def hook(detail: str) -> None:
            if point in ("tool.before", "tool.after"):
                fd = os.open(executions, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.write(fd, f"{point} {detail}\n".encode())
                os.fsync(fd)
                os.close(fd)
            hits[point] += 1
            if kill is not None and kill.point == point and hits[point] >= kill.hit and kill.disk_full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if kill is not None and kill.point == point and hits[point] == kill.hit:
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


# -- checking ----------------------------------------------------------------------------


def reference(example: str, home: Path, project: Path, ctx: Any) -> Reference:
    started = time.monotonic()
    run_id, _ = run_through_crashes(example, home, project, [], ctx)
    seconds = time.monotonic() - started
    hits = json.loads((home / f"{run_id}.{HITS}").read_text())
    return Reference(*observe(example, home, run_id, project), hits, seconds)


def check(example: str, home: Path, run_id: str, project: Path, ref: Reference, kills: int) -> Result:
    """How the run ``run_id`` of ``example``, ended through ``kills`` kills, compares with ``ref``."""
    from .store import open_reader

    result = Result(example, kills=kills)
    run_dir = home / "runs" / run_id
    resumes = home / f"{run_id}.{RESUMES}"
    starts = [float(line.split()[0]) for line in resumes.read_text().splitlines()] if resumes.exists() else []
    result.resumes = len(starts)
    reader = open_reader(run_dir, run_id)
    try:
        resumed = [e.at for e in reader.events() if e.kind == "run.resumed"]
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
    executions = home / f"{run_id}.{EXECUTIONS}"
    noted = Counter(executions.read_text().splitlines() if executions.exists() else [])
    result.twice = sorted(
        call
        for (point, call), n in ((line.split(" ", 1), n) for line, n in noted.items())
        if n > 1 and call in side_effecting and (point == "tool.after" or call not in repeatable)
    )
    if run_file(run_dir) is not None:
        with sqlite3.connect(run_dir / "run.db") as db:
            verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        result.corrupted = 0 if verdict == "ok" else 1
    answer, outcome, mail = observe(example, home, run_id, project)
    if answer != ref.answer:
        result.differences.append(f"answer: {answer!r} != {ref.answer!r}")
    if outcome != ref.outcome:
        result.differences.append(f"{'integration tree' if example == 'coding' else 'report'} differs")
    result.lost, result.duplicated = mail.against(ref.mail)
    return result


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
    from .store import open_reader

    run_dir = home / "runs" / run_id
    reader = open_reader(run_dir, run_id)
    try:
        answer = _mask(next((a for a in _answers(reader, "lead")), ""), run_id)
        rows = {(m.agent, m.id): m.message for m in reader.mail()}
    finally:
        reader.close()
    mail = _mail(run_dir / "mailbox", rows, run_id)
    if example == "coding":
        tree = subprocess.run(["git", "rev-parse", f"teamrt/{run_id}^{{tree}}"], cwd=project,
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        return answer, tree, mail
    return answer, (project / "REPORT.md").read_text(encoding="utf-8"), mail


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
            messages[agent, path.stem] = json.loads(path.read_bytes())
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
