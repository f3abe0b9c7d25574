"""The run view at 80x24 and its keys: tasks readable in the narrow side panel, ``t``/``T`` and
``pgup``/``pgdn`` from anywhere, notices held while the help is open, mail read as a person reads it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.text import Text
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from teamrt.store import TurnRecord, Usage
from teamrt.tui.app import TeamApp
from teamrt.tui.detail import transcript
from teamrt.tui.widgets import TaskTable, Transcript, _line
from tests.helpers.tuidata import mail_run, mail_text
from tests.tui.test_app import app_on, drive, footer_keys, loaded, run_screen, until

SMALL = (80, 24)


def transcript_text(app: TeamApp) -> str:
    return str(run_screen(app).query_one(Transcript).render())


def task_columns(app: TeamApp) -> list[str]:
    table = run_screen(app).query_one(TaskTable)
    return [str(column.label) for column in table.ordered_columns]


def task_cells(app: TeamApp, column: int) -> list[str]:
    table = run_screen(app).query_one(TaskTable)
    return [str(table.get_row_at(row)[column]) for row in range(table.row_count)]


WHOLE = ["fix kit.dates", "fix kit.numbers", "fix kit.stats"]


@pytest.mark.parametrize(
    ("size", "columns", "subjects"),
    [
        ((80, 24), ["#", "status", "subject"], ["fix kit.dates", "fix kit.numb…", "fix kit.stats"]),
        ((100, 30), ["#", "status", "subject"], WHOLE),
        (
            (140, 45),
            ["#", "status", "owner", "subject"],
            ["fix kit.dates", "fix kit.numbers", "fix kit.stats"],
        ),
        ((60, 24), ["#", "subject"], WHOLE),
    ],
)
def test_the_task_list_keeps_each_subject_readable_at_any_width(
    live: Path, size: tuple[int, int], columns: list[str], subjects: list[str]
) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: loaded(app)() and run_screen(app).query_one(TaskTable).row_count == 3)
        await pilot.pause(0.2)
        assert task_columns(app) == columns
        assert task_cells(app, len(columns) - 1) == subjects

    drive(app, steps, size)


def test_the_task_list_lays_out_again_when_the_terminal_widens(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: loaded(app)() and run_screen(app).query_one(TaskTable).row_count == 3)
        await pilot.pause(0.2)
        assert "owner" not in task_columns(app)
        await pilot.resize_terminal(140, 45)
        await until(pilot, lambda: task_columns(app) == ["#", "status", "owner", "subject"])

    drive(app, steps, SMALL)


def test_t_and_shift_t_go_round_the_tabs_and_pages_scroll_the_tab_shown(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        tabs = run_screen(app).query_one("#tabs", TabbedContent)
        seen = [tabs.active]
        for key in ("t", "t", "t", "t", "T"):
            await pilot.press(key)
            seen.append(tabs.active)
        assert seen == [
            "tab-transcript", "tab-mail", "tab-worktree", "tab-diff", "tab-transcript", "tab-diff",
        ]  # fmt: skip
        await pilot.press("T", "T", "T")
        assert tabs.active == "tab-transcript"
        await pilot.press("f")  # calls unfolded: more than the pane holds at 80x24
        scroll = run_screen(app).query_one("#transcript-scroll", VerticalScroll)
        await until(pilot, lambda: scroll.max_scroll_y > 0)
        scroll.scroll_home(animate=False)
        await pilot.pause(0.1)
        await pilot.press("pagedown")  # the agent list has the focus: the key scrolls the tab all the same
        await until(pilot, lambda: scroll.scroll_y > 0)
        await pilot.press("pageup")
        await until(pilot, lambda: scroll.scroll_y == 0)

    drive(app, steps, SMALL)


def test_the_footer_offers_t_where_it_fits_and_the_key_works_everywhere(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        assert "t" not in footer_keys(app)
        await pilot.resize_terminal(140, 45)
        await until(pilot, lambda: "t" in footer_keys(app))

    drive(app, steps, SMALL)


def test_notices_wait_while_the_help_is_open_and_show_once_it_closes(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        app.notify("before the help")
        await pilot.pause(0.1)
        await pilot.press("question_mark")
        app.notify("while the help is open", severity="warning")
        await pilot.pause(0.2)
        assert not list(app._notifications), "no toast over the help"
        await pilot.press("escape")
        await until(pilot, lambda: [n.message for n in app._notifications] == [
            "before the help", "while the help is open"
        ])  # fmt: skip

    drive(app, steps, SMALL)


def test_mail_in_a_transcript_reads_as_mail_from_its_sender(tmp_path: Path) -> None:
    asyncio.run(mail_run(tmp_path / "runs"))
    app, _ = app_on(tmp_path / "runs", "run-mail")

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: loaded(app)() and "Fixed both" in transcript_text(app))
        text = transcript_text(app)
        assert "✉ mail from reviewer: two problems in the README" in text
        assert "✉ mail from user: keep the badges" in text
        assert "<mail" not in text and "</mail>" not in text
        await pilot.press("f")  # unfolded: the whole of each message under its line
        await until(pilot, lambda: "The example in Usage" in transcript_text(app))

    drive(app, steps, SMALL)


@pytest.mark.hostile
def test_mail_whose_text_carries_escape_sequences_and_markup_is_shown_inert(tmp_path: Path) -> None:
    """A peer's mail is an agent's text: its summary and body reach the screen with no control sequence
    acting and no markup read."""
    content = mail_text(
        "m-9", "coder-1", "done\x1b]0;pwned\x07 [b]bold[/b]", "body\x1b[2J line\n[red]x[/red]"
    )
    turn = TurnRecord(1, "lead", 1, 1, "user", content, None, None, Usage(), 0.0)
    [line] = transcript([turn])
    assert line.kind == "mail" and line.text.startswith("mail from coder-1: done")
    shown = Text()
    _line(shown, line, unfolded=True)
    assert "\x1b" not in shown.plain and "\x07" not in shown.plain
    assert "[b]bold[/b]" in shown.plain and "[red]x[/red]" in shown.plain, "markup is shown, not read"
