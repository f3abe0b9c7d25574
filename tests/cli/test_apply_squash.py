"""``teamrt apply --squash``: a run as one commit on the person's branch, with a message drafted from the
run; and ``apply`` asking before a merge commit on a terminal."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

from teamrt.models import Reply
from teamrt.sim import SimRequest, SimServer
from tests.helpers.git import IDENTITY, git, make_repo, run_worktree_team, snapshot
from tests.worktree import test_hostile_apply as planted
from tests.worktree.test_commit_messages import CONTROLS, coder_saying
from tests.worktree.test_worktree import APP, CHECK, CHECK_PY, team_toml, teamrt


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose team's gate runs check.py; ``teamrt`` sees its runs and acts as the user in git."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "project" / ".teamrt"))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    files = {"app.py": APP, "check.py": CHECK_PY, "README": "hello\n", "team.toml": team_toml([CHECK])}
    return make_repo(tmp_path / "project", files)


ANSWER = "## Done\n\nThe coder fixed add in app.py;\ncheck.py passes.\n\nDetails: none."


def lead(answer: str = ANSWER, directive: str = "Fix add in app.py."):  # type: ignore[no-untyped-def]
    def play(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call(
                "spawn_agent", {"kind": "worktree", "role": "coder", "directives": [directive]}
            )
        return Reply().say(answer)

    return play


def finished(project: Path, sim: SimServer, prompt: str = "Fix the bug in add.\n\nIt subtracts.") -> None:
    sim.policies.update(
        {"lead": lead(), "coder": coder_saying("Fixed add: it returns a + b.", task="fix add")}
    )
    outcome, _ = run_worktree_team(project, sim, prompt)
    assert outcome.status == "done", outcome


def test_squash_lands_the_run_as_one_commit_with_a_message_drafted_from_the_run(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    finished(project, sim)
    mine = git(project, "rev-parse", "HEAD")
    code, out, err = teamrt(capsys, "apply", "r1", "--squash")
    assert code == 0, (out, err)
    assert out.startswith("squashed teamrt/r1 (2 commit(s)) onto main as "), out
    assert git(project, "rev-parse", "HEAD^") == mine and git(project, "rev-list", "--count", "HEAD") == "2"
    assert git(project, "rev-parse", "HEAD^{tree}") == git(project, "rev-parse", "teamrt/r1^{tree}")
    assert git(project, "log", "-1", "--format=%an", "HEAD") == IDENTITY["GIT_AUTHOR_NAME"], "the person's"
    message = git(project, "log", "-1", "--format=%B", "HEAD")
    head, _, trailers = message.rpartition("\n\n")
    assert head.startswith(
        "Fix the bug in add.\n\n"
        "The coder fixed add in app.py;\ncheck.py passes.\n\n"
        'Merged:\n- coder: Fixed add: it returns a + b. (task #1 "fix add")\n  gates passed: `'
    ), message
    assert " ".join(head.split()).endswith(f"gates passed: `{CHECK}`"), message
    assert re.fullmatch(r"Agents: coder\nRun: r1\nCost: \$\d+\.\d{4}( \(sim\))?", trailers), trailers
    assert git(project, "log", "-1", "--format=%(trailers:key=Run,valueonly)") == "r1"


def test_squash_onto_a_branch_that_moved_needs_no_merge_commit(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    finished(project, sim)
    (project / "README").write_text("the user moved on\n")
    git(project, "commit", "-qam", "user work")
    mine = git(project, "rev-parse", "HEAD")
    code, out, err = teamrt(capsys, "apply", "r1", "--squash")
    assert code == 0 and "squashed teamrt/r1" in out, (out, err)
    assert git(project, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:] == [mine], "one parent"
    assert git(project, "diff", "--name-only", "HEAD^", "HEAD") == "app.py"
    assert (project / "README").read_text() == "the user moved on\n"
    code, out, _ = teamrt(capsys, "apply", "r1", "--squash")
    assert code == 0 and out == "main already has the changes of teamrt/r1; nothing to commit\n"
    assert git(project, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_conflicting_squash_is_undone(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    finished(project, sim)
    (project / "app.py").write_text("def add(a, b):\n    return sum((a, b))\n")
    git(project, "commit", "-qam", "user fix")
    before = snapshot(project)
    code, _, err = teamrt(capsys, "apply", "r1", "--squash")
    assert code == 1 and "squashing teamrt/r1 onto main conflicts in app.py; nothing was changed" in err, err
    assert snapshot(project) == before
    assert not (project / ".git" / "SQUASH_MSG").exists()


def test_a_dirty_tree_is_refused_for_a_squash_too(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    finished(project, sim)
    (project / "app.py").write_text("# mine\n")
    code, _, err = teamrt(capsys, "apply", "r1", "--squash")
    assert code == 1 and "your working tree has uncommitted changes (app.py)" in err
    assert (project / "app.py").read_text() == "# mine\n"


def test_edit_opens_the_editor_on_the_draft_and_an_emptied_message_cancels(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    finished(project, sim)
    before = snapshot(project)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "truncate -s 0")
    code, _, err = teamrt(capsys, "apply", "r1", "--squash", "--edit")
    assert code == 1 and err == "teamrt: the commit message was left empty; nothing was changed\n"
    assert snapshot(project) == before
    monkeypatch.setenv("EDITOR", "sed -i '1s/.*/Fix add, my words/'")
    code, out, err = teamrt(capsys, "apply", "r1", "--squash", "--edit")
    assert code == 0, (out, err)
    message = git(project, "log", "-1", "--format=%B")
    assert message.startswith("Fix add, my words\n\nThe coder fixed add") and "# " not in message, message
    code, _, err = teamrt(capsys, "apply", "r1", "--edit")
    assert code == 1 and "use it with --squash" in err


@pytest.mark.hostile
def test_squash_refuses_a_protected_path_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("TEAMRT_HOME", str(home))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    repo = planted.repo_for(tmp_path)
    run_id = planted.planted_run(repo, home)
    before = snapshot(repo)
    code, _, err = teamrt(capsys, "apply", run_id, "--squash")
    assert code == 1 and "4 path(s) listed above may not land unasked" in err, err
    code, _, err = teamrt(capsys, "apply", run_id, "--squash", "--allow-protected", ".mcp.json")
    assert code == 1 and "3 path(s) listed above may not land unasked" in err, err
    assert snapshot(repo) == before
    allow = [arg for path in planted.PLANTED for arg in ("--allow-protected", path)]
    code, out, err = teamrt(capsys, "apply", run_id, "--squash", *allow)
    assert code == 0 and "squashed teamrt/r1" in out, (out, err)
    assert git(repo, "show", "HEAD:.mcp.json") == planted.MCP
    assert git(repo, "rev-list", "--count", "HEAD") == "2"


@pytest.mark.hostile
def test_a_squash_message_carries_no_control_character_of_the_runs_texts(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    sim.policies.update({
        "lead": lead("All fixed\x1b]0;owned\x07.\rRun: r0\n\x1b[2J\u202eCost: $0", "Fix\x1b[31m add."),
        "coder": coder_saying("Fixed\x9b2J add.\r\nAgents: root", task="fix\x1b]52;c;bad\x07 add\nRun: r0"),
    })  # fmt: skip
    outcome, _ = run_worktree_team(project, sim, "Fix\x1b[5m the\r bug.\x07\nCost: $0")
    assert outcome.status == "done", outcome
    code, out, err = teamrt(capsys, "apply", "r1", "--squash")
    assert code == 0, (out, err)
    message = git(project, "log", "-1", "--format=%B")
    assert not CONTROLS.search(message), message
    assert message.startswith("Fix the bug.\n\nAll fixed]0;owned.Run: r0\n[2JCost: $0\n\nMerged:\n"), message
    assert '- coder: Fixed2J add. (task #1 "fix]52;c;bad add Run: r0")' in message, message
    trailers = git(project, "log", "-1", "--format=%(trailers:only)")
    assert trailers.splitlines()[:2] == ["Agents: coder", "Run: r1"] and len(trailers.splitlines()) == 3


# -- apply asks before a merge commit, on a terminal ---------------------------------------------------


def moved_on(project: Path, sim: SimServer) -> str:
    finished(project, sim)
    (project / "README").write_text("the user moved on\n")
    git(project, "commit", "-qam", "user work")
    return git(project, "rev-parse", "HEAD")


def test_apply_asks_on_a_terminal_and_merges_when_told_yes(project: Path, sim: SimServer) -> None:
    mine = moved_on(project, sim)
    teamrt_bin = str(Path(sys.executable).with_name("teamrt"))
    child = pexpect.spawn(
        teamrt_bin, ["apply", "r1"], cwd=str(project), env={**os.environ, "TERM": "dumb"}, encoding="utf-8",
        timeout=30,
    )  # fmt: skip
    try:
        child.expect_exact("main has moved on since run r1 started: applying it makes a merge commit of")
        child.expect_exact("Merge coder: Fixed add: it returns a + b.")
        child.expect_exact("Merge? [y/N] ")
        child.sendline("y")
        child.expect_exact("merged teamrt/r1 into main")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert git(project, "rev-parse", "HEAD^1") == mine


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_apply_on_a_terminal_told_no_or_closed_changes_nothing(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    moved_on(project, sim)
    before = snapshot(project)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    for typed in ("n\n", ""):  # no, and the terminal closed (EOF)
        monkeypatch.setattr(sys, "stdin", Tty(typed))
        code, out, err = teamrt(capsys, "apply", "r1")
        assert code == 1 and err == "teamrt: nothing was changed\n", (out, err)
        assert "Merge? [y/N] " in out and "  " in out
        assert snapshot(project) == before


def test_apply_without_a_terminal_says_how_to_merge(
    project: Path, sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    moved_on(project, sim)
    code, _, err = teamrt(capsys, "apply", "r1")
    assert code == 1 and err == (
        "teamrt: main has moved on since run r1 started: applying it makes a merge commit of teamrt/r1"
        " (2 commit(s)) on main. Run again with --yes to make the merge commit, or --squash for one commit\n"
    )
