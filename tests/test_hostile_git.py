"""A repository whose ``.git`` an agent wrote: teamrt's own git on the host runs none of what it planted.

Every program planted here (hooks, an fsmonitor, filter, merge and diff drivers, a gpg
program, a submodule's filter) leaves a file in ``marks`` when it runs. The sandbox gives
every command a private ``/tmp``, so only a program run on the host can leave one there.

A lead can no longer plant them (``.git`` is read-only in its sandbox), so most tests plant
them directly, as a run before that could have: a control shows that plain git runs them all;
teamrt's worktrees, merge queue and ``apply`` run none.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import needs_bwrap
from gitrepo import IDENTITY, git, make_repo, run_worktree_team
from hostile import Scene

from teamrt.cli import main
from teamrt.models import Reply
from teamrt.models.sim import SimRequest, SimServer
from teamrt.store import Store, create_store
from teamrt.tools.sandbox import default_sandbox
from teamrt.worktree import GitRepo, MergeQueue, Verdict
from teamrt.worktree.apply import NOT_RUN, ApplyError, apply, plan_apply

HOOKS = (
    "post-checkout", "pre-commit", "commit-msg", "prepare-commit-msg", "post-commit", "post-merge",
    "pre-merge-commit", "reference-transaction", "post-rewrite", "post-index-change", "pre-auto-gc",
)  # fmt: skip
APP = "".join(f"line {n}\n" for n in range(1, 11))


def leaves(marks: Path, name: str, then: str = "true") -> str:
    """A shell command that leaves ``marks/name`` behind, then does ``then``."""
    return f"touch {shlex.quote(str(marks / name))} 2>/dev/null; {then}"


def script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@dataclass(frozen=True)
class Hostile:
    repo: Path
    marks: Path
    base: str
    branches: dict[str, str]
    """Ready-made branches: ``a`` changes app.txt's first line and adds files, ``b`` its last line."""

    def marked(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())


