"""The terminal's notifications: the channel each terminal gets, the OSC sequences byte for byte, what a
hostile ask's command can do to them (nothing), and ``teamrt run`` ringing on a real pseudo-terminal (and
not through a pipe, nor with --quiet).
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from teamrt.cli import main
from teamrt.runs.alerts import MIN_GAP_S, Alerts, choose_channel, sequence, terminal_alerts
from teamrt.runtime.notices import Notice
from teamrt.settings import NotifySettings
from teamrt.store import EventRecord

HOSTILE = "rm -rf x\x1b]52;c;cHduZWQ=\x07\x9c\x1b\\; echo\nowned\u202e\r\x00"
"""An agent's command that would end an OSC early, write the clipboard and reverse the text after it."""


@pytest.mark.parametrize(
    ("env", "channel"),
    [
        ({"TERM_PROGRAM": "iTerm.app", "TERM": "xterm-256color"}, "osc9"),
        ({"LC_TERMINAL": "iTerm2", "TERM": "xterm-256color"}, "osc9"),  # iTerm2 over ssh
        ({"KITTY_WINDOW_ID": "1", "TERM": "xterm-kitty"}, "osc99"),
        ({"TERM_PROGRAM": "ghostty", "TERM": "xterm-ghostty"}, "osc777"),
        ({"TERM_PROGRAM": "WezTerm", "TERM": "xterm-256color"}, "osc777"),
        ({"TERM": "foot"}, "osc777"),
        ({"TERM": "rxvt-unicode-256color"}, "osc777"),
        ({"TERM_PROGRAM": "Apple_Terminal", "TERM": "xterm-256color"}, "bell"),
        ({"WT_SESSION": "x", "TERM": "xterm-256color"}, "bell"),  # its OSC 9 means other things
        ({"TERM": "xterm-256color"}, "bell"),
        ({"TERM": "screen", "TMUX": "/tmp/tmux-0/default,1,0", "LC_TERMINAL": "iTerm2"}, "osc9"),
        ({"TERM": "dumb", "TERM_PROGRAM": "iTerm.app"}, None),
    ],
)
def test_auto_picks_the_channel_from_the_terminal(env: dict[str, str], channel: str | None) -> None:
    assert choose_channel("auto", env) == channel


def test_the_setting_overrides_the_guess() -> None:
    assert choose_channel("osc777", {"TERM_PROGRAM": "iTerm.app"}) == "osc777"
    assert choose_channel("bell", {"TERM_PROGRAM": "iTerm.app"}) == "bell"
    assert choose_channel("off", {"TERM_PROGRAM": "iTerm.app"}) is None


NOTICE = Notice("ask", "r1", "teamrt r1: permission needed", "lead asks to use Bash: ls (teamrt answer ...)")


def test_each_channel_writes_its_own_sequence() -> None:
    t, m = NOTICE.title, NOTICE.message
    assert sequence(NOTICE, "osc9") == f"\x1b]9;{t}: {m}\x07"
    assert sequence(NOTICE, "osc777") == f"\x1b]777;notify;{t};{m}\x07"
    assert sequence(NOTICE, "osc99", ident=3) == (
        f"\x1b]99;i=teamrt3:d=0;{t}\x1b\\\x1b]99;i=teamrt3:p=body;{m}\x1b\\"
    )
    assert sequence(NOTICE, "bell") == ""
    assert sequence(NOTICE, "osc9", tmux=True) == f"\x1bPtmux;\x1b\x1b]9;{t}: {m}\x07\x1b\\"
    digits = Notice("end", "9", "4;3 done", "x")
    assert sequence(digits, "osc9") == "\x1b]9;teamrt: 4,3 done: x\x07", "never read as ConEmu's 9;4"


class Terminal(io.StringIO):
    """stderr as a terminal."""

    def isatty(self) -> bool:
        return True


def ask_event(command: str, id_: int = 1) -> EventRecord:
    data = {"id": f"ask-{id_}", "tool": "Bash", "input": {"command": command}, "reason": "r", "wait_s": 30}
    return EventRecord(id_, 0.0, "lead", "ask", data)


