"""The merge queue's gates, driven directly: the integration branch moves only after every gate passed,
a red gate leaves it where it was, and a gate red on the tip too passes only a merge adding no failure.

The gates run unconfined (``Sandbox(None)``, opted in) so that they can note what they saw; that bwrap
confines them is tests/worktree/test_worktree.py's business."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.store import Store, create_store
from teamrt.worktree import GitRepo
from teamrt.worktree.queue import MergeQueue, Verdict
from tests.helpers.git import git, make_repo

INTEGRATION = "teamrt/r1"
PYTHON = os.path.realpath(sys.executable)
APP = "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n"
TESTS = (
    "import unittest\nimport app\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(app.add(2, 3), 5)\n\n"
    "    def test_neg(self):\n        self.assertEqual(app.neg(2), -2)\n"
)
UNITTEST = f"{PYTHON} -m unittest -q"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "project", {"app.py": APP, "test_app.py": TESTS})


def branch_with(project: Path, name: str, old: str, new: str) -> str:
    """A branch off main whose one commit replaces ``old`` with ``new`` in app.py; its head."""
    git(project, "checkout", "-q", "-b", name, "main")
    app = project / "app.py"
    app.write_text(app.read_text().replace(old, new))
    git(project, "commit", "-q", "-am", f"{name}: {new}")
    head = git(project, "rev-parse", "HEAD")
    git(project, "checkout", "-q", "main")
    return head


def land(project: Path, gates: tuple[str, ...], branch: str, head: str) -> tuple[Verdict, str | None]:
    """Land ``branch`` through a queue with ``gates``; the verdict and the integration branch's tip."""
    repo = GitRepo.find(project)
    assert repo is not None
    base = git(project, "rev-parse", "main")
    run_dir = project.parent / "home" / "runs" / "r1"
    run_dir.mkdir(parents=True)

    async def go() -> Verdict:
        store: Store = create_store(run_dir, "r1", task="t", workdir=str(project))
        try:
            await store.add_agent("coder", kind="team", model="sim")
            queue = MergeQueue(
                repo=repo, store=store, run_dir=run_dir, branch=INTEGRATION, base=base, gates=gates,
                gate_timeout=120, sandbox=Sandbox(None), policy=SandboxPolicy(unconfined=True),
            )  # fmt: skip
            try:
                return await queue.land("coder", branch, head, "a change")
            finally:
                await queue.close()
        finally:
            store.close()

    verdict = asyncio.run(go())
    return verdict, repo.tip(INTEGRATION)


def test_the_branch_moves_only_after_every_gate_has_passed(project: Path, tmp_path: Path) -> None:
    """Each gate notes where the integration branch is while it runs: still at the base."""
    seen = tmp_path / "seen"
    note = f"git -C {project} rev-parse --verify --quiet refs/heads/{INTEGRATION} >> {seen}"
    head = branch_with(project, "fix", "a - b", "a + b")
    verdict, tip = land(project, (note, UNITTEST, note), "fix", head)
    assert verdict.status == "merged", verdict.output
    base = git(project, "rev-parse", "main")
    assert seen.read_text().split() == [base, base], "no gate ran with the branch moved"
    assert tip == verdict.commit and tip != base
    assert git(project, "rev-parse", f"{tip}^2") == head


def test_a_red_gate_leaves_the_integration_branch_where_it_was(project: Path) -> None:
    """A gate whose output names no failing test must pass outright; the first red one decides."""
    head = branch_with(project, "fix", "a - b", "a + b")
    verdict, tip = land(project, ("true", "echo something broke; exit 3", "true"), "fix", head)
    assert verdict.status == "red"
    assert "something broke" in verdict.output and "exit code 3" in verdict.output
    assert verdict.commit is None
    assert tip == git(project, "rev-parse", "main"), "the integration branch is still at the base"


def test_a_merge_adding_a_failure_to_a_red_tip_is_refused(project: Path) -> None:
    """The tip fails test_add; a merge that fixes it and breaks test_neg adds a failure: red."""
    head = branch_with(project, "fix", "return -a", "return a")
    verdict, tip = land(project, (UNITTEST,), "fix", head)
    assert verdict.status == "red", verdict.output
    assert "failing now but not before the merge: test_neg (test_app.T.test_neg)" in verdict.output
    assert tip == git(project, "rev-parse", "main")


def test_a_merge_leaving_only_the_tips_failures_is_merged(project: Path) -> None:
    """The tip fails test_add; a merge that fixes nothing and breaks nothing is no worse: merged."""
    head = branch_with(project, "docs", "def neg(a):", "def neg(a):  # negation")
    verdict, tip = land(project, (UNITTEST,), "docs", head)
    assert verdict.status == "merged", verdict.output
    assert "every failing test failed before this merge too; fixed by it: none" in verdict.output
    assert tip == verdict.commit
