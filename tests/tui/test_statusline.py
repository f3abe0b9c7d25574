"""The settings' ``statusLine`` in the run view: run confined with Claude Code's JSON, shown above the
footer, run again as the run moves; hostile output made inert, a hung command killed, a repository's
line run only once trusted (``teamrt.claudecode.statusline``, ``teamrt.tui.statusline``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from teamrt.claudecode import statusline, trust
from teamrt.claudecode.hooks import Hook, Ran
from teamrt.claudecode.settings_read import read_settings_files
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.store import Store, Usage, create_store
from teamrt.tui.app import TeamApp
from teamrt.tui.run_screen import RunScreen
from teamrt.tui.statusline import StatusBar, ansi_lines, outcome_lines
from tests.helpers.tuidata import NOW, text

RUN = "run-sl"
MODEL = "claude-opus-4-1"
# what the command read, kept in the project (the one place it may write), then its first line printed
READ_INPUT = "cat > sl-input.json; "
PRINTS_COST = (
    READ_INPUT + "python3 -c \"import json; d = json.load(open('sl-input.json'));"
    " print('\\033[1;32m' + d['model']['display_name'] + '\\033[0m $%.4f' % d['cost']['total_cost_usd'])\""
)

pytestmark = pytest.mark.skipif(
    not default_sandbox().confined and not os.environ.get("CI"), reason="the status line runs in bubblewrap"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".claude").mkdir(parents=True)
    return path


@pytest.fixture
def user() -> Path:
    home = Path(os.environ["CLAUDE_CONFIG_DIR"])
    home.mkdir(parents=True, exist_ok=True)
    return home


def settings(folder: Path, name: str, data: dict[str, Any]) -> None:
    (folder / name).write_text(json.dumps(data))


def line_of(command: str, **more: Any) -> dict[str, Any]:
    return {"statusLine": {"type": "command", "command": command, **more}}


async def live_run(runs: Path, project: Path) -> Store:
    (runs / RUN).mkdir(parents=True)
    store = create_store(
        runs / RUN, RUN, task="Fix it", workdir=str(project), settings={"team": {"model": MODEL}}
    )
    await store.add_agent("lead", kind="lead", model=MODEL)
    await store.begin_epoch("lead")
    await store.append_turn("lead", epoch=1, role="user", content=text("Fix it"))
    spent = Usage(input_tokens=1000, output_tokens=100, cost_usd=0.25)
    await store.append_turn("lead", epoch=1, role="assistant", content=text("On it."), usage=spent)
    return store


def watch(
    runs: Path, project: Path, steps: Callable[[Pilot[None], Store, StatusBar], Awaitable[None]]
) -> list[str]:
    """The run view of a live run of ``project``; ``steps`` driven on its status bar. The toasts said."""
    said: list[str] = []

    async def go() -> None:
        store = await live_run(runs, project)
        app = TeamApp(runs, RUN, clock=lambda: NOW, blink=False)
        original = app.notify

        def notify(message: str, **kw: Any) -> None:
            said.append(message)
            original(message, **kw)

        app.notify = notify  # type: ignore[method-assign]
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None)
                await steps(pilot, store, app.screen.query_one(StatusBar))
        finally:
            store.close()

    asyncio.run(go())
    return said


async def until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await pilot.pause(0.02)
    raise AssertionError("the screen did not get there in time")


def shown(bar: StatusBar) -> str:
    return str(bar.render())


def test_the_status_line_shows_the_commands_line_fed_claude_codes_json(
    runs: Path, project: Path, user: Path
) -> None:
    settings(user, "settings.json", line_of(PRINTS_COST, padding=2))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: "Opus 4.1 $0.2500" in shown(bar))
        [rendered] = bar.lines
        assert rendered.plain.startswith("  Opus 4.1"), "padding: 2 cells in"
        assert [str(span.style) for span in rendered.spans] == ["bold color(2)"], (
            "its colours are kept, as styles"
        )
        assert bar.display
        sent = json.loads((project / "sl-input.json").read_text())
        assert sent["session_id"] == RUN and sent["hook_event_name"] == "Status"
        assert sent["model"] == {"id": MODEL, "display_name": "Opus 4.1"}
        assert sent["workspace"]["project_dir"] == str(project) == sent["cwd"]
        assert sent["cost"]["total_cost_usd"] == 0.25
        assert isinstance(sent["cost"]["total_duration_ms"], int)
        assert sent["context_window"]["context_window_size"] == 200_000
        assert sent["context_window"]["used_percentage"] is None, "what teamrt does not know is null"
        assert "transcript_path" not in sent, "teamrt keeps no transcript file: left out, not made up"
        assert sent["teamrt"]["status"] == "running"
        runs_before = bar.runs
        more = Usage(input_tokens=500, output_tokens=50, cost_usd=0.5)
        await store.append_turn("lead", epoch=1, role="assistant", content=text("More."), usage=more)
        await until(pilot, lambda: "$0.7500" in shown(bar))
        assert bar.runs == runs_before + 1, "the run moved once: the line ran once more"

    watch(runs, project, steps)


def test_several_lines_show_as_rows_and_nothing_printed_hides_the_bar(
    runs: Path, project: Path, user: Path
) -> None:
    settings(user, "settings.json", line_of(READ_INPUT + "printf 'one\\ntwo\\nthree\\nfour\\n'"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: "three" in shown(bar))
        assert shown(bar).splitlines() == ["one", "two", "three"], "at most 3 rows"

    watch(runs, project, steps)


def test_nothing_printed_shows_no_row() -> None:
    ran = Ran(Hook("statusLine", "", "true", 1.0, "user", Path("s")), 0, "\n\n", "", 3)
    assert outcome_lines(ran, 2) == [], "nothing printed: no row, as in Claude Code (the bar hides)"


def test_a_failing_command_is_named_in_one_dim_line(runs: Path, project: Path, user: Path) -> None:
    settings(user, "settings.json", line_of(READ_INPUT + "echo 'jq: not found' >&2; exit 127"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: "exit code 127" in shown(bar))
        assert shown(bar) == "statusLine: exit code 127: jq: not found"

    watch(runs, project, steps)


def test_a_users_script_in_the_hidden_home_is_shown_to_the_sandbox(
    runs: Path, project: Path, user: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``~/.claude/statusline.sh``, what Claude Code's /statusline writes, runs though the home is hidden."""
    home = tmp_path / "person"
    (home / ".claude").mkdir(parents=True)
    script = home / ".claude" / "statusline.sh"
    script.write_text("#!/bin/sh\ncat > /dev/null\necho from-home-script\n")
    script.chmod(0o755)
    (home / ".claude" / "secret.txt").write_text("hidden")
    monkeypatch.setenv("HOME", str(home))
    settings(user, "settings.json", line_of("~/.claude/statusline.sh; cat ~/.claude/secret.txt 2>&1; true"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: "from-home-script" in shown(bar))
        assert "hidden" not in shown(bar), "only the script is shown, not the folder around it"

    watch(runs, project, steps)


@pytest.mark.hostile
def test_attack_escapes_and_bidi_in_the_output_are_inert(runs: Path, project: Path, user: Path) -> None:
    hostile = (
        r"\033]52;c;cm0gLXJmIH4=\007\033]0;owned\007\033[2J\033[H\033[31mred\033[0m \033]8;;https://x.test\033\\"
        r"link\033]8;;\033\\ \342\200\256evil\342\200\254 \033[8mhidden\033[0m \033P+q\033\\ \233"
        r"1;1H\007end"
    )
    settings(user, "settings.json", line_of(READ_INPUT + f"printf '{hostile}\\n'"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: "end" in shown(bar))
        said = shown(bar)
        assert not any(c in said for c in "\x1b\x07\x9b\u202e\u202c"), "no control reaches the terminal"
        assert "\ufffd]52;c;cm0gLXJmIH4=" in said, "an OSC string is shown, not run or dropped"
        assert "red link" in said and "https://x.test" not in said, "an OSC 8 link shows its text"
        assert "\ufffdevil\ufffd" in said, "a bidi override is shown as U+FFFD"
        [rendered] = bar.lines
        assert not any(getattr(s.style, "conceal", False) for s in rendered.spans), "concealed text shows"
        assert "color(1)" in [str(s.style) for s in rendered.spans], "the colour stays (red)"

    watch(runs, project, steps)


@pytest.mark.hostile
def test_attack_a_hung_command_is_killed_with_what_it_started_and_the_ui_goes_on(
    runs: Path, project: Path, user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(statusline, "TIMEOUT", 0.6)
    settings(user, "settings.json", line_of(READ_INPUT + "sleep 300 & echo $! > child.pid; sleep 300"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await pilot.press("j")  # the view answers keys while the command hangs
        await until(pilot, lambda: "timed out after 0.6 s" in shown(bar))
        child = int((project / "child.pid").read_text())  # its pid inside the sandbox's namespace
        assert child > 0
        assert isinstance(pilot.app.screen, RunScreen)

    watch(runs, project, steps)
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs_sleep_300(p)]
    assert leftovers == [], "the command's group is killed, the child it left too"


def _runs_sleep_300(proc: Path) -> bool:
    try:
        return (proc / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"300"]
    except OSError:
        return False


@pytest.mark.hostile
def test_attack_ten_megabytes_on_one_line_shows_a_cut_row(runs: Path, project: Path, user: Path) -> None:
    settings(user, "settings.json", line_of(READ_INPUT + "head -c 10000000 /dev/zero | tr '\\0' 'x'; echo"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: bar.runs >= 1)
        row, cut = bar.lines
        assert set(row.plain) == {"x"} and len(row.plain) == 2000, "a row reads the first 2000 characters"
        assert cut.plain.startswith("[... ") and "bytes more not kept]" in cut.plain, (
            "hook output's cap, said"
        )

    watch(runs, project, steps)


@pytest.mark.hostile
def test_attack_an_untrusted_repositorys_status_line_does_not_run(
    runs: Path, project: Path, user: Path
) -> None:
    settings(project / ".claude", "settings.json", line_of("touch pwned; echo repository"))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: "not trusted" in shown(bar))
        assert "`teamrt trust`" in shown(bar)

    said = watch(runs, project, steps)
    assert not (project / "pwned").exists()
    assert any("its statusLine does not run: this project's hooks are not trusted" in s for s in said)


def test_a_repositorys_line_gives_way_to_the_persons_own_until_trusted(project: Path, user: Path) -> None:
    settings(project / ".claude", "settings.json", line_of("echo repository"))
    settings(user, "settings.json", line_of("echo mine"))
    chosen = statusline.choose(project)
    assert chosen.line is not None and chosen.line.command == "echo mine", "the person's own shows instead"
    assert len(chosen.notes) == 1 and "run `teamrt trust` in" in chosen.notes[0]
    digest = trust.hooks_digest(read_settings_files(project))
    assert digest is not None, "the repository's statusLine is in the hooks' hash"
    trust.trust(project, digest)
    chosen = statusline.choose(project)
    assert chosen.line is not None and chosen.line.command == "echo repository" and chosen.notes == ()
    settings(project / ".claude", "settings.json", line_of("echo changed"))
    assert statusline.choose(project).line.command == "echo mine", "a change lapses the trust"  # type: ignore[union-attr]


@pytest.mark.hostile
def test_attack_a_settings_local_json_git_tracks_is_the_repositorys_and_waits_for_trust(
    project: Path,
) -> None:
    """A ``settings.local.json`` committed to the repository is someone else's word, like settings.json."""
    settings(project / ".claude", "settings.local.json", line_of("touch pwned; echo planted"))
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "-f", ".claude/settings.local.json"], check=True)
    chosen = statusline.choose(project)
    assert chosen.line is None and chosen.untrusted == (project / ".claude" / "settings.local.json",)
    assert len(chosen.notes) == 1 and "run `teamrt trust` in" in chosen.notes[0]


def test_trust_recorded_without_a_status_line_still_holds(project: Path) -> None:
    settings(
        project / ".claude",
        "settings.json",
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}},
    )
    before = trust.hooks_digest(read_settings_files(project))
    settings(
        project / ".claude",
        "settings.json",
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}, "model": "opus"},
    )
    assert trust.hooks_digest(read_settings_files(project)) == before, "no statusLine: the hash is as it was"


