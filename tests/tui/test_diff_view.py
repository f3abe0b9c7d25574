"""The run view's diff tab over a real repository and run store (tests/helpers/reviews.py): what it shows
for the lead (all the run merged), a worktree agent and a fork, moving between files, the cut of a large
diff, and an agent's hostile file drawn inert. Pictures of it are pinned (pytest-textual-snapshot) on
fixed content and a fixed clock: no hashes or dates are in view."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.containers import ScrollableContainer
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from teamrt.tui.app import TeamApp
from teamrt.tui.diff_view import DiffView
from teamrt.tui.run_screen import RunScreen
from tests.helpers.reviews import RUN, make_reviewed
from tests.helpers.tuidata import NOW, freeze

SIZE = (140, 45)
SMALL = (80, 24)
Compare = Callable[..., bool]
FILES: dict[str, str | bytes] = {
    f"kit/m{n}.py": "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(12)) for n in range(4)
}
HOSTILE = "clip \x1b]52;c;cHduZWQ=\x07 clear \x1b[2J bell \x07 [bold red]markup[/] [link=http://x]y[/link]\n"


def runs_of(tmp_path: Path, coder1: dict[str, str | bytes] | None = None) -> Path:
    made = make_reviewed(tmp_path, coder1=coder1, finished=True)
    freeze(made.run_dir, owner_gone=True)
    return made.run_dir.parent


def app(runs: Path) -> TeamApp:
    return TeamApp(runs, RUN, clock=lambda: NOW, blink=False)


def view(pilot: Pilot[Any]) -> DiffView:
    screen = pilot.app.screen
    assert isinstance(screen, RunScreen)
    return screen.query_one(DiffView)


async def until(pilot: Pilot[Any], ready: Callable[[], bool]) -> None:
    for _ in range(400):
        if ready():
            await pilot.pause(0.1)  # painted
            return
        await pilot.pause(0.05)
    raise AssertionError("the diff tab did not show what was waited for")


async def diff_of(pilot: Pilot[Any], moves: int = 0) -> DiffView:
    """Select the agent ``moves`` rows down, open the diff tab (``]``), and wait for its diff."""
    await until(pilot, lambda: isinstance(pilot.app.screen, RunScreen) and pilot.app.screen.state is not None)
    for _ in range(moves):
        await pilot.press("j")
    await pilot.press("right_square_bracket")
    shown = view(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, RunScreen)

    def read() -> bool:
        key = shown._key
        return shown.review is not None and key is not None and key[0] in (screen._selected, None)

    await until(pilot, read)
    return shown


def drive(tui: TeamApp, size: tuple[int, int], script: Callable[[Pilot[Any]], Awaitable[None]]) -> None:
    """``script`` on ``tui`` running headless at ``size``."""

    async def go() -> None:
        async with tui.run_test(size=size) as pilot:
            await script(pilot)

    asyncio.run(go())


def body(shown: DiffView) -> str:
    return shown.body.plain


def head(shown: DiffView) -> str:
    return shown.head.plain


def test_the_lead_shows_all_the_run_merged(tmp_path: Path) -> None:
    async def go(pilot: Pilot[Any]) -> None:
        shown = await diff_of(pilot)
        assert pilot.app.screen.query_one("#tabs", TabbedContent).active == "tab-diff"
        assert head(shown) == (
            "2 files +2 -2   file 1/2: kit/dates.py   ] next  [ previous\n"
            "integration branch teamrt/r1 against the commit the run started from"
        )
        text = body(shown)
        assert (
            " kit/dates.py  +1 -1\n@@ -1,2 +1,2 @@\n def is_leap(year):\n-    return year % 4 == 0\n" in text
        )
        assert "index " not in text and "+++ " not in text  # hashes and names said already are left out

    drive(app(runs_of(tmp_path)), SIZE, go)


def test_files_are_jumped_between_and_the_diff_scrolls(tmp_path: Path) -> None:
    async def go(pilot: Pilot[Any]) -> None:
        shown = await diff_of(pilot, moves=1)
        scroll = shown.query_one("#diff-scroll", ScrollableContainer)
        await until(pilot, lambda: len(shown.offsets) == 4 and scroll.max_scroll_y > 0)

        def at(n: int) -> float:
            return min(shown.offsets[n], scroll.max_scroll_y)

        def on(n: int) -> Callable[[], bool]:
            return lambda: shown.current == n and scroll.scroll_y == at(n)

        for n in (1, 2, 3, 3):
            await pilot.press("right_square_bracket")
            await until(pilot, on(n))
        assert "file 4/4: kit/m3.py" in head(shown)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await until(pilot, on(1))
        scroll.scroll_to(y=shown.offsets[2] + 3, animate=False)  # scrolled by hand into the third file
        await pilot.press("left_square_bracket")
        await until(pilot, on(2))
        scroll.focus()
        await pilot.press("end")
        await until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y)

    drive(app(runs_of(tmp_path, FILES)), SMALL, go)


def test_a_live_worktree_a_fork_and_a_branch_gone(tmp_path: Path) -> None:
    async def go(pilot: Pilot[Any]) -> None:
        shown = await diff_of(pilot, moves=2)
        assert head(shown).endswith(
            "\nworktree of coder-2 against the commit coder-2 was cut from (work in progress)"
        )
        assert "+ANSWER = 42" in body(shown)
        await pilot.press("j")
        await until(pilot, lambda: shown.review is not None and shown.review.problem is not None)
        assert head(shown).startswith("the branch teamrt/r1-coder-3 of agent coder-3 no longer exists")
        await pilot.press("j")
        await until(pilot, lambda: shown.review is not None and "fork" in (shown.review.problem or ""))
        assert head(shown).startswith("agent lead-fork-1 of run r1 is a fork agent")

    drive(app(runs_of(tmp_path)), SIZE, go)


def test_a_large_diff_is_cut_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DiffView, "limit", 600)

    async def go(pilot: Pilot[Any]) -> None:
        shown = await diff_of(pilot, moves=1)
        assert shown.review is not None and shown.review.cut > 0
        assert body(shown).endswith(
            f"the diff is cut here: {shown.review.cut:,} more bytes (teamrt diff shows it whole)"
        )

    drive(app(runs_of(tmp_path, FILES)), SIZE, go)


@pytest.mark.hostile
def test_escape_sequences_and_markup_in_a_file_are_drawn_inert(tmp_path: Path) -> None:
    async def go(pilot: Pilot[Any]) -> None:
        shown = await diff_of(pilot, moves=1)
        text = body(shown)
        assert "\x1b" not in text and "\x07" not in text
        assert (
            text.count("+clip \ufffd]52;c;cHduZWQ=\ufffd clear \ufffd[2J bell \ufffd [bold red]markup[/]")
            == 2
        )
        assert not any("link" in str(span.style) for span in shown.body.spans)

    drive(app(runs_of(tmp_path, {"evil.py": HOSTILE, "evil.txt": HOSTILE})), SIZE, go)


# -- pictures -------------------------------------------------------------------------------------------


async def opened(pilot: Pilot[Any]) -> None:
    """coder-1's diff, the agent full size (no event log: it would show the owner's pid)."""
    await diff_of(pilot, moves=1)
    await pilot.press("enter")
    await pilot.pause(0.3)


def test_the_diff_tab(snap_compare: Compare, tmp_path: Path) -> None:
    assert snap_compare(app(runs_of(tmp_path)), terminal_size=SIZE, run_before=opened)


def test_the_diff_tab_at_80x24(snap_compare: Compare, tmp_path: Path) -> None:
    assert snap_compare(app(runs_of(tmp_path, FILES)), terminal_size=SMALL, run_before=opened)
