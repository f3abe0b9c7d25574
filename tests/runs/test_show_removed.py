"""``teamrt show`` says which of a run's branches git no longer has: a branch deleted since (by ``apply``,
``gc`` or a person) is marked ``(removed)``, never listed as if it were there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from teamrt.cli import main
from teamrt.store import create_store
from tests.helpers.git import git, make_repo


def test_show_marks_the_branches_git_no_longer_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_repo(tmp_path / "project", {"app.py": "x = 1\n"})
    for branch in ("teamrt/r1", "teamrt/r1-coder", "teamrt/r1-coder-1"):
        git(project, "branch", branch)
    home = tmp_path / "home"
    monkeypatch.setenv("TEAMRT_HOME", str(home))
    kept = tmp_path / "worktrees"
    (kept / "coder").mkdir(parents=True)
    (kept / "coder-1").mkdir()
    run_dir = home / "runs" / "r1"
    run_dir.mkdir(parents=True)
    settings = {"integration_branch": "teamrt/r1"}
    with create_store(run_dir, "r1", task="t", workdir=str(project), settings=settings) as store:

        async def build() -> None:
            for name in ("coder", "coder-1"):
                await store.add_agent(name, kind="worktree", model="sim", workspace=str(kept / name),
                                      branch=f"teamrt/r1-{name}")  # fmt: skip
                await store.queue_merge(name, f"teamrt/r1-{name}", git(project, "rev-parse", "HEAD"))
                await store.set_merge_status(name, "merging")
                await store.set_merge_status(name, "red", output="$ true\nno")
            await store.set_run_status("done")

        asyncio.run(build())

    def shown() -> str:
        assert main(["show", "r1"]) == 0
        return capsys.readouterr().out

    before = shown()
    assert "merges onto teamrt/r1 (teamrt apply r1 brings it onto your branch)" in before
    assert "coder    teamrt/r1-coder    red" in before and "(removed)" not in before
    assert f"coder-1: {kept / 'coder-1'} (branch teamrt/r1-coder-1)" in before
    git(project, "branch", "-D", "teamrt/r1", "teamrt/r1-coder-1")
    after = shown()
    assert "merges onto teamrt/r1 (removed) (nothing to apply)" in after
    assert "coder    teamrt/r1-coder" in after, "a branch still there is shown as it is"
    assert "coder-1  teamrt/r1-coder-1 (removed)  red" in after
    assert f"coder-1: {kept / 'coder-1'} (branch teamrt/r1-coder-1 (removed))" in after
