"""The TUI's notifications of an open run: the bell and a toast when an ask waits or the run ends (not for
what happened before the view opened), and the OSC written through Textual's driver, inert."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from textual.pilot import Pilot

from teamrt.runs.alerts import sequence
from teamrt.runtime.notices import notice_of
from teamrt.tui.app import TeamApp
from teamrt.tui.notifying import ring
from teamrt.tui.run_screen import RunScreen
from tests.helpers.tuidata import NOW, coding_run

HOSTILE = "rm -rf x\x1b]52;c;cHduZWQ=\x07\x9c\x1b\\; echo\nowned"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("TERM_PROGRAM", "iTerm.app")
    return tmp_path / "home"


async def until(pilot: Pilot[None], check: Any) -> None:
    for _ in range(600):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError("the screen did not get there in time")


def test_an_ask_waiting_and_the_runs_end_ring_the_bell_with_a_toast(home: Path) -> None:
    store = asyncio.run(coding_run(home / "runs", "run-n"))  # its ask (older than the view) is no news
    app = TeamApp(home / "runs", "run-n", clock=lambda: NOW, blink=False)
    rang: list[int] = []
    toasts: list[tuple[str, str]] = []
    app.bell = lambda: rang.append(1)  # type: ignore[method-assign]
    original = app.notify

    def notify(message: str, **kw: Any) -> None:
        toasts.append((kw.get("title", ""), message))
        original(message, **kw)

    app.notify = notify  # type: ignore[method-assign]

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None)
        await pilot.pause(0.3)
        assert rang == [] and toasts == []
        ask = {"id": "ask-9", "tool": "Bash", "input": {"command": HOSTILE}, "reason": "asks", "wait_s": 60}
        await store.append_event("ask", ask, agent="coder-2")
        await until(pilot, lambda: len(toasts) == 1)
        assert rang == [1]
        title, message = toasts[0]
        assert title == "teamrt run-n: permission needed"
        assert message == (
            "coder-2 asks to use Bash: rm -rf x]52,c,cHduZWQ=\\, echo owned"
            " (teamrt answer run-n ask-9 allow|deny)"
        )
        await store.set_run_status("failed", "stopped by the test")
        await until(pilot, lambda: len(toasts) == 2)
        assert rang == [1, 1], "a run's end rings however soon after"
        assert toasts[1] == ("teamrt run-n: failed", "the run failed: stopped by the test")

    async def go() -> None:
        async with app.run_test(size=(140, 45)) as pilot:
            await steps(pilot)

    try:
        asyncio.run(go())
    finally:
        store.close()


@pytest.mark.hostile
def test_attack_the_osc_goes_through_the_driver_and_nothing_in_it_can_end_it() -> None:
    written: list[str] = []
    rang: list[int] = []
    app = SimpleNamespace(
        _driver=SimpleNamespace(write=written.append), is_headless=False, bell=lambda: rang.append(1)
    )
    ask = {"id": "ask-9", "tool": "Bash", "input": {"command": HOSTILE}, "wait_s": 60}
    notice = notice_of("ask", ask, "coder-2", "run-n")
    assert notice is not None
    ring(app, sequence(notice, "osc777"))  # type: ignore[arg-type]
    [osc] = written
    assert rang == [1]
    assert osc.startswith("\x1b]777;notify;teamrt run-n: permission needed;coder-2 asks")
    assert osc.count("\x1b") == 1 and osc.count("\x07") == 1 and osc.endswith("\x07")
    assert osc.count(";") == 3 and "\x9c" not in osc and "\n" not in osc
    headless = SimpleNamespace(_driver=None, is_headless=True, bell=lambda: rang.append(1))
    ring(headless, "\x1b]9;x\x07")  # type: ignore[arg-type]
    assert written == [osc] and rang == [1, 1]