@pytest.mark.hostile
@pytest.mark.parametrize("channel", ["osc9", "osc777", "osc99"])
def test_attack_an_asks_command_cannot_end_the_osc_or_start_a_sequence(
    channel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    stream = Terminal()
    alerts = terminal_alerts("r1", NotifySettings(terminal=channel), stream)
    assert alerts is not None
    alerts.seen(ask_event(HOSTILE))
    written = stream.getvalue().encode()
    fields = {
        "osc9": rb"\x1b\]9;([^\x00-\x1f\x7f]*)\x07\x07",
        "osc777": rb"\x1b\]777;notify;([^\x00-\x1f\x7f;]*);([^\x00-\x1f\x7f;]*)\x07\x07",
        "osc99": rb"\x1b\]99;i=teamrt1:d=0;([^\x00-\x1f\x7f]*)\x1b\\"
        rb"\x1b\]99;i=teamrt1:p=body;([^\x00-\x1f\x7f]*)\x1b\\\x07",
    }
    assert re.fullmatch(fields[channel], written), written
    text = written.decode()
    assert "\x9c" not in text and "\u202e" not in text and "\r" not in text
    assert "rm -rf x]52,c,cHduZWQ=" in text, "the command is shown, made inert"


def test_a_burst_rings_once_and_the_runs_end_always_rings() -> None:
    rings: list[str] = []
    now = [100.0]
    alerts = Alerts("r1", NotifySettings(terminal="bell"), {}, ring=rings.append, clock=lambda: now[0])
    assert alerts.seen(ask_event("ls", 1)) is not None
    assert alerts.seen(ask_event("ls", 2)) is not None, "still a notice (the TUI toasts it)"
    assert rings == [""]
    alerts.seen(EventRecord(3, 0.0, None, "run.status", {"status": "done", "reason": None}))
    assert rings == ["", ""]
    now[0] += MIN_GAP_S
    alerts.seen(ask_event("ls", 4))
    assert len(rings) == 3
    assert alerts.seen(EventRecord(5, 0.0, "lead", "agent.done", {})) is None


def test_the_events_setting_and_the_terminal_decide_what_rings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    assert terminal_alerts("r1", NotifySettings(), io.StringIO()) is None, "not a terminal"
    assert terminal_alerts("r1", NotifySettings(terminal="off"), Terminal()) is None
    stream = Terminal()
    alerts = terminal_alerts("r1", NotifySettings(events=("end",)), stream)
    assert alerts is not None and alerts.seen(ask_event("ls")) is None and stream.getvalue() == ""


# -- teamrt run on a real terminal ----------------------------------------------------------------------


def teamrt_on(project: Path, *args: str, terminal: bool) -> tuple[bytes, str]:
    """``teamrt ARGS`` with its stderr on a pseudo-terminal (or a pipe); what reached stderr, and stdout."""
    env = {**os.environ, "TEAMRT_HOME": str(project / ".teamrt"), "TERM": "xterm-256color",
           "TERM_PROGRAM": "iTerm.app"}  # fmt: skip
    env.pop("TMUX", None)
    argv = [sys.executable, "-m", "teamrt", *args]
    if not terminal:
        done = subprocess.run(argv, env=env, cwd=project, capture_output=True, timeout=120, check=False)
        return done.stderr, done.stdout.decode()
    main, other = pty.openpty()
    proc = subprocess.Popen(argv, env=env, cwd=project, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=other)  # fmt: skip
    os.close(other)
    got: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every end of the terminal is closed
                return
            if not chunk:
                return
            got.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.wait(timeout=120)
    reader.join(timeout=30)
    os.close(main)
    return b"".join(got), out


def run_id_of(project: Path) -> str:
    return next((project / ".teamrt" / "runs").iterdir()).name


@pytest.mark.slow
def test_a_foreground_run_on_a_terminal_rings_at_its_end(tmp_path: Path) -> None:
    err, out = teamrt_on(
        tmp_path, "run", "--prompt", "hi", "--model", "sim", "--agent", "reviewer", terminal=True
    )
    run = run_id_of(tmp_path)
    assert f"\x1b]9;teamrt {run}: done: the run done\x07\x07".encode() in err, err
    assert err.count(b"\x07") == 2 and err.count(b"\x1b]") == 1, "one notification, at the end"
    assert "\x07" not in out and "\x1b" not in out, "stdout (the answer) carries none of it"


def in_process(project: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    """``teamrt ARGS`` in this process with stderr a terminal (iTerm2's); what reached stderr."""
    monkeypatch.setenv("TEAMRT_HOME", str(project / ".teamrt"))
    monkeypatch.setenv("TERM_PROGRAM", "iTerm.app")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.chdir(project)
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    main(list(args))
    return stream.getvalue()


def test_quiet_rings_nothing_and_the_json_on_stdout_carries_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a").mkdir()
    one = ("--prompt", "hi", "--model", "sim", "--agent", "reviewer")
    said = in_process(tmp_path / "a", monkeypatch, "run", "--json", *one)
    run = run_id_of(tmp_path / "a")
    assert f"\x1b]9;teamrt {run}: done: the run done\x07\x07" in said, said
    out = capsys.readouterr().out
    assert json.loads(out)["status"] == "done" and "\x07" not in out and "\x1b" not in out
    (tmp_path / "b").mkdir()
    quiet = in_process(tmp_path / "b", monkeypatch, "run", "--quiet", *one)
    assert "\x07" not in quiet and "\x1b" not in quiet