def build(tmp_path: Path, *, tracked_hooks: bool, user_commit: str = "") -> Hostile:
    """A repository with a submodule and two branches made by the user's own git, then everything an
    unconfined agent could plant in its ``.git`` (``tracked_hooks``: hooks in a tracked ``hooks``
    directory named by ``core.hooksPath``, else in ``.git/hooks``). With ``user_commit`` (README.md or
    app.txt), main has moved on: the user changed that file (app.txt: its last line)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    sub = tmp_path / "subsrc"
    sub.mkdir()
    (sub / "s.txt").write_text("s\n")
    git(sub, "init", "-q", "-b", "main")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "sub")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.txt").write_text(APP)
    (repo / "README.md").write_text("hello\n")
    (repo / ".gitattributes").write_text("* filter=x diff=z merge=y\n*.dat filter=p\n*.inc filter=i\n")
    for hook in HOOKS:
        script(repo / "hooks" / hook, leaves(marks, f"hook-{hook}"))
    git(repo, "add", "-A")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "a")
    (repo / "app.txt").write_text(APP.replace("line 1\n", "line 1 by a\n"))
    for name in ("a.txt", "a.dat", "a.inc"):
        (repo / name).write_text(f"{name}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    git(repo, "checkout", "-q", "-b", "b", base)
    (repo / "app.txt").write_text(APP.replace("line 10\n", "line 10 by b\n"))
    git(repo, "commit", "-qam", "b")
    git(repo, "checkout", "-q", "main")
    if user_commit == "README.md":
        (repo / "README.md").write_text("the user's\n")
    elif user_commit == "app.txt":
        (repo / "app.txt").write_text(APP.replace("line 10\n", "line 10 by the user\n"))
    if user_commit:
        git(repo, "commit", "-qam", "the user's")
    branches = {name: git(repo, "rev-parse", name) for name in ("a", "b")}
    plant(repo, marks, tracked_hooks=tracked_hooks)
    return Hostile(repo, marks, base, branches)


def plant(repo: Path, marks: Path, *, tracked_hooks: bool) -> None:
    """What an agent with a writable ``.git`` could leave for the next git outside its sandbox."""
    dot_git = repo / ".git"
    included = repo.parent / "included.cfg"
    config = {
        "filter.x.smudge": leaves(marks, "filter-x-smudge", "cat"),
        "filter.x.clean": leaves(marks, "filter-x-clean", "cat"),
        "filter.x.required": "true",
        "filter.p.process": leaves(marks, "filter-p-process", "exit 1"),
        "diff.z.textconv": leaves(marks, "diff-z-textconv", "cat"),
        "diff.z.command": leaves(marks, "diff-z-command"),
        "core.fsmonitor": str(repo.parent / "fsmonitor"),
        "commit.gpgSign": "true",
        "gpg.program": str(repo.parent / "gpg"),
        "submodule.recurse": "true",
        "include.path": str(included),
    }
    if tracked_hooks:
        config["core.hooksPath"] = "hooks"
    for key, value in config.items():
        git(repo, "config", key, value)
    included.write_text(
        f'[filter "i"]\n\tsmudge = {leaves(marks, "filter-i-smudge", "cat")}\n'
        f"\tclean = {leaves(marks, 'filter-i-clean', 'cat')}\n"
        f'[merge "y"]\n\tdriver = {leaves(marks, "merge-y-driver", "exit 1")}\n'
    )
    script(repo.parent / "fsmonitor", leaves(marks, "fsmonitor", "exit 1"))
    script(repo.parent / "gpg", leaves(marks, "gpg", "exit 1"))
    for hook in HOOKS:
        script(dot_git / "hooks" / hook, leaves(marks, f"hook-{hook}"))
    (dot_git / "info" / "attributes").write_text("*.txt filter=x diff=z merge=y\n")
    module = dot_git / "modules" / "sub"
    git(module, "config", "filter.q.clean", leaves(marks, "submodule-filter-q-clean", "cat"))
    (module / "info").mkdir(exist_ok=True)
    (module / "info" / "attributes").write_text("* filter=q\n")


def touch_tracked(repo: Path) -> None:
    """Make git read tracked files again (and so run their clean filters) to see whether they changed."""
    for path in (repo / "app.txt", repo / "sub" / "s.txt"):
        os.utime(path, (path.stat().st_atime + 10, path.stat().st_mtime + 10))


HOOK_PLACES = pytest.mark.parametrize("tracked_hooks", [False, True], ids=["git-dir-hooks", "tracked-hooks"])


@pytest.fixture(autouse=True)
def _user(monkeypatch: pytest.MonkeyPatch) -> None:
    """git acts as the user: a merge commit needs an identity."""
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)


@HOOK_PLACES
def test_what_is_planted_runs_when_plain_git_does_what_teamrt_does(
    tmp_path: Path, tracked_hooks: bool
) -> None:
    """The control: without teamrt's settings, the same steps run every planted program."""
    hostile = build(tmp_path, tracked_hooks=tracked_hooks)
    steps = [
        (hostile.repo, "worktree", "add", "--detach", str(tmp_path / "wt"), hostile.branches["b"]),
        (tmp_path / "wt", "merge", "--no-ff", "--no-edit", "-m", "m", hostile.branches["a"]),
        (hostile.repo, "worktree", "add", "--detach", str(tmp_path / "wt2"), hostile.base),
        (tmp_path / "wt2", "-c", "filter.p.process=", "merge", "--no-ff", "--no-edit", "-m", "m", "a"),
        (hostile.repo, "status", "--porcelain"),
        (hostile.repo, "-c", "filter.p.process=", "merge", "--ff-only", "a"),
    ]
    for cwd, *argv in steps:
        touch_tracked(hostile.repo)
        subprocess.run(["git", *argv], cwd=cwd, capture_output=True, check=False)
    assert set(hostile.marked()) >= {
        "filter-x-smudge", "filter-x-clean", "filter-p-process", "filter-i-smudge", "merge-y-driver",
        "fsmonitor", "gpg", "submodule-filter-q-clean", "hook-post-checkout", "hook-reference-transaction",
        "hook-pre-merge-commit", "hook-post-merge",
    }  # fmt: skip


def queue(repo_path: Path, base: str, run_dir: Path) -> tuple[MergeQueue, Store]:
    """A merge queue for run r1 of the repository at ``repo_path``, with its store; no gates."""
    run_dir.mkdir()
    store = create_store(
        run_dir, "r1", task="t", workdir=str(repo_path), base_head=base,
        settings={"integration_branch": "teamrt/r1"},
    )  # fmt: skip
    repo = GitRepo.find(repo_path)
    assert repo is not None
    merges = MergeQueue(
        repo=repo, store=store, run_dir=run_dir, branch="teamrt/r1", base=base, gates=(),
        gate_timeout=60, sandbox=default_sandbox(),
    )  # fmt: skip
    return merges, store


