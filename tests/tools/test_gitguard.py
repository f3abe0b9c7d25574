"""The text check that refuses git commands pointed outside the workspace, and the sandbox's binds."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrt.sandbox.bwrap import bwrap_options
from teamrt.sandbox.confinement import Confinement
from teamrt.tools.shell.gitguard import git_escape

pytestmark = pytest.mark.hostile

WS = Path("/work/ws")


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git -C sub log",
        "git -C . -C sub diff",
        "git --git-dir=.git log",
        "git -c user.name=x commit -m 'a -C /etc b'",
        "echo 'git -C /etc'",
        "git log -C",  # -C after the subcommand is log's copy detection, not a directory
        "grep GIT_DIR notes.txt",
    ],
)
def test_git_inside_the_workspace_passes(command: str) -> None:
    assert git_escape(command, WS) is None


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("git -C /etc commit -m x", "git -C /etc"),
        ("git -C .. status", "git -C .."),
        ("git -C sub -C ../.. status", "git -C ../.."),
        ("git --git-dir=/p/.git log", "git --git-dir /p/.git"),
        ("git --work-tree ../other add .", "git --work-tree ../other"),
        ("ls && /usr/bin/git -c a=b --git-dir /p/.git log", "git --git-dir /p/.git"),
        ("GIT_DIR=/p/.git git commit", "GIT_DIR=/p/.git"),
        ("export GIT_WORK_TREE=/p; git add .", "GIT_WORK_TREE=/p"),
        ("env GIT_OBJECT_DIRECTORY=/p/.git/objects git commit", "GIT_OBJECT_DIRECTORY=/p/.git/objects"),
        ("sudo -u me git -C /etc commit", "git -C /etc"),
        ("nice -n 5 command git --work-tree=/p add .", "git --work-tree /p"),
        ("if true; then g\\it -C '/e'tc commit; fi", "git -C /etc"),
        ("echo $(git -C /etc log)", "git -C /etc"),
        ("find . -exec git -C /etc add {} +", "git -C /etc"),
        ("x=1 GIT_WORK_TREE=/p git add .", "GIT_WORK_TREE=/p"),
    ],
)
def test_git_pointed_outside_is_refused_naming_what(command: str, shown: str) -> None:
    why = git_escape(command, WS)
    assert (
        why == f"`{shown}` points git outside your workspace ({WS}); git may only work on your own checkout"
    )


def test_a_path_the_text_cannot_tell_is_refused() -> None:
    assert "literal path" in (git_escape('git -C "$HOME" status', WS) or "")
    assert "literal path" in (git_escape("git --git-dir=`pwd`/x log", WS) or "")


def test_git_options_the_text_cannot_read_are_refused() -> None:
    assert git_escape("git $OPTS status", WS) == (
        "cannot tell where git works: `$OPTS` is not plain text; write the command more plainly"
    )
    assert git_escape('git commit -m "$MSG"', WS) is None


def test_what_the_parser_cannot_read_is_left_to_bash_and_the_sandbox() -> None:
    assert git_escape("git commit -m 'oops", WS) is None
    assert git_escape("[[ -d .git ]] && git status", WS) is None


def test_a_worktrees_repository_is_read_only_and_its_metadata_writable_after_the_private_tmp(
    tmp_path: Path,
) -> None:
    ws, git_dir, admin = tmp_path / "ws", tmp_path / "repo/.git", tmp_path / "repo/.git/worktrees/a"
    ctx = Confinement(ws, tmp_path / "home/runs/r1", writable=(admin,), readable=(git_dir,))
    options = bwrap_options(ctx)
    tmpfs = options.index("--tmpfs")
    ro = options.index(str(git_dir))
    rw = options.index(str(admin))
    assert tmpfs < ro < rw, "the private /tmp first, then the repository read-only, then its metadata"
    assert options[ro - 1] == "--ro-bind" and options[rw - 1] == "--bind"
