"""Worktree benchmark, on a repository of 5,000 files.

- spawn: the time from the supervisor starting to add a worktree agent (its worktree
  created, its branch named, its store rows written) to that agent's first model request
  reaching ``sim``, for 5 agents spawned one at a time; against ``git worktree add``
  alone on the same repository in the same run (the floor: checking out 5,000 files).
  Target: at most 100 ms above the floor. This machine's file system makes one ``git
  worktree add`` vary by +-20% from the next (hundreds of ms), more than the target, so
  the overhead is also taken per spawn: its latency less the ``git worktree add`` inside it.
- merge queue: 10 small green branches (one new file each) landed through the real
  queue with a trivial gate (``true``, sandboxed like every gate): each is merged
  ``--no-ff`` in the queue's worktree, gated, and the integration branch moved.

Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from teamrt.agents import load_definitions
from teamrt.models import Reply
from teamrt.runtime.supervisor import Supervisor
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.settings import Settings
from teamrt.sim import SimRequest, SimServer
from teamrt.store import create_store
from teamrt.store.engine import DB_ENV
from teamrt.team import load_team
from teamrt.worktree import GitRepo, MergeQueue, Worktrees

FILES = 5_000
SPAWNS = 5
BRANCHES = 10
TARGET_OVERHEAD_MS = 100.0
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@teamrt.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@teamrt.invalid",
}


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **IDENTITY, **(env or {})},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    """A repository of ``FILES`` small source files in 50 directories, one commit."""
    for i in range(FILES):
        f = path / f"pkg{i % 50:02d}" / f"mod{i:04d}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f'"""Module {i}."""\n\n\ndef f{i}(x):\n    return x + {i}\n')
    (path / "team.toml").write_text(
        "[team]\nmodel = 'sim'\nmax_agents = 40\n[roles.coder]\n[merge]\ngates = ['true']\n"
    )
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "5,000 files")
    return path


def worktree_add_ms(repo: Path, scratch: Path, count: int) -> list[float]:
    """``git worktree add`` alone, timed as teamrt runs it (detached, quiet), each then removed."""
    times = []
    for _ in range(count):
        path = scratch / "plain"
        start = time.perf_counter()
        git(repo, "worktree", "add", "--detach", "--quiet", str(path), "HEAD")
        times.append((time.perf_counter() - start) * 1000)
        git(repo, "worktree", "remove", "--force", str(path))
    return times


def lead_policy(request: SimRequest) -> Reply:
    """Spawns one worktree agent per turn and waits for it, ``SPAWNS`` times."""
    if request.calls("spawn_agent") < SPAWNS:
        return Reply().call("spawn_agent", {"kind": "worktree", "role": "coder", "directives": ["Look."]})
    return Reply().say("done")


def new_run(repo_path: Path, run: str) -> tuple[Path, GitRepo, str]:
    """A run directory in the repository, the repository, and its HEAD."""
    run_dir = repo_path / ".teamrt" / "runs" / run
    run_dir.mkdir(parents=True)
    repo = GitRepo.find(repo_path)
    head = repo.head() if repo else None
    assert repo is not None and head is not None
    return run_dir, repo, head


async def spawn_ms(repo_path: Path, base: Path) -> tuple[list[float], list[float]]:
    """From the start of adding each worktree agent to its first request at ``sim``; and the
    ``git worktree add`` inside each of those spawns."""
    run_dir, repo, head = new_run(repo_path, "spawn")
    adds: dict[str, float] = {}
    add_worktree = repo.add_worktree

    def timed_add_worktree(path: Path, commit: str) -> Path:
        start = time.monotonic()
        admin = add_worktree(path, commit)
        adds[path.name] = (time.monotonic() - start) * 1000
        return admin

    repo.add_worktree = timed_add_worktree  # type: ignore[method-assign]
    store = create_store(run_dir, "spawn", task="bench", workdir=str(repo_path), base_head=head)
    team = load_team(repo_path / "team.toml", project=repo_path)
    with SimServer(policies={"lead": lead_policy}) as sim:
        worktrees = Worktrees(
            repo=repo, store=store, run_dir=run_dir, run_id="spawn", base=head, project=repo_path,
            integration="teamrt/spawn", gates=team.gates, gate_timeout=team.gate_timeout,
        )  # fmt: skip
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(repo_path),
            project=repo_path, settings=Settings(), sim=sim, worktrees=worktrees,
        )  # fmt: skip
        created: dict[str, float] = {}
        add = supervisor.assembly.add

        async def timed_add(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()  # the clock sim stamps its calls with
            member = await add(*args, **kwargs)
            created[member.name] = start
            return member

        supervisor.assembly.add = timed_add  # type: ignore[method-assign]
        try:
            outcome = await supervisor.run("bench")
            assert outcome.status == "done", outcome
        finally:
            store.close()
        first: dict[str, float] = {}
        for call in sim.calls:
            first.setdefault(call.agent, call.at)
    names = [name for name in created if name != "lead"]
    return [(first[name] - created[name]) * 1000 for name in names], [adds[name] for name in names]


async def merges(repo_path: Path) -> tuple[float, list[float]]:
    """Land ``BRANCHES`` one-file branches at once through the queue: (seconds for all, each one's ms)."""
    run_dir, repo, base = new_run(repo_path, "merge")
    heads = []
    for i in range(BRANCHES):  # a commit adding one file, made without touching any working tree
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo_path, input=f"change {i}\n",
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        index = {"GIT_INDEX_FILE": str(run_dir / f"index{i}")}
        git(repo_path, "read-tree", base, env=index)
        git(repo_path, "update-index", "--add", "--cacheinfo", f"100644,{blob},new/file{i}.txt", env=index)
        tree = git(repo_path, "write-tree", env=index)
        heads.append(git(repo_path, "commit-tree", tree, "-p", base, "-m", f"change {i}"))
        repo.set_branch(f"teamrt/merge-a{i}", heads[-1])
    store = create_store(run_dir, "merge", task="bench", workdir=str(repo_path), base_head=base)
    queue = MergeQueue(
        repo=repo, store=store, run_dir=run_dir, branch="teamrt/merge", base=base, gates=("true",),
        gate_timeout=60, sandbox=default_sandbox(),
    )  # fmt: skip
    each: list[float] = []

    async def land(i: int) -> None:
        await store.add_agent(f"a{i}", kind="worktree", model="sim")
        start = time.perf_counter()
        verdict = await queue.land(f"a{i}", f"teamrt/merge-a{i}", heads[i], f"change {i}")
        assert verdict.status == "merged", verdict
        each.append((time.perf_counter() - start) * 1000)

    try:
        start = time.perf_counter()
        await asyncio.gather(*(land(i) for i in range(BRANCHES)))
        total = time.perf_counter() - start
        await queue.close()
    finally:
        store.close()
    files = git(repo_path, "ls-tree", "-r", "--name-only", "teamrt/merge", "new/").split()
    assert len(files) == BRANCHES, files
    return total, each


async def measure(base: Path) -> dict[str, Any]:
    repo = make_repo(base / "repo")
    scratch = base / "scratch"
    scratch.mkdir()
    # this machine's file system sets the floor and drifts: half the floor before the spawns, half after
    plain = worktree_add_ms(repo, scratch, SPAWNS // 2 + 1)
    spawned, inside = await spawn_ms(repo, base)
    plain += worktree_add_ms(repo, scratch, SPAWNS // 2)
    total, each = await merges(repo)
    result: dict[str, Any] = {
        "files": FILES,
        "git_worktree_add_p50_ms": round(statistics.median(plain), 1),
        "spawn_p50_ms_worktree": round(statistics.median(spawned), 1),
        "merges": BRANCHES,
        "merges_per_min": round(BRANCHES / total * 60, 1),
        "merge_wait_p50_ms": round(statistics.median(each), 1),
        "sandboxed": default_sandbox().confined,
    }
    floor = result["git_worktree_add_p50_ms"]
    result["spawn_overhead_ms"] = round(result["spawn_p50_ms_worktree"] - floor, 1)
    per_spawn = statistics.median(s - a for s, a in zip(spawned, inside, strict=True))
    result["spawn_overhead_per_spawn_p50_ms"] = round(per_spawn, 1)
    result["targets"] = {"spawn_overhead_per_spawn_p50_ms": f"<= {TARGET_OVERHEAD_MS}"}
    result["targets_met"] = per_spawn <= TARGET_OVERHEAD_MS
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    args = parser.parse_args()
    os.environ.pop(DB_ENV, None)
    with tempfile.TemporaryDirectory(prefix="teamrt-bench-") as tmp:
        result = asyncio.run(measure(Path(tmp)))
    print(f"repository of {result['files']:,} files")
    print(f"  git worktree add alone   p50 {result['git_worktree_add_p50_ms']:>8} ms")
    print(f"  worktree agent spawn     p50 {result['spawn_p50_ms_worktree']:>8} ms"
          f"  (+{result['spawn_overhead_ms']} ms against the floor;"
          f" +{result['spawn_overhead_per_spawn_p50_ms']} ms per spawn,"
          f" target <= +{TARGET_OVERHEAD_MS:g})")  # fmt: skip
    print(f"  merge queue: {result['merges']} green branches, gate 'true':"
          f" {result['merges_per_min']} merges/min"
          f" (each waited p50 {result['merge_wait_p50_ms']} ms, queue included)")  # fmt: skip
    print(f"targets {'met' if result['targets_met'] else 'NOT met'}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