async def land(merges: MergeQueue, store: Store, heads: dict[str, str], *names: str) -> list[Verdict]:
    """Land the branches ``names`` (at ``heads``) one after the other, then close the queue."""
    verdicts = []
    for name in names:
        await store.add_agent(name, kind="worktree", model="sim")
        verdicts.append(await merges.land(name, name, heads[name], name))
    await merges.close()
    return verdicts


@HOOK_PLACES
def test_teamrt_checks_out_merges_and_fast_forwards_running_nothing_planted(
    tmp_path: Path, tracked_hooks: bool
) -> None:
    hostile = build(tmp_path, tracked_hooks=tracked_hooks)
    repo = GitRepo.find(hostile.repo)
    assert repo is not None
    repo.add_worktree(tmp_path / "wt", hostile.branches["a"])
    assert (tmp_path / "wt" / "app.txt").read_text() == APP.replace("line 1\n", "line 1 by a\n")
    merges, store = queue(hostile.repo, hostile.base, tmp_path / "run")
    with store:
        merged, conflict = asyncio.run(land(merges, store, hostile.branches, "a", "b"))
        run = store.reader.run()
    assert merged.status == "merged", merged
    assert (conflict.status, conflict.files) == ("conflict", ("app.txt",)), "merge=y is not run: a conflict"
    touch_tracked(hostile.repo)
    plan = plan_apply(run)
    assert plan.how == "fast-forward"
    assert apply(plan).endswith(f", 2 commit(s)) {NOT_RUN}")
    assert git(hostile.repo, "rev-parse", "HEAD") == merged.commit
    assert (hostile.repo / "a.dat").read_text() == "a.dat\n"
    assert hostile.marked() == []


@HOOK_PLACES
def test_teamrt_apply_makes_an_unsigned_merge_commit_running_nothing_planted(
    tmp_path: Path, tracked_hooks: bool
) -> None:
    hostile = build(tmp_path, tracked_hooks=tracked_hooks, user_commit="README.md")
    merges, store = queue(hostile.repo, hostile.base, tmp_path / "run")
    with store:
        [merged] = asyncio.run(land(merges, store, hostile.branches, "a"))
        run = store.reader.run()
    mine = git(hostile.repo, "rev-parse", "HEAD")
    touch_tracked(hostile.repo)
    plan = plan_apply(run)
    assert plan.how == "merge"
    said = apply(plan)
    assert said.startswith("merged teamrt/r1 into main as ") and said.endswith(
        f"(2 commit(s), unsigned) {NOT_RUN}"
    )
    assert git(hostile.repo, "rev-parse", "HEAD^1", "HEAD^2") == f"{mine}\n{merged.commit}"
    assert "gpgsig" not in git(hostile.repo, "cat-file", "commit", "HEAD")
    assert (hostile.repo / "a.txt").is_file() and (hostile.repo / "README.md").read_text() == "the user's\n"
    assert hostile.marked() == []


@HOOK_PLACES
def test_a_merge_the_repositorys_driver_would_make_is_a_conflict_apply_undoes(
    tmp_path: Path, tracked_hooks: bool
) -> None:
    hostile = build(tmp_path, tracked_hooks=tracked_hooks, user_commit="app.txt")
    merges, store = queue(hostile.repo, hostile.base, tmp_path / "run")
    with store:
        asyncio.run(land(merges, store, hostile.branches, "a"))
        run = store.reader.run()
    mine = git(hostile.repo, "rev-parse", "HEAD")
    plan = plan_apply(run)
    with pytest.raises(ApplyError, match=r"conflicts in app\.txt; nothing was changed"):
        apply(plan)
    assert hostile.marked() == []
    assert git(hostile.repo, "rev-parse", "HEAD") == mine
    repo = GitRepo.find(hostile.repo)
    assert repo is not None and repo.changed_tracked() == [], "the merge was undone"


