"""Real git repositories for tests, and a team run over one on ``sim`` with worktrees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from teamrt.api import RunResult
from teamrt.sim import SimServer
from teamrt.testing import run_on_sim
from teamrt.worktree import GitRepo
from tests.helpers.teams import FAST, Kept, kept

IDENTITY = {
    "GIT_AUTHOR_NAME": "User",
    "GIT_AUTHOR_EMAIL": "user@example.invalid",
    "GIT_COMMITTER_NAME": "User",
    "GIT_COMMITTER_EMAIL": "user@example.invalid",
}


def git(repo: Path, *args: str) -> str:
    """Run git as the user would, in ``repo``; its stdout, stripped. Raises on failure."""
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **IDENTITY}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A repository at ``path`` on branch ``main`` with ``files`` in one commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def snapshot(repo: Path) -> dict[str, object]:
    """What a run must not change in the user's repository: branch, HEAD, refs it had, files."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts and ".teamrt" not in p.parts
    }
    refs = [r for r in git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
            if "refs/heads/teamrt/" not in r]  # fmt: skip
    return {
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "head": git(repo, "rev-parse", "HEAD"),
        "refs": refs,
        "status": [
            line for line in git(repo, "status", "--porcelain").splitlines() if ".teamrt/" not in line
        ],
        "files": files,
    }


def run_worktree_team(
    project: Path, sim: SimServer, prompt: str, run: str = "r1", timeout: float = 90
) -> tuple[RunResult, Kept]:
    """Run the team of ``project/team.toml`` as ``teamrt run`` would, with worktrees, on ``sim``."""
    repo = GitRepo.find(project)
    assert repo is not None and repo.head() is not None, "worktrees need a repository with a commit"
    result = run_on_sim(
        project / "team.toml",
        prompt,
        project=project,
        sim=sim,
        run_dir=project / ".teamrt" / "runs" / run,
        run_id=run,
        settings=FAST,
        timeout=timeout,
    )
    return result, kept(result)
