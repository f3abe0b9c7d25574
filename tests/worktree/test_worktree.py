"""Worktree agents and the gated merge queue, with real git repositories, on ``sim``."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrt.agents import load_definitions
from teamrt.cli import main
from teamrt.models import Reply
from teamrt.runs import steer
from teamrt.runtime.teamrun import BranchTaken, run_team
from teamrt.sim import SimRequest, SimServer, shared_server
from teamrt.store import StoreError, create_store, open_reader
from teamrt.team import load_team
from teamrt.testing import run_on_sim
from teamrt.worktree import GitRepo
from teamrt.worktree.apply import NOT_RUN, unmerged_work
from teamrt.worktree.git import admin_dir, driver_overrides
from tests.helpers.git import IDENTITY, git, make_repo, run_worktree_team, snapshot
from tests.helpers.machine import needs_bwrap
from tests.helpers.teams import FAST

# The interpreter itself, not a virtual environment's link to it: gates run in the sandbox, whose /tmp is
# private, and a checkout under /tmp (a fresh clone's .venv) would not be there. Home directories are
# hidden in the sandbox too, so the interpreter's installation (~/.pyenv, say) is named in [sandbox] read.
CHECK = f"{os.path.realpath(sys.executable)} check.py"
PYTHON_HOME = os.path.realpath(sys.base_prefix)
APP = "def add(a, b):\n    return a - b\n"
CHECK_PY = "import app\nassert app.add(2, 3) == 5, f'add(2, 3) gave {app.add(2, 3)}'\nprint('check ok')\n"


def team_toml(gates: list[str]) -> str:
    listed = ", ".join(f"'{g}'" for g in gates)
    permissions = "[permissions]\nallow = ['Bash']\n"
    sandbox = f"[sandbox]\nread = ['{PYTHON_HOME}']\n"
    return f"[team]\nmodel = 'sim'\n[roles.coder]\n{permissions}{sandbox}[merge]\ngates = [{listed}]\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = make_repo(
        tmp_path / "project",
        {"app.py": APP, "check.py": CHECK_PY, "README": "hello\n", "team.toml": team_toml([CHECK])},
    )
    return repo


def lead_spawning(*directives: str):  # type: ignore[no-untyped-def]
    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call(
                "spawn_agent", {"kind": "worktree", "role": "coder", "directives": list(directives)}
            )
        return Reply().say(
            "Lead: " + request.tool_outcomes[0].output if request.tool_outcomes else "Lead: done"
        )

    return lead


def fixing_coder(first: str, second: str = "a + b"):  # type: ignore[no-untyped-def]
    """Reads app.py, writes ``first`` as the body of add, finishes; told a gate failed, writes ``second``."""

    def coder(request: SimRequest) -> Reply:
        text = request.last_user_text
        if request.turns == 0:
            return Reply().call("Read", {"file_path": "app.py"})
        if request.calls("Edit") == 0:
            return Reply().call("Edit", {"file_path": "app.py", "old_string": "a - b", "new_string": first})
        if "a gate failed" in text:
            return Reply().call("Edit", {"file_path": "app.py", "old_string": first, "new_string": second})
        return Reply().say(f"Fixed add: it returns {second if request.calls('Edit') > 1 else first}.")

    return coder


def test_green_change_is_merged_and_the_users_tree_is_untouched(project: Path, sim: SimServer) -> None:
    (project / "README").write_text("hello, edited by the user\n")  # a dirty tree: worktrees do not see it
    (project / "notes.txt").write_text("untracked\n")
    before = snapshot(project)
    sim.policies.update({"lead": lead_spawning("Fix add in app.py."), "coder": fixing_coder("a + b")})
    outcome, store = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    assert snapshot(project) == before
    assert git(project, "show", "teamrt/r1:app.py") == "def add(a, b):\n    return a + b"
    assert git(project, "show", "teamrt/r1:README") == "hello", "the user's uncommitted edit stays theirs"
    merges = store.reader.merges()
    assert [(m.agent, m.status, m.attempts) for m in merges] == [("coder", "merged", 1)]
    assert git(project, "rev-parse", "teamrt/r1") == merges[0].merged_commit
    assert "check ok" in (merges[0].output or "")
    coder = store.reader.agent("coder")
    assert (coder.kind, coder.status, coder.branch) == ("worktree", "done", "teamrt/r1-coder")
    assert not Path(coder.workspace or "").exists(), "a merged agent's worktree is removed"
    assert "merged onto teamrt/r1" in outcome.answer


def test_a_red_gate_comes_back_as_mail_and_the_fix_is_merged(project: Path, sim: SimServer) -> None:
    sim.policies.update({"lead": lead_spawning("Fix add in app.py."), "coder": fixing_coder("a * b")})
    outcome, store = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    [merge] = store.reader.merges()
    assert (merge.status, merge.attempts) == ("merged", 2)
    assert git(project, "show", "teamrt/r1:app.py").endswith("return a + b")
    [verdict] = [m for m in store.reader.mail("coder") if m.message["summary"].startswith("merge")]
    body = verdict.message["body"]
    assert "a gate failed" in body and "add(2, 3) gave 6" in body and "exit code 1" in body
    kinds = [e.kind for e in store.reader.events() if e.agent == "coder" and e.kind.startswith("merge.")]
    assert kinds == [
        "merge.queued",
        "merge.merging",
        "merge.red",
        "merge.queued",
        "merge.merging",
        "merge.merged",
    ]
    history = [git(project, "show", "-s", "--format=%an", f"teamrt/r1^2~{n}") for n in range(2)]
    assert history == ["coder (teamrt)", "coder (teamrt)"], "both attempts are the agent's commits"


def greeter(request: SimRequest) -> Reply:
    """Writes greet.txt in its language; after a conflict, writes both greetings, markers gone."""
    word = "Bonjour" if "French" in request.all_text() else "Hallo"
    if request.calls("Write") == 0:
        return Reply().call("Write", {"file_path": "greet.txt", "content": f"{word}\n"})
    if "conflict markers in greet.txt" in request.last_user_text:
        return Reply().call("Read", {"file_path": "greet.txt"})
    outcomes = request.tool_outcomes
    if outcomes and outcomes[0].name == "Read" and "<<<<<<<" in outcomes[0].output:
        return Reply().call("Write", {"file_path": "greet.txt", "content": "Bonjour\nHallo\n"})
    return Reply().say(f"greet.txt says {word}.")


def test_a_conflict_comes_back_with_markers_and_is_resolved(tmp_path: Path, sim: SimServer) -> None:
    project = make_repo(
        tmp_path / "project", {"greet.txt": "Hello\n", "team.toml": team_toml(["test -s greet.txt"])}
    )
    sim.policies.update(
        {"lead": lead_spawning("Say hello in French.", "Say hello in German."), "coder": greeter}
    )
    outcome, store = run_worktree_team(project, sim, "Translate.")
    assert outcome.status == "done", outcome
    merges = {m.agent: m for m in store.reader.merges()}
    assert sorted((m.status, m.attempts) for m in merges.values()) == [("merged", 1), ("merged", 2)]
    second = next(name for name, m in merges.items() if m.attempts == 2)
    [verdict] = [m for m in store.reader.mail(second) if m.message["summary"].startswith("merge")]
    body = verdict.message["body"]
    assert "conflicts with teamrt/r1 in greet.txt" in body and "CONFLICT (content)" in body
    assert git(project, "show", "teamrt/r1:greet.txt") == "Bonjour\nHallo"
    assert git(project, "show", "main:greet.txt") == "Hello"


def overlapper(request: SimRequest) -> Reply:
    """Edits one end of shared.txt, then works on until warned of the overlap (at most 60 turns)."""
    top = "top" in request.all_text()
    if request.calls("Edit") == 0:
        return Reply().call("Read", {"file_path": "shared.txt"}).call(
            "Edit",
            {"file_path": "shared.txt", "old_string": "line 1\n" if top else "line 20\n",
             "new_string": "line 1 changed\n" if top else "line 20 changed\n"},
        )  # fmt: skip
    if "have both changed shared.txt" in request.all_text():
        return Reply().say("Done; I was warned that shared.txt is shared.")
    if request.turns > 60:
        return Reply().say("Done; never warned.")
    return Reply().call("Bash", {"command": "sleep 0.05"})


def test_overlapping_edits_are_warned_before_either_finishes(tmp_path: Path, sim: SimServer) -> None:
    lines = "".join(f"line {n}\n" for n in range(1, 21))
    project = make_repo(tmp_path / "project", {"shared.txt": lines, "team.toml": team_toml([])})
    sim.policies.update(
        {"lead": lead_spawning("Change the top of shared.txt.", "Change the bottom."), "coder": overlapper}
    )
    outcome, store = run_worktree_team(project, sim, "Edit.")
    assert outcome.status == "done", outcome
    assert outcome.answer.count("I was warned that shared.txt is shared") == 2
    for agent in ("coder", "coder-1", "lead"):
        warned = [m for m in store.reader.mail(agent) if m.message["summary"] == "overlap: coder-1 and coder"
                  or m.message["summary"] == "overlap: coder and coder-1"]  # fmt: skip
        assert len(warned) == 1, agent
        assert "coder and coder-1 have both changed shared.txt" in warned[0].message["body"] or (
            "coder-1 and coder have both changed shared.txt" in warned[0].message["body"]
        )
    assert sorted(m.status for m in store.reader.merges()) == ["merged", "merged"]
    merged = git(project, "show", "teamrt/r1:shared.txt").splitlines()
    assert merged[0] == "line 1 changed" and merged[-1] == "line 20 changed"


INSIDE = "git commit -qm inside && git log -1 --format=%s"


def escaper(project: Path):  # type: ignore[no-untyped-def]
    """Tries to write and commit outside its worktree in every plain way, then commits inside it."""
    attempts = [
        ("Write", {"file_path": str(project / "app.py"), "content": "hacked\n"}),
        ("Bash", {"command": f"echo hacked > {project}/app.py"}),
        ("Bash", {"command": f"git -C {project} commit --allow-empty -m sneaky"}),
        ("Bash", {"command": f"GIT_DIR={project}/.git git update-ref refs/heads/main HEAD"}),
        ("Bash", {"command": f"cd {project} && git commit --allow-empty -m sneaky"}),
        ("Bash", {"command": "git update-ref refs/heads/main HEAD"}),
        ("Bash", {"command": f"echo mine > mine.txt && git add . && {INSIDE}"}),
    ]  # fmt: skip

    def coder(request: SimRequest) -> Reply:
        if request.turns < len(attempts):
            name, input = attempts[request.turns]
            return Reply().call(name, input)
        return Reply().say("tried")

    return coder


@pytest.fixture
def project_off_tmp() -> Iterator[Path]:
    """A project outside /tmp and the home directories: the sandbox covers those with a private tmpfs,
    which would hide (not refuse) a write to a project there."""
    root = Path(tempfile.mkdtemp(prefix="teamrt-test-", dir="/var/tmp"))
    try:
        yield make_repo(root / "project", {"app.py": APP, "team.toml": team_toml([])})
    finally:
        shutil.rmtree(root, ignore_errors=True)


@needs_bwrap
def test_writes_and_commits_outside_the_worktree_are_refused(project_off_tmp: Path, sim: SimServer) -> None:
    project = project_off_tmp
    before = snapshot(project)
    sim.policies.update({"lead": lead_spawning("Escape."), "coder": escaper(project)})
    outcome, store = run_worktree_team(project, sim, "Try.")
    assert outcome.status == "done", outcome
    results = [c for c in store.reader.tool_calls("coder")]
    said = [(c.status, json.dumps(c.result)) for c in results]
    assert [s for s, _ in said] == ["error"] * 6 + ["done"], said
    assert "outside" in said[0][1]
    assert "Read-only file system" in said[1][1]
    assert "points git outside your workspace" in said[2][1] and "GIT_DIR" in said[3][1]
    assert "Read-only file system" in said[4][1] or "insufficient permission" in said[4][1]
    assert "cannot lock ref" in said[5][1] or "Read-only" in said[5][1]
    assert "inside" in said[6][1]
    assert snapshot(project) == before
    assert git(project, "show", "teamrt/r1:mine.txt") == "mine"
    assert git(project, "log", "-1", "--format=%s", "teamrt/r1^2") == "inside"


# -- apply, show and gc ----------------------------------------------------------------


@pytest.fixture
def home(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``teamrt`` commands see the runs ``run_worktree_team`` makes, and act as the user in git."""
    monkeypatch.setenv("TEAMRT_HOME", str(project / ".teamrt"))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    return project / ".teamrt"


