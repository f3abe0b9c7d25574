"""``drive_run``: one attempt of a queued run, driven by a worker (the task ``connect.DRIVE_TASK``).

The attempt is started in the books (``attempts.begin``: a stop asked, a quota
reached, a second delivery are met there), the repository cloned into the run's
``project`` on its first start, then the run is a child process in a session of
its own (``teamrt run --queued RUN``, or ``teamrt resume RUN --queued`` once the run
has its row), its output appended to the run's ``output.log``. While it lives the
worker pulses it (``fence``) and pushes the integration branch to the submitted URL
whenever its tip moves, and once more at the end; then the attempt is settled
(``attempts.settle``). The library aborting the job (``teamrt`` cancels it, or the
worker shuts down hard) asks the run to stop as ``teamrt stop`` does, waits for
the child, then kills what is left.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from teamrt import home
from teamrt.procs import python_module
from teamrt.queue import attempts, gitremote
from teamrt.queue.attempts import Start, Verdict
from teamrt.queue.child import PROJECT_DIR, REFUSED_EXIT
from teamrt.queue.fence import PULSE_FD_ENV
from teamrt.queue.timing import BRANCH_CHECK_S, FOLLOW_POLL_S, PULSE_S, STOP_GRACE_S
from teamrt.runs.follow import OUTPUT_LOG
from teamrt.store.ownership import host_identity
from teamrt.terminal import clean_line

log = logging.getLogger("teamrt.queue")


class AttemptCrashed(Exception):
    """The attempt's child died without an end; the next attempt is deferred (or the run ended failed)."""


@dataclass
class Drive:
    """One attempt being driven by this worker."""

    url: str
    run_id: str
    attempt: int
    repo_url: str | None
    run_dir: Path = field(init=False)
    branch: str | None = None
    pushed: str | None = None
    stop_delivered: bool = False

    def __post_init__(self) -> None:
        self.run_dir = home.run_dir(self.run_id)

    @property
    def project(self) -> Path:
        return self.run_dir / PROJECT_DIR


async def drive_run(url: str, run_id: str, attempt: int) -> str:
    """Drive attempt ``attempt`` of run ``run_id`` to its end; returns what happened (the job's result).
    Raises ``attempts.QuotaWait`` (tried again later) or ``AttemptCrashed``."""
    host = host_identity()
    begun = await asyncio.to_thread(attempts.begin, url, run_id, attempt, host)
    if begun.start is Start.DONE:
        return "nothing to do"
    if begun.start is Start.FOLLOW:
        await _follow(url, run_id, attempt, take_over=False)
        return "followed another delivery"
    drive = Drive(url, run_id, attempt, begun.repo_url)
    if not begun.has_run:
        try:
            await asyncio.to_thread(_fresh_project, drive.project, begun.repo_url, begun.repo_ref)
        except gitremote.RemoteError as e:
            await asyncio.to_thread(attempts.fail_unstarted, url, run_id, attempt, str(e))
            return f"failed: {e}"
        except asyncio.CancelledError:  # aborted while cloning: a stop before the run began
            await asyncio.to_thread(attempts.stop_unstarted, url, run_id, attempt)
            raise
    resume = begun.has_run
    while True:
        child = _spawn(drive, resume=resume)
        verdict = await _supervise(drive, child, host)
        if verdict is not Verdict.OWNED:
            break
        if not await _follow(url, run_id, attempt, take_over=True):  # the other owner ended it: book that
            verdict = await asyncio.to_thread(attempts.settle, url, run_id, attempt, host, child.proc.pid)
            break
        resume = True  # the other owner went stale: take the run over
    if verdict is Verdict.CRASHED:
        code = child.proc.returncode
        raise AttemptCrashed(f"run {run_id} attempt {attempt}: its child exited {code} without an end")
    return str(verdict.value)


def _last_line(output: Path) -> str:
    """The last line a refused child said (the submitter's team file may be quoted: made safe)."""
    try:
        lines = output.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        lines = []
    return clean_line(lines[-1].removeprefix("teamrt: ")) if lines else "its first start was refused"


def _fresh_project(project: Path, url: str | None, ref: str | None) -> None:
    """The run's project before its first start: the repository cloned (what an attempt that died before
    the run began left is removed first), or an empty directory when none was submitted."""
    shutil.rmtree(project, ignore_errors=True)
    if url is None:
        project.mkdir(mode=0o700)
        return
    gitremote.clone(url, ref, project)


@dataclass(frozen=True)
class Child:
    proc: subprocess.Popen[bytes]
    pulse: int
    """The write end of its pulse pipe."""


