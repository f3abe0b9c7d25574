"""The TUI's main screens pinned as pictures (pytest-textual-snapshot), on fixed data and a fixed clock.

The store is tests/helpers/tuidata.py's coding run, its times frozen; the app's clock
is fixed and its text cursor does not blink, so each picture is the same on
every machine. After a deliberate change of a screen, look at the new picture
and accept it with ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets._footer import FooterKey

from teamrt.tui.app import TeamApp
from teamrt.tui.run_screen import RunScreen
from teamrt.tui.runs_screen import RunsScreen
from teamrt.tui.widgets import NO_AGENT, KeyTable, Transcript
from tests.helpers.tuidata import NOW, coding_run, finished_run, freeze, mail_run

SIZE = (140, 45)
SMALL = (80, 24)  # a terminal's default: the activity column and the footer's ? help and q quit fit
Compare = Callable[..., bool]


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Path]:
    store = asyncio.run(coding_run(tmp_path / "runs"))
    freeze(tmp_path / "runs" / "run-demo")
    crashed = asyncio.run(coding_run(tmp_path / "runs", "run-old"))
    crashed.close()
    freeze(tmp_path / "runs" / "run-old", owner_gone=True)
    yield tmp_path / "runs"
    store.close()


def app(runs: Path, run: str | None = "run-demo") -> TeamApp:
    return TeamApp(runs, run, clock=lambda: NOW, blink=False)


async def shown(pilot: Pilot[Any]) -> None:
    """Wait until the screen on top has read its run, or the runs list its runs, and its footer
    offers the keys that apply to what it read."""
    for _ in range(600):
        screen = pilot.app.screen
        read = (isinstance(screen, RunScreen) and detailed(screen)) or (
            isinstance(screen, RunsScreen) and screen.query_one("#runs", KeyTable).row_count
        )
        if read and footed(screen):
            break
        await pilot.pause(0.05)
    await pilot.pause(0.3)  # column widths are measured when the app is idle


def detailed(screen: RunScreen) -> bool:
    """Whether the run screen has read its run and, when it has agents, shows the selected one's
    transcript (the screen reads an agent's detail only once the list has selected it)."""
    state = screen.state
    if state is None:
        return False
    shown = screen.query_one(Transcript)._shown
    return not state.agents or (shown is not None and shown.plain != NO_AGENT)


def footed(screen: Screen[Any]) -> bool:
    """Whether the footer shows the keys the screen's bindings offer now."""
    offered = [b.key for _, b, _, _ in screen.active_bindings.values() if b.show]
    return [k.key for k in screen.query(FooterKey)] == offered


def test_the_run_view(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs), terminal_size=SIZE, run_before=shown)


def test_the_run_view_on_an_agent_with_a_waiting_ask(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs), press=["j", "j", "j", "j", "_"], terminal_size=SIZE, run_before=shown)


def test_a_crashed_run(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs, "run-old"), terminal_size=SIZE, run_before=shown)


def test_the_runs_list(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs, None), terminal_size=SIZE, run_before=shown)


def test_one_agent_full_size_with_calls_unfolded(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs), press=["enter", "f", "_"], terminal_size=SIZE, run_before=shown)


def test_the_message_dialog(snap_compare: Compare, runs: Path) -> None:
    keys = ["j", "m", *"check stats", "_"]
    assert snap_compare(app(runs), press=keys, terminal_size=SIZE, run_before=shown)


def test_the_stop_confirmation(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs), press=["x", "_"], terminal_size=SIZE, run_before=shown)


def test_the_help(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs), press=["question_mark", "_"], terminal_size=SIZE, run_before=shown)


def test_the_run_view_at_80x24_on_an_agent_waiting_for_approval(snap_compare: Compare, runs: Path) -> None:
    keys = ["j", "j", "j", "j", "_"]
    assert snap_compare(app(runs), press=keys, terminal_size=SMALL, run_before=shown)


def test_a_finished_run_at_80x24_offers_only_what_applies(snap_compare: Compare, runs: Path) -> None:
    asyncio.run(finished_run(runs, "run-done"))
    assert snap_compare(app(runs, "run-done"), terminal_size=SMALL, run_before=shown)


def test_a_crashed_run_at_80x24_offers_resume(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs, "run-old"), terminal_size=SMALL, run_before=shown)


def test_the_help_at_80x24(snap_compare: Compare, runs: Path) -> None:
    assert snap_compare(app(runs), press=["question_mark", "_"], terminal_size=SMALL, run_before=shown)


def test_the_run_view_at_80x24_shows_the_tasks_and_t_shows_the_next_tab(
    snap_compare: Compare, runs: Path
) -> None:
    """Each task's status and subject readable in the narrow side panel; ``t``: the mail tab."""
    assert snap_compare(app(runs), press=["t", "_"], terminal_size=SMALL, run_before=shown)


def test_the_help_at_80x24_with_notices_pending(snap_compare: Compare, runs: Path) -> None:
    """A notice shown before the help opens and one that comes while it is open: neither covers it."""

    async def notices(pilot: Pilot[Any]) -> None:
        await shown(pilot)
        pilot.app.notify("run run-demo: coder-3 asks to run bash: rm -rf build", severity="warning")
        await pilot.press("question_mark")
        pilot.app.notify("run run-demo ended: done")
        await pilot.pause(0.3)

    assert snap_compare(app(runs), press=["_"], terminal_size=SMALL, run_before=notices)


def test_a_transcript_with_mail_at_80x24(snap_compare: Compare, runs: Path) -> None:
    """Mail reads ``mail from reviewer: ...``, never the ``<mail ...>`` markup the model reads."""
    asyncio.run(mail_run(runs))
    assert snap_compare(app(runs, "run-mail"), terminal_size=SMALL, run_before=shown)