def attack(marks: Path) -> list[tuple[str, dict[str, str]]]:
    """The issue's attack, as an agent's tool calls in its workspace (a repository's working tree): a
    filter driver and the attributes that apply it, and hooks, for the next git outside the sandbox."""
    hook = shlex.quote(f"#!/bin/sh\n{leaves(marks, 'hook')}\n")
    hooks = " ".join(
        f".git/hooks/{name}" for name in ("post-checkout", "post-merge", "reference-transaction")
    )
    return [
        ("bash", {"command": f"git config filter.x.smudge {shlex.quote(leaves(marks, 'smudge', 'cat'))}"
                             f" && git config filter.x.clean {shlex.quote(leaves(marks, 'clean', 'cat'))}"}),
        ("write", {"file_path": ".git/info/attributes", "content": "* filter=x\n"}),
        ("bash", {"command": f"for h in {hooks}; do printf %s {hook} > $h && chmod +x $h; done"}),
    ]  # fmt: skip


def commit_without_a_working_tree(repo: Path, parent: str, path: str, text: str) -> str:
    """A commit on ``parent`` that sets ``path`` to ``text``, by plumbing that runs no hook or filter."""
    index = {**os.environ, "GIT_INDEX_FILE": str(repo.parent / "plumbing.index")}

    def plumb(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=repo, env=index, input=stdin, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    blob = plumb("hash-object", "-w", "--stdin", stdin=text)
    plumb("read-tree", parent)
    plumb("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    return plumb("commit-tree", plumb("write-tree"), "-p", parent, "-m", f"change {path}")


def test_a_filter_and_hooks_a_lead_tries_to_plant_in_git_never_run_in_teamrts_git(
    scene: Scene, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    said = scene.attack(*attack(marks))
    assert [s.is_error for s in said] == [True, True, True], said  # .git is read-only in the sandbox
    scene.untouched()
    base = git(scene.project, "rev-parse", "HEAD")  # then teamrt's git works in that repository
    heads = {"coder": commit_without_a_working_tree(scene.project, base, "src/app.py", "print('patched')\n")}
    merges, store = queue(scene.project, base, tmp_path / "run")
    with store:
        [verdict] = asyncio.run(land(merges, store, heads, "coder"))
        run = store.reader.run()
    assert verdict.status == "merged", verdict
    assert apply(plan_apply(run)).endswith(NOT_RUN)
    assert (scene.project / "src" / "app.py").read_text() == "print('patched')\n"
    assert sorted(p.name for p in marks.iterdir()) == []


def planted_by_an_earlier_run(project: Path, marks: Path) -> None:
    """What ``attack`` does, done on the host: what a run before ``.git`` was read-only could leave."""
    for name, call in attack(marks):
        if name == "bash":
            subprocess.run(["bash", "-c", call["command"]], cwd=project, check=True)
        else:
            (project / call["file_path"]).write_text(call["content"])


def lead_spawning_a_coder(request: SimRequest) -> Reply:
    if not request.calls("spawn_agent"):
        return Reply().call("spawn_agent", {"kind": "worktree", "role": "coder", "directives": ["Fix add."]})
    return Reply().say("Lead: " + request.tool_outcomes[0].output)


def coder(request: SimRequest) -> Reply:
    if not request.calls("edit"):
        return Reply().call("edit", {"file_path": "app.py", "old_string": "a - b", "new_string": "a + b"})
    return Reply().say("Fixed add.")


@needs_bwrap
def test_what_an_earlier_run_planted_runs_nothing_as_a_worktree_agent_is_cut_merged_and_applied(
    tmp_path: Path, sim: SimServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    team = "[team]\nmodel = 'sim'\n[roles.coder]\n[merge]\ngates = []\n"
    project = make_repo(
        tmp_path / "project", {"app.py": "def add(a, b):\n    return a - b\n", "team.toml": team}
    )
    planted_by_an_earlier_run(project, marks)
    sim.policies.update({"lead": lead_spawning_a_coder, "coder": coder})
    outcome, _ = run_worktree_team(project, sim, "Fix add.")
    assert outcome.status == "done" and "merged onto teamrt/r1" in outcome.answer, outcome
    assert sorted(p.name for p in marks.iterdir()) == []
    monkeypatch.setenv("TEAMRT_HOME", str(project / ".teamrt"))
    assert main(["apply", "r1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fast-forwarded main to teamrt/r1") and out.endswith(f"{NOT_RUN}\n"), out
    assert (project / "app.py").read_text().endswith("a + b\n")
    assert sorted(p.name for p in marks.iterdir()) == []
    git(project, "worktree", "add", "-q", "--detach", str(tmp_path / "plain"), "HEAD")
    assert sorted(p.name for p in marks.iterdir()) == ["hook", "smudge"], "the plants are live for plain git"
