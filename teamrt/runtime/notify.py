"""Telling the person, from the run's own process, when the run needs them or ends: Claude Code's
``Notification`` hooks and the ``[notify] command`` of their settings file.

The supervisor makes one ``RunNotifier`` per run and runs its ``follow`` beside
the agents. It watches the run's event log for asks that wait for a person, and
the run's budget (in memory) for the share ``[notify] budget_share`` of a limit
spent, which it records as a ``budget.near`` event, once per limit; the
supervisor calls ``ended`` with the run's status. Each such moment is a
``Notice`` (``teamrt.runtime.notices``) handed to:

- the ``Notification`` hooks whose matcher matches its ``notification_type``
  (``permission_prompt``, ``idle_prompt``, ``budget_near``), trust-gated and
  sandboxed like every hook, journaled as ``hook`` events;
- the ``[notify] command``, when its ``events`` name it: the person's own program,
  run as they would run it (unconfined: it is theirs, and only their settings file
  can set it), never through a shell, with the title and the message as its last
  two arguments and the notice as JSON on stdin; killed with all it started at
  ``timeout``. Its output is read and dropped (only its error's first line is
  kept, for the warning): it never reaches the terminal.

Nothing here can stop the run: a hook or a command that fails or hangs is
journaled (the command's first failure as a ``notify.failed`` event, said once
as a warning) and the run goes on. The terminal's bell and OSC notification are
not here: they belong to whoever watches the run in a terminal
(``teamrt.runs.alerts``), which reads the same events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teamrt.claudecode.hooks import HookSet
from teamrt.procs import kill_group
from teamrt.runtime.asking import ANSWERED, ASK
from teamrt.runtime.budget import Budget
from teamrt.runtime.hook_events import notification
from teamrt.runtime.notices import BUDGET_NEAR, NOTIFY_FAILED, Notice, budget_near, notice_of, plain
from teamrt.settings import NotifySettings
from teamrt.store import Store, StoreError
from teamrt.tools.base import ToolContext

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How often the event log (when anything was committed) and the budget are looked at."""
ERROR_BYTES = 4096
"""Of the command's stderr, what is kept for the warning."""
DRAIN_S = 1.0
"""After the command ended, how long to wait for its stderr to close (a process it left may hold it)."""


