"""Running an example team through crashes: each incarnation of the run's owner forked from a server
that has teamrt imported, killed where its step says (a fault point's Nth hit, or a timer), resumed by the
next until one ends the run; a hang killed and resumed, a resume that refuses resumed with the loss
accepted, each noted beside the run.
"""

from __future__ import annotations

import asyncio
import errno
import json
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrt import faults
from teamrt.demos.examples import coding_repo, copy_tree, team_file
from teamrt.store.engine import DB_ENV
from teamrt.testing.chaos.base import (
    CODER_WRITE,
    DISK,
    ERROR,
    ERRORS,
    EXECUTIONS,
    HANGS,
    HITS,
    INJECTED,
    KILL,
    KILLED,
    PG_RESTART,
    REFUSED,
    RESUMES,
    STOPPING,
    STOPS,
    WRITES,
    Kill,
    Reference,
    Step,
    note,
    read_notes,
)
from teamrt.testing.chaos.plan import World, damage

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
EXTRA = 2
"""Incarnations past a plan's end a run may take (after a hang or a stop) before the harness gives up;
a run given up on is left running, which ``check`` reports."""
HUNG = 256
"""``incarnate``'s exit code for an incarnation that did not end by its deadline (no process exits so)."""
ACCEPT_LOSS = "--accept-loss"
"""What a resume's refusal tells the person to add to go on; how the harness knows a refusal."""


def prepare(example: str, where: Path, tree: Path | None = None) -> Path:
    """A project for ``example`` under ``where``: a copy of the coding repository (a git repository),
    or of the tree to survey (teamrt's own package by default)."""
    if example == "coding":
        return coding_repo(where / "project")
    return copy_tree(tree or Path(__file__).resolve().parents[2], where / "project")


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
        injected = len(read_notes(home / f"{run_id}.{INJECTED}"))
        (home / f"{run_id}.{KILLED}").unlink(missing_ok=True)
        exitcode = incarnate(ctx, example, home, project, run_id, step.kill, first=first, step=step,
                             server=server, deadline_s=deadline_s)  # fmt: skip
        if exitcode == 0 and (status_of(home, run_id) or "running") != "running":
            return run_id, fired
        if exitcode not in (0, HUNG, -signal.SIGKILL):
            said = _said(home, run_id)
            caused = step.fault in STOPPING and len(read_notes(home / f"{run_id}.{INJECTED}")) > injected
            if not caused and strict:
                raise RuntimeError(f"incarnation {i} of run {run_id} exited with {exitcode}: {said}")
            note(home / f"{run_id}.{STOPS if caused else ERRORS}", said)
        fired += exitcode == -signal.SIGKILL
        status = status_of(home, run_id)
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
        note(home / f"{run_id}.{HANGS}", f"an owner did not end in {deadline_s:g} s (kill: {kill})")
        return HUNG
    return int(process.exitcode)


def _restart(process: Any, server: PgServer, home: Path, run_id: str) -> None:
    """``pg_ctl restart -m fast`` while the owner runs; noted only if it was still running."""
    if process.is_alive():
        server.restart("fast")
        note(home / f"{run_id}.{INJECTED}", f"{PG_RESTART} server restarted fast while the owner ran")


def status_of(home: Path, run_id: str) -> str | None:
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
        note(home / f"{run_id}.{REFUSED}", str(e))
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
                    note(home / f"{run_id}.{INJECTED}", f"{fault} ENOSPC from {point} on")
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