def test_disable_all_hooks_turns_the_line_off_and_bad_entries_are_named(project: Path, user: Path) -> None:
    settings(user, "settings.json", {"disableAllHooks": True, **line_of("echo mine")})
    chosen = statusline.choose(project)
    assert chosen.line is None and "disableAllHooks turns it off" in chosen.notes[0]
    assert statusline.entry_problems({"type": "prompt", "command": "x"}) == [
        "statusLine type 'prompt' is not one teamrt runs (only 'command'); left out"
    ]
    assert statusline.entry_problems(
        {"type": "command", "command": "x", "padding": -1, "refreshInterval": 0.1, "colour": 1}
    ) == [
        "statusLine padding must be a number of characters, 0 or more; it gets 0",
        "statusLine refreshInterval 0.1 is under 1 s; it gets 1",
        "statusLine: unknown field colour ignored",
    ]


def test_ansi_lines_keep_sgr_only() -> None:
    [line] = ansi_lines("\x9b1mbold\x1b[0m \x1b[38:2:1:2:3mtrue\x1b[0m\t\x1b[Kx\r\n")
    assert line.plain == "bold true \ufffd[Kx"
    assert any(s.style and "bold" in str(s.style) for s in line.spans), "an 8-bit CSI SGR is a style too"


@pytest.mark.hostile
def test_attack_teamrt_trust_shows_a_repositorys_status_line_with_its_escapes_written_out(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrt.cli import main

    (project / ".git").mkdir()
    monkeypatch.chdir(project)
    settings(project / ".claude", "settings.json", line_of("echo hi \x1b]0;x\x07\u202e"))
    assert main(["trust", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "(project), which teamrt tui runs: echo hi \\x1b]0;x\\x07\\u202e\n" in out
    assert "teamrt trusts the hooks of" in out
    assert statusline.choose(project).line is not None, "trusted by what it showed"


def test_refresh_interval_runs_it_again_while_the_run_is_still(
    runs: Path, project: Path, user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(statusline, "MIN_REFRESH_S", 0.1)  # Claude Code's floor is 1 s: kept short here
    settings(user, "settings.json", line_of(READ_INPUT + "echo tick", refreshInterval=0.2))

    async def steps(pilot: Pilot[None], store: Store, bar: StatusBar) -> None:
        await until(pilot, lambda: bar.runs >= 3)
        assert shown(bar) == "tick"

    watch(runs, project, steps)