def teamrt(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def green_run(project: Path, sim: SimServer) -> None:
    sim.policies.update({"lead": lead_spawning("Fix add in app.py."), "coder": fixing_coder("a + b")})
    outcome, _ = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome


def test_apply_fast_forwards_a_clean_tree_and_refuses_a_dirty_one(
    project: Path, sim: SimServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    green_run(project, sim)
    (project / "app.py").write_text("# the user's own edit\n")
    code, _, err = teamrt(capsys, "apply", "r1")
    assert code == 1 and err == (
        "teamrt: your working tree has uncommitted changes (app.py); commit or stash them, then apply again\n"
    )
    assert (project / "app.py").read_text() == "# the user's own edit\n"
    git(project, "checkout", "--", "app.py")
    code, out, _ = teamrt(capsys, "apply", "r1")
    assert code == 0 and out.startswith("fast-forwarded main to teamrt/r1") and out == f"{out[:-1]}\n", out
    assert out.endswith(f" {NOT_RUN}\n"), "apply says that hooks and the repository's drivers did not run"
    assert git(project, "rev-parse", "HEAD") == git(project, "rev-parse", "teamrt/r1")
    assert (project / "app.py").read_text().endswith("return a + b\n")
    code, out, _ = teamrt(capsys, "apply", "r1")
    assert code == 0 and "already has teamrt/r1" in out


def test_apply_merges_onto_a_branch_that_moved_only_when_confirmed(
    project: Path, sim: SimServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    green_run(project, sim)
    (project / "README").write_text("the user moved on\n")
    git(project, "commit", "-qam", "user work")
    mine = git(project, "rev-parse", "HEAD")
    code, _, err = teamrt(capsys, "apply", "r1")
    assert code == 1 and "Run again with --yes" in err
    assert git(project, "rev-parse", "HEAD") == mine
    code, out, _ = teamrt(capsys, "apply", "r1", "--yes")
    assert code == 0 and out.startswith("merged teamrt/r1 into main"), out
    assert out.endswith(f"(2 commit(s), unsigned) {NOT_RUN}\n"), out
    assert git(project, "rev-parse", "HEAD^1") == mine
    assert (project / "README").read_text() == "the user moved on\n"
    assert (project / "app.py").read_text().endswith("return a + b\n")


def test_apply_undoes_a_conflicting_merge(
    project: Path, sim: SimServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    green_run(project, sim)
    (project / "app.py").write_text("def add(a, b):\n    return sum((a, b))\n")
    git(project, "commit", "-qam", "user fix")
    before = snapshot(project)
    code, _, err = teamrt(capsys, "apply", "r1", "--yes")
    assert code == 1 and "conflicts in app.py; nothing was changed" in err
    assert snapshot(project) == before


def test_apply_refuses_unknown_runs_and_runs_outside_git(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = teamrt(capsys, "apply", "nope")
    assert code == 1 and err.startswith("teamrt: no run named 'nope'")
    run_dir = home / "runs" / "r9"
    run_dir.mkdir(parents=True)
    with create_store(run_dir, "r9", task="t", workdir=str(tmp_path)) as store:
        asyncio.run(store.set_run_status("done"))
    code, _, err = teamrt(capsys, "apply", "r9")
    assert code == 1 and err == "teamrt: run r9 did not run in a git repository; it has nothing to apply\n"


def test_a_branch_never_merged_is_kept_shown_and_collected(
    project: Path, sim: SimServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim.policies.update({"lead": lead_spawning("Fix add."), "coder": fixing_coder("a * b", "a * b")})
    outcome, store = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    coder = store.reader.agent("coder")
    assert coder.status == "failed" and "not merged after 3 attempts (red)" in (coder.status_reason or "")
    assert "## coder: failed" in outcome.answer and "add(2, 3) gave 6" in outcome.answer, "the parent is told"
    [merge] = store.reader.merges()
    assert (merge.status, merge.attempts) == ("red", 3)
    kept = Path(coder.workspace or "")
    assert kept.is_dir() and (kept / "app.py").read_text().endswith("a * b\n")
    code, out, _ = teamrt(capsys, "show", "r1")
    assert code == 0 and "worktrees kept" in out and f"coder: {kept} (branch teamrt/r1-coder)" in out
    assert "coder  teamrt/r1-coder  red" in out

    def state() -> tuple[str, str, list[str]]:
        files = sorted(str(p.relative_to(home)) for p in home.rglob("*") if ".git" not in p.parts)
        return git(project, "branch", "--list", "teamrt/*"), git(project, "worktree", "list"), files

    before = state()
    code, out, _ = teamrt(capsys, "gc", "--dry-run")
    assert code == 0 and state() == before, "a dry run changes nothing"
    unmerged = r"\d+ unmerged commit\(s\)"
    assert re.search(
        f"^r1: would keep worktree {re.escape(str(kept))} \\(branch teamrt/r1-coder\\): {unmerged};"
        " teamrt gc --force removes it$", out, re.M,
    ), out  # fmt: skip
    assert "r1: would delete branch teamrt/r1\n" in out and "teamrt/r1-coder\n" not in out
    assert out.endswith("dry run: nothing was changed\n")

    code, out, _ = teamrt(capsys, "gc")
    assert code == 0 and re.search(f"^r1: kept worktree {re.escape(str(kept))} .*: {unmerged};", out, re.M), (
        out
    )
    assert "r1: deleted branch teamrt/r1\n" in out, "nothing was merged, so there is nothing to keep"
    assert kept.is_dir() and (kept / "app.py").read_text().endswith("a * b\n"), "the unmerged work is kept"
    assert git(project, "branch", "--list", "teamrt/*").split() == ["teamrt/r1-coder"]
    assert git(project, "log", "-1", "--format=%H", "teamrt/r1-coder") != git(project, "rev-parse", "main")
    assert f"coder: {kept} (branch teamrt/r1-coder)" in teamrt(capsys, "show", "r1")[1]

    code, out, _ = teamrt(capsys, "gc", "--force")
    assert code == 0
    assert f"r1: removed worktree {kept}\n" in out and "r1: deleted branch teamrt/r1-coder\n" in out
    assert not kept.exists() and git(project, "branch", "--list", "teamrt/*") == ""
    assert git(project, "worktree", "list").count("\n") == 0
    assert not (home / "runs" / "r1" / "objects").exists()
    assert teamrt(capsys, "gc") == (
        0,
        "nothing to collect: no finished run has worktrees or branches left\n",
        "",
    )


def test_gc_counts_commits_not_merged_and_uncommitted_files_as_work(tmp_path: Path) -> None:
    project = make_repo(tmp_path / "project", {"app.py": APP})
    repo = GitRepo.find(project)
    assert repo is not None
    base = repo.head()
    assert base is not None
    run_dir = project / ".teamrt" / "runs" / "r1"
    path = run_dir / "worktrees" / "coder"
    path.parent.mkdir(parents=True)
    repo.add_worktree(path, base)
    assert unmerged_work(repo, run_dir, path, None, [base]) is None, "nothing done: nothing to keep"
    (path / "new.txt").write_text("mine\n")
    assert unmerged_work(repo, run_dir, path, None, [base]) == "uncommitted changes in 1 file(s) (new.txt)"
    objects = run_dir / "objects" / "coder"  # as an agent commits: into its own object store
    (objects / "info").mkdir(parents=True)
    env = {**os.environ, **IDENTITY, "GIT_OBJECT_DIRECTORY": str(objects),
           "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(project / ".git" / "objects")}  # fmt: skip
    for command in (["add", "-A"], ["commit", "-qm", "work"]):
        subprocess.run(["git", *command], cwd=path, env=env, check=True)
    head = git(path, "rev-parse", "HEAD")
    assert not repo.has_object(head), "the commit is in the agent's object store only"
    assert unmerged_work(repo, run_dir, path, None, [base]) == "1 unmerged commit(s)"
    assert unmerged_work(repo, run_dir, path, None, [base, head]) is None, "merged: nothing to keep"
    (path / "app.py").write_text("changed\n")
    assert unmerged_work(repo, run_dir, path, None, [base]) == (
        "1 unmerged commit(s) and uncommitted changes in 1 file(s) (app.py)"
    )
    # The agent points its checkout's metadata at a configuration of its own, whose clean filter a git
    # status there would run: gc looks by git's own records, so it never does.
    rig = tmp_path / "fake"
    (rig / "objects" / "info").mkdir(parents=True)
    (rig / "refs").mkdir()
    (rig / "objects" / "info" / "alternates").write_text(f"{project / '.git' / 'objects'}\n")
    pwned = tmp_path / "pwned"
    (rig / "config").write_text(
        f'[core]\n\trepositoryformatversion = 0\n[filter "x"]\n\tclean = touch {pwned}; cat\n'
    )
    (admin_dir(path) / "commondir").write_text(f"{rig}\n")
    (path / ".gitattributes").write_text("* filter=x\n")
    assert unmerged_work(repo, run_dir, path, None, [base]) == (
        "1 unmerged commit(s) and uncommitted changes in 2 file(s) (app.py, .gitattributes)"
    )
    assert not pwned.exists(), "gc ran the filter the agent planted"
    # hash-object cleans the file whatever its stat says (git status would only if it looked changed)
    plain = ["git", "hash-object", "app.py"]
    subprocess.run(plain, cwd=path, env={**os.environ, **env}, capture_output=True, check=False)
    assert pwned.exists(), "the rig is real: a plain git command there runs it"
    (path / ".git").unlink()  # git's own records no longer lead to it: nothing can be checked, so keep it
    assert unmerged_work(repo, run_dir, path, None, [base]) == (
        "git no longer knows this worktree, so its files cannot be checked"
    )


def test_gc_keeps_an_integration_branch_until_it_is_applied(
    project: Path, sim: SimServer, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    green_run(project, sim)
    code, out, _ = teamrt(capsys, "gc")
    assert code == 0 and "r1: kept teamrt/r1: not applied" in out and "deleted branch teamrt/r1-coder" in out
    assert git(project, "branch", "--list", "teamrt/*").split() == ["teamrt/r1"]
    assert teamrt(capsys, "apply", "r1")[0] == 0
    code, out, _ = teamrt(capsys, "gc")
    assert code == 0 and out == "r1: deleted branch teamrt/r1\n"


# -- where worktrees come from -----------------------------------------------------------


def nesting(request: SimRequest) -> Reply:
    """The outer coder commits a file, then starts a worktree child that reports what it sees."""
    if request.agent == "coder":
        if request.turns == 0:
            return Reply().call(
                "Bash", {"command": "echo from-parent > parent.txt && git add -A && git commit -qm p"}
            )
        if not request.calls("spawn_agent"):
            return Reply().call("spawn_agent", {"kind": "worktree", "role": "coder", "directives": ["Look."]})
        return Reply().say(request.tool_outcomes[0].output)
    return (
        Reply().call("Read", {"file_path": "parent.txt"})
        if request.turns == 0
        else Reply().say("child saw " + request.tool_outcomes[0].output.split("\t")[-1])
    )


def test_a_worktree_agents_child_branches_from_its_committed_head(tmp_path: Path, sim: SimServer) -> None:
    project = make_repo(tmp_path / "project", {"team.toml": team_toml([])})
    sim.policies.update({"lead": lead_spawning("Nest."), "coder": nesting})
    outcome, store = run_worktree_team(project, sim, "Nest.")
    assert outcome.status == "done", outcome
    assert "child saw from-parent" in outcome.answer
    [merge] = store.reader.merges()
    assert (merge.agent, merge.status) == ("coder", "merged")
    assert store.reader.agent("coder-1").status_reason == "no changes to merge"
    assert git(project, "rev-parse", "teamrt/r1-coder-1") == merge.head, "cut from the parent's commit"
    assert git(project, "show", "teamrt/r1:parent.txt") == "from-parent"


def test_a_project_outside_git_refuses_worktree_agents(tmp_path: Path, sim: SimServer) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    (project / "team.toml").write_text(team_toml([]))
    run_dir = project / ".teamrt" / "runs" / "r1"
    sim.policies.update({"lead": lead_spawning("Work.")})
    outcome = run_on_sim(project / "team.toml", "t", project=project, sim=sim, run_dir=run_dir, settings=FAST)
    assert (
        outcome.answer
        == f"Lead: worktree agents need a git repository with a commit; {project} is not in one"
    )


def test_teamrt_run_says_when_the_tree_is_dirty_and_refuses_a_taken_branch(project: Path) -> None:
    team = load_team(project / "team.toml", project=project)
    notices: list[str] = []
    (project / "README").write_text("changed\n")
    server = shared_server()
    server.policies["lead"] = lambda request: Reply().say("nothing to do")
    try:
        summary = asyncio.run(
            run_team(
                team, "t", project=project, definitions=load_definitions(project), on_notice=notices.append
            )
        )
    finally:
        del server.policies["lead"]
    assert summary.outcome.status == "done"
    head = git(project, "rev-parse", "HEAD")
    assert notices[0] == (
        f"teamrt: note: your working tree has 1 uncommitted change(s); worktree agents start from HEAD"
        f" ({head[:12]}) and will not see them"
    )
    assert len(notices) == 2 and notices[1].startswith(f"run {summary.run_id} started: team ")
    git(project, "branch", "taken")
    taken = dataclasses.replace(team, integration_branch="taken")
    with pytest.raises(BranchTaken, match="the integration branch 'taken' exists already"):
        asyncio.run(run_team(taken, "t", project=project, definitions=load_definitions(project)))


def test_a_stop_while_merging_ends_the_gate_and_keeps_the_work(tmp_path: Path, sim: SimServer) -> None:
    project = make_repo(tmp_path / "project", {"app.py": APP, "team.toml": team_toml(["sleep 300"])})
    run_dir = project / ".teamrt" / "runs" / "r1"
    sim.policies.update({"lead": lead_spawning("Fix add."), "coder": fixing_coder("a + b")})

    def stop_once_merging() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(StoreError), contextlib.closing(open_reader(run_dir, "r1")) as reader:
                if any(m.status == "merging" for m in reader.merges()):
                    steer.stop(run_dir, "r1", None)
                    return
            time.sleep(0.05)

    stopper = threading.Thread(target=stop_once_merging)
    stopper.start()
    started = time.monotonic()
    outcome, store = run_worktree_team(project, sim, "Fix the bug.")
    stopper.join()
    # A ceiling far below the gate's 300 s and far above the run's idle time (a few seconds): it bounds a
    # gate that was waited out instead of killed.
    assert time.monotonic() - started < 120, "the gate was killed, not waited out"
    coder = store.reader.agent("coder")
    assert coder.status == "stopped"
    assert (coder.status_reason or "").startswith(
        "stopped while merging; its work is kept on branch teamrt/r1-coder"
    )
    assert git(project, "show", "teamrt/r1-coder:app.py").endswith("return a + b")
    assert outcome.status == "stopped"


def test_a_project_in_a_subdirectory_works_in_the_same_subdirectory_of_its_worktree(
    tmp_path: Path, sim: SimServer
) -> None:
    files = {".pkg/app.py": APP, ".pkg/team.toml": team_toml([]), "top.txt": "x\n"}
    repo = make_repo(tmp_path / "repo", files)
    project = repo / ".pkg"
    sim.policies.update({"lead": lead_spawning("Fix add."), "coder": fixing_coder("a + b")})
    outcome, store = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    assert Path(store.reader.agent("coder").workspace or "").name == ".pkg"
    assert git(repo, "show", "teamrt/r1:.pkg/app.py").endswith("return a + b")


def rigger(project: Path):  # type: ignore[no-untyped-def]
    """Points its checkout's git metadata at a configuration of its own, whose clean filter would
    touch a file in the project if any git outside the sandbox ran it, and dirties a file."""
    rig = (
        "admin=$(sed 's/^gitdir: //' .git) && mkdir -p fake/objects/info fake/refs"
        f" && echo {project}/.git/objects > fake/objects/info/alternates"
        " && printf '[core]\\n\\trepositoryformatversion = 0\\n[filter \"x\"]\\n\\tclean = %s\\n'"
        f" 'touch {project}/pwned; cat'"
        ' > fake/config && echo "$PWD/fake" > "$admin/commondir"'
        " && echo '* filter=x' > .gitattributes && echo '# more' >> app.py"
    )  # fmt: skip

    def coder(request: SimRequest) -> Reply:
        return Reply().call("Bash", {"command": rig}) if request.turns == 0 else Reply().say("rigged")

    return coder


@needs_bwrap
def test_git_configuration_an_agent_plants_runs_only_in_its_sandbox(
    project_off_tmp: Path, sim: SimServer
) -> None:
    sim.policies.update({"lead": lead_spawning("Rig."), "coder": rigger(project_off_tmp)})
    outcome, store = run_worktree_team(project_off_tmp, sim, "Rig.")
    assert [c.status for c in store.reader.tool_calls("coder")] == ["done"], store.reader.tool_calls("coder")
    assert not (project_off_tmp / "pwned").exists(), "the agent's filter ran outside its sandbox"
    assert outcome.status == "done"


def test_a_gate_red_before_the_merge_accepts_fixes_and_refuses_new_failures(
    tmp_path: Path, sim: SimServer
) -> None:
    """Parallel fixes of a failing suite: each merge may leave failures, never add one."""
    app = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\n"
    app += "def neg(a):\n    return -a\n"
    tests = (
        "import unittest\nimport app\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(app.add(2, 3), 5)\n\n"
        "    def test_mul(self):\n        self.assertEqual(app.mul(2, 3), 6)\n\n"
        "    def test_neg(self):\n        self.assertEqual(app.neg(2), -2)\n"
    )
    gate = f"{os.path.realpath(sys.executable)} -m unittest -q"
    project = make_repo(
        tmp_path / "project", {"app.py": app, "test_app.py": tests, "team.toml": team_toml([gate])}
    )

    def coder(request: SimRequest) -> Reply:
        if request.calls("Edit") == 0:  # fixes add, and breaks neg on the way
            return (
                Reply()
                .call("Edit", {"file_path": "app.py", "old_string": "a - b", "new_string": "a + b"})
                .call("Edit", {"file_path": "app.py", "old_string": "return -a", "new_string": "return a"})
            )
        if "failing now but not before the merge" in request.last_user_text and request.calls("Edit") == 2:
            return Reply().call(
                "Edit", {"file_path": "app.py", "old_string": "return a\n", "new_string": "return -a\n"}
            )
        return Reply().say("Fixed add.")

    sim.policies.update({"lead": lead_spawning("Fix add in app.py."), "coder": coder})
    outcome, store = run_worktree_team(project, sim, "Fix add.")
    assert outcome.status == "done", outcome
    [merge] = store.reader.merges()
    assert (merge.status, merge.attempts) == ("merged", 2)
    [verdict] = [m for m in store.reader.mail("coder") if m.message["summary"].startswith("merge")]
    assert "failing now but not before the merge: test_neg (test_app.T.test_neg)" in verdict.message["body"]
    assert "test_add" not in verdict.message["body"].split("failing now")[1]
    assert "every failing test failed before this merge too; fixed by it: test_add" in (merge.output or "")
    assert git(project, "show", "teamrt/r1:app.py") == app.replace("a - b", "a + b").rstrip("\n")


# -- the repository's own drivers ---------------------------------------------------------


def test_drivers_the_repository_defines_are_replaced_by_the_users_or_by_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user.gitconfig"
    user.write_text('[filter "lfs"]\n\tsmudge = git-lfs smudge -- %f\n\tprocess = git-lfs filter-process\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    for name, setting in (("COUNT", "1"), ("KEY_0", "filter.cli.clean"), ("VALUE_0", "mine")):
        monkeypatch.setenv(f"GIT_CONFIG_{name}", setting)  # as `git -c` would pass it on
    project = make_repo(tmp_path / "project", {"README": "hello\n"})
    included = tmp_path / "included.gitconfig"
    included.write_text('[merge "ours"]\n\tdriver = evil %A\n')
    with (project / ".git" / "config").open("a") as config:
        config.write(
            '[filter "lfs"]\n\tsmudge = evil\n[filter "a=b.c"]\n\tclean = evil\n\trequired\n'
            '[filter "cli"]\n\tclean = evil\n[diff "z"]\n\ttextconv = evil\n\tcommand = evil\n'
            f"[include]\n\tpath = {included}\n"
        )
    repo = GitRepo.find(project)
    assert repo is not None

    def value(key: str) -> str:
        return repo.run("config", "--get", key)

    assert value("filter.lfs.smudge") == "git-lfs smudge -- %f", "the user's own value comes back"
    assert value("filter.lfs.process") == "git-lfs filter-process", "the user's own driver is left alone"
    assert (value("filter.a=b.c.clean"), value("filter.a=b.c.required")) == ("", "false")
    assert value("filter.cli.clean") == "mine", "what the command line sets outranks the repository already"
    assert [value(f"diff.z.{name}") for name in ("textconv", "command")] == ["", ""]
    assert value("merge.ours.driver") == "false", "a driver of an included file is the repository's too"
    assert value("core.hooksPath") == "/dev/null" and value("core.fsmonitor") == "false"


def test_driver_overrides_read_scopes_order_and_bare_keys() -> None:
    listing = "\0".join(
        [
            "global", "filter.x.required", "local", "filter.x.required\nfalse",
            "local", "filter.x.smudge\nevil", "worktree", "merge.m.driver\nevil",
            "local", "merge.n.driver\nevil", "command", "merge.n.driver\nmine",
            "local", "filter.noname\nevil", "local", "filter.x.funcname\nx", "",
        ]
    )  # fmt: skip
    assert driver_overrides(listing) == [
        ("filter.x.required", "true"),
        ("filter.x.smudge", ""),
        ("merge.m.driver", "false"),
    ]
