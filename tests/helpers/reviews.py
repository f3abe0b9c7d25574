"""A finished run to review, made fast: a real repository with the branches a coding team leaves, and a
real store that records them as the runtime does (``worktree.created`` with each checkout's base, agents'
branches, merges, turns).

- ``coder-1`` landed and was merged onto ``teamrt/r1``; its worktree is gone, its branch stays.
- ``coder-2`` is still at work in ``runs/r1/worktrees/coder-2``: an edit not committed, a new file.
- ``coder-3`` was merged and collected: its branch is gone.
- ``lead-fork-1`` is a fork: no branch of its own.

Commits carry fixed dates, so the same files give the same commits on every run of the tests.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.store import Store, create_store
from tests.helpers.git import IDENTITY, git, make_repo

RUN = "r1"
FILES = {
    "README.md": "kit: small helpers\n",
    "kit/dates.py": "def is_leap(year):\n    return year % 4 == 0\n",
    "kit/numbers.py": "def clamp(x, lo, hi):\n    return max(lo, min(x, hi + 1))\n",
}
LEAP = "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"
CLAMP = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
DATE = {"GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"}


@dataclass(frozen=True)
class Reviewed:
    project: Path
    run_dir: Path
    base: str


def commit_on(project: Path, where: Path, start: str, files: dict[str, str | bytes], message: str) -> str:
    """A commit on ``start`` with ``files`` written (as an agent's worktree makes it); its sha."""
    git(project, "worktree", "add", "-q", "--detach", str(where), start)
    write(where, files)
    env = {**os.environ, **IDENTITY, **DATE}
    for args in (["add", "-A"], ["commit", "-q", "--allow-empty", "--no-verify", "-m", message]):
        subprocess.run(["git", *args], cwd=where, env=env, check=True, capture_output=True)
    sha = git(where, "rev-parse", "HEAD")
    git(project, "worktree", "remove", "--force", str(where))
    return sha


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def make_reviewed(
    tmp: Path,
    coder1: dict[str, str | bytes] | None = None,
    turns: dict[str, list[tuple[str, list[Any]]]] | None = None,
    *,
    finished: bool = False,
) -> Reviewed:
    """The run ``r1`` under ``tmp/project/.teamrt/runs`` (set TEAMRT_HOME to ``tmp/project/.teamrt``);
    ``coder1``: the files coder-1's commit writes (default: the leap-year fix); ``turns``: each agent's
    turns as (role, content); ``finished``: the run ended ``done`` (else its owner left it running)."""
    project = make_repo(tmp / "project", FILES)
    (project / ".gitignore").write_text(".teamrt/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-q", "-m", "ignore .teamrt")
    base = git(project, "rev-parse", "HEAD")
    run_dir = project / ".teamrt" / "runs" / RUN
    run_dir.mkdir(parents=True)
    one = commit_on(project, tmp / "wt1", base, coder1 or {"kit/dates.py": LEAP}, "coder-1: fix is_leap")
    git(project, "branch", f"teamrt/{RUN}-coder-1", one)
    three = commit_on(project, tmp / "wt3", base, {"kit/numbers.py": CLAMP}, "coder-3: fix clamp")
    git(project, "branch", f"teamrt/{RUN}", base)
    git(project, "worktree", "add", "-q", str(tmp / "wti"), f"teamrt/{RUN}")
    env = {**os.environ, **IDENTITY, **DATE}
    for sha in (one, three):
        subprocess.run(["git", "merge", "-q", "--no-ff", "-m", "merge", sha], cwd=tmp / "wti", env=env,
                       check=True, capture_output=True)  # fmt: skip
    git(project, "worktree", "remove", "--force", str(tmp / "wti"))
    live = run_dir / "worktrees" / "coder-2"
    live.parent.mkdir()
    git(project, "worktree", "add", "-q", "--detach", str(live), base)
    (run_dir / "objects" / "coder-2").mkdir(parents=True)
    write(live, {"kit/numbers.py": CLAMP, "kit/extra.py": "ANSWER = 42\n"})
    asyncio.run(_store(project, run_dir, base, turns or {}, finished))
    return Reviewed(project, run_dir, base)


async def _store(
    project: Path, run_dir: Path, base: str, turns: dict[str, list[tuple[str, list[Any]]]], finished: bool
) -> None:
    store: Store = create_store(
        run_dir, RUN, task="Fix the failing tests in kit", workdir=str(project), base_head=base,
        settings={"integration_branch": f"teamrt/{RUN}"},
    )  # fmt: skip
    try:
        await store.add_agent("lead", kind="lead", model="sim")
        for n in (1, 2, 3):
            name = f"coder-{n}"
            await store.add_agent(
                name, kind="worktree", model="sim", parent="lead", role="coder",
                workspace=str(run_dir / "worktrees" / name), branch=f"teamrt/{RUN}-{name}",
            )  # fmt: skip
            await store.append_event("worktree.created", {"base": base}, agent=name)
        await store.add_agent("lead-fork-1", kind="fork", model="sim", parent="lead", role="researcher")
        await store.queue_merge("coder-1", f"teamrt/{RUN}-coder-1", "1" * 40)
        await store.set_merge_status("coder-1", "merged", merged_commit="2" * 40)
        for agent, said in turns.items():
            epoch = await store.begin_epoch(agent)
            for role, content in said:
                if role == "epoch":
                    epoch = await store.begin_epoch(agent)
                    continue
                if role == "continued":  # a follow-up of teamrt continue: its event, then the prompt
                    prompt = content[0]["text"]
                    await store.append_event("run.continued", {"round": 2, "prompt": prompt})
                    role = "user"
                stop = "end_turn" if role == "assistant" and not any(
                    b.get("type") == "tool_use" for b in content
                ) else None  # fmt: skip
                await store.append_turn(agent, epoch=epoch, role=role, content=content, stop_reason=stop)
        for n, status in ((1, "done"), (2, "running"), (3, "done")):
            await store.set_agent_status(f"coder-{n}", status)
        if finished:
            await store.set_run_status("done", "answered")
    finally:
        store.close()
