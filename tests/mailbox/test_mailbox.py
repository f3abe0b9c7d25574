"""The sending side: addressing, modes, the durable delivery order, resends, spills."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

import teamrt.mailbox.maildir as maildir_module
from teamrt.mailbox import (
    DuplicateId,
    InvalidName,
    Mailbox,
    Message,
    MessageTooLarge,
    UnknownRecipient,
    UnsafePath,
)
from teamrt.mailbox.message import MAX_MESSAGE_BYTES

HOSTILE_NAMES = ["../x", "a/b", ".hidden", "x:2", "", "a" * 300, "/etc", "A", "-rf", "x\n"]


def files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def test_layout_and_modes_are_set_explicitly(root: Path) -> None:
    old = os.umask(0)  # a permissive umask must not open anything up
    try:
        with Mailbox(root, "run1") as mb:
            mb.register("alice")
            msg = mb.post(sender="lead", recipient="alice", body="hi")
    finally:
        os.umask(old)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for sub in ("", "tmp", "new", "cur", "bad"):
        assert stat.S_IMODE((root / "alice" / sub).stat().st_mode) == 0o700
    delivered = root / "alice" / "new" / f"{msg.id}.json"
    assert stat.S_IMODE(delivered.stat().st_mode) == 0o600
    assert Message.decode(delivered.read_bytes()) == msg
    assert files(root / "alice" / "tmp") == []


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_are_refused_and_nothing_is_created(mailbox: Mailbox, root: Path, name: str) -> None:
    before = sorted(str(p) for p in root.parent.rglob("*"))
    with pytest.raises(InvalidName):
        mailbox.register(name)
    with pytest.raises((InvalidName, ValueError)):
        mailbox.post(sender="lead", recipient=name, body="x")
    with pytest.raises((InvalidName, ValueError)):
        mailbox.post(sender=name, recipient="alice", body="x")
    assert sorted(str(p) for p in root.parent.rglob("*")) == before


def test_unknown_recipient_is_an_error_to_the_sender(mailbox: Mailbox) -> None:
    with pytest.raises(UnknownRecipient) as info:
        mailbox.post(sender="lead", recipient="carol", body="anyone there?")
    assert (info.value.run, info.value.name) == ("run1", "carol")
    assert "carol" in str(info.value)


def test_agent_directory_that_is_a_symlink_is_refused(mailbox: Mailbox, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    for sub in ("tmp", "new", "cur", "bad"):
        (outside / sub).mkdir(parents=True)
    (root / "mallory").symlink_to(outside)
    with pytest.raises(UnsafePath):
        mailbox.post(sender="lead", recipient="mallory", body="secret")
    with pytest.raises(UnsafePath):
        mailbox.register("mallory")
    assert all(files(outside / sub) == [] for sub in ("tmp", "new", "cur", "bad"))
    assert "mallory" not in mailbox.members()
    # an internal symlink (to another agent) is refused the same way
    (root / "alias").symlink_to(root / "alice")
    with pytest.raises(UnsafePath):
        mailbox.post(sender="lead", recipient="alias", body="x")


def test_broadcast_reaches_every_member_but_the_sender(mailbox: Mailbox, root: Path) -> None:
    mailbox.register("carol")
    sent = mailbox.broadcast(sender="lead", body="standup", kind="control")
    assert sorted(m.recipient for m in sent) == ["alice", "bob", "carol"]
    assert len({m.id for m in sent}) == 3
    for msg in sent:
        assert files(root / msg.recipient / "new") == [f"{msg.id}.json"]
    assert files(root / "lead" / "new") == []


def test_resend_after_a_crash_is_harmless_and_a_reused_id_is_refused(mailbox: Mailbox, root: Path) -> None:
    msg = Message.compose(run="run1", sender="lead", recipient="alice", body="once")
    mailbox.deliver(msg)
    mailbox.deliver(msg)  # the sender does not know whether the first one landed
    assert files(root / "alice" / "new") == [f"{msg.id}.json"]
    assert mailbox.locate("alice", msg.id) == "new"
    impostor = Message.decode(msg.encode().replace(b'"once"', b'"twice"'))
    with pytest.raises(DuplicateId):
        mailbox.deliver(impostor)
    assert files(root / "alice" / "tmp") == []


def test_a_resend_of_a_message_already_acknowledged_is_not_delivered_again(
    mailbox: Mailbox, root: Path
) -> None:
    """A sender back from a crash resends what the recipient has read and acknowledged: it stays read."""
    msg = Message.compose(run="run1", sender="lead", recipient="alice", body="once")
    mailbox.deliver(msg)
    with mailbox.open_maildir("alice") as maildir:
        maildir.ack(f"{msg.id}.json", msg.id)
    mailbox.deliver(msg)
    assert files(root / "alice" / "new") == [] and files(root / "alice" / "cur") == [f"{msg.id}.json"]
    assert mailbox.locate("alice", msg.id) == "cur"


def test_delivery_order_write_fsync_link_unlink_dirfsync(
    mailbox: Mailbox, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL cannot show a missing fsync, so pin the file-system calls of one delivery."""
    calls: list[tuple[Any, ...]] = []
    real = os

    def where(fd: int) -> str:
        return real.readlink(f"/proc/self/fd/{fd}")

    class RecordingOS:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def open(self, path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
            fd = real.open(path, flags, mode, dir_fd=dir_fd)
            if flags & real.O_CREAT:
                calls.append(("create", where(fd), flags, mode))
            return fd

        def write(self, fd: int, data: bytes) -> int:
            calls.append(("write", where(fd)))
            return real.write(fd, data)

        def fsync(self, fd: int) -> None:
            calls.append(("fsync", where(fd)))
            real.fsync(fd)

        def link(self, src: str, dst: str, **kw: Any) -> None:
            calls.append(("link", where(kw["src_dir_fd"]) + "/" + src, where(kw["dst_dir_fd"]) + "/" + dst))
            real.link(src, dst, **kw)

        def unlink(self, path: str, *, dir_fd: int) -> None:
            calls.append(("unlink", where(dir_fd) + "/" + path))
            real.unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(maildir_module, "os", RecordingOS())
    msg = mailbox.post(sender="lead", recipient="alice", body="durable")
    monkeypatch.undo()

    box = str(root.resolve() / "alice")
    final = f"{box}/new/{msg.id}.json"
    create, write, fsync_file, link, unlink, fsync_dir = calls  # exactly six, nothing else
    tmp = create[1]
    assert create[0] == "create" and tmp.startswith(f"{box}/tmp/")
    assert create[2] & (os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW) == os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    assert create[3] == 0o600
    assert write == ("write", tmp)
    assert fsync_file == ("fsync", tmp)
    assert link == ("link", tmp, final)
    assert unlink == ("unlink", tmp)
    assert fsync_dir == ("fsync", f"{box}/new")


def test_a_symlink_planted_at_the_tmp_name_is_never_written_through(
    mailbox: Mailbox, root: Path, tmp_path: Path
) -> None:
    target = tmp_path / "victim"
    target.write_text("untouched")
    msg = Message.compose(run="run1", sender="lead", recipient="alice", body="payload")
    planted = root / "alice" / "tmp" / f"{msg.id}.{os.getpid()}.0.tmp"
    planted.symlink_to(target)
    mailbox.deliver(msg)
    assert target.read_text() == "untouched"
    assert files(root / "alice" / "new") == [f"{msg.id}.json"]
    with mailbox.open_maildir("alice") as md:
        assert md.clean_tmp(grace=3600) == 0  # a symlink is quarantined at once, whatever its age
        notes = list(md.quarantined())
    assert files(root / "alice" / "tmp") == []
    assert [n["reason"] for n in notes] == ["a symbolic link in tmp/"]
    assert target.read_text() == "untouched"


def test_stale_tmp_files_are_removed_after_the_grace_period(mailbox: Mailbox, root: Path) -> None:
    tmp = root / "alice" / "tmp"
    (tmp / "orphan-old").write_bytes(b'{"partial')
    (tmp / "orphan-new").write_bytes(b'{"partial')
    old = time.time() - 3600
    os.utime(tmp / "orphan-old", (old, old))
    with mailbox.open_maildir("alice") as md:
        assert md.clean_tmp(grace=600) == 1
    assert files(tmp) == ["orphan-new"]


def test_large_bodies_spill_to_a_file_and_read_back_whole(root: Path, tmp_path: Path) -> None:
    body = "x" * (MAX_MESSAGE_BYTES + 10)
    with Mailbox(root, "run1") as plain:
        plain.register("alice")
        with pytest.raises(MessageTooLarge):
            plain.post(sender="lead", recipient="alice", body=body)
        assert files(root / "alice" / "new") == []
    with Mailbox(root, "run1", spill_dir=tmp_path / "spill") as mb:
        msg = mb.post(sender="lead", recipient="alice", body=body)
        assert len(msg.body) < 2100 and msg.data["spill"]["bytes"] == len(body)
        assert mb.full_body(msg) == body
        (tmp_path / "spill" / msg.data["spill"]["file"]).write_text("tampered")
        with pytest.raises(ValueError, match="checksum"):
            mb.full_body(msg)


def test_an_unreadable_reason_note_is_reported_not_raised(mailbox: Mailbox, root: Path) -> None:
    note = root / "alice" / "bad" / "01ARZ3NDEKTSV4RRFFQ69G5FAV.reason.json"
    note.write_text("{not json")
    os.chmod(note, 0o644)
    with mailbox.open_maildir("alice") as md:
        (found,) = md.quarantined()
    assert found["reason"].startswith("unreadable reason note")
    assert found["file"] == "01ARZ3NDEKTSV4RRFFQ69G5FAV"
