"""``teamrt continue`` and ``teamrt run --continue`` on sim, as a user runs them: the rounds in the store,
in ``show`` and in ``logs``; each refusal one line and a non-zero exit; a prompt's escape sequences inert."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from teamrt.cli import main
from teamrt.store import open_reader
from teamrt.store.rounds import CONTINUED, rounds_of

HOSTILE = "fix it\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x1b[1Anow\x9b31m"


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def teamrt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Done]:
    """``teamrt ARGS`` in this process, in ``project`` with its own home: its exit status and output."""

    def command(*args: str, project: Path) -> Done:
        monkeypatch.chdir(project)
        monkeypatch.setenv("TEAMRT_HOME", str(project / ".teamrt"))
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Done(code, out, err)

    return command


def inert(text: str) -> bool:
    return not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)


@pytest.fixture
def ran(tmp_path: Path, teamrt: Callable[..., Done]) -> tuple[Path, str]:
    """A project with one run of one agent on sim, done."""
    first = teamrt(
        "run", "--agent", "lead", "--model", "sim", "--prompt", "first", "--quiet", project=tmp_path
    )
    assert first.returncode == 0, first.stderr
    [run_dir] = (tmp_path / ".teamrt" / "runs").iterdir()
    return tmp_path, run_dir.name


def test_continue_and_run_continue_go_on_with_the_same_run(
    ran: tuple[Path, str], teamrt: Callable[..., Done]
) -> None:
    project, run = ran
    second = teamrt("continue", run, "--prompt", "second", project=project)
    assert second.returncode == 0, second.stderr
    assert f"run {run} goes on: round 2, the lead's conversation kept" in second.stderr
    assert "run.continued" in second.stderr and "round 2 (after done): second" in second.stderr, "progress"
    assert f"run {run}: done; 1 agent(s)," in second.stderr
    third = teamrt("run", "--continue", "--prompt", "third", "--json", project=project)
    assert third.returncode == 0, third.stderr
    said = json.loads(third.stdout)
    [run_dir] = (project / ".teamrt" / "runs").iterdir()
    reader = open_reader(run_dir, run)
    try:
        turns = reader.turns("lead")
        prompts = [
            i for i, t in enumerate(turns) if t.role == "user" and _text(t.content) in ("second", "third")
        ]
        assert [_text(turns[i].content) for i in prompts] == ["second", "third"], "each prompt read once"
        since = [t for t in turns[prompts[-1] :] if t.role == "assistant"]
        assert (said["run"], said["status"], said["lead_turns"]) == (run, "done", len(since)), "the round's"
        assert said["answer"] == _text(since[-1].content), "the latest round's answer"
        assert [e.data["round"] for e in reader.events(kinds=(CONTINUED,))] == [2, 3]
        rounds = [(r.prompt, r.status) for r in rounds_of(reader.run(), reader.events())]
        assert rounds == [("first", "done"), ("second", "done"), ("third", "done")]
    finally:
        reader.close()
    shown = teamrt("show", run, project=project)
    assert shown.returncode == 0, shown.stderr
    rows = shown.stdout.split("\nrounds\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [row.split() for row in rows] == [
        ["1", "done", "first"],
        ["2", "done", "second"],
        ["3", "done", "third"],
    ]
    as_json = json.loads(teamrt("show", run, "--json", project=project).stdout)
    assert [(r["round"], r["prompt"], r["status"]) for r in as_json["rounds"]] == [
        (1, "first", "done"), (2, "second", "done"), (3, "third", "done")
    ]  # fmt: skip
    logs = teamrt("logs", run, project=project).stdout
    assert "round 2 (after done): second" in logs and "round 3 (after done): third" in logs


def test_each_refusal_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, ran: tuple[Path, str], teamrt: Callable[..., Done]
) -> None:
    project, run = ran
    cases = [
        (("continue", "nope", "--prompt", "x"), 1, "no run named 'nope'"),
        (("continue", run), 2, "the following arguments are required: --prompt"),
        (("continue", run, "--prompt", "x", "--budget-usd", "0.000001"), 1, "is not above the $"),
        (("run", "--continue", "--prompt", "x", "--agent", "lead"), 2, "leave out --agent"),
        (("run", "--continue"), 2, "run --continue needs --prompt"),
        (("resume", run), 1, f"teamrt continue {run} --prompt"),
    ]
    for args, code, said in cases:
        done = teamrt(*args, project=project)
        assert (done.returncode, done.stderr.count("\n")) == (code, 1), (args, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = teamrt("run", "--continue", "--prompt", "x", project=empty)
    assert nothing.returncode == 1 and nothing.stderr.startswith("teamrt: no run to continue in "), (
        nothing.stderr
    )
    reader = open_reader(project / ".teamrt" / "runs" / run, run)
    try:
        assert reader.run().status == "done" and not reader.events(kinds=(CONTINUED,)), "nothing changed"
    finally:
        reader.close()


@pytest.mark.hostile
def test_a_follow_up_with_escape_sequences_is_shown_inert_and_kept_as_given(
    ran: tuple[Path, str], teamrt: Callable[..., Done]
) -> None:
    project, run = ran
    done = teamrt("continue", run, "--prompt", HOSTILE, project=project)
    assert done.returncode == 0, done.stderr
    for out in (
        done.stderr,
        teamrt("show", run, project=project).stdout,
        teamrt("show", run, "--full", project=project).stdout,
        teamrt("logs", run, project=project).stdout,
    ):
        assert inert(out), repr(out)
        assert "fix it" in out
    reader = open_reader(project / ".teamrt" / "runs" / run, run)
    try:
        [continued] = reader.events(kinds=(CONTINUED,))
        assert continued.data["prompt"] == HOSTILE, "kept as the person gave it"
    finally:
        reader.close()


def _text(content: list[Any]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def test_continue_detached_goes_on_in_the_background(
    ran: tuple[Path, str], teamrt: Callable[..., Done]
) -> None:
    project, run = ran
    started = teamrt("continue", run, "--prompt", "later", "--detach", project=project)
    assert (started.returncode, started.stdout) == (0, f"{run}\n"), started.stderr
    assert f"follow it with: teamrt logs {run} -f" in started.stderr
    followed = teamrt("logs", run, "-f", project=project)
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert "round 2 (after done): later" in followed.stdout
