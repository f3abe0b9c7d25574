"""Protected paths at their edges: a nested repository's ``.git`` file, the run's spill directory inside a
project whose teamrt home is hidden, and git pointed at a sibling that shares the workspace's name."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from teamrt.sandbox.protect import PROTECTED, protected_paths
from teamrt.tools import ToolContext, ToolError, builtin_tools
from teamrt.tools.files.confine import IN_HOME
from teamrt.tools.shell.gitguard import git_escape

pytestmark = pytest.mark.hostile

TOOLS = builtin_tools()
WS = Path("/work/ws")


def refused(ctx: ToolContext, tool: str, **input: Any) -> str:
    with pytest.raises(ToolError) as caught:
        asyncio.run(TOOLS[tool].run(input, ctx))
    return str(caught.value)


@pytest.fixture
def lead(tmp_path: Path) -> ToolContext:
    """The lead of a run in ``project``, whose teamrt home is ``project/.teamrt``, its spill readable."""
    project = tmp_path / "project"
    home = project / ".teamrt"
    run_dir = home / "runs" / "r1"
    (run_dir / "spill").mkdir(parents=True)
    protected = protected_paths((project,), home=home)
    return ToolContext(project, run_dir, protected=protected, extra_roots=(run_dir / "spill",))


@pytest.mark.parametrize("path", ["vendor/lib/.git", "sub/.claude"])
def test_a_git_or_claude_file_below_the_workspace_is_never_written(lead: ToolContext, path: str) -> None:
    """A ``.git`` file saying ``gitdir: /elsewhere`` makes a nested repository whose hooks run at the next
    git command there: the name is protected as a file too, not only as a directory on the way."""
    assert (
        refused(lead, "Write", file_path=path, content="gitdir: /elsewhere\n") == f"Write: {path} {PROTECTED}"
    )
    assert not (lead.workspace / path).exists()


def test_the_spill_directory_is_readable_though_the_home_around_it_is_not(lead: ToolContext) -> None:
    """The spill directory lies in the hidden home inside the project: the innermost root holding a
    path decides, so the spill is read from its own root, the rest of the home from the workspace."""
    spill = lead.run_dir / "spill"
    (spill / "big.txt").write_text("spilled\n")
    (lead.run_dir / "run.db").write_text("store\n")
    for path in (".teamrt/runs/r1/spill/big.txt", str(spill / "big.txt")):
        assert asyncio.run(TOOLS["Read"].run({"file_path": path}, lead)).content == "     1\tspilled"
    assert (
        refused(lead, "Read", file_path=".teamrt/runs/r1/run.db") == f"Read: .teamrt/runs/r1/run.db {IN_HOME}"
    )


def test_a_sibling_sharing_the_workspaces_name_is_outside_it() -> None:
    """``/work/ws-other`` starts with ``/work/ws`` but is not inside it."""
    for command, shown in (
        ("git -C /work/ws-other status", "git -C /work/ws-other"),
        ("git --git-dir=../ws2/.git log", "git --git-dir ../ws2/.git"),
    ):
        assert git_escape(command, WS) == (
            f"`{shown}` points git outside your workspace ({WS}); git may only work on your own checkout"
        )


def test_each_git_c_goes_on_from_the_directory_before_it() -> None:
    """``git -C sub -C ..`` works in the workspace itself, as git would."""
    assert git_escape("git -C sub -C .. status", WS) is None
    assert git_escape("git -C a/b -C ../c log", WS) is None
