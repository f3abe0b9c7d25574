"""Real git repositories for tests, and a team run over one on ``sim`` with worktrees."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from teamrt.agents import load_definitions
from teamrt.runtime.agent import Outcome
from teamrt.runtime.supervisor import Supervisor
from teamrt.sim import SimServer
from teamrt.store import Store, create_store
from teamrt.team import load_team
from teamrt.worktree import GitRepo, Worktrees
from tests.helpers.teams import FAST

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
) -> tuple[Outcome, Store]:
    """Run the team of ``project/team.toml`` as ``teamrt run`` would, with worktrees, on ``sim``."""
    run_dir = project / ".teamrt" / "runs" / run
    run_dir.mkdir(parents=True)
    repo = GitRepo.find(project)
    assert repo is not None
    base = repo.head()
    assert base is not None
    team = load_team(project / "team.toml", project=project)
    integration = team.integration_branch or f"teamrt/{run}"
    store = create_store(
        run_dir, run, task=prompt, workdir=str(project), base_head=base,
        settings={"integration_branch": integration, "gates": list(team.gates)},
    )  # fmt: skip

    async def go() -> Outcome:
        worktrees = Worktrees(
            repo=repo, store=store, run_dir=run_dir, run_id=run, base=base, project=project,
            integration=integration, gates=team.gates, gate_timeout=team.gate_timeout, policy=team.sandbox,
            team_file=team.path,
        )  # fmt: skip
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project),
            project=project, settings=FAST, sim=sim, worktrees=worktrees,
        )  # fmt: skip
        return await asyncio.wait_for(supervisor.run(prompt), timeout)

    try:
        return asyncio.run(go()), store
    finally:
        store.close()
