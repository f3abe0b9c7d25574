"""One agent's Maildir: durable delivery into it, reading, acknowledging, quarantine.

Layout ``<agent>/{tmp,new,cur,bad}``, directories 0700, files 0600. Every
path is opened relative to a directory file descriptor with ``O_NOFOLLOW``,
so a planted symlink is refused rather than followed.

Delivery (the order is the durability argument, and a test pins it):
create ``tmp/<tmp-name>`` with O_CREAT|O_EXCL|O_NOFOLLOW, write, fsync, close,
link it as ``new/<id>.json`` (a link never replaces an existing name; Python
has no renameat2), unlink the tmp name, fsync ``new/``. A sender killed
before the link leaves only an orphan in ``tmp/``, which receivers remove
after a grace period; a sender killed after it leaves a complete message.

Acknowledging links ``new/<name>`` as ``cur/<id>.json`` and unlinks it. It is
not fsynced: an acknowledgement lost in a crash only means the message is
delivered again, and its id lets the consumer see that it has it already.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from teamrt import faults
from teamrt.errors import TeamrtError
from teamrt.mailbox.errors import DuplicateId, MailboxError, UnsafePath
from teamrt.mailbox.ids import new_id
from teamrt.mailbox.message import MAX_MESSAGE_BYTES

SUBDIRS = ("tmp", "new", "cur", "bad")
DIR_MODE = 0o700
FILE_MODE = 0o600
REASON_SUFFIX = ".reason.json"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted in new/ must not hang the reader.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_ATTEMPTS = 5


class BadFile(TeamrtError):
    """A file in a maildir that is not a well-formed message; it goes to ``bad/``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def open_dir(name: str, dir_fd: int | None, shown: str) -> int:
    """Open directory ``name`` under ``dir_fd`` without following a symlink."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(shown, "it is a symbolic link") from None
        if e.errno == errno.ENOTDIR:
            raise UnsafePath(shown, "it is not a directory") from None
        raise


def make_maildir(root_fd: int, name: str, shown: str) -> None:
    """Create (or repair the modes of) ``name/{tmp,new,cur,bad}`` under ``root_fd``."""
    _mkdir(name, root_fd)
    fd = open_dir(name, root_fd, shown)
    try:
        _check_owner(fd, shown)
        os.fchmod(fd, DIR_MODE)
        for sub in SUBDIRS:
            _mkdir(sub, fd)
            sub_fd = open_dir(sub, fd, f"{shown}/{sub}")
            try:
                _check_owner(sub_fd, f"{shown}/{sub}")
                os.fchmod(sub_fd, DIR_MODE)
            finally:
                os.close(sub_fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.fsync(root_fd)


def write_durably(payload: bytes, tmp_fd: int, stem: str, dst_fd: int, dst_name: str) -> bool:
    """Write a file all or nothing; False, with nothing written, if ``dst_name`` exists.

    tmp file (O_EXCL, O_NOFOLLOW) -> write -> fsync -> link -> unlink tmp -> fsync directory.
    """
    for attempt in range(_TMP_ATTEMPTS):
        tmp = f"{stem}.{os.getpid()}.{attempt}.tmp"
        try:
            fd = os.open(tmp, _CREATE_FLAGS, FILE_MODE, dir_fd=tmp_fd)
            break
        except FileExistsError:
            continue  # a leftover, or something planted there: never write through it
    else:
        raise MailboxError(f"could not create a temporary file for {stem}")
    try:
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        faults.point("mail.written", stem)
        try:
            os.link(tmp, dst_name, src_dir_fd=tmp_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
        except FileExistsError:
            return False
    finally:
        try:
            os.unlink(tmp, dir_fd=tmp_fd)
        except FileNotFoundError:
            pass  # a receiver's tmp clean-up got there first
    os.fsync(dst_fd)
    return True


def _mkdir(name: str, dir_fd: int) -> None:
    try:
        os.mkdir(name, DIR_MODE, dir_fd=dir_fd)
    except FileExistsError:
        pass


def _check_owner(fd: int, shown: str) -> None:
    owner = os.fstat(fd).st_uid
    if owner != os.geteuid():
        raise UnsafePath(shown, f"it belongs to uid {owner}, not to this user")


class Maildir:
    """Open directory descriptors on one agent's maildir; close it when done."""

    def __init__(self, root_fd: int, name: str, shown: str) -> None:
        self.name = name
        self.shown = shown
        self._fds: dict[str, int] = {}
        agent_fd = open_dir(name, root_fd, shown)
        try:
            for sub in SUBDIRS:
                self._fds[sub] = open_dir(sub, agent_fd, f"{shown}/{sub}")
        except BaseException:
            self.close()
            raise
        finally:
            os.close(agent_fd)

    def alive(self) -> bool:
        """False once the maildir has been removed from under these descriptors."""
        return os.fstat(self._fds["new"]).st_nlink > 0

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> Maildir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending ---------------------------------------------------------

    def deliver(self, msg_id: str, payload: bytes) -> bool:
        """Durably put ``payload`` into ``new/``; False if this exact message was there already."""
        final = f"{msg_id}.json"
        if self._exists("cur", final) and self._holds("cur", final, payload, msg_id):
            return False  # a resend of a message delivered and acknowledged before
        if write_durably(payload, self._fds["tmp"], msg_id, self._fds["new"], final):
            faults.point("mail.delivered", msg_id)
            return True
        # The id is taken: a resend after a crash is fine, another message is not.
        if self._holds("new", final, payload, msg_id) or self._holds("cur", final, payload, msg_id):
            return False
        raise DuplicateId(msg_id, self.name)

    def _holds(self, sub: str, name: str, payload: bytes, msg_id: str) -> bool:
        """True if ``sub/name`` holds exactly ``payload``; DuplicateId if it holds other bytes."""
        try:
            existing = self.read(name, sub)
        except FileNotFoundError:
            return False
        except BadFile:
            raise DuplicateId(msg_id, self.name) from None
        if existing != payload:
            raise DuplicateId(msg_id, self.name)
        return True

    def location(self, msg_id: str) -> str | None:
        """``"new"`` (waiting), ``"cur"`` (acknowledged) or None for a message id."""
        for sub in ("new", "cur"):
            if self._exists(sub, f"{msg_id}.json"):
                return sub
        return None

    def _exists(self, sub: str, name: str) -> bool:
        return os.access(name, os.F_OK, dir_fd=self._fds[sub], follow_symlinks=False)

    # -- receiving -------------------------------------------------------

    def waiting(self) -> list[str]:
        """Names in ``new/``, oldest id first (names are ordered, never interpreted)."""
        return sorted(os.listdir(self._fds["new"]))

    def read(self, name: str, sub: str = "new") -> bytes:
        """The bytes of ``sub/name``; :class:`BadFile` if it is not a safe, regular, small file."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self._fds[sub])
        except OSError as e:
            if e.errno == errno.ENOENT:
                raise
            if e.errno == errno.ELOOP:
                raise BadFile("a symbolic link, never followed") from None
            raise BadFile(f"cannot be opened: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadFile(f"not a regular file ({_kind_of(st.st_mode)})")
            if st.st_uid != os.geteuid():
                raise BadFile(f"owned by uid {st.st_uid}, not by this user")
            if st.st_mode & 0o077:
                raise BadFile(f"mode {stat.S_IMODE(st.st_mode):04o} opens it to other users (want 0600)")
            if st.st_size > MAX_MESSAGE_BYTES:
                raise BadFile(f"{st.st_size} bytes, over the {MAX_MESSAGE_BYTES}-byte cap")
            data = _read_all(fd, st.st_size)
            if len(data) != st.st_size:
                raise BadFile(f"changed size while being read ({st.st_size} -> {len(data)} bytes)")
            return data
        finally:
            os.close(fd)

    def acknowledged(self, msg_id: str) -> bool:
        return self._exists("cur", f"{msg_id}.json")

    def holds_acknowledged(self, msg_id: str, payload: bytes) -> bool:
        """True if ``cur/`` holds exactly ``payload`` under ``msg_id``."""
        try:
            return self.read(f"{msg_id}.json", "cur") == payload
        except (FileNotFoundError, BadFile):
            return False

    def ack(self, name: str, msg_id: str) -> None:
        """Move ``new/name`` to ``cur/<id>.json`` (done already is fine)."""
        new_fd = self._fds["new"]
        try:
            os.link(
                name, f"{msg_id}.json", src_dir_fd=new_fd, dst_dir_fd=self._fds["cur"], follow_symlinks=False
            )
        except FileExistsError:
            pass  # acknowledged before, then delivered again: the copy in cur/ stands
        except FileNotFoundError:
            if self.acknowledged(msg_id):
                return  # acknowledged through another handle
            raise MailboxError(f"message {msg_id} vanished from {self.shown}/new before its ack") from None
        try:
            os.unlink(name, dir_fd=new_fd)
        except FileNotFoundError:
            pass

    def quarantine(self, name: str, reason: str, sub: str = "new") -> str:
        """Move ``sub/name`` into ``bad/`` beside a reason note; returns its name in ``bad/``.

        The note is written (durably) first: a crash in between leaves a note
        whose file is still in ``sub/``, to be quarantined again, never a file
        without its reason.
        """
        bad_fd = self._fds["bad"]
        bad_name = new_id()
        note = {"reason": reason, "name": name, "from": sub, "at": time.time()}
        write_durably(json.dumps(note).encode(), bad_fd, bad_name, bad_fd, bad_name + REASON_SUFFIX)
        os.rename(name, bad_name, src_dir_fd=self._fds[sub], dst_dir_fd=bad_fd)
        return bad_name

    def quarantined(self) -> Iterator[dict[str, Any]]:
        """The reason notes in ``bad/``, oldest first; an unreadable note is reported as such."""
        for entry in sorted(os.listdir(self._fds["bad"])):
            if not entry.endswith(REASON_SUFFIX):
                continue
            try:
                note = json.loads(self.read(entry, "bad"))
                if not isinstance(note, dict):
                    raise ValueError("not an object")
            except (BadFile, ValueError, FileNotFoundError) as e:
                note = {"reason": f"unreadable reason note: {e}", "name": None, "from": None, "at": None}
            note["file"] = entry.removesuffix(REASON_SUFFIX)
            yield note

    def clean_tmp(self, grace: float) -> int:
        """Remove files in ``tmp/`` older than ``grace`` seconds; quarantine non-files there."""
        tmp_fd, removed, now = self._fds["tmp"], 0, time.time()
        for name in os.listdir(tmp_fd):
            try:
                st = os.stat(name, dir_fd=tmp_fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    self.quarantine(name, f"{_kind_of(st.st_mode)} in tmp/", "tmp")
                elif now - st.st_mtime >= grace:
                    os.unlink(name, dir_fd=tmp_fd)
                    removed += 1
            except FileNotFoundError:
                continue  # its sender finished or another cleaner took it
        return removed


def _kind_of(mode: int) -> str:
    for test, kind in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _read_all(fd: int, size: int) -> bytes:
    """Read a file fstat said has ``size`` bytes, and at most one byte more.

    A short read that completes ``size`` is the end (one read on a local
    disk); other short reads, as some network filesystems give, go on.
    """
    chunks, total = [], 0
    while total <= size:
        chunk = os.read(fd, size + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total == size:
            break
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def peek(root: Path, name: str, subs: Sequence[str] = ("new", "cur")) -> Iterator[dict[str, Any]]:
    """The messages in mailbox ``name`` under ``root`` (waiting in ``new/``, read in ``cur/``), oldest
    name first, without claiming any: for onlookers. Unreadable files are skipped."""
    for sub in subs:
        folder = root / name / sub
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                data = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                yield data
