"""A run's mailbox: one Maildir per agent under a root directory.

``Mailbox`` is the sending side and the registry: an agent is a member of
the run exactly when its maildir exists, so an unknown recipient is found
out at delivery and raised to the sender, never dropped.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from teamrt import faults
from teamrt.mailbox.errors import InvalidMessage, MailboxError, MessageTooLarge, UnknownRecipient, UnsafePath
from teamrt.mailbox.ids import is_id
from teamrt.mailbox.maildir import DIR_MODE, Maildir, make_maildir, open_dir, write_durably
from teamrt.mailbox.message import MAX_MESSAGE_BYTES, Message, preview
from teamrt.mailbox.names import check_name, is_name

SPILL_PREVIEW_CHARS = 2000
DELIVERY_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.EIO})
"""What the host's filesystem or process limits can refuse a delivery with: said to the sender, never
raised past it as a crash."""
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})
"""Of those, the ones that stay until a person acts (frees space, fixes the disk): the run stops."""


class MailNotDelivered(MailboxError):
    """A message the filesystem refused (``DELIVERY_ERRNOS``); nothing of it is in the recipient's
    ``new/``. ``delivered`` lists the messages a broadcast delivered before this one failed."""

    def __init__(
        self, msg: Message, error: OSError, where: Path, delivered: list[Message] | None = None
    ) -> None:
        self.msg = msg
        self.recipient = msg.recipient
        self.errno = error.errno or errno.EIO
        self.cause = os.strerror(self.errno).lower()
        self.where = where
        """The directory the write was refused in (the mailbox's root, or its spill directory)."""
        self.delivered = list(delivered or [])
        super().__init__(f"not delivered: {self.cause} (mailbox of {msg.recipient})")

    @property
    def lasting(self) -> bool:
        """Whether the cause stays until a person acts (a full disk, no inodes left, a failing disk)."""
        return self.errno in FULL_ERRNOS


class Mailbox:
    """The mailboxes of one run, rooted at ``root`` (``runs/<run>/mailbox``)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        run: str,
        *,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.run = check_name(run, "run")
        root = Path(root)
        root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        self.root = root.resolve()
        self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        os.fchmod(self._root_fd, DIR_MODE)
        self.spill_dir = Path(spill_dir).resolve() if spill_dir is not None else None
        self._open: dict[str, Maildir] = {}  # recipients' maildirs, kept open for sending

    def close(self) -> None:
        for maildir in self._open.values():
            maildir.close()
        self._open.clear()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def __enter__(self) -> Mailbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- membership ------------------------------------------------------

    def register(self, agent: str) -> None:
        """Create ``agent``'s maildir (idempotent; repairs its modes)."""
        make_maildir(self._root_fd, self._checked(agent), self._shown(agent))

    def members(self) -> list[str]:
        """Agents with a maildir, sorted. Entries that are not real directories are skipped."""
        names = []
        for entry in os.scandir(self._root_fd):
            if is_name(entry.name) and entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
        return sorted(names)

    def open_maildir(self, agent: str) -> Maildir:
        """Open ``agent``'s maildir; :class:`UnknownRecipient` if there is none."""
        try:
            return Maildir(self._root_fd, self._checked(agent), self._shown(agent))
        except FileNotFoundError:
            raise UnknownRecipient(self.run, agent) from None

    def _checked(self, agent: str) -> str:
        check_name(agent)
        resolved = Path(os.path.realpath(self.root / agent))
        if resolved.parent != self.root:
            raise UnsafePath(self._shown(agent), f"it resolves to {resolved}, outside {self.root}")
        return agent

    def _shown(self, agent: str) -> str:
        return str(self.root / agent)

    # -- sending ---------------------------------------------------------

    def post(self, *, sender: str, recipient: str, body: str, **fields: Any) -> Message:
        """Compose a message (its id fixed now) and deliver it; returns what was delivered."""
        return self.deliver(
            Message.compose(run=self.run, sender=sender, recipient=recipient, body=body, **fields)
        )

    def deliver(self, msg: Message) -> Message:
        """Durably deliver a composed message. When this returns, the message is on disk.

        Delivering the same message again (a resend after a crash) is harmless.
        A body too large for one file is spilled when the mailbox has a spill
        directory; the message that was delivered is returned. A delivery the
        filesystem refuses (``DELIVERY_ERRNOS``) raises ``MailNotDelivered``, with
        nothing of it in ``new/``. Fault point ``mail.deliver`` (detail
        ``<recipient>/<id>``) comes before anything is written.
        """
        if msg.run != self.run:
            raise InvalidMessage(f"message is for run {msg.run!r}, not {self.run!r}")
        with _refusals(msg, self.root):  # a hook there may refuse it as the disk would
            faults.point("mail.deliver", f"{msg.recipient}/{msg.id}")
        payload = msg.encode()
        if len(payload) > MAX_MESSAGE_BYTES:
            with _refusals(msg, self.spill_dir or self.root):
                msg, payload = self._spill(msg, len(payload))
        with _refusals(msg, self.root):
            self._maildir_of(msg.recipient).deliver(msg.id, payload)
        return msg

    def _maildir_of(self, recipient: str) -> Maildir:
        maildir = self._open.get(recipient)
        if maildir is None or not maildir.alive():
            if maildir is not None:
                maildir.close()
            maildir = self._open[recipient] = self.open_maildir(recipient)
        return maildir

    def broadcast(self, *, sender: str, body: str, **fields: Any) -> list[Message]:
        """Deliver one copy (each with its own id) to every member but the sender."""
        first: Message | None = None
        delivered = []
        for member in self.members():
            if member == sender:
                continue
            if first is None:
                first = Message.compose(run=self.run, sender=sender, recipient=member, body=body, **fields)
                msg = first
            else:
                msg = first.readdressed(member)
            try:
                delivered.append(self.deliver(msg))
            except MailNotDelivered as e:  # say who has it already, so a resend skips them
                e.delivered = delivered
                raise
        return delivered

    def locate(self, recipient: str, msg_id: str) -> str | None:
        """Where a message is: ``"new"``, ``"cur"`` or None. For a sender back from a crash."""
        return self._maildir_of(recipient).location(msg_id)

    # -- spilling --------------------------------------------------------

    def _spill(self, msg: Message, size: int) -> tuple[Message, bytes]:
        if self.spill_dir is None or "spill" in msg.data:
            raise MessageTooLarge(size, MAX_MESSAGE_BYTES)
        body = msg.body.encode("utf-8")
        name = f"{msg.id}.body"
        _write_durably(self.spill_dir, name, body)
        spill = {"file": name, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        small = dataclasses.replace(
            msg,
            body=preview(msg.body, SPILL_PREVIEW_CHARS),
            data={**msg.data, "spill": spill},
        )
        payload = small.encode()
        if len(payload) > MAX_MESSAGE_BYTES:
            raise MessageTooLarge(len(payload), MAX_MESSAGE_BYTES)
        return small, payload

    def full_body(self, msg: Message) -> str:
        """The whole body of a message, reading its spill file if it has one."""
        spill = msg.data.get("spill")
        if spill is None:
            return msg.body
        if self.spill_dir is None:
            raise InvalidMessage("message refers to a spill file but this mailbox has no spill directory")
        name = spill.get("file") if isinstance(spill, dict) else None
        if not isinstance(name, str) or not name.endswith(".body") or not is_id(name.removesuffix(".body")):
            raise InvalidMessage("bad spill reference")
        fd = os.open(self.spill_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != spill.get("sha256"):
            raise InvalidMessage(f"spill file {name} does not match its checksum")
        return data.decode("utf-8")


@contextmanager
def _refusals(msg: Message, where: Path) -> Iterator[None]:
    """Turn the filesystem's refusal of ``msg`` (``DELIVERY_ERRNOS``) into ``MailNotDelivered``."""
    try:
        yield
    except OSError as e:
        if e.errno not in DELIVERY_ERRNOS:
            raise
        raise MailNotDelivered(msg, e, where) from e


def _write_durably(directory: Path, name: str, data: bytes) -> None:
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    dir_fd = open_dir(str(directory), None, str(directory))
    try:
        write_durably(data, dir_fd, "." + name, dir_fd, name)  # False: spilled before a resend
    finally:
        os.close(dir_fd)
