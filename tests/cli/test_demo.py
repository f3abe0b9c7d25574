"""The ``teamrt`` command, its mailbox demo between real processes, and the run directory."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from teamrt import __version__, home
from teamrt.cli import main
from teamrt.demos.mailbox import HOSTILE
from teamrt.mailbox import InvalidName, Mailbox, Message, is_name

AGENTS = ("lead", "alice", "bob", "carol")


def teamrt(*args: str, home_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m teamrt ARGS`` with TEAMRT_HOME set, from home_dir's parent."""
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args],
        env={**os.environ, "TEAMRT_HOME": str(home_dir)},
        cwd=home_dir.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = teamrt("--version", home_dir=tmp_path / "home")
    assert (result.returncode, result.stdout) == (0, f"teamrt {__version__}\n")
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"teamrt {__version__}\n"


def test_demo_between_processes_acknowledges_everything(tmp_path: Path) -> None:
    home_dir = tmp_path / "home"
    result = teamrt("demo", "mailbox", "--rounds", "20", home_dir=home_dir)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert re.search(r"^\s+worker\s+p50\s+p90\s+p99\s+max\s+rtt p50$", result.stdout, re.M)
    for row in ("alice", "bob", "carol", "all"):
        assert re.search(rf"^\s+{row}(\s+\d+\.\d\d){{5}}$", result.stdout, re.M), row
    (run,) = (home_dir / "runs").iterdir()
    root = run / "mailbox"
    assert str(root) in result.stdout
    assert mode(home_dir) == mode(run) == 0o700

    delivered: dict[str, list[Message]] = {}
    for agent in AGENTS:
        assert list((root / agent / "new").iterdir()) == [], f"{agent} left mail unacknowledged"
        delivered[agent] = [Message.decode(p.read_bytes()) for p in (root / agent / "cur").iterdir()]
        assert {m.recipient for m in delivered[agent]} == {agent}
    to_workers = [m.id for agent in AGENTS[1:] for m in delivered[agent]]
    assert len(delivered["bob"]) > 20  # the pings, and more
    # Every message the lead sent was answered exactly once.
    assert sorted(m.reply_to or "" for m in delivered["lead"]) == sorted(to_workers)
    assert any(m.kind == "result" for m in delivered["lead"])
    assert sum(m.kind == "shutdown_response" for m in delivered["lead"]) == 3


def test_demo_quarantines_the_hostile_file_with_its_reason(tmp_path: Path) -> None:
    home_dir = tmp_path / "home"
    result = teamrt("demo", "mailbox", "--rounds", "1", home_dir=home_dir)

    assert result.returncode == 0, result.stderr
    (run,) = (home_dir / "runs").iterdir()
    with Mailbox(run / "mailbox", run.name) as mailbox:
        with mailbox.open_maildir("alice") as alice:
            (note,) = alice.quarantined()
        for agent in ("lead", "bob", "carol"):
            with mailbox.open_maildir(agent) as maildir:
                assert list(maildir.quarantined()) == []
    assert note["reason"].startswith("not JSON")
    assert (run / "mailbox" / "alice" / "bad" / note["file"]).read_bytes() == HOSTILE
    assert note["reason"] in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["demo", "mailbox", "--rounds", "zero"], "--rounds"),
        (["demo", "mailbox", "--rounds", "0"], "--rounds"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_get_one_line_and_no_traceback(tmp_path: Path, args: list[str], expected: str) -> None:
    result = teamrt(*args, home_dir=tmp_path / "home")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert expected in result.stderr
    assert not (tmp_path / "home").exists()


def test_unusable_home_gets_one_line_and_no_traceback(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "home"
    not_a_dir.write_text("a file where the run directory should be\n")
    result = teamrt("demo", home_dir=not_a_dir)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("teamrt: ") and len(result.stderr.splitlines()) == 1


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.delenv(home.HOME_ENV, raising=False)
    return tmp_path


def test_default_home_is_private_and_excluded_from_git_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subdir = repo / "src"
    subdir.mkdir()
    monkeypatch.chdir(subdir)

    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("*.log\n.teamrt/\n")  # what an older teamrt wrote: it hid agent files from git too
    first, second = home.teamrt_home(), home.teamrt_home()
    (home.run_dir(home.new_run_id()) / "run.db").write_text("")

    assert first == second == repo.resolve() / ".teamrt", "at the repository's top, from any directory in it"
    assert mode(first) == 0o700
    assert exclude.read_text().splitlines() == ["*.log", *home.EXCLUDE_LINES]
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout == ""
    (first / "agents").mkdir()
    (first / "agents" / "helper.md").write_text("---\nname: helper\n---\n")
    (first / "team.toml").write_text("")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True, text=True
    )
    assert status.stdout.splitlines() == ["?? .teamrt/agents/helper.md", "?? .teamrt/team.toml"]


def test_bare_teamrt_prints_help(tmp_path: Path) -> None:
    result = teamrt(home_dir=tmp_path / "home")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("usage: teamrt") and "run " in result.stdout and "init " in result.stdout


def test_configured_home_leaves_git_alone(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    before = exclude.read_text()
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "home"
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    monkeypatch.setenv(home.HOME_ENV, str(elsewhere))
    monkeypatch.chdir(repo)

    assert home.teamrt_home() == elsewhere.resolve()
    assert mode(elsewhere) == 0o700
    assert exclude.read_text() == before


def test_worktree_git_file_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    monkeypatch.delenv(home.HOME_ENV, raising=False)
    monkeypatch.chdir(tmp_path)

    assert home.teamrt_home() == tmp_path.resolve() / ".teamrt"
    assert (tmp_path / ".git").read_text() == "gitdir: /elsewhere/.git/worktrees/x\n"


def test_run_ids_are_run_names_and_run_dirs_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    run_id = home.new_run_id()

    assert re.fullmatch(r"\d{8}-\d{6}-[a-z0-9]{4}", run_id) and is_name(run_id)
    assert home.run_dir(run_id) == tmp_path / "home" / "runs" / run_id
    assert mode(tmp_path / "home" / "runs" / run_id) == 0o700
    with pytest.raises(InvalidName):
        home.run_dir("../escape")
