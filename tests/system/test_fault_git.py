"""Git faults a resume must not hide: the integration branch deleted, moved back or its objects pruned
after a merge, and a worktree agent's workspace deleted with an uncommitted edit.

Real repositories and worktrees; the damaged state is built directly (``test_resume_reconcile``'s
scenes: the real store API, a dead owner) and resumed through ``resume_run``, the code path of
``teamrt resume``; only the model is scripted. The last test runs the coding example on ``sim``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teamrt import home
from teamrt.models import ModelRequest, Reply
from teamrt.runs.report import render_show, show_json
from teamrt.runtime.losses import BRANCH_LOST, BRANCH_RESTORED, WORKSPACE_REMADE
from teamrt.sim.plays.coding import REDO
from teamrt.store import EventRecord, FinishedCall, ToolCallRecord, ToolUse, open_reader
from teamrt.testing import chaos
from teamrt.worktree import GitRepo
from teamrt.worktree.facts import commit_time, git_findings, lost_work
from tests.helpers.git import git, make_repo
from tests.runtime.test_restore import (
    APP,
    CODER_TEAM,
    RUN,
    Coder,
    begin_coder,
    crash,
    fix,
    requests_of,
    results,
    resume,
    scripted,
    text,
    use,
)
from tests.system.conftest import Finished

FIXED = APP.replace("a - b", "a + b")


@pytest.fixture
def runs_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv(home.HOME_ENV, str(path))
    return path


def landed_coder(tmp_path: Path) -> Coder:
    """A run whose coder's fix was merged onto the integration branch and recorded, its checkout removed
    as a landed agent's is; the lead's spawn still waits for it."""
    coder = begin_coder(tmp_path, CODER_TEAM)
    scene = coder.scene

    async def build() -> None:
        checkout = coder.worktrees.checkouts["coder"]
        await scene.store.append_turn(
            "coder", epoch=coder.epoch, role="assistant", content=[text("Fixed add.")]
        )
        fix(checkout.path)
        await scene.store.set_agent_status("coder", "merging")
        landing = await coder.worktrees.land("coder", "Fixed add.", 1)
        assert landing.status == "merged", landing.message
        await coder.worktrees.remove("coder")
        await scene.store.set_agent_status("coder", "done", landing.message)
        await coder.worktrees.close()

    scene.call(build())
    return coder


def events_of(run_dir: Path, kind: str) -> list[EventRecord]:
    reader = open_reader(run_dir, RUN)
    try:
        return reader.events(kinds=(kind,))
    finally:
        reader.close()


@pytest.mark.parametrize("damage", ["deleted", "moved-back"])
def test_an_integration_branch_that_lost_a_merge_is_restored_at_the_recorded_commit(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """The branch was deleted (or moved back to the base) after the coder's merge was recorded. The
    resume puts it back at the recorded commit, says so, and every claim names a commit on it."""
    coder = landed_coder(tmp_path)
    project, branch = coder.scene.project, coder.integration
    merged = git(project, "rev-parse", branch)
    if damage == "deleted":
        git(project, "update-ref", "-d", f"refs/heads/{branch}")
    else:
        git(project, "update-ref", f"refs/heads/{branch}", coder.base)
    reader = open_reader(coder.scene.run_dir, RUN)
    try:
        found = git_findings(coder.repo, branch, reader.merges(), reader.agents())
    finally:
        reader.close()
    assert len(found) == 1 and f"coder's at {merged[:12]}" in found[0], found
    crash(coder.scene)
    shown = "\n".join(render_show(coder.scene.run_dir, RUN))
    assert f"repository behind the store (teamrt resume {RUN}" in shown, shown
    assert f"  {found[0]}" in shown, "show says what the resume will put back"
    model = scripted({"lead": [Reply().say("merged")]})
    summary = resume(monkeypatch, model)

    assert git(project, "rev-parse", branch) == merged, "put back at the recorded merge"
    assert git(project, "show", f"{branch}:app.py") == FIXED.strip()
    (restored,) = events_of(coder.scene.run_dir, BRANCH_RESTORED)
    assert restored.data["commit"] == merged and restored.data["agents"] == ["coder"]
    assert merged[:12] in restored.data["note"] and branch in restored.data["note"]
    assert summary.merged == 1
    said, error = results(model.requests[0])["toolu_spawn"]
    assert not error and f"merged onto {branch} at {merged[:12]}" in said, said


def prune(project: Path, commit: str) -> None:
    """Drop what no ref reaches, as ``git gc`` does once the reflogs expire: ``commit`` with it."""
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")
    gone = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=project, check=False)
    assert gone.returncode != 0, "the merge commit's objects are gone"


@pytest.mark.hostile
def test_a_merge_whose_objects_were_pruned_is_named_lost_and_merged_again_from_the_agents_branch(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch was deleted and its merge commit pruned: it cannot be put back. The loss is named
    (``branch.lost``), the coder's branch (still there) is merged again, and nothing claims the lost
    commit: the count and the lead's report name the new merge, which the branch holds."""
    coder = landed_coder(tmp_path)
    project, branch = coder.scene.project, coder.integration
    lost = git(project, "rev-parse", branch)
    git(project, "branch", "-D", branch)
    prune(project, lost)
    crash(coder.scene)
    for clock in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # a merge made again in the same second as the
        monkeypatch.setenv(clock, "2030-01-01T00:00:00+00:00")  # lost one would be the same commit
    model = scripted({"lead": [Reply().say("merged")]})
    summary = resume(monkeypatch, model)

    (event,) = events_of(coder.scene.run_dir, BRANCH_LOST)
    assert event.data["agents"] == ["coder"] and event.data["commits"] == [lost]
    assert (
        "coder" in event.data["note"]
        and lost[:12] in event.data["note"]
        and "queued again" in event.data["note"]
    )
    tip = git(project, "rev-parse", branch)
    assert git(project, "log", "-1", "--format=%cI", branch).startswith("2030-"), "made by the resume"
    assert tip != lost and git(project, "show", f"{branch}:app.py") == FIXED.strip(), "merged again"
    assert summary.merged == 1
    said, error = results(model.requests[0])["toolu_spawn"]
    assert not error and f"at {tip[:12]}" in said and lost[:12] not in said, said


