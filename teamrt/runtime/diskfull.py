"""A full disk under the run's own files stops the run as a full store does, in one line.

The store may live elsewhere (a PostgreSQL server) or still have room (SQLite's
files exist before the inodes run out) while the mailbox, the worktrees and git
meet the full disk. Every agent would hit the same wall again and again, so
teamrt's own failures there (a delivery, a commit, a maildir) are not retried:
the supervisor records what was refused, then stops the store with ``DiskFull``
(a ``StoreWriteFailed``), so nothing after it is kept, no agent is restarted or
marked failed, and the run ends as after a crash: ``teamrt resume`` goes on once
space is freed. An agent's own command meeting the full disk is its tool error.

``DiskHalt`` is the supervisor's part that does so: it records the refused
messages (``mail.failed``, the message kept when an agent sent it), stops the
run's store and then its lead, and on resume delivers the kept messages. It
lives here, beside ``DiskFull``, because every other part (spawning, landing,
the team's mail, restarts) calls it when teamrt's own write meets a full disk.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
from pathlib import Path
from typing import Any, Final

from teamrt.mailbox import Mailbox, MailboxError, Message
from teamrt.mailbox.mailbox import FULL_ERRNOS, MailNotDelivered
from teamrt.runtime.losses import MAIL_FAILED
from teamrt.runtime.lostmail import LostMail
from teamrt.runtime.member import Member, Runner
from teamrt.store import Store, StoreError, StoreWriteFailed, ops
from teamrt.worktree import GitError

log = logging.getLogger(__name__)

HALTING = FULL_ERRNOS
"""What stops the run when teamrt's own files meet it (the mailbox's lasting refusals): it stays until a
person acts."""
KEPT_DELIVERED: Final = "mail.kept_delivered"
"""A message a full disk refused, kept in its ``mail.failed`` event, delivered by a resume."""


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


class DiskHalt:
    """Stops one run for a full disk under its own files, and delivers on resume what it kept."""

    def __init__(
        self, store: Store, members: dict[str, Member], mailbox: Mailbox, lost_mail: LostMail, runner: Runner
    ) -> None:
        self.store = store
        self.members = members
        self.mailbox = mailbox
        self.lost_mail = lost_mail
        self.runner = runner
        self.full: DiskFull | None = None
        """Why the run stops: the disk under its own files is full; set at once, the store stopped right
        after by ``_halting``."""
        self._halting: asyncio.Task[None] | None = None
        self._refused: list[tuple[dict[str, Any], str | None]] = []  # mail.failed events still to record
        self._recorder: asyncio.Task[None] | None = None

    def mail_failed(self, e: MailNotDelivered, *, kept: bool) -> None:
        """Record a message the disk refused (``mail.failed``, with the message itself when ``kept``: a
        resume delivers it); a lasting cause (a full disk) stops the run, as a full store does."""
        msg = e.msg
        what = f"{msg.sender}'s {msg.kind} to {msg.recipient} ({msg.id})"
        then = "; kept, to be delivered when the run is resumed" if kept else ""
        data: dict[str, Any] = {
            "note": f"{what} was not delivered: {e.cause}{then}", "id": msg.id, "from": msg.sender,
            "to": msg.recipient, "kind": msg.kind, "errno": e.errno,
        }  # fmt: skip
        if kept:
            data["message"] = msg.to_dict()
        self._refused.append((data, msg.sender if msg.sender in self.members else None))
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.get_running_loop().create_task(self._record_refused())
        if e.lasting:
            self._stop_for_disk(DiskFull(self.store.run_id, e.where, e.errno, f"{what} was not delivered"))

    def _stop_for_disk(self, full: DiskFull) -> None:
        """Stop the run for a full disk: at once in memory (no agent is restarted or reports), and in the
        store right after the refusals not yet recorded, queued now: nothing written after this (the
        refused sender's tool result, a model turn) is kept, as after a crash there. The sender's call is
        then completed once by the resume, which finds its message delivered from the ``mail.failed``
        event (``deliver_kept``), so the agent never acts on a refusal that the resume undoes."""
        if self.full is None:
            self.full = full
            log.warning("%s", full)
            refused, self._refused = self._refused, []
            run = self.store.run_id

            def record(conn: Any) -> None:
                for data, agent in refused:
                    ops.append_event(conn, run=run, kind=MAIL_FAILED, agent=agent, data=data)

            try:
                stopped: asyncio.Future[None] | None = self.store.stop_after(record, full)
            except StoreError:
                stopped = None  # stopped already, by what came first
            self._halting = asyncio.get_running_loop().create_task(self._halt(stopped))

    async def _record_refused(self) -> None:
        """Record each refused message (``mail.failed``), each committed before the next is written."""
        while self._refused:
            data, agent = self._refused.pop(0)
            try:
                await self.store.append_event(MAIL_FAILED, data, agent=agent)
            except StoreError:
                return  # the store stopped: the journal says the call never finished; a resume redoes it

    async def _halt(self, stopped: asyncio.Future[None] | None) -> None:
        """Once the store has stopped (``stopped``: its last write), end the lead, which ends the run: its
        end raises the failure, in one line."""
        if stopped is not None:
            try:
                await stopped
            except StoreError:
                pass  # stopped before, by what came first
        lead = self.members.get("lead")
        if lead is not None and not lead.done.done():
            self.runner.stop(lead, str(self.full))

    async def deliver_kept(self) -> None:
        """Deliver the agents' messages a full disk refused and the run kept (``mail.failed`` with the
        message), each once: never one its recipient holds already (waiting, read or ingested). A disk
        still full stops the resume in one line, before any agent starts."""
        reader = self.store.reader
        for event in reader.events(kinds=(MAIL_FAILED,)):
            kept = event.data.get("message")
            if not isinstance(kept, dict):
                continue
            try:
                msg = Message.decode(json.dumps(kept).encode())
                if self.mailbox.locate(msg.recipient, msg.id) or msg.id in reader.ingested_ids(msg.recipient):
                    continue
                self.mailbox.deliver(msg)
            except MailNotDelivered as e:
                what = f"the kept message {e.msg.id} to {e.recipient} was not delivered"
                raise DiskFull(self.store.run_id, e.where, e.errno, what) from e
            except MailboxError as e:  # its recipient's mailbox is gone: the event said the loss already
                log.warning("kept message %s not delivered on resume: %s", kept.get("id"), e)
                continue
            self.lost_mail.remember(msg)
            note = f"{msg.sender}'s {msg.kind} to {msg.recipient} ({msg.id}), kept while the disk was full:"
            note += " delivered now"
            await self.store.append_event(KEPT_DELIVERED, {"note": note, "id": msg.id}, agent=msg.sender)

    def disk_full(self, error: BaseException, where: Path, what: str) -> DiskFull | None:
        """The ``DiskFull`` behind ``error`` (teamrt's own write, not an agent's command), else None."""
        code = full_disk_errno(error)
        if code is None:
            return None
        return DiskFull(self.store.run_id, where_of(error, where), code, what)

    async def stopped_by_disk(self, full: DiskFull) -> StoreError:
        """Stop the run for ``full`` (or what stopped it first) and wait until the store has stopped;
        the error to raise."""
        self._stop_for_disk(full)
        if self._halting is not None:
            await asyncio.shield(self._halting)
        return self.store.failure or self.full or full


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
