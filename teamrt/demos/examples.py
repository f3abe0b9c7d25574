"""The example teams of ``examples/`` and scratch copies of what they work on.

Used by ``teamrt demo``, the fault-injection harness (``teamrt.testing.chaos``) and
the tests, so that all three run the teams on the same kind of copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from teamrt.errors import UserError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
"""In a clone of teamrt, beside the package."""
SKIPPED = ("__pycache__", "node_modules", "*.pyc", ".*")
MAX_TREE_FILES = 3_000
IDENTITY = {
    "GIT_AUTHOR_NAME": "teamrt example", "GIT_AUTHOR_EMAIL": "example@teamrt.invalid",
    "GIT_COMMITTER_NAME": "teamrt example", "GIT_COMMITTER_EMAIL": "example@teamrt.invalid",
}  # fmt: skip


class ExamplesError(UserError):
    """Why an example cannot be prepared; one line for the user."""


def team_file(example: str) -> Path:
    """``examples/<example>-team/team.toml``; ExamplesError outside a clone of teamrt."""
    path = EXAMPLES / f"{example}-team" / "team.toml"
    if not path.is_file():
        raise ExamplesError(f"{path} is missing; the examples come with a clone of teamrt")
    return path


def coding_repo(target: Path) -> Path:
    """A copy of the coding team's repository at ``target``, made a git repository of one commit."""
    shutil.copytree(EXAMPLES / "coding-team" / "repo", target, ignore=shutil.ignore_patterns(*SKIPPED[:3]))
    git = ["git", "-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null"]
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["commit", "-q", "-m", "kit: small helpers, some tests failing"],
    ):
        subprocess.run(
            [*git, *args], cwd=target, env={**os.environ, **IDENTITY}, check=True, capture_output=True
        )
    return target


def copy_tree(source: Path, target: Path) -> Path:
    """A copy of ``source`` to survey, without hidden files, caches, symlinks or an earlier report;
    refused when it is not a directory or too big."""
    if not source.is_dir():
        raise ExamplesError(f"{source} is not a directory")
    files = 0
    for _, dirs, names in os.walk(source):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED]
        files += sum(not n.startswith(".") for n in names)
        if files > MAX_TREE_FILES:
            raise ExamplesError(f"{source} has over {MAX_TREE_FILES:,} files; give a smaller tree")
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(*SKIPPED, "REPORT.md"))
    for path in list(target.rglob("*")):
        if path.is_symlink():
            path.unlink()
    return target
