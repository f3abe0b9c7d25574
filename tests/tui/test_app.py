"""The TUI driven as a person would, with Textual's Pilot, on real stores and run directories."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TabbedContent
from textual.widgets._footer import FooterKey

from teamrt.demos.examples import team_file
from teamrt.runtime.asking import ANSWERED
from teamrt.store import Store, ToolUse
from teamrt.testing import chaos
from teamrt.tui.agent_list import AgentList
from teamrt.tui.app import TeamApp
from teamrt.tui.run_screen import RunScreen
from teamrt.tui.runs_screen import RunsScreen
from teamrt.tui.widgets import (
    AgentTitle,
    EventLog,
    KeyTable,
    MailView,
    TaskTable,
    Totals,
    Transcript,
    WorktreeView,
)
from tests.helpers.tuidata import NOW, coding_run, finished_run, freeze

SIZE = (140, 45)


def crashed_fixture(runs: Path, run_id: str) -> None:
    """The same run, left without an owner: crashed."""

    async def go() -> Store:
        return await coding_run(runs, run_id)

    asyncio.run(go()).close()
    freeze(runs / run_id, owner_gone=True)


def app_on(runs: Path, run: str | None = "run-demo") -> tuple[TeamApp, list[str]]:
    """The app with a frozen clock and a still cursor; the second value collects its notifications."""
    app = TeamApp(runs, run, clock=lambda: NOW, blink=False)
    said: list[str] = []
    original = app.notify

    def notify(message: str, **kw: Any) -> None:
        said.append(message)
        original(message, **kw)

    app.notify = notify  # type: ignore[method-assign]
    return app, said


async def until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError("the screen did not get there in time")


def drive(
    app: TeamApp, steps: Callable[[Pilot[None]], Awaitable[None]], size: tuple[int, int] = SIZE
) -> None:
    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await steps(pilot)

    asyncio.run(go())


def footer_keys(app: TeamApp) -> list[str]:
    """The keys the footer offers, in its order."""
    return [k.key for k in app.screen.query(FooterKey)]


def cells(table: AgentList, name: str) -> list[str]:
    return table.cells(name)


def shown(widget: Any) -> str:
    return str(widget.render())


def run_screen(app: TeamApp) -> RunScreen:
    assert isinstance(app.screen, RunScreen)
    return app.screen


def loaded(app: TeamApp) -> Callable[[], bool]:
    return lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None


def mail_files(runs: Path, run: str, box: str) -> list[dict[str, Any]]:
    new = runs / run / "mailbox" / box / "new"
    return [json.loads(p.read_text()) for p in sorted(new.iterdir())] if new.is_dir() else []


# -- the runs list ----------------------------------------------------------------


def test_the_runs_list_shows_each_run_with_status_age_agents_and_cost(live: Path) -> None:
    crashed_fixture(live, "run-old")
    (live / "run-empty").mkdir()  # a run directory without a store: listed with its problem
    app, _ = app_on(live, None)

    async def steps(pilot: Pilot[None]) -> None:
        table = app.screen.query_one("#runs", KeyTable)
        await until(pilot, lambda: table.row_count == 3)
        rows = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)] for i in range(3)}
        assert rows["run-demo"][1:6] == ["running", "3m", "6, 2 running", "$0.0934/$2.00 (sim)", "68.2k"]
        assert rows["run-demo"][6] == "Fix the failing tests in kit and merge the fixes"
        assert rows["run-old"][1:3] == ["crashed", "3m"]
        assert "no run store here" in rows["run-empty"][6]

    drive(app, steps)


def test_the_runs_list_filters_and_opens_a_run_and_esc_comes_back(live: Path) -> None:
    crashed_fixture(live, "run-old")
    app, _ = app_on(live, None)

    async def steps(pilot: Pilot[None]) -> None:
        table = app.screen.query_one("#runs", KeyTable)
        await until(pilot, lambda: table.row_count == 2)
        await pilot.press("slash", *"crash")
        await until(pilot, lambda: table.row_count == 1)
        assert str(table.get_row_at(0)[0]) == "run-old"
        await pilot.press("enter", "enter")  # the filter's enter gives the table the focus; then open
        await until(pilot, loaded(app))
        assert run_screen(app).run_id == "run-old"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("escape")  # clears the filter
        await until(pilot, lambda: table.row_count == 2)
        await pilot.press("k", "j", "q")

    drive(app, steps)
    assert app.return_code in (None, 0)


# -- the run view --------------------------------------------------------------------


def test_the_run_view_shows_the_tree_with_status_activity_and_the_totals(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        table = screen.query_one(AgentList)
        await until(pilot, lambda: table.row_count == 6)
        assert cells(table, "lead")[:10] == [
            "lead", "lead", "-", "sim", "running", "2", "15.0k", "29%", "$0.0330 (sim)",
            "bash: git log --oneline -5",
        ]  # fmt: skip
        assert cells(table, "reviewer")[0] == "└ reviewer" and cells(table, "reviewer")[4] == "idle"
        assert cells(table, "reviewer")[9] == "waiting for mail"
        assert cells(table, "coder-1")[4] == "merging" and cells(table, "coder-1")[1] == "worktree"
        assert cells(table, "coder-2")[4] == "done"
        assert cells(table, "coder-2")[9] == "done: merged onto teamrt/run-demo at 333333333333"
        assert cells(table, "coder-3")[9] == "waiting for approval"  # not the command it asks to run
        assert cells(table, "lead-fork-1")[4] == "failed"
        header = shown(screen.query_one(Totals))
        assert "run run-demo running" in header and "ran 3m 20s" in header
        assert "2 running, 1 idle, 1 merging, 1 done, 1 failed" in header
        assert "cost $0.0934 (sim) of $2.00 (5%)" in header and "1 ask waiting: a/d" in header
        tasks = screen.query_one(TaskTable)
        assert [str(c) for c in tasks.get_row_at(1)] == ["#2", "done", "coder-2", "fix kit.numbers"]
        events = shown(screen.query_one(EventLog))
        assert "coder-2 merge.merged" in events and "coder-3 ask ask-0001" in events

    drive(app, steps)


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_the_activity_and_the_help_and_quit_keys_stay_in_view_at_any_width(
    live: Path, size: tuple[int, int]
) -> None:
    app, _ = app_on(live)
    width = size[0]

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        table = run_screen(app).query_one(AgentList)
        await until(pilot, lambda: table.row_count == 6)
        wide = ["agent", "kind", "role", "model", "status", "turns", "tokens", "cache", "cost", "activity"]
        assert table.columns == (wide if width > 100 else ["agent", "status", "cost", "activity"])
        header = table.render_line(0).text
        assert header.split() == table.columns and len(header) <= width
        line = table.render_line(1 + [r.name for r in table.rows].index("coder-3")).text
        assert "waiting for approval" in line and "$0.0080 (sim)" in line
        assert not table.max_scroll_x  # nothing hides to the right

        def in_view() -> bool:
            keys = {k.key: k.region for k in app.screen.query(FooterKey)}
            return "question_mark" in keys and "q" in keys and max(r.right for r in keys.values()) <= width

        await until(pilot, in_view)
        header = shown(run_screen(app).query_one(Totals))
        assert header.splitlines()[1].startswith("cost $0.0934 (sim) of $2.00 (5%)   1 ask waiting: a/d")

    drive(app, steps, size)


def test_an_agent_waiting_for_approval_says_so_until_the_ask_is_answered(home: Path) -> None:
    store = asyncio.run(coding_run(home / "runs", "run-ask"))
    app, _ = app_on(home / "runs", "run-ask")

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        table, title = screen.query_one(AgentList), screen.query_one(AgentTitle)
        await until(pilot, lambda: table.row_count == 6)
        assert table.cells("coder-3")[9] == "waiting for approval"
        assert table.cells("lead")[9] == "bash: git log --oneline -5"  # a call that asks nobody
        await pilot.press("j", "j", "j", "j")  # coder-3: its detail says it waits, and for what
        await until(pilot, lambda: "coder-3" in shown(title))
        assert "running  waiting for approval: a/d" in shown(title)
        transcript = shown(screen.query_one(Transcript))
        assert "? waiting for approval to run bash: rm -rf build: Bash(rm:*) asks" in transcript
        # answered (as the run's supervisor records it): the agent runs its command
        await store.append_event(ANSWERED, {"id": "ask-0001", "allowed": True, "by": "user"}, agent="coder-3")
        await until(pilot, lambda: table.cells("coder-3")[9] == "bash: rm -rf build")
        await until(pilot, lambda: "waiting" not in shown(title))
        assert "waiting for approval" not in shown(screen.query_one(Transcript))

    try:
        drive(app, steps)
    finally:
        store.close()


def test_an_agents_transcript_folds_tool_calls_and_f_unfolds_them(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        transcript = run_screen(app).query_one(Transcript)
        await until(pilot, lambda: "bash: python3 -m unittest" in shown(transcript))
        text = shown(transcript)
        assert "I will run the suite first, then split the work by module." in text
        assert "↳ 4 lines: FAILED (failures=5)" in text and "test_numbers ... FAIL" not in text
        await pilot.press("f")
        await until(pilot, lambda: "test_numbers ... FAIL" in shown(transcript))
        await pilot.press("j", "j", "j", "j")  # coder-3: its ask shows under its transcript
        await until(pilot, lambda: "task 3: fix kit.stats" in shown(transcript))
        said = "waiting for approval to run bash: rm -rf build: Bash(rm:*) asks (a approves, d denies)"
        assert said in shown(transcript)

    drive(app, steps)


def test_the_mail_and_worktree_tabs_show_the_selected_agent(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        screen.query_one(TabbedContent).active = "tab-mail"
        mail = screen.query_one(MailView)
        await until(pilot, lambda: "inbox: 1" in shown(mail))
        assert "from reviewer" in shown(mail) and "ready to review diffs" in shown(mail)
        await pilot.press("j", "j")  # coder-1
        screen.query_one(TabbedContent).active = "tab-worktree"
        worktree = screen.query_one(WorktreeView)
        await until(pilot, lambda: "teamrt/run-demo/coder-1" in shown(worktree))
        assert "merge      queued, attempt 1" in shown(worktree)

    drive(app, steps)


def test_the_agent_filter_keeps_matching_rows_and_esc_clears_it(live: Path) -> None:
    app, _ = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        table = run_screen(app).query_one(AgentList)
        await until(pilot, lambda: table.row_count == 6)
        await pilot.press("slash", *"coder")
        await until(pilot, lambda: table.row_count == 3)
        assert [r.name for r in table.rows] == ["coder-1", "coder-2", "coder-3"]
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 6)
        box = run_screen(app).query_one("#filter", Input)
        assert table.rows[0].name == "lead" and box.value == "" and box.has_class("hidden")
        await pilot.press("enter")  # the selected agent alone, full size; esc back
        await until(pilot, lambda: run_screen(app).has_class("-agent-only"))
        assert not table.display and run_screen(app).query_one(Transcript).display
        await pilot.press("escape")
        await until(pilot, lambda: not run_screen(app).has_class("-agent-only"))
        assert table.display
        await pilot.press("question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        assert run_screen(app).run_id == "run-demo"  # esc closed the help, not the run view

    drive(app, steps)


# -- acting by mail ---------------------------------------------------------------------


def test_m_sends_a_message_to_the_selected_agent(live: Path) -> None:
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await pilot.press("j", "m")
        await until(pilot, lambda: type(app.screen).__name__ == "MessageDialog")
        await pilot.press(*"look at [/]stats[b] first", "enter")
        await until(pilot, lambda: any(s.startswith("sent to reviewer") for s in said))

    drive(app, steps)
    [msg] = mail_files(live, "run-demo", "reviewer")
    assert (msg["from"], msg["to"], msg["body"]) == ("user", "reviewer", "look at [/]stats[b] first")


def test_x_asks_before_stopping_and_only_yes_sends_the_stop(live: Path) -> None:
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await pilot.press("j", "j", "x")
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmDialog")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.pause(0.2)
        assert mail_files(live, "run-demo", "supervisor") == []
        await pilot.press("x", "y")
        await until(pilot, lambda: "asked the supervisor to stop coder-1" in said)

    drive(app, steps)
    [msg] = mail_files(live, "run-demo", "supervisor")
    assert msg["kind"] == "control" and msg["data"] == {"action": "stop", "agent": "coder-1"}


@pytest.mark.parametrize(("key", "allow"), [("a", True), ("d", False)])
def test_a_and_d_answer_the_waiting_ask_by_mail(live: Path, key: str, allow: bool) -> None:
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await pilot.press(key)
        verdict = "approved" if allow else "denied"
        await until(pilot, lambda: f"{verdict} coder-3's bash: rm -rf build" in said)

    drive(app, steps)
    [msg] = mail_files(live, "run-demo", "supervisor")
    assert msg["data"]["action"] == "answer" and msg["data"]["ask"] == "ask-0001"
    assert msg["data"]["allow"] is allow


def test_a_crashed_run_offers_resume_and_message_and_its_other_keys_say_why_not(home: Path) -> None:
    crashed_fixture(home / "runs", "run-old")
    app, said = app_on(home / "runs", "run-old")

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        assert "crashed" in shown(run_screen(app).query_one(Totals))
        offered = ["escape", "m", "r", "slash", "f", "t", "question_mark", "q", "s"]  # no x, a or d
        await until(pilot, lambda: footer_keys(app) == offered)
        await pilot.press("x")
        await until(pilot, lambda: "run run-old crashed: nothing runs to stop (r resumes it)" in said)
        await pilot.press("a")
        await until(pilot, lambda: "the run crashed: r resumes it" in said)
        assert isinstance(app.screen, RunScreen)  # no dialog was opened

    drive(app, steps)
    assert mail_files(home / "runs", "run-old", "supervisor") == []


@pytest.mark.parametrize("status", ["done", "failed", "stopped"])
def test_a_finished_run_offers_no_action_that_cannot_apply_and_keys_say_why(home: Path, status: str) -> None:
    asyncio.run(finished_run(home / "runs", "run-end", status))
    app, said = app_on(home / "runs", "run-end")

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        # no m, x, a, d or r; c continues
        offered = ["escape", "c", "slash", "f", "t", "question_mark", "q", "s"]
        await until(pilot, lambda: footer_keys(app) == offered)
        for key, why in (
            ("m", f"run run-end is {status}: no agent reads mail any more"),
            ("x", f"run run-end is {status}: nothing to stop"),
            ("a", f"run run-end is {status}: nothing to approve or deny"),
            ("d", f"run run-end is {status}: nothing to approve or deny"),
            ("r", f"run run-end is {status}; only a crashed run can be resumed"),
        ):
            said.clear()
            await pilot.press(key)
            await until(pilot, lambda: bool(said))
            assert said == [why], key
            assert isinstance(app.screen, RunScreen)  # no dialog was opened

    drive(app, steps)
    for box in ("supervisor", "lead", "reviewer", "coder-3"):
        assert mail_files(home / "runs", "run-end", box) == []


def test_approve_and_deny_are_offered_only_while_an_ask_waits(live: Path) -> None:
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        offered = ["escape", "m", "x", "a", "d", "slash", "f", "t", "question_mark", "q", "s"]
        await until(pilot, lambda: footer_keys(app) == offered)
        await pilot.press("a")  # the one ask waiting: answered from here, not offered again
        await until(pilot, lambda: footer_keys(app) == [k for k in offered if k not in ("a", "d")])
        await pilot.press("d")
        await until(pilot, lambda: "no permission ask is waiting" in said)

    drive(app, steps)
    [msg] = mail_files(live, "run-demo", "supervisor")
    assert msg["data"]["action"] == "answer" and msg["data"]["allow"] is True


def test_r_on_a_live_run_is_refused(live: Path) -> None:
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await pilot.press("r")
        await until(pilot, lambda: "run run-demo is running; only a crashed run can be resumed" in said)
        await pilot.pause(0.3)
        assert not any(s.startswith("starting teamrt resume") for s in said)  # no resume was started

    drive(app, steps)
    assert not (live / "run-demo" / "output.log").exists()  # what a detached resume would have written


def test_the_tui_never_writes_the_store(home: Path) -> None:
    crashed_fixture(home / "runs", "run-old")
    run_dir = home / "runs" / "run-old"

    def digest() -> dict[str, str]:
        """The database and its write-ahead log (a reader may leave an empty one: SQLite's WAL readers do)."""
        files = (run_dir / "run.db", run_dir / "run.db-wal")
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files
            if p.exists() and p.stat().st_size
        }

    before = digest()
    app, _ = app_on(home / "runs", "run-old")

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        for key in ("j", "j", "f", "j", "slash", "c", "escape", "m", "escape", "escape"):
            await pilot.press(key)
        await pilot.pause(1.2)  # a reread of the runs list, too

    drive(app, steps)
    assert digest() == before