class RunNotifier:
    """One run's notifications through its hooks and the person's command."""

    def __init__(
        self,
        store: Store,
        *,
        project: Path,
        hooks: HookSet,
        settings: NotifySettings,
        budget: Budget,
        lead_context: Callable[[], ToolContext | None],
    ) -> None:
        """``hooks``: the run's hooks that may run (those of ``Notification`` are used);
        ``lead_context``: the lead's tool context, whose sandbox the hooks run in (None before it exists)."""
        self.store = store
        self.project = project
        self.hooks = hooks
        self.settings = settings
        self.budget = budget
        self.lead_context = lead_context
        self._pending: set[asyncio.Task[None]] = set()
        self._told: set[tuple[str, float]] = set()  # the budget limits already said near: (limit, max)
        self._warned = False
        self._last_event = 0
        self._commits = -1

    @property
    def _hooked(self) -> bool:
        return any(h.event == "Notification" for h in self.hooks.hooks)

    def _wanted(self, notice: Notice) -> bool:
        return self._hooked or bool(self.settings.command and notice.what in self.settings.events)

    async def follow(self) -> None:
        """Watch the run until cancelled: asks that wait for a person, the budget's share spent."""
        seen = self.store.reader.last_events(1)
        self._last_event = seen[-1].id if seen else 0  # a resume does not tell again what was told
        for event in self.store.reader.events(kinds=(BUDGET_NEAR,)):
            self._told.add((str(event.data.get("limit")), float(event.data.get("max") or 0)))
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self._budget()
                self._asks()
            except StoreError:
                return  # a store that stopped taking writes ends the run; nothing more to tell

    async def _budget(self) -> None:
        data = budget_near(self.budget, self.settings.budget_share)
        if data is None or (str(data["limit"]), float(data["max"])) in self._told:
            return
        self._told.add((str(data["limit"]), float(data["max"])))
        await self.store.append_event(BUDGET_NEAR, data)
        notice = notice_of(BUDGET_NEAR, data, None, self.store.run_id)
        if notice is not None:
            self._send(notice)

    def _asks(self) -> None:
        """Tell of each ask recorded since the last look (when the store committed anything)."""
        if not self._hooked and not ("ask" in self.settings.events and self.settings.command):
            return
        if self.store.commits == self._commits:
            return
        self._commits = self.store.commits
        new = self.store.reader.events(self._last_event, kinds=(ASK, ANSWERED))
        answered = {e.data.get("id") for e in new if e.kind == ANSWERED}
        for event in new:
            self._last_event = event.id
            if event.kind == ASK and event.data.get("id") not in answered:  # answered already: no one to call
                notice = notice_of(event.kind, event.data, event.agent, self.store.run_id)
                if notice is not None:
                    self._send(notice)

    def _send(self, notice: Notice) -> None:
        """Tell of ``notice`` without waiting: a slow hook or command holds up nothing."""
        if not self._wanted(notice):
            return
        task = asyncio.create_task(self._tell(notice))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def ended(self, status: str, reason: str | None) -> None:
        """The run ended with ``status``: tell of it, and wait (each within its timeout) for every
        notification still under way, so that none is cut off by the process's end."""
        notice = notice_of("run.status", {"status": status, "reason": reason}, None, self.store.run_id)
        if notice is not None:
            self._send(notice)
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    def close(self) -> None:
        """Stop what is still under way (a run torn down early): the hooks' and the command's processes
        are killed as their tasks are cancelled."""
        for task in self._pending:
            task.cancel()

    async def _tell(self, notice: Notice) -> None:
        jobs = []
        context = self.lead_context()
        if context is not None and self._hooked:
            jobs.append(notification(self.hooks, self.store, context, self._hook_input(notice, context)))
        if self.settings.command and notice.what in self.settings.events:
            jobs.append(self._command(notice))
        for outcome in await asyncio.gather(*jobs, return_exceptions=True):
            # a notification lost is never the run's failure; a store that stopped is the run ending
            if isinstance(outcome, Exception) and not isinstance(outcome, StoreError):
                log.warning("a notification of run %s was lost: %r", self.store.run_id, outcome)

    def _hook_input(self, notice: Notice, context: ToolContext) -> dict[str, Any]:
        """A ``Notification`` hook's input as Claude Code writes it, and what teamrt knows besides (under
        ``teamrt``)."""
        return {
            "session_id": self.store.run_id, "transcript_path": "", "cwd": str(context.workspace),
            "hook_event_name": "Notification", "message": notice.message, "title": notice.title,
            "notification_type": notice.notification_type,
            "teamrt": {"run_id": notice.run_id, "what": notice.what, **notice.facts},
        }  # fmt: skip

    async def _command(self, notice: Notice) -> None:
        payload = {
            "run_id": notice.run_id, "what": notice.what, "title": notice.title, "message": notice.message,
            "notification_type": notice.notification_type, "cwd": str(self.project), **notice.facts,
        }  # fmt: skip
        argv = [*self.settings.command, notice.title, notice.message]
        failure = await run_command(argv, json.dumps(payload).encode(), self.settings.timeout, self.project)
        if failure is None or self._warned:
            return
        self._warned = True
        program = plain(self.settings.command[0], 80)
        note = (
            f"the [notify] command {program} failed: {failure}; the run goes on"
            " (later failures of it are not said again)"
        )
        await self.store.append_event(NOTIFY_FAILED, {"note": note, "command": program})


async def run_command(argv: list[str], data: bytes, timeout: float, cwd: Path) -> str | None:
    """Run ``argv`` (no shell) in ``cwd`` with ``data`` on stdin, in a session of its own, its stdout
    dropped; None when it exits 0 within ``timeout``, else why not, in one line. At the timeout, or when
    cancelled, it is killed with all it started; a program it left running after a clean exit (a sound
    player sent to the background) is left alone."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=dict(os.environ), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
    except OSError as e:
        return f"could not start it: {e.strerror or e}"
    assert proc.stdin is not None and proc.stderr is not None
    error = asyncio.ensure_future(_head(proc.stderr))
    killed = True
    try:
        code = await asyncio.wait_for(_talk(proc, proc.stdin, data), timeout)
        killed = False
    except TimeoutError:
        return f"it did not end within {timeout:g} s and was killed"
    finally:
        if killed:  # timed out or cancelled
            await asyncio.shield(kill_group(proc.pid, grace=0))
            await asyncio.shield(proc.wait())
        await asyncio.wait([error], timeout=DRAIN_S)
        error.cancel()
    if code == 0:
        return None
    said = f"exit code {code}" if code > 0 else f"killed by signal {-code}"
    line = next((x for x in (error.result() if error.done() and not error.cancelled() else "").splitlines()
                 if x.strip()), "")  # fmt: skip
    return f"{said}: {plain(line, 160)}" if line else said


async def _talk(proc: asyncio.subprocess.Process, stdin: asyncio.StreamWriter, data: bytes) -> int:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it need not read its stdin
        stdin.write(data)
        await stdin.drain()
    stdin.close()
    return await proc.wait()


async def _head(stream: asyncio.StreamReader) -> str:
    """The first ``ERROR_BYTES`` of ``stream``; the rest read and dropped."""
    kept = bytearray()
    while chunk := await stream.read(65_536):
        kept += chunk[: max(0, ERROR_BYTES - len(kept))]
    return kept.decode("utf-8", errors="replace")
