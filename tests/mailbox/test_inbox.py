"""The receiving side: order, acknowledgement, redelivery, wake-ups, and hostile files in new/."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from teamrt.mailbox import Inbox, Mailbox, MailboxError, Message, open_watcher
from teamrt.mailbox import inbox as inbox_module
from teamrt.mailbox.watcher import Watcher


def receive(mailbox: Mailbox, agent: str, count: int, watcher: Watcher, *, ack: bool = True) -> list[Message]:
    async def go() -> list[Message]:
        got = []
        async with Inbox(mailbox, agent, watcher=watcher) as inbox:
            for _ in range(count):
                msg = await asyncio.wait_for(inbox.next(), 10)
                got.append(msg)
                if ack:
                    inbox.ack(msg)
        return got

    return asyncio.run(go())


def test_mail_arrives_in_order_and_acknowledged_mail_is_not_delivered_again(
    mailbox: Mailbox, root: Path, watcher: Watcher
) -> None:
    sent = [mailbox.post(sender="lead", recipient="alice", body=f"m{i}") for i in range(5)]
    assert receive(mailbox, "alice", 5, watcher) == sent
    assert sorted(p.name for p in (root / "alice" / "cur").iterdir()) == [f"{m.id}.json" for m in sent]
    assert list((root / "alice" / "new").iterdir()) == []

    async def nothing_left() -> Message | None:
        async with Inbox(mailbox, "alice", watcher=watcher) as inbox:
            return inbox.poll()

    assert asyncio.run(nothing_left()) is None


def test_unacknowledged_mail_is_delivered_again_with_the_same_id(mailbox: Mailbox, watcher: Watcher) -> None:
    sent = mailbox.post(sender="lead", recipient="alice", body="are you there?")
    first = receive(mailbox, "alice", 1, watcher, ack=False)  # the consumer "crashed" before ack
    again = receive(mailbox, "alice", 1, watcher)
    assert first == again == [sent]


def test_a_watcher_started_after_mail_waits_receives_all_of_it(mailbox: Mailbox, watcher: Watcher) -> None:
    sent = [mailbox.post(sender="bob", recipient="alice", body=str(i)) for i in range(200)]
    assert [m.id for m in receive(mailbox, "alice", 200, watcher)] == [m.id for m in sent]


def later(seconds: float, fn: Callable[[], object]) -> threading.Timer:
    """``fn`` called on a thread in ``seconds``; join the timer before the mailbox it writes to closes."""
    timer = threading.Timer(seconds, fn)
    timer.start()
    return timer


def wake_times(mailbox: Mailbox, watcher: Watcher, count: int, delay: float = 0.02) -> list[float]:
    """Seconds from each delivery (made ``delay`` s after the inbox starts waiting) to its wake."""

    async def go() -> list[float]:
        waits = []
        async with Inbox(mailbox, "alice", watcher=watcher) as inbox:
            for i in range(count):
                poster = later(delay, partial(mailbox.post, sender="bob", recipient="alice", body=str(i)))
                start = time.perf_counter()
                msg = await asyncio.wait_for(inbox.next(), 60)
                waits.append(time.perf_counter() - start - delay)
                poster.join()
                inbox.ack(msg)
        return waits

    return asyncio.run(go())


@pytest.fixture
def no_rescan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inbox's rescan tick out of the way, so whatever wakes it is the watcher's push.

    How fast a push wakes is a benchmark's figure (benchmarks/mailbox.py), not a test's: a timed
    assertion flakes on a loaded machine."""
    monkeypatch.setattr(inbox_module, "RESCAN_SECONDS", 3600.0)


@pytest.mark.usefixtures("no_rescan")
def test_wake_right_after_an_ack_comes_from_the_watcher(mailbox: Mailbox, watcher: Watcher) -> None:
    """watchdog's Observer on new/ alone holds the event after each ack; each wake here is pushed."""
    assert len(wake_times(mailbox, watcher, 10)) == 10


