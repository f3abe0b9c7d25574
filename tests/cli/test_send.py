"""``teamrt send``: where the message went and whether the agent read it, never a bare id; it waits for
the read receipt only on a terminal or when asked (``--wait``), never when the agent will not read it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from teamrt.cli import main
from teamrt.mailbox import Message
from tests.helpers.cli import cli
from tests.helpers.waiting import within
from tests.runs.test_person_mail import live_run, read, waiting


def test_send_waits_for_the_agent_to_read_it_and_says_after_how_long(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs) as store:
        codes: list[int] = []
        sender = threading.Thread(
            target=lambda: codes.append(main(["send", "r1", "coder", "hi", "--wait", "60"]))
        )
        sender.start()
        [msg] = within(30, lambda: _first_waiting(runs))
        read(store, "coder", msg)
        within(30, sender.join)
        out, _ = capsys.readouterr()
        lines = out.splitlines()
        assert codes == [0] and lines[0] == f"sent {msg.id} to coder; delivered (in coder's inbox)"
        assert len(lines) == 2 and lines[1].startswith("read by coder after ") and lines[1].endswith("s")


def _first_waiting(runs: Path) -> list[Message]:
    while not (found := waiting(runs, "coder")):
        time.sleep(0.02)
    return list(found)


def test_send_says_what_the_agent_is_busy_with_when_it_has_not_read_it_in_time(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs):
        code, out, _ = cli(capsys, "send", "r1", "coder", "hi", "--wait", "0.3")
        [msg] = waiting(runs, "coder")
        assert code == 0 and out.splitlines() == [
            f"sent {msg.id} to coder; delivered (in coder's inbox)",
            "not read yet after 0.3s: coder is in the middle of a turn (a model call or a tool); it reads"
            " mail between turns; teamrt logs r1 shows when it does",
        ]
        code, out, _ = cli(capsys, "send", "r1", "coder", "again")  # not a terminal: no wait by default
        assert code == 0 and out.count("\n") == 1 and out.startswith("sent ")


def test_send_to_an_agent_that_ended_or_a_finished_run_says_it_will_not_be_read(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs) as store:
        asyncio.run(store.set_agent_status("coder", "done", "it finished"))
        code, out, _ = within(20, lambda: cli(capsys, "send", "r1", "coder", "hi", "--wait", "600"))
        assert code == 0 and out.splitlines()[1] == "coder has ended, done (it finished): it will not read it"
        asyncio.run(store.set_run_status("done"))
    code, out, _ = cli(capsys, "send", "r1", "lead", "hi", "--wait", "600")
    assert out.splitlines()[1] == "run r1 is done: no agent reads mail now; it waits in lead's mailbox"


def test_send_to_an_unknown_agent_lists_the_runs_agents(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(runs):
        code, out, err = cli(capsys, "send", "r1", "bob", "hi")
    assert (code, out) == (
        1,
        "",
    ) and err == "teamrt: no agent named 'bob' in run 'r1' (its agents: coder, lead)\n"
    code, _, err = cli(capsys, "send", "r1", "coder", "hi", "--wait", "-1")
    assert code == 2 and "expected a number of seconds" in err