@pytest.mark.hostile
def test_a_merge_lost_with_its_agents_branch_is_claimed_by_no_one(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge commit and the coder's branch are both gone: the work is lost. The loss is named, the
    coder ends failed saying so, no count or report claims the merge, and ``show`` lists it lost."""
    coder = landed_coder(tmp_path)
    project, branch = coder.scene.project, coder.integration
    lost = git(project, "rev-parse", branch)
    git(project, "branch", "-D", branch, f"teamrt/{RUN}-coder")
    prune(project, lost)
    crash(coder.scene)
    model = scripted({"lead": [Reply().say("nothing merged")]})
    summary = resume(monkeypatch, model)

    (event,) = events_of(coder.scene.run_dir, BRANCH_LOST)
    assert "its work is lost" in event.data["note"] and lost[:12] in event.data["note"]
    assert summary.merged == 0
    said, _ = results(model.requests[0])["toolu_spawn"]
    assert said.startswith("## coder: failed") and "was lost" in said, said
    shown = show_json(coder.scene.run_dir, RUN)
    assert [(m["agent"], m["status"]) for m in shown["merges"]] == [("coder", "lost")]


def test_a_workspace_deleted_with_an_uncommitted_edit_is_remade_and_the_agent_told(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coder wrote its fix (a journaled ``Write``) and had not committed it when its worktree was
    deleted. The resume remakes the worktree from its base, records ``worktree.remade`` naming the file,
    and the coder's next turn says so; the coder redoes the fix, and it is merged."""
    coder = begin_coder(tmp_path, CODER_TEAM)
    scene = coder.scene
    checkout = coder.worktrees.checkouts["coder"]
    write = use("toolu_write", "Write", file_path="app.py", content=FIXED)

    async def build() -> None:
        store = scene.store
        uses = [ToolUse(write["id"], "Write", write["input"], False)]
        await store.append_turn("coder", epoch=coder.epoch, role="assistant", content=[write], tool_uses=uses)
        await store.move_tool_call(write["id"], "running")
        (checkout.path / "app.py").write_text(FIXED)
        result = {"type": "tool_result", "tool_use_id": write["id"], "content": "wrote app.py"}
        await store.append_turn("coder", epoch=coder.epoch, role="user", content=[result],
                                finished=[FinishedCall(write["id"], "done", [result])])  # fmt: skip

    scene.call(build())
    shutil.rmtree(checkout.path)  # lost with the uncommitted fix
    crash(scene)
    told: list[str] = []

    def redo(request: ModelRequest) -> Reply:
        told.append(str(request.messages[-1]["content"]))
        assert (checkout.path / "app.py").read_text() == APP, "remade from its base"
        return Reply().call("Write", {"file_path": "app.py", "content": FIXED})

    model = scripted({"coder": [redo, Reply().say("Fixed add.")], "lead": [Reply().say("finished")]})
    summary = resume(monkeypatch, model)

    (event,) = events_of(scene.run_dir, WORKSPACE_REMADE)
    assert event.agent == "coder" and event.data["lost"] == ["app.py"] and event.data["commit"] == coder.base
    assert all(word in event.data["note"] for word in ("coder", checkout.branch, coder.base[:12], "app.py"))
    (first,) = told
    assert f"remade from its base at {coder.base[:12]}" in first
    assert "your uncommitted changes to app.py are gone: redo them" in first
    assert len(requests_of(model, "coder")) == 2
    assert summary.merged == 1 and git(scene.project, "show", f"{coder.integration}:app.py") == FIXED.strip()


# -- on sim: the coding example ------------------------------------------------------------------------


@pytest.mark.slow
def test_on_sim_a_coder_told_of_its_lost_workspace_redoes_its_fix_and_the_run_ends_as_an_uninterrupted_one(
    tmp_path: Path, chaos_ctx: Any, uninterrupted: Callable[[str], Finished]
) -> None:
    """The coding example killed right after a coder's first write (a try in its file, uncommitted), and
    that coder's worktree deleted. Resumed, the coder is told and redoes the write: the integration tree
    and the lead's answer are an uninterrupted run's, and the loss is named."""
    ref, ctx = uninterrupted("coding").ref, chaos_ctx  # the worker's uninterrupted run (conftest.py)
    project = chaos.prepare("coding", tmp_path / "run")
    where = tmp_path / "run" / "home"
    last = chaos.Kill("tool.after", hit=ref.writes, only=chaos.CODER_WRITE)  # the coder has written before
    plan = [chaos.Step(last, chaos.WORKTREE)]
    run_id, fired = chaos.run_through_crashes("coding", where, project, plan, ctx)
    assert fired == 1
    reader = open_reader(where / "runs" / run_id, run_id)
    try:
        remade = reader.events(kinds=(WORKSPACE_REMADE,))
        told = [m for m in reader.mail(sender="supervisor") if m.message["summary"] == "workspace remade"]
        said = [
            b.get("text", "")
            for e in remade
            for turn in reader.turns(str(e.agent))
            if turn.role == "assistant"
            for b in turn.content
        ]
    finally:
        reader.close()
    assert len(remade) == 1 and remade[0].data["lost"], remade
    coder = remade[0].agent
    assert [m.agent for m in told] == [coder] and "redo them" in told[0].message["body"]
    assert any(text.startswith(REDO) for text in said), "the coder redid what it had written"
    result = chaos.check("coding", where, run_id, project, ref, kills=fired)
    assert result.differences == [], result.differences
    assert (result.lost, result.duplicated, result.corrupted) == (0, 0, 0), result


def test_what_a_remade_workspace_lost_is_read_from_the_journal_against_the_files(tmp_path: Path) -> None:
    """Each file whose last write or edit (any of the tools' names) is not in the remade checkout is lost;
    one whose change the commit holds, or an edit that failed, is not; commands since it are named."""
    project = make_repo(tmp_path / "project", {"app.py": FIXED, "b.py": "x = 1\n", "c.py": "y = 2\n"})
    repo = GitRepo.find(project)
    assert repo is not None
    base = git(project, "rev-parse", "HEAD")
    after = commit_time(repo, base) + 5

    def call(name: str, at: float = after, status: str = "done", **args: Any) -> ToolCallRecord:
        return ToolCallRecord(
            f"c{name}{at}", "coder", 1, 1, name, args, False, status, None, False, at, at, at, ()
        )

    calls = [
        call("Write", file_path="app.py", content=FIXED),  # the commit holds it
        call("Edit", file_path=str(project / "b.py"), old_string="x = 1", new_string="x = 10"),
        call("multi_edit", file_path="c.py", edits=[{"old_string": "y = 2", "new_string": "y = 2"}]),
        call(
            "MultiEdit", status="running", file_path="d.py", edits=[{"old_string": "", "new_string": "new"}]
        ),
        call("edit", status="error", file_path="c.py", old_string="y", new_string="z"),
        call("Bash", command="sed -i s/1/2/ b.py"),
    ]
    lost = lost_work(repo, project, base, calls)
    assert lost.files == ("b.py", "d.py")
    assert lost.commands == ("sed -i s/1/2/ b.py",)
