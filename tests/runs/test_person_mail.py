"""A person's mail in ``teamrt logs``: the message sent, where it is, and when its agent read it (the
run's read receipt: the turn that took it in), over a real store and mailbox."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from teamrt.mailbox import Mailbox, Message
from teamrt.store import IngestedMail, Store, create_store
from tests.helpers.cli import cli

TEXT = "please also run the tests"


def live_run(runs: Path, agents: tuple[str, ...] = ("lead", "coder")) -> Store:
    """A live run (owned by this process) whose ``agents`` run, each with a mailbox."""
    (runs / "r1").mkdir()
    store = create_store(runs / "r1", "r1", task="fix it", workdir="/work/proj")

    async def build() -> None:
        for name in agents:
            await store.add_agent(name, kind="lead" if name == "lead" else "team", model="sim",
                                  parent=None if name == "lead" else "lead")  # fmt: skip
            await store.begin_epoch(name)

    asyncio.run(build())
    with Mailbox(runs / "r1" / "mailbox", "r1") as mailbox:
        for name in agents:
            mailbox.register(name)
    return store


def waiting(runs: Path, agent: str) -> list[Message]:
    folder = runs / "r1" / "mailbox" / agent / "new"
    return [Message.decode(p.read_bytes()) for p in sorted(folder.iterdir())]


def read(store: Store, agent: str, msg: Message) -> None:
    """``agent`` takes ``msg`` into a turn, as its loop does: the run's read receipt."""
    ingested = [IngestedMail(msg.id, msg.sender, msg.kind, msg.to_dict())]
    content = [{"type": "text", "text": msg.body}]
    epoch = store.reader.agent(agent).epoch
    asyncio.run(store.append_turn(agent, epoch=epoch, role="user", content=content, ingested=ingested))


def test_logs_shows_a_persons_mail_delivered_then_read(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs) as store:
        code, out, _ = cli(capsys, "send", "r1", "coder", TEXT, "--no-wait")
        [msg] = waiting(runs, "coder")
        assert code == 0 and out == f"sent {msg.id} to coder; delivered (in coder's inbox)\n"
        code, out, _ = cli(capsys, "logs", "r1")
        [sent] = [line for line in out.splitlines() if "you → coder" in line]
        assert sent.split()[1:] == ["you", "→", "coder", "mail", *f'"{TEXT}"'.split(),
                                    f"({msg.id};", "delivered,", "not", "read", "yet)"]  # fmt: skip
        read(store, "coder", msg)
        code, out, _ = cli(capsys, "logs", "r1")
        lines = out.splitlines()
        [at] = [n for n, line in enumerate(lines) if "you → coder" in line]
        assert lines[at].endswith(f'"{TEXT}" ({msg.id})')
        [seen] = [line for line in lines if "mail.read" in line]
        assert lines.index(seen) > at and seen.split()[1:5] == ["coder", "mail.read", "read", "your"]
        assert f"read your message {msg.id} after " in seen and seen.endswith("s")
        code, out, _ = cli(capsys, "logs", "r1", "--json")
        said = [json.loads(line) for line in out.splitlines()]
        mail = [
            (d["kind"], d["agent"], d["data"]["message"], d["data"]["state"]) for d in said if d["id"] is None
        ]
        assert mail == [("mail.sent", "user", msg.id, "read"), ("mail.read", "coder", msg.id, "read")]


def test_mail_to_an_agent_that_ended_says_it_was_never_read(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs) as store:
        cli(capsys, "send", "r1", "coder", TEXT, "--no-wait")
        asyncio.run(store.set_agent_status("coder", "done"))
        _, out, _ = cli(capsys, "logs", "r1")
        assert "; delivered, never read: coder had ended)" in out


def test_logs_follow_shows_the_mail_among_the_events(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with live_run(runs) as store:
        cli(capsys, "send", "r1", "coder", TEXT, "--no-wait")
        [msg] = waiting(runs, "coder")
        read(store, "coder", msg)
        asyncio.run(store.set_agent_status("coder", "done"))
        asyncio.run(store.set_run_status("done"))
    code, out, _ = cli(capsys, "logs", "r1", "-f")
    lines = out.splitlines()
    assert code == 0 and lines[-1] == "run r1 ended: done"
    assert (
        sum("you → coder" in line for line in lines) == 1 and sum("mail.read" in line for line in lines) == 1
    )


@pytest.mark.hostile
def test_mail_text_with_escape_sequences_is_inert_in_logs(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs):
        hostile = "hi \x1b]0;owned\x07 \x1b[2J\rdone\u202e \x9b31m"
        cli(capsys, "send", "r1", "coder", hostile, "--no-wait")
        _, out, _ = cli(capsys, "logs", "r1")
        [line] = [x for x in out.splitlines() if "you → coder" in x]
        assert not any(c in line for c in "\x1b\x07\r\u202e\x9b"), repr(line)
        assert '"hi \ufffd]0;owned\ufffd \ufffd[2J done\ufffd "' in line, (
            "shown, not acted on (colour dropped)"
        )
        _, out, _ = cli(capsys, "logs", "r1", "--json")
        assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out
