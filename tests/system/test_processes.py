"""Real processes: many senders, senders and receivers SIGKILLed, a watcher frozen past overflow."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from teamrt.mailbox import Inbox, Mailbox, Message, open_watcher
from tests.helpers.mail import RUN, mailproc


def collect(proc: subprocess.Popen[str], word: str) -> list[str]:
    """Ids on the complete ``word <id>`` lines a finished process printed."""
    out, _ = proc.communicate(timeout=120)
    lines = out.splitlines(keepends=True)
    return [line.split()[1] for line in lines if line.startswith(f"{word} ") and line.endswith("\n")]


def drain_in_process(mailbox: Mailbox, agent: str) -> list[Message]:
    async def go() -> list[Message]:
        watcher = open_watcher()
        got = []
        try:
            async with Inbox(mailbox, agent, watcher=watcher, tmp_grace=0) as inbox:
                while (msg := inbox.poll()) is not None:
                    got.append(msg)
                    inbox.ack(msg)
                inbox.clean_now()
        finally:
            watcher.close()
        return got

    return asyncio.run(go())


def wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"


def test_four_sender_processes_times_1000_messages_arrive_exactly_once(root: Path, tmp_path: Path) -> None:
    with Mailbox(root, RUN) as mb:
        mb.register("rx")
    out = tmp_path / "received"
    receiver = mailproc("drain", str(root), RUN, "rx", "4000", str(out))
    wait_ready(receiver)
    senders = [mailproc("send", str(root), RUN, f"s{i}", "rx", "1000") for i in range(4)]
    sent_by = [collect(proc, "sent") for proc in senders]
    assert all(proc.returncode == 0 for proc in senders)
    receiver.communicate(timeout=120)
    assert receiver.returncode == 0
    received = out.read_text().split()
    assert [len(ids) for ids in sent_by] == [1000] * 4
    assert len(received) == len(set(received)) == 4000
    assert set(received) == {msg_id for ids in sent_by for msg_id in ids}
    for ids in sent_by:  # each sender's mail arrives in the order it was sent
        mine = set(ids)
        assert [m for m in received if m in mine] == ids


@pytest.mark.slow
@pytest.mark.parametrize("senders", [60, pytest.param(200, marks=pytest.mark.proof)])
def test_sigkill_of_senders_at_random_points_loses_and_tears_nothing(root: Path, senders: int) -> None:
    """Sender processes each SIGKILLed at a random point of their deliveries. A sender costs a Python
    start (a fifth of a second), so ``make test`` kills 60, six for each of the ten sender names;
    ``make bench`` kills 200 (the ``proof`` marker)."""
    rng = random.Random(20261122)
    with Mailbox(root, RUN) as mb:
        mb.register("rx")
    tried: set[str] = set()
    returned: set[str] = set()
    kills = 0
    for i in range(senders):
        proc = mailproc("sendloop", str(root), RUN, f"s{i % 10}", "rx")
        wait_ready(proc)
        assert proc.stdout is not None
        lines = []
        while not (line := proc.stdout.readline()).startswith("sent "):  # one delivery returned, however
            assert line, "the sender ended before a delivery returned"  # busy the machine
            lines.append(line)
        lines.append(line)
        time.sleep(rng.uniform(0, 0.015))  # then a kill at a random point of the deliveries after it
        proc.send_signal(signal.SIGKILL)
        kills += proc.wait() == -signal.SIGKILL
        lines += proc.stdout.read().splitlines(keepends=True)
        tried |= {line.split()[1] for line in lines if line.startswith("try ") and line.endswith("\n")}
        returned |= {line.split()[1] for line in lines if line.startswith("sent ") and line.endswith("\n")}
    assert kills == senders
    orphans = list((root / "rx" / "tmp").iterdir())
    with Mailbox(root, RUN) as mb:
        received = drain_in_process(mb, "rx")
        with mb.open_maildir("rx") as md:
            assert list(md.quarantined()) == []  # no partial message was ever read
    ids = [m.id for m in received]
    assert len(ids) == len(set(ids))  # exactly once
    assert returned <= set(ids) <= tried  # every returned delivery arrives; nothing invented
    assert len(returned) >= senders  # at least one from each sender
    assert list((root / "rx" / "tmp").iterdir()) == []  # orphans cleaned
    print(f"{len(returned)} returned, {len(ids)} received, {len(orphans)} tmp orphans cleaned")


def test_sigkill_of_a_receiver_before_its_ack_redelivers_the_same_message(root: Path) -> None:
    with Mailbox(root, RUN) as mb:
        mb.register("rx")
        first = mb.post(sender="lead", recipient="rx", body="important", data={"n": 1})
        second = mb.post(sender="lead", recipient="rx", body="next")
        receiver = mailproc("hold", str(root), RUN, "rx")
        assert receiver.stdout is not None
        assert receiver.stdout.readline().split() == ["got", first.id]
        receiver.kill()
        receiver.wait()
        again = drain_in_process(mb, "rx")
    assert again == [first, second]  # the same id and content, recognisable as already seen


@pytest.mark.slow
def test_forced_inotify_overflow_loses_nothing(root: Path, tmp_path: Path) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    per_sender = limit // 4 + 250
    total = per_sender * 4
    with Mailbox(root, RUN) as mb:
        mb.register("rx")
    out = tmp_path / "received"
    receiver = mailproc("drain", str(root), RUN, "rx", str(total), str(out))
    wait_ready(receiver)
    os.kill(receiver.pid, signal.SIGSTOP)
    try:
        senders = [mailproc("send", str(root), RUN, f"s{i}", "rx", str(per_sender)) for i in range(4)]
        sent = {msg_id for proc in senders for msg_id in collect(proc, "sent")}
    finally:
        os.kill(receiver.pid, signal.SIGCONT)
    stdout, _ = receiver.communicate(timeout=120)
    assert receiver.returncode == 0
    assert len(sent) == total > limit
    received = out.read_text().split()
    assert len(received) == len(set(received)) == total
    assert set(received) == sent
    overflows = int(stdout.split("overflows")[1])
    assert overflows >= 1  # the kernel queue really overflowed, and the inbox was told
