"""Claude Code's ``Setup`` hooks run by ``teamrt init`` (trigger ``init``; ``--setup-only``) and
``teamrt init --maintenance`` (trigger ``maintenance``): confined, a line each, a block failing init, the
repository's only once trusted, never by a run (``teamrt.claudecode.setup_hooks``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from teamrt.claudecode import trust
from teamrt.claudecode.hooks import parse_hooks
from teamrt.claudecode.settings_read import read_settings_files
from teamrt.cli import main
from teamrt.sandbox.bwrap import default_sandbox

pytestmark = pytest.mark.skipif(
    not default_sandbox().confined and not os.environ.get("CI"), reason="Setup hooks run in bubblewrap"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    path = tmp_path / "project"
    (path / ".git").mkdir(parents=True)  # the top of a repository, as project_root finds it
    (path / ".claude").mkdir()
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def user() -> Path:
    home = Path(os.environ["CLAUDE_CONFIG_DIR"])
    home.mkdir(parents=True, exist_ok=True)
    return home


def setup_hooks(*groups: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "hooks": {
            "Setup": [
                {"matcher": matcher, "hooks": [{"type": "command", "command": command, **more}]}
                for matcher, command, more in groups
            ]
        }
    }


CONTEXT = {"hookSpecificOutput": {"hookEventName": "Setup", "additionalContext": "x"}}


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data))


def init(*args: str) -> int:
    return main(["init", *args])


def test_init_writes_the_team_then_runs_the_setup_hooks_of_init(
    project: Path, user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(user / "settings.json", setup_hooks(
        ("init", "cat > init-input.json; echo prepared", {}),
        ("maintenance", "touch maintained", {}),
        ("*", "touch any-trigger", {}),
    ))  # fmt: skip
    assert init() == 0
    out = capsys.readouterr().out
    assert (project / ".teamrt" / "team.toml").is_file()
    assert "teamrt: Setup hook (user) cat > init-input.json; echo prepared: ok in " in out
    assert "teamrt: Setup hook (user) touch any-trigger: ok in " in out
    assert json.loads((project / "init-input.json").read_text()) == {
        "session_id": "", "transcript_path": "", "cwd": str(project), "hook_event_name": "Setup",
        "trigger": "init",
    }  # fmt: skip
    assert not (project / "maintained").exists()
    assert init("--maintenance") == 0
    assert (project / "maintained").exists()
    assert "Setup hook (user) touch maintained: ok" in capsys.readouterr().out


def test_setup_only_runs_them_without_writing_and_says_when_there_are_none(
    project: Path, user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init("--setup-only") == 0
    assert capsys.readouterr().out == "teamrt: no Setup hooks of trigger 'init' to run\n"
    write(user / "settings.json", setup_hooks(("init", "touch ran", {})))
    assert init("--setup-only") == 0
    assert (project / "ran").exists() and not (project / ".teamrt").exists(), "nothing written"
    (project / "ran").unlink()
    assert init("--no-setup") == 0 and not (project / "ran").exists()


def test_a_block_fails_init_with_its_reason_on_one_line(
    project: Path, user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(user / "settings.json", setup_hooks(
        ("init", "echo 'node 20 is needed' >&2; echo 'see README' >&2; exit 2", {}),
        ("init", "echo failing >&2; exit 1", {}),
        ("init", "echo " + json.dumps(json.dumps(CONTEXT)), {}),
    ))  # fmt: skip
    assert init("--setup-only") == 1
    captured = capsys.readouterr()
    assert "teamrt: a Setup hook blocked init: node 20 is needed see README\n" in captured.err
    assert "failed in " in captured.out and "(exit code 1: failing); init goes on" in captured.out
    assert "its additionalContext is not used: teamrt init starts no session" in captured.out


def test_a_run_does_not_run_them_and_says_where_they_run(user: Path) -> None:
    write(user / "settings.json", setup_hooks(("init", "touch x", {})))
    files = read_settings_files(Path("/nowhere"))
    parsed = parse_hooks(files)
    assert parsed.hooks == ()
    assert len(parsed.problems) == 1 and "Setup hooks run with `teamrt init`" in parsed.problems[0]
    assert [h.command for h in parse_hooks(files, setup=True).matching("Setup", "init")] == ["touch x"]


@pytest.mark.hostile
def test_attack_an_untrusted_repositorys_setup_hook_does_not_run(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / ".claude" / "settings.json", setup_hooks(("init", "touch pwned", {})))
    assert init() == 0
    captured = capsys.readouterr()
    assert not (project / "pwned").exists()
    assert (
        "teamrt: warning: the repository's 1 Setup hook did not run: this project's hooks are not trusted as"
        f" they are now; read them, then run `teamrt trust` in {project} to let them run\n"
    ) in captured.err
    trust.trust(project, trust.hooks_digest(read_settings_files(project)))
    assert init("--setup-only") == 0
    assert (project / "pwned").exists(), "trusted, it runs"


@pytest.mark.hostile
def test_attack_a_hung_setup_hook_is_killed_at_its_timeout(
    project: Path, user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(user / "settings.json", setup_hooks(("init", "sleep 300 & sleep 300", {"timeout": 0.5})))
    assert init("--setup-only") == 0
    assert "timed out after 0.5 s; it and all it started were killed" in capsys.readouterr().out
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                assert (proc / "cmdline").read_bytes().split(b"\0")[:2] != [b"sleep", b"300"]
            except OSError:
                pass


@pytest.mark.hostile
def test_attack_escapes_in_a_setup_hooks_output_and_command_are_inert(
    project: Path, user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(user / "settings.json", setup_hooks(
        ("init", "printf '\\033]0;owned\\007\\342\\200\\256 evil\\033[2J' >&2; exit 2"
                 " # \x1b]52;c;eA==\x07", {}),
    ))  # fmt: skip
    assert init("--setup-only") == 1
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        assert not any(c in text for c in "\x1b\x07\u202e"), "no control reaches the terminal"
    assert "\ufffd]0;owned\ufffd\ufffd evil\ufffd[2J" in captured.err
    assert "\ufffd]52;c;eA==\ufffd" in captured.out, "the command is shown as it runs"


@pytest.mark.hostile
def test_attack_a_setup_hook_is_confined(project: Path, user: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    write(user / "settings.json", setup_hooks(("init", f"touch {outside}; touch .claude/planted", {})))
    assert init("--setup-only") == 0
    assert not outside.exists(), "only the project is writable"
    assert not (project / ".claude" / "planted").exists(), "the project's .claude is protected"