def test_a_store_that_cannot_be_read_is_said_on_the_screen(home: Path) -> None:
    run_dir = home / "runs" / "run-bad"
    run_dir.mkdir(parents=True)
    garbage = b"this is not a database" * 100
    (run_dir / "run.db").write_bytes(garbage)
    app, _ = app_on(home / "runs", "run-bad")

    async def steps(pilot: Pilot[None]) -> None:
        totals = app.screen.query_one(Totals)
        await until(pilot, lambda: "cannot read run run-bad" in shown(totals))
        assert "file is not a database" in shown(totals) and "Traceback" not in shown(totals)
        await pilot.press("escape")  # the app goes on: back to the list, which names the problem too
        await until(pilot, lambda: isinstance(app.screen, RunsScreen))

    drive(app, steps)
    assert (run_dir / "run.db").read_bytes() == garbage  # left as it was


# -- real runs ------------------------------------------------------------------------------


def teamrt(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env=os.environ.copy(), check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_a_real_team_on_sim_is_seen_changing_status_live(home: Path, tmp_path: Path) -> None:
    """The lead's first call waits for an answer from the TUI, so a loaded machine cannot end the run
    before the TUI first looks: it sees the run at work, answers, and sees it to its end."""
    project = chaos.prepare("coding", tmp_path)
    team = team_file("coding").read_text()
    team = team.replace('on_ask = "deny"', 'on_ask = "deny"\nask_wait = 120')
    team = team.replace("[permissions]\n", '[permissions]\nask = ["Bash(python3 -m unittest)"]\n')
    (tmp_path / "held.toml").write_text(team)
    started = teamrt("run", str(tmp_path / "held.toml"), "--detach", cwd=project)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    app, _ = app_on(home / "runs", run_id)
    seen: dict[str, list[str]] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        table = screen.query_one(AgentList)

        def watch() -> bool:
            for name in [r.name for r in table.rows]:
                status = cells(table, name)[4]
                if not seen.get(name) or seen[name][-1] != status:
                    seen.setdefault(name, []).append(status)
            return screen.state is not None and screen.state.status == "done"

        for _ in range(1200):  # answer each ask (a) until the run is done (120 s at most)
            if watch():
                break
            if screen.state is not None and screen.state.asks:
                await pilot.press("a")
            await pilot.pause(0.1)
        assert watch()
        await pilot.press("j", "j")  # a coder: its merged work, from git
        screen.query_one(TabbedContent).active = "tab-worktree"
        worktree = screen.query_one(WorktreeView)
        await until(pilot, lambda: "1 file changed" in shown(worktree))
        assert "merge      merged, attempt 1" in shown(worktree) and "kit/" in shown(worktree)

    drive(app, steps)
    assert seen["lead"][0] in ("pending", "running") and seen["lead"][-1] == "done"
    coders = [name for name in seen if name.startswith("coder")]
    assert len(coders) == 3 and all(seen[c][-1] == "done" for c in coders)
    # seen changing live (a coder's short running spell may fall between two reads on a loaded machine)
    assert sum(len(v) for v in seen.values()) > len(seen), seen


@pytest.mark.slow
def test_r_resumes_a_crashed_run_which_then_finishes(home: Path, tmp_path: Path) -> None:
    project = chaos.prepare("coding", tmp_path)
    run_id = "20261122-000000-tuir"
    exitcode = chaos.incarnate(
        chaos.context(), "coding", home, project, run_id, chaos.Kill("merge.merged"), first=True
    )
    assert exitcode < 0  # killed
    app, said = app_on(home / "runs", run_id)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        await until(pilot, lambda: screen.state is not None and screen.state.status == "crashed")
        await pilot.press("r")
        await until(pilot, lambda: screen.state is not None and screen.state.status == "done", timeout=90)

    drive(app, steps)
    assert said[0] == f"starting teamrt resume {run_id} --detach ..."
    assert f"resumed run {run_id}: it goes on in the background" in said, said


# -- the command --------------------------------------------------------------------------


def test_teamrt_tui_on_an_unknown_run_says_so_in_one_line(home: Path, tmp_path: Path) -> None:
    done = teamrt("tui", "no-such-run", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "no-such-run" in done.stderr


def test_starting_the_tui_does_not_import_the_anthropic_sdk() -> None:
    code = (
        "import sys, teamrt.cli, teamrt.tui.app, teamrt.tui.run_screen, teamrt.tui.runs_screen\n"
        "teamrt.cli.build_parser()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'httpx')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_call_waiting_for_approval_goes_on_when_a_is_pressed(home: Path, tmp_path: Path) -> None:
    """End to end: the rules ask about the suite's run; the TUI shows the ask; each ``a`` lets it run."""
    project = chaos.prepare("coding", tmp_path)
    team = team_file("coding").read_text()
    team = team.replace('on_ask = "deny"', 'on_ask = "deny"\nask_wait = 60')
    team = team.replace("[permissions]\n", '[permissions]\nask = ["Bash(python3 -m unittest)"]\n')
    (tmp_path / "asking.toml").write_text(team)
    started = teamrt("run", str(tmp_path / "asking.toml"), "--detach", cwd=project)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    app, said = app_on(home / "runs", run_id)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        await until(pilot, lambda: screen.state is not None and bool(screen.state.asks), timeout=30)
        assert "1 ask waiting: a/d" in shown(screen.query_one(Totals))

        for _ in range(900):  # press a while asks wait, until the run is done (90 s at most)
            state = screen.state
            assert state is not None
            if state.status == "done":
                break
            if state.asks:  # each press answers one not answered yet (or says none is left)
                await pilot.press("a")
            await pilot.pause(0.1)
        assert screen.state is not None and screen.state.status == "done"

    drive(app, steps)
    from teamrt.runs.query import reading

    with reading(home / "runs" / run_id, run_id) as reader:
        answers = [e.data for e in reader.events(kinds=("ask.answered",))]
    assert answers and all(a["by"] == "user" and a["allowed"] for a in answers), answers
    assert any(s.startswith("approved lead's Bash: python3 -m unittest") for s in said), said


def test_text_with_brackets_is_shown_as_it_is_never_read_as_markup(home: Path) -> None:
    async def build() -> Store:
        store = await coding_run(home / "runs", "run-markup")
        call = {"command": "grep -rn '[/]api' src [b]x[/b]"}
        use = ToolUse("toolu_m", "bash", call, False)
        block = {"type": "tool_use", "id": "toolu_m", "name": "bash", "input": call}
        await store.append_turn("reviewer", epoch=1, role="assistant", content=[block], tool_uses=[use])
        await store.move_tool_call("toolu_m", "running")
        await store.set_agent_status("reviewer", "running")
        await store.create_task("[urgent] fix [red]x", "d", created_by="lead", blocked_by=[])
        return store

    store = asyncio.run(build())
    app, _ = app_on(home / "runs", "run-markup")

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        screen = run_screen(app)
        table = screen.query_one(AgentList)
        await until(pilot, lambda: "[/]api" in table.cells("reviewer")[9])
        assert table.cells("reviewer")[9] == "bash: grep -rn '[/]api' src [b]x[/b]"
        tasks = screen.query_one(TaskTable)
        assert [str(c) for c in tasks.get_row_at(3)][3] == "[urgent] fix [red]x"
        await pilot.press("j")  # the reviewer: its transcript shows the call as written
        transcript = screen.query_one(Transcript)
        await until(pilot, lambda: "grep -rn '[/]api' src [b]x[/b]" in shown(transcript))

    try:
        drive(app, steps)
    finally:
        store.close()


@pytest.mark.parametrize("size", [SIZE, (80, 24)])  # offered in the footer only when wide; works on both
def test_s_saves_a_picture_under_the_runs_directory_and_says_where(
    live: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    monkeypatch.chdir(tmp_path)
    app, said = app_on(live)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        await pilot.press("s")
        await until(pilot, lambda: any(s.startswith("saved a picture of the screen: ") for s in said))
        await pilot.press("escape")  # the runs list: beside the runs
        await until(pilot, lambda: isinstance(app.screen, RunsScreen))
        said.clear()
        await pilot.press("s")
        await until(pilot, lambda: any(s.startswith("saved a picture of the screen: ") for s in said))

    drive(app, steps, size)
    [picture] = (live / "run-demo" / "screenshots").glob("*.svg")
    assert picture.read_text().startswith("<svg") and "run-demo" in picture.read_text()
    [listed] = (live.parent / "screenshots").glob("*.svg")
    assert said == [f"saved a picture of the screen: {listed}"]
    assert "run-old" not in picture.read_text() and listed.read_text().startswith("<svg")
    assert not list(tmp_path.glob("*.svg"))  # nothing in the current directory


@pytest.mark.slow
def test_run_with_tui_starts_the_run_shows_it_and_leaves_it_going_on_q(home: Path, tmp_path: Path) -> None:
    """As a person would: ``teamrt run TEAMFILE --tui`` on a terminal, ``q``, the run still going."""
    project = chaos.prepare("coding", tmp_path)
    team = (
        team_file("coding")
        .read_text()
        .replace("[permissions]\n", '[permissions]\nask = ["Bash(python3 -m unittest)"]\n')
    )
    (tmp_path / "asking.toml").write_text(
        team
    )  # the lead's first call waits for an answer: the run stays live
    # COLUMNS and LINES (set under pytest-xdist) would win over the terminal's own size
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 130, 0, 0))
    child = subprocess.Popen(
        [sys.executable, "-m", "teamrt", "run", str(tmp_path / "asking.toml"), "--tui"],
        cwd=project, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        env={**env, "TERM": "xterm-256color"},
    )  # fmt: skip
    os.close(slave)
    screen = b""
    try:
        deadline = time.monotonic() + 150  # a loaded machine: the run starts, its lead calls, it asks
        while b"1 ask waiting" not in screen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                screen += os.read(master, 65536)
        assert b"1 ask waiting" in screen, screen[-2000:]
        os.write(master, b"q")
        # Read on while it exits: a child whose terminal is full blocks on its last words, never exiting.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    screen += os.read(master, 65536)
                except OSError:  # the terminal closed: the child has gone
                    break
            elif child.poll() is not None:
                break
        assert child.wait(timeout=5) == 0
    finally:
        child.kill()
        os.close(master)
    [run_dir] = (home / "runs").iterdir()
    assert f"watch it again with teamrt tui {run_dir.name}".encode() in screen
    from teamrt.runs.query import reading, run_status

    with reading(run_dir, run_dir.name) as reader:
        assert run_status(reader.run()) == "running"  # the TUI went, the run did not
    stopped = teamrt("stop", run_dir.name, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    ended = teamrt("logs", run_dir.name, "-f", cwd=tmp_path, timeout=60)  # it ends: nothing left behind
    assert ended.returncode == 1 and "stopped" in ended.stdout, ended.stdout[-500:]


def test_with_no_runs_the_list_says_how_to_start_one(home: Path) -> None:
    app, _ = app_on(home / "runs", None)

    async def steps(pilot: Pilot[None]) -> None:
        title = app.screen.query_one("#runs-title")
        await until(pilot, lambda: "no runs yet" in shown(title))
        assert "start one with: teamrt run TEAMFILE --tui, or teamrt demo" in shown(title)

    drive(app, steps)
