"""``teamrt transcript``: an agent's conversation read back from a real run store, folded as a person
reads it (tests/helpers/reviews.py makes the run)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from teamrt.cli import main
from tests.helpers.reviews import RUN, make_reviewed

RESULT = "FAILED (failures=1)\ntest_leap ... FAIL\nAssertionError: 1900 is not a leap year\nRan 3 tests"
MAIL = (
    '<mail id="m-1" from="reviewer" kind="message" summary="looks good">'
    "\nThe fix is right.\nShip it.\n</mail>"
)
TURNS: list[tuple[str, list[Any]]] = [
    ("user", [{"type": "text", "text": "task 1: fix kit.dates"}]),
    ("assistant", [
        {"type": "thinking", "thinking": "The leap rule misses centuries.", "signature": "s"},
        {"type": "text", "text": "I will run the tests first."},
        {"type": "tool_use", "id": "t1", "name": "Bash",
         "input": {"command": "python3 -m unittest", "timeout": 60}},
    ]),
    ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": RESULT, "is_error": True}]),
    ("assistant", [{"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": "kit/dates.py"}}]),
    ("user", [{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "ok"}]},
              {"type": "text", "text": MAIL}]),
    ("assistant", [{"type": "text", "text": "Fixed is_leap for centuries."}]),
    ("continued", [{"type": "text", "text": "Now add a test for 2000."}]),
    ("user", [{"type": "text", "text": "(a hook's context)"}]),
    ("epoch", []),
    ("compaction", [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "ok"}]),
    ("assistant", [{"type": "text", "text": "Added test_2000."}]),
]  # fmt: skip


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    made = make_reviewed(tmp_path, turns={"coder-1": TURNS})
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    return made.project


def transcript(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["transcript", RUN, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_transcript_as_a_person_reads_it(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = transcript(capsys, "coder-1")
    assert code == 0 and err == ""
    assert out == (
        "coder-1 (worktree agent, role coder) of run r1: done\n"
        "\n"
        "prompt\n"
        "  task 1: fix kit.dates\n"
        "\n"
        "coder-1\n"
        "  I will run the tests first.\n"
        "  ▸ Bash: python3 -m unittest\n"
        "    ↳ FAILED (failures=1)\n"
        "      test_leap ... FAIL  ... (4 lines)\n"
        "  ▸ Edit: kit/dates.py\n"
        "    ↳ ok\n"
        "\n"
        "mail from reviewer: looks good\n"
        "  The fix is right.\n"
        "  Ship it.\n"
        "\n"
        "coder-1\n"
        "  Fixed is_leap for centuries.\n"
        "\n"
        "── round 2: a follow-up prompt ──\n"
        "\n"
        "prompt\n"
        "  Now add a test for 2000.\n"
        "\n"
        "user\n"
        "  (a hook's context)\n"
        "\n"
        "── restarted (epoch 2): it goes on from its last kept turn ──\n"
        "\n"
        "── compacted: 2 messages replace the conversation before ──\n"
        "\n"
        "coder-1\n"
        "  Added test_2000.\n"
    )
    assert "<mail" not in out and "leap rule" not in out  # no markup; no thinking unless asked


def test_full_shows_inputs_and_results_whole_and_thinking_on_request(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = transcript(capsys, "coder-1", "--full", "--thinking")
    assert "  The leap rule misses centuries.\n" in out
    assert '        "command": "python3 -m unittest",\n        "timeout": 60\n' in out
    assert (
        "    ↳ FAILED (failures=1)\n      test_leap ... FAIL\n      AssertionError: 1900 is not a leap year\n"
        in out
    )


def test_json_is_the_stored_messages(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = transcript(capsys, "coder-1", "--json")
    messages = json.loads(out)
    assert [m["role"] for m in messages][:3] == ["user", "assistant", "user"]
    assert messages[1]["content"][2] == TURNS[1][1][2]
    assert messages[-2]["role"] == "compaction" and messages[-2]["epoch"] == 2


def test_colour_on_request(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = transcript(capsys, "coder-1", "--color=always")
    assert "\x1b[1;36mprompt\x1b[0m" in out and "▸ \x1b[33mBash: python3 -m unittest\x1b[0m" in out
    assert "↳ \x1b[31mFAILED (failures=1)\x1b[0m" in out


def test_an_unknown_agent_or_run_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = transcript(capsys, "nobody")
    assert (code, out) == (1, "")
    agents = "coder-1, coder-2, coder-3, lead, lead-fork-1"
    assert err == f"teamrt: no agent named 'nobody' in run 'r1' (its agents: {agents})\n"
    assert main(["transcript", "nope", "lead"]) == 1
    assert capsys.readouterr().err.startswith("teamrt: no run named 'nope'")


def test_an_agent_that_said_nothing_yet(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = transcript(capsys, "lead")
    assert out == "lead (lead agent) of run r1: pending\n(nothing yet)\n"


@pytest.mark.hostile
def test_escape_sequences_in_what_an_agent_said_reach_no_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "done \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x1b[H [bold red]not markup[/] \u202eevil\x9b31m"
    turns: list[tuple[str, list[Any]]] = [
        ("user", [{"type": "text", "text": f"go {evil}"}]),
        ("assistant", [{"type": "text", "text": evil},
                       {"type": "tool_use", "id": "t", "name": f"Bash{evil}", "input": {"command": evil}}]),
        ("user", [{"type": "tool_result", "tool_use_id": "t", "content": evil},
                  {"type": "text", "text": f'<mail id="m" from="x\x1b[31m" kind="message">\n{evil}\n</mail>'}]),  # noqa: E501
    ]  # fmt: skip
    made = make_reviewed(tmp_path, turns={"coder-1": turns})
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    for args in ([], ["--full"], ["--color=always"], ["--json"]):
        code, out, _ = transcript(capsys, "coder-1", *args)
        assert code == 0
        assert "\x07" not in out and "\x9b" not in out and "\u202e" not in out
        assert "\x1b" not in re.sub(r"\x1b\[[0-9;]*m", "", out)  # only the colours teamrt adds
        assert "\x1b" not in out or "--color=always" in args
        if "--json" not in args:
            assert "[bold red]not markup[/]" in out and "\ufffd]52;c;cHduZWQ=\ufffd" in out