class DeafWatcher:
    """A watcher whose events are all lost."""

    kind = "deaf"

    def watch(self, path: str, on_change: Callable[[], None], on_overflow: Callable[[], None]) -> object:
        return None

    def unwatch(self, handle: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_rescan_timer_finds_mail_when_every_event_is_lost(mailbox: Mailbox) -> None:
    async def go() -> Message:
        async with Inbox(mailbox, "alice", watcher=DeafWatcher()) as inbox:
            assert inbox.poll() is None
            poster = later(0.05, lambda: mailbox.post(sender="bob", recipient="alice", body="late"))
            got = await asyncio.wait_for(inbox.next(), 5)
            poster.join()  # its post may still be tidying its temporary file after the inbox saw it
            return got

    assert asyncio.run(go()).body == "late"


@pytest.mark.usefixtures("no_rescan")
def test_the_polling_watcher_wakes_the_inbox(mailbox: Mailbox) -> None:
    poller = open_watcher("poll")
    try:
        assert poller.kind == "poll"
        assert len(wake_times(mailbox, poller, 8, delay=0.05)) == 8
    finally:
        poller.close()


def test_watcher_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMRT_WATCHER", "fanotify")
    with pytest.raises(MailboxError, match="TEAMRT_WATCHER must be 'inotify' or 'poll'"):
        open_watcher()


def test_acknowledging_mail_not_in_flight_is_an_error(mailbox: Mailbox, watcher: Watcher) -> None:
    stray = Message.compose(run="run1", sender="bob", recipient="alice", body="never delivered")

    async def go() -> None:
        async with Inbox(mailbox, "alice", watcher=watcher) as inbox:
            inbox.ack(stray)

    with pytest.raises(MailboxError, match="not in flight"):
        asyncio.run(go())


def good_bytes(**fields: object) -> bytes:
    defaults: dict[str, object] = {"run": "run1", "sender": "bob", "recipient": "alice", "body": "ok"}
    defaults.update(fields)
    return Message.compose(**defaults).encode()  # type: ignore[arg-type]


def plant(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.write_bytes(data)
    os.chmod(path, mode)


def test_hostile_files_are_quarantined_with_a_reason_and_nothing_else_is_lost(
    mailbox: Mailbox, root: Path, tmp_path: Path, watcher: Watcher
) -> None:
    new = root / "alice" / "new"
    good = [mailbox.post(sender="bob", recipient="alice", body=f"good {i}") for i in range(3)]
    # A message delivered and acknowledged, whose file is then replayed.
    replayed = mailbox.post(sender="bob", recipient="alice", body="replay me")
    assert receive(mailbox, "alice", 4, watcher) == [*good, replayed]
    good.append(mailbox.post(sender="bob", recipient="alice", body="after the replay"))

    elsewhere = tmp_path / "elsewhere.json"
    plant(elsewhere, good_bytes(body="via a symlink"))
    (new / "00-symlink").symlink_to(elsewhere)
    with open(new / "01-huge", "wb") as f:
        f.truncate(100 * 1024 * 1024)  # 100 MB, sparse
    os.chmod(new / "01-huge", 0o600)
    plant(new / "02-invalid-json", b'{"v": 1, "id": ')
    plant(new / "03-duplicate-keys", good_bytes().replace(b'"v":1', b'"v":1,"v":1'))
    plant(new / "04-nan", good_bytes(data={"x": 1}).replace(b'"x":1', b'"x":NaN'))
    plant(new / "05-deep", b"[" * 10_000 + b"]" * 10_000)
    plant(new / "06-world-writable", good_bytes(body="tampered?"), mode=0o666)
    os.mkfifo(new / "07-fifo", 0o600)
    (new / "08-directory").mkdir(mode=0o700)
    plant(new / "09-misaddressed", good_bytes(recipient="bob"))
    plant(new / "10-other-run", good_bytes(run="run2"))
    acked_copy = (root / "alice" / "cur" / f"{replayed.id}.json").read_bytes()
    plant(new / "11-replayed", acked_copy.replace(b"replay me", b"replayed, altered"))
    plant(new / "12-interrupted-ack", acked_copy)  # as a crash between an ack's link and unlink leaves it
    plant(new / ".hidden-but-fine", good_bytes(body="file names mean nothing"))

    async def drain() -> list[str]:
        bodies = []
        async with Inbox(mailbox, "alice", watcher=watcher) as inbox:
            while (msg := inbox.poll()) is not None:
                bodies.append(msg.body)
                inbox.ack(msg)
            assert inbox.quarantined == 12
        return bodies

    assert sorted(asyncio.run(drain())) == ["after the replay", "file names mean nothing"]

    with mailbox.open_maildir("alice") as md:
        notes = {note["name"]: note for note in md.quarantined()}
    reasons = {name: note["reason"] for name, note in notes.items()}
    assert list(new.iterdir()) == []
    assert reasons["00-symlink"] == "a symbolic link, never followed"
    assert "over the 262144-byte cap" in reasons["01-huge"]
    assert "not JSON" in reasons["02-invalid-json"]
    assert "duplicate key 'v'" in reasons["03-duplicate-keys"]
    assert "NaN is not allowed" in reasons["04-nan"]
    assert "nested deeper" in reasons["05-deep"]
    assert "mode 0666" in reasons["06-world-writable"]
    assert "a FIFO" in reasons["07-fifo"]
    assert "a directory" in reasons["08-directory"]
    assert "addressed to 'bob'" in reasons["09-misaddressed"]
    assert "in run 'run2'" in reasons["10-other-run"]
    assert f"replayed id {replayed.id}" in reasons["11-replayed"]
    assert len(reasons) == 12  # the identical copy was an unfinished ack: finished, not delivered again
    # each quarantined file sits in bad/ beside its reason, untouched
    bad = root / "alice" / "bad"
    assert (bad / notes["02-invalid-json"]["file"]).read_bytes() == b'{"v": 1, "id": '
    assert (bad / notes["00-symlink"]["file"]).is_symlink()
    assert elsewhere.exists()


def test_a_refused_inotify_watch_falls_back_to_polling(
    mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when fs.inotify.max_user_watches is exhausted: that mailbox is polled instead."""
    import watchdog.observers.inotify_c as inotify_c

    def refuse(fd: int, path: bytes, mask: int) -> int:
        ctypes.set_errno(errno.ENOSPC)
        return -1

    monkeypatch.setattr(inotify_c, "inotify_add_watch", refuse)
    watcher = open_watcher("inotify")

    async def go() -> Message:
        async with Inbox(mailbox, "alice", watcher=watcher) as inbox:
            poster = later(0.05, partial(mailbox.post, sender="bob", recipient="alice", body="polled"))
            got = await asyncio.wait_for(inbox.next(), 5)
            poster.join()
            return got

    try:
        assert asyncio.run(go()).body == "polled"
    finally:
        watcher.close()


def test_no_inotify_at_all_means_the_polling_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    import watchdog.observers.inotify_c as inotify_c

    monkeypatch.setattr(inotify_c, "inotify_init", lambda: -1)
    watcher = open_watcher()
    try:
        assert watcher.kind == "poll"
    finally:
        watcher.close()


def test_an_ack_of_mail_acknowledged_elsewhere_is_fine_and_of_vanished_mail_is_an_error(
    mailbox: Mailbox, root: Path, watcher: Watcher
) -> None:
    first = mailbox.post(sender="bob", recipient="alice", body="one")
    second = mailbox.post(sender="bob", recipient="alice", body="two")

    async def go() -> None:
        async with (
            Inbox(mailbox, "alice", watcher=watcher) as a,
            Inbox(mailbox, "alice", watcher=watcher) as b,
        ):
            msg = a.poll()
            assert msg == first and b.poll() == first  # two handles on one maildir both see it
            b.ack(first)
            a.ack(first)  # the file has already moved to cur/: nothing to do
            assert a.poll() == second
            (root / "alice" / "new" / f"{second.id}.json").unlink()
            with pytest.raises(MailboxError, match="vanished"):
                a.ack(second)

    asyncio.run(go())
    assert (root / "alice" / "cur" / f"{first.id}.json").exists()