def _spawn(drive: Drive, *, resume: bool) -> Child:
    argv = ["resume", drive.run_id, "--queued"] if resume else ["run", "--queued", drive.run_id]
    read, write = os.pipe()
    output = os.open(drive.run_dir / OUTPUT_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            python_module("teamrt", *argv), cwd=drive.project, stdin=subprocess.DEVNULL,
            stdout=output, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(read,),
            env={**os.environ, PULSE_FD_ENV: str(read), "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
        os.close(output)
    os.set_blocking(write, False)
    return Child(child, write)


async def _supervise(drive: Drive, child: Child, host: str) -> Verdict:
    """Pulse ``child`` and push its branch until it exits; then push once more and settle the attempt."""
    try:
        try:
            await _pulse_until_exit(drive, child)
        except asyncio.CancelledError:
            await _stop(drive, child)
            raise
        finally:
            try:
                await _push(drive)
            except Exception as e:  # said; the next attempt (or none) pushes what it has
                log.warning("run %s: %s", drive.run_id, e)
            pid = child.proc.pid
            refused = (
                _last_line(drive.run_dir / OUTPUT_LOG) if child.proc.returncode == REFUSED_EXIT else None
            )
            verdict = await asyncio.to_thread(
                attempts.settle, drive.url, drive.run_id, drive.attempt, host, pid, refused
            )
            if verdict is Verdict.CRASHED:
                await _kill_leftovers(drive)
    finally:
        os.close(child.pulse)
    return verdict


async def _pulse_until_exit(drive: Drive, child: Child) -> None:
    since_check = BRANCH_CHECK_S
    while child.proc.poll() is None:
        _beat(child.pulse)
        if since_check >= BRANCH_CHECK_S:
            since_check = 0.0
            await _watch(drive)
        await asyncio.sleep(PULSE_S)
        since_check += PULSE_S


def _beat(pulse: int) -> None:
    try:
        os.write(pulse, b".")
    except (BlockingIOError, BrokenPipeError):
        pass  # a full pipe is a pulse already waiting; a closed one, a child gone


async def _watch(drive: Drive) -> None:
    """Push the integration branch to the submitted URL if its tip moved since the last push; deliver a
    stop that was asked while the run had no owner to read it (``attempts.Seen.stop_missed``)."""
    try:
        if drive.branch is None or not drive.stop_delivered:
            seen = await asyncio.to_thread(attempts.watch, drive.url, drive.run_id)
            drive.branch = seen.branch
            if seen.stop_missed and not drive.stop_delivered:
                await asyncio.to_thread(_ask_stop, drive)
                drive.stop_delivered = True
        await _push(drive)
    except Exception as e:  # a failed push or stop is said and tried again at the next look
        log.warning("run %s: %s", drive.run_id, e)


async def _push(drive: Drive) -> None:
    if drive.repo_url is None or drive.branch is None:
        return
    tip = gitremote.branch_tip(drive.project / ".git", drive.branch)
    if tip is None or tip == drive.pushed:
        return
    await asyncio.to_thread(gitremote.push, drive.project / ".git", drive.repo_url, drive.branch, tip)
    drive.pushed = tip


def _ask_stop(drive: Drive) -> None:
    from teamrt.runs import steer

    steer.stop(drive.run_dir, drive.run_id, None)


async def _stop(drive: Drive, child: Child) -> None:
    """The job was aborted: ask the run to stop (as ``teamrt stop``), wait, then kill what is left."""
    try:
        await asyncio.to_thread(_ask_stop, drive)
    except Exception as e:  # a run not yet live cannot be asked; it is killed below
        log.warning("run %s: could not ask it to stop: %s", drive.run_id, e)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STOP_GRACE_S
    while child.proc.poll() is None and loop.time() < deadline:
        _beat(child.pulse)
        await asyncio.sleep(min(PULSE_S, 0.2))
    if child.proc.poll() is None:
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await asyncio.to_thread(child.proc.wait)


async def _kill_leftovers(drive: Drive) -> None:
    """Kill the tool processes a crashed child left on this machine (their groups, as resume does)."""
    from teamrt.runtime.restore import kill_leftovers
    from teamrt.store import open_reader

    def running() -> list[object]:
        reader = open_reader(drive.run_dir, drive.run_id)
        try:
            return list(reader.tool_calls(statuses=("running",)))
        finally:
            reader.close()

    try:
        await kill_leftovers(await asyncio.to_thread(running))  # type: ignore[arg-type]
    except Exception as e:  # no row yet, or the database out of reach: the resume tries again
        log.warning("run %s: leftovers not checked: %s", drive.run_id, e)


async def _follow(url: str, run_id: str, attempt: int, *, take_over: bool) -> bool:
    """Wait while another owner (or another delivery) drives the attempt: False once it is over; with
    ``take_over``, True as soon as the run's lease is stale (this worker goes on with it)."""
    while True:
        over, fresh = await asyncio.to_thread(attempts.look, url, run_id, attempt)
        if over:
            return False
        if take_over and not fresh:
            return True
        await asyncio.sleep(FOLLOW_POLL_S)
