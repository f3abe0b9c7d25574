"""Asks in the terminal you are in: a foreground ``teamrt run`` on a real pseudo-terminal (pexpect), its
simulator playing the lead (``tests/helpers/procs/asker.py``), answered by keys as a person answers."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from teamrt.cli import asking
from teamrt.cli.asking import Held, TerminalAsks, asking_here
from teamrt.runtime.asking import ATTENDANT, Choice, Shown
from teamrt.store import open_reader
from tests.helpers.procs.asker import ESCAPES

TEAM = """
[team]
name = "t"
model = "sim"
on_ask = "deny"
ask_wait = 0
"""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "team.toml").write_text(TEAM)
    for args in (["init", "-q"], ["add", "team.toml"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit",
                                                        "-qm", "start"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def spawn(project: Path, play: str, run_id: str, *more: str) -> pexpect.spawn[str]:
    env = {**os.environ, "TEAMRT_HOME": str(project / ".teamrt"), "PYTHONPATH": str(ROOT), "TERM": "dumb"}
    argv = ["-m", "tests.helpers.procs.asker", play, "--model", "sim", "--prompt", "go", f"--run-id={run_id}",
            *more, "team.toml"]  # fmt: skip
    return pexpect.spawn(sys.executable, argv, cwd=str(project), env=env, encoding="utf-8", timeout=30)


def events(project: Path, run_id: str, *kinds: str) -> list[tuple[str, dict[str, Any]]]:
    reader = open_reader(project / ".teamrt" / "runs" / run_id, run_id)
    try:
        return [(e.kind, e.data) for e in reader.events(kinds=kinds)]
    finally:
        reader.close()


@pytest.mark.slow
def test_a_day_of_asks_answered_at_the_terminal(project: Path) -> None:
    child = spawn(project, "day", "r1")
    try:
        child.expect_exact("teamrt: lead asks to use Bash: echo one")
        child.expect_exact("why: Bash needs approval in default mode")
        child.expect_exact("2/a  allow always: add Bash(echo:*) to .claude/settings.local.json")
        child.expect(r"ask-[0-9a-f]{8}\? ")
        child.send("2")
        child.expect_exact("teamrt: added Bash(echo:*) to .claude/settings.local.json")
        # echo two runs by the rule, unasked; the compound command may not be allowed always
        child.expect_exact("teamrt: lead asks to use Bash: echo three && rm -rf gone")
        child.expect_exact("(allow always is not offered: it runs 2 programs (echo, rm); a rule allows one)")
        child.expect(r"\? ")
        child.send("a")
        child.expect_exact("allow always is not offered: it runs 2 programs")
        child.send("4")
        child.expect_exact("note to the agent (enter sends): ")
        child.sendline("do not remove anything")
        child.expect_exact("denied, with your note")
        child.expect_exact("teamrt: lead asks to use Write: note.txt")
        child.expect(r"\? ")
        child.send("y")
        child.expect_exact("allowed once")
        child.expect(pexpect.EOF)
        shown = str(child.before)
    finally:
        child.close()
    assert child.exitstatus == 0, shown
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert settings == {"permissions": {"allow": ["Bash(echo:*)"]}}
    ignored = subprocess.run(["git", "check-ignore", "-q", ".claude/settings.local.json"], cwd=project)
    assert ignored.returncode == 0, "git ignores the file, as Claude Code makes it"
    assert (project / "note.txt").read_text() == "hello\n"
    asked = events(project, "r1", "ask", "ask.answered")
    calls = [data["input"] for kind, data in asked if kind == "ask"]
    assert calls == [
        {"command": "echo one"}, {"command": "echo three && rm -rf gone"},
        {"file_path": "note.txt", "content": "hello\n"},
    ], "echo two was allowed by the rule, not asked"  # fmt: skip
    assert all(
        data.get("attended") is True and data["wait_s"] is None for kind, data in asked if kind == "ask"
    )
    answers = [data for kind, data in asked if kind == "ask.answered"]
    assert [(a["allowed"], a["by"], a.get("always")) for a in answers] == [
        (True, "user", "Bash(echo:*)"), (False, "user", None), (True, "user", None),
    ]  # fmt: skip
    assert answers[1]["reason"].startswith("denied by user: do not remove anything.")

    again = spawn(project, "one", "r2")  # the next run reads the rule from the file: nothing is asked
    try:
        again.expect(pexpect.EOF)
        said = str(again.before)
    finally:
        again.close()
    assert again.exitstatus == 0 and "asks to use" not in said, said
    assert events(project, "r2", "ask") == []


@pytest.mark.hostile
@pytest.mark.slow
def test_a_call_with_escape_sequences_is_shown_inert(project: Path) -> None:
    child = spawn(project, "escapes", "r1")
    try:
        child.expect_exact("teamrt: lead asks to use Bash: printf")
        child.expect(r"\? ")
        prompt = str(child.before) + str(child.after)
        child.send("1")
        child.expect_exact("allowed once")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "\x1b" not in prompt and "\x07" not in prompt, "no escape sequence reaches the terminal"
    assert "\ufffd]0;pwned\ufffd\ufffd[2J" in prompt, "shown, inert, for the person to read"
    assert ESCAPES.startswith("printf")


@pytest.mark.slow
def test_ctrl_c_at_the_prompt_interrupts_the_run_as_ever(project: Path) -> None:
    child = spawn(project, "one", "r1")
    try:
        child.expect_exact("teamrt: lead asks to use Bash: echo one")
        child.expect(r"\? ")
        child.sendintr()
        child.expect_exact("teamrt: run r1 interrupted; resume it with: teamrt resume r1")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 130
    assert not (project / ".claude").exists()


# -- in this process: who is asked, and the screen ------------------------------------------------------


def test_without_a_terminal_nobody_is_asked_and_lines_pass_at_once() -> None:
    lines: list[str] = []
    with asking_here(lines.append) as out:  # pytest's stdin is no terminal
        assert ATTENDANT.get() is None
        out("progress")
    assert lines == ["progress"]


def test_on_ask_on_the_command_line_means_nobody_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asking, "at_a_terminal", lambda: True)
    lines: list[str] = []
    write = lines.append
    with asking_here(write, policy_given=True) as out:
        assert ATTENDANT.get() is None and out is write


def shown(ask_id: str, command: str, rule: str | None = "Bash(echo:*)") -> Shown:
    return Shown(ask_id, "lead", "Bash", {"command": command}, "Bash needs approval in default mode", rule,
                 "" if rule else "it runs 2 programs")  # fmt: skip


def test_asks_come_one_at_a_time_in_order_and_hold_the_progress_lines() -> None:
    """Two asks at once: the first is on screen, the second waits for it; a progress line that comes
    meanwhile is printed only after the answer, never inside a prompt; an ask answered elsewhere comes
    down."""
    master, slave = pty.openpty()
    screen = os.fdopen(os.dup(slave), "w", encoding="utf-8")
    printed: list[str] = []
    held = Held(printed.append)
    asks = TerminalAsks(slave, screen, held)

    seen: list[str] = []

    async def showing(text: str) -> None:
        def shown_now() -> bool:
            while select.select([master], [], [], 0)[0]:
                seen.append(os.read(master, 65536).decode())
            return text in "".join(seen)

        await within_s(shown_now)

    async def scene() -> tuple[Choice, Choice, list[str]]:
        first = asyncio.create_task(asks.ask(shown("ask-00000001", "echo one")))
        second = asyncio.create_task(asks.ask(shown("ask-00000002", "echo a && rm b", rule=None)))
        third = asyncio.create_task(asks.ask(shown("ask-00000003", "echo three")))
        await showing("ask-00000001? ")
        held("lead: task #1 in_progress")  # from the progress thread, while the prompt is up
        assert printed == [] and "ask-00000002" not in "".join(seen), "held; the second waits"
        os.write(master, b"2")
        one = await first
        await showing("ask-00000002? ")
        assert printed == ["lead: task #1 in_progress"], "printed once the prompt came down"
        os.write(master, b"4")
        await showing("enter sends")
        os.write(master, b"not  that\n")
        two = await second
        await showing("ask-00000003? ")
        third.cancel()  # answered by mail: the prompt comes down
        with pytest.raises(asyncio.CancelledError):
            await third
        await showing("answered elsewhere")
        return one, two, seen

    try:
        one, two, _ = asyncio.run(scene())
    finally:
        screen.close()
        os.close(master)
        os.close(slave)
    text = "".join(seen)
    assert one == Choice(True, always=True) and two == Choice(False, note="not that")
    assert text.index("ask-00000001? ") < text.index("ask-00000002? ") < text.index("ask-00000003? ")
    assert "ask-00000003: answered elsewhere, or the run is ending" in text


async def within_s(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not within the time"
        await asyncio.sleep(0.02)
