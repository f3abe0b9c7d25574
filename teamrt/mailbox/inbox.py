"""An agent's receiving end of the mailbox, for asyncio.

    async with Inbox(mailbox, "alice") as inbox:
        async for msg in inbox:
            record(msg.id)      # wherever the consumer keeps its state
            inbox.ack(msg)      # only then: the file moves to cur/

Mail not acknowledged is delivered again after a restart, under the same id.
The inbox scans ``new/`` when it starts, after every watcher hint, after a
kernel queue overflow and at least every ``RESCAN_SECONDS``; files that are
not well-formed messages for this agent go to ``bad/`` with a reason, and
the inbox carries on, telling its owner (``on_quarantine``: what was set aside,
with what could still be read of it, for the run to name and deliver again).

``waiting`` says whether the consumer is blocked in ``next()`` with nothing to
read (``on_wait`` hears each change): the run's stall watchdog reads it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from teamrt.mailbox.errors import InvalidMessage, MailboxError
from teamrt.mailbox.mailbox import Mailbox
from teamrt.mailbox.maildir import REASON_SUFFIX, BadFile, Maildir
from teamrt.mailbox.message import Message
from teamrt.mailbox.watcher import Watcher, open_watcher

log = logging.getLogger(__name__)

RESCAN_SECONDS = 1.0
TMP_GRACE_SECONDS = 600.0
CLEAN_EVERY_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class SetAside:
    """A file moved from an agent's ``new/`` to ``bad/``: ``name`` as it was in ``new/``, ``bad`` as it is
    in ``bad/``, why, and its bytes when they could be read (None: not a readable regular file)."""

    agent: str
    name: str
    bad: str
    reason: str
    raw: bytes | None


class Inbox:
    """Wait for, read and acknowledge ``agent``'s mail. Use it from one event loop;
    senders may deliver from any thread or process.

    Inboxes of one loop should share a watcher (one inotify descriptor for
    all); without one, an inbox opens its own and closes it with itself.
    """

    def __init__(
        self,
        mailbox: Mailbox,
        agent: str,
        *,
        watcher: Watcher | None = None,
        tmp_grace: float = TMP_GRACE_SECONDS,
        on_quarantine: Callable[[SetAside], None] | None = None,
        on_wait: Callable[[bool], None] | None = None,
    ) -> None:
        """``on_quarantine``: called (on the loop) for each file this inbox sets aside; ``on_wait``: called
        with True when the consumer starts waiting in ``next()`` with nothing to read, False when it stops."""
        self.run = mailbox.run
        self.agent = agent
        self._maildir: Maildir = mailbox.open_maildir(agent)
        self._watch_path = str(mailbox.root / agent / "new")
        self._watcher = watcher
        self._own_watcher: Watcher | None = None
        self._tmp_grace = tmp_grace
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: object = None
        self._timer: asyncio.TimerHandle | None = None
        self._wake = asyncio.Event()
        self._queue: deque[str] = deque()  # names seen by the last scan, not yet read
        self._in_flight: dict[str, str] = {}  # id -> file name, handed out and not acknowledged
        self._stuck: set[str] = set()  # bad files that could not even be moved to bad/
        self._last_clean = float("-inf")
        self.overflows = 0
        self.quarantined = 0
        self._on_quarantine = on_quarantine
        self._on_wait = on_wait
        self.waiting = False
        """The consumer is blocked in ``next()`` and the last scan of ``new/`` found nothing to read."""

    # -- lifecycle -------------------------------------------------------

    def start(self) -> None:
        """Begin watching (call from the event loop; ``next()`` does it for you)."""
        if self._handle is not None:
            return
        self._loop = asyncio.get_running_loop()
        if self._watcher is None:
            self._watcher = self._own_watcher = open_watcher()
        self._handle = self._watcher.watch(self._watch_path, self._wake.set, self._overflowed)
        self._tick()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._handle is not None and self._watcher is not None:
            self._watcher.unwatch(self._handle)
            self._handle = None
        if self._own_watcher is not None:
            self._own_watcher.close()
            self._own_watcher = self._watcher = None
        self._maildir.close()

    async def __aenter__(self) -> Inbox:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- receiving -------------------------------------------------------

    def __aiter__(self) -> Inbox:
        return self

    async def __anext__(self) -> Message:
        return await self.next()

    async def next(self) -> Message:
        """The next unacknowledged message, oldest id first; waits until there is one."""
        self.start()
        try:
            while True:
                msg = self._take()
                if msg is not None:
                    return msg
                self._wake.clear()  # before scanning: a hint during the scan sets it again
                self._scan()
                if not self._queue:
                    self._set_waiting(True)
                    await self._wake.wait()  # a hint, an overflow, or the rescan tick
        finally:
            self._set_waiting(False)

    def poll(self) -> Message | None:
        """The next message if one is waiting now, else None; never blocks."""
        msg = self._take()
        if msg is None:
            self._scan()
            msg = self._take()
        return msg

    def ack(self, msg: Message) -> None:
        """Acknowledge a message the consumer has recorded: it will not be delivered again."""
        try:
            name = self._in_flight.pop(msg.id)
        except KeyError:
            raise MailboxError(f"message {msg.id} is not in flight in {self.agent}'s inbox") from None
        self._maildir.ack(name, msg.id)

    def unread(self) -> list[str]:
        """The names in ``new/`` not handed out yet (files that could not be moved to ``bad/`` left out)."""
        taken = set(self._in_flight.values()) | self._stuck
        return [name for name in self._maildir.waiting() if name not in taken]

    def set_aside(self) -> list[dict[str, Any]]:
        """The reason notes of the files in ``bad/`` that came from ``new/`` (a resumed run's look at what
        an earlier one set aside), oldest first."""
        return [note for note in self._maildir.quarantined() if note.get("from") == "new"]

    def read_set_aside(self, bad: str) -> bytes | None:
        """The bytes of ``bad/<bad>`` if it is a readable regular file, else None."""
        if bad.endswith(REASON_SUFFIX):
            return None
        try:
            return self._maildir.read(bad, "bad")
        except (BadFile, OSError):
            return None

    # -- internals -------------------------------------------------------

    def _set_waiting(self, waiting: bool) -> None:
        if waiting == self.waiting:
            return
        self.waiting = waiting
        if self._on_wait is not None:
            self._on_wait(waiting)

    def _scan(self) -> None:
        taken = set(self._in_flight.values()) | self._stuck
        self._queue = deque(name for name in self._maildir.waiting() if name not in taken)

    def _take(self) -> Message | None:
        while self._queue:
            name = self._queue.popleft()
            raw: bytes | None = None
            try:
                raw = self._maildir.read(name)
                msg = self._read(name, raw)
            except FileNotFoundError:
                continue  # acknowledged through another handle, or cleaned away
            except (BadFile, InvalidMessage) as e:
                self._quarantine(name, e.reason, raw)
                continue
            if msg is None:
                continue
            self._in_flight[msg.id] = name
            return msg
        return None

    def _read(self, name: str, raw: bytes) -> Message | None:
        """The message ``raw`` read from ``new/name``; None if it turns out to be acknowledged already."""
        msg = Message.decode(raw)
        if msg.run != self.run or msg.recipient != self.agent:
            raise BadFile(
                f"addressed to {msg.recipient!r} in run {msg.run!r}, found in {self.agent!r} of {self.run!r}"
            )
        if msg.id in self._in_flight:
            raise BadFile(f"replayed id {msg.id}: a message with that id is in flight")
        if self._maildir.acknowledged(msg.id):
            if self._maildir.holds_acknowledged(msg.id, raw):
                self._maildir.ack(name, msg.id)  # an ack cut short by a crash: finish it
                return None
            raise BadFile(f"replayed id {msg.id}: a message with that id was acknowledged already")
        return msg

    def _quarantine(self, name: str, reason: str, raw: bytes | None) -> None:
        try:
            bad = self._maildir.quarantine(name, reason)
        except FileNotFoundError:
            return
        except OSError as e:
            log.error("cannot move %r out of %s's new/ (%s); skipping it", name, self.agent, e)
            self._stuck.add(name)
            return
        self.quarantined += 1
        log.warning("quarantined %r in %s's mailbox: %s", name, self.agent, reason)
        if self._on_quarantine is not None:
            self._on_quarantine(SetAside(self.agent, name, bad, reason, raw))

    def _tick(self) -> None:
        """Every RESCAN_SECONDS: wake for a scan (events are only hints), clean tmp/ now and then."""
        assert self._loop is not None
        self._timer = self._loop.call_later(RESCAN_SECONDS, self._tick)
        self._wake.set()
        if time.monotonic() - self._last_clean >= CLEAN_EVERY_SECONDS:
            try:
                self.clean_now()
            except OSError as e:  # tmp/ unreadable: delivery still works, say so and go on
                log.error("cannot clean %s's tmp/: %s", self.agent, e)

    def clean_now(self) -> int:
        """Remove stale files from ``tmp/`` now; returns how many."""
        self._last_clean = time.monotonic()
        return self._maildir.clean_tmp(self._tmp_grace)

    def _overflowed(self) -> None:
        self.overflows += 1
        self._wake.set()
