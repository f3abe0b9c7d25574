"""The TUI's ``c``: a run that ended asks for a follow-up prompt and starts ``teamrt continue --detach``;
a live run says why not; the header of a later round shows its number and prompt, made inert."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from teamrt.models import Reply, ScriptedModel
from teamrt.runs import detach
from teamrt.runtime.continuing import continue_run
from teamrt.team import Role, Team
from teamrt.testing import run_on_sim
from teamrt.tui.dialogs import FollowUpDialog
from teamrt.tui.run_screen import RunScreen
from teamrt.tui.widgets import Totals
from tests.helpers.teams import FAST
from tests.tui.test_app import app_on, drive, footer_keys, loaded, shown, until

RUN = "r1"
HOSTILE = "again\x1b]0;pwned\x07\x1b[2J\x9b31m please"


def ended_run(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    team = Team(path=project, name="solo", lead=Role("lead", "lead"), model="sim")
    model = ScriptedModel([Reply().say("first")])
    run_on_sim(team, "go", project=project, run_dir=home / "runs" / RUN, models={"sim": model}, settings=FAST)


def test_c_asks_for_the_follow_up_and_starts_teamrt_continue_detached(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended_run(home, tmp_path)
    started: list[list[str]] = []
    monkeypatch.setattr(detach, "_take_over", started.append)
    app, said = app_on(home / "runs", RUN)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await until(pilot, lambda: "c" in footer_keys(app))
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, FollowUpDialog))
        app.screen.query_one(Input).value = "now the docs"
        await pilot.press("enter")
        await until(pilot, lambda: any("goes on with your follow-up" in s for s in said))
        assert isinstance(app.screen, RunScreen)

    drive(app, steps)
    assert started == [["continue", RUN, "--prompt=now the docs", "--detach"]]


def test_c_on_a_live_run_says_why_not_and_opens_nothing(live: Path) -> None:
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await until(pilot, lambda: "c" not in footer_keys(app) and "m" in footer_keys(app))
        await pilot.press("c")
        await until(pilot, lambda: bool(said))
        assert said == ["run run-demo is running: m messages its agents; continue it once it has ended"]
        assert isinstance(app.screen, RunScreen)

    drive(app, steps)


@pytest.mark.hostile
def test_a_later_round_s_header_shows_its_prompt_inert(home: Path, tmp_path: Path) -> None:
    ended_run(home, tmp_path)
    model = ScriptedModel([Reply().say("second")])
    asyncio.run(continue_run(RUN, HOSTILE, models={"sim": model}, settings=FAST))
    app, _ = app_on(home / "runs", RUN)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        header = shown(app.screen.query_one(Totals))
        assert "round 2: again" in header and "please" in header, header
        assert not any((ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in header), repr(header)

    drive(app, steps)
